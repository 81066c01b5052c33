// libfabric transport of iCheck [John24 §6.2, Figure 6.6]: reliable
// datagram (FI_EP_RDM) endpoints with one-sided RMA (fi_read / fi_write),
// completions through a completion queue, and a progress thread.
//
// Providers: "shm" (same host, cross-memory attach), "tcp;ofi_rxm" (RDM over
// TCP between hosts). "tcp" is accepted and mapped to "tcp;ofi_rxm" (plain
// tcp is FI_EP_MSG only in libfabric 1.17; see the module README/report).
// "auto" tries shm, then tcp;ofi_rxm.
//
// mr_mode: the wrapper asks for FI_MR_LOCAL | FI_MR_VIRT_ADDR |
// FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT and then honours what the
// provider returns, as libfabric's fabtests do: local buffers always carry a
// descriptor, remote addresses are virtual addresses or offsets, keys are
// provider keys or our requested ones, and regions get bound to the endpoint
// when FI_MR_ENDPOINT is set.
//
// Progress: libfabric 1.17's tcp/rxm/shm use manual progress, so the target
// of an RMA must poll its CQ too. A progress thread polls continuously while
// work is outstanding or while a Busy guard is held, and naps ~200 µs
// otherwise.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

struct fi_info;
struct fid_fabric;
struct fid_domain;
struct fid_av;
struct fid_cq;
struct fid_ep;
struct fid_mr;

namespace dynres::icheck {

/// A libfabric call failed; what() names the call and fi_strerror.
class FabricError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct FabricOptions {
  std::string provider = "auto";  ///< "auto", "shm", "tcp;ofi_rxm", "tcp"
  std::string node;               ///< source address for tcp (e.g. "127.0.0.1"); "" = provider default
  size_t max_chunk = 8u << 20;    ///< largest single RMA operation (bytes)
  int depth = 16;                 ///< RMA operations kept in flight per transfer
};

/// A registered memory region (RAII: deregisters on destruction).
struct MemRegion {
  void* base = nullptr;
  size_t len = 0;
  fid_mr* mr = nullptr;
  void* desc = nullptr;      ///< local descriptor (for FI_MR_LOCAL)
  uint64_t key = 0;          ///< remote key to hand to peers
  uint64_t remote_base = 0;  ///< address peers must use for byte 0 (virtual address or 0)
  ~MemRegion();
};

/// Anonymous private mapping used for checkpoint buffers (agent pieces,
/// library staging buffer). Transparent huge pages are requested
/// (MADV_HUGEPAGE) and, with `prefault`, every page is populated at
/// allocation time (MADV_POPULATE_WRITE, or touching each page on kernels
/// without it) so that no page fault lands inside an RMA transfer — the
/// dominant cost of a commit into fresh memory (perf: exc_page_fault +
/// clear_page ~18 % of commit time before this buffer type existed).
/// Pages return to the OS on destruction. Throws std::bad_alloc.
struct Mapping {
  void* p = nullptr;
  size_t len = 0;  ///< bytes (rounded up to 4 KiB)
  explicit Mapping(size_t bytes, bool prefault = true);
  ~Mapping();
  /// Mark every page lazily freeable (MADV_FREE): the pages stay mapped and
  /// keep counting in VmRSS (as "LazyFree" in /proc/PID/smaps_rollup), but
  /// the kernel may reclaim them without I/O whenever memory is short.
  /// Used for an agent's spare buffer between two commits (§6.2.3.2 double
  /// buffering without holding a second checkpoint of unreclaimable memory).
  /// The contents become undefined; no-op where MADV_FREE is missing.
  void lazy_free();
  /// Take a buffer back into use after lazy_free(): every page is written
  /// to (MADV_POPULATE_WRITE), so it is dirty again (the kernel no longer
  /// reclaims it) and any reclaimed page is faulted in now rather than
  /// inside an RMA transfer. Cheap when nothing was reclaimed.
  void reuse();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
};

/// Resident memory of a process, in bytes: VmRSS (/proc/PID/status) and
/// the part of it the kernel may reclaim without I/O, LazyFree
/// (/proc/PID/smaps_rollup: pages handed to MADV_FREE, e.g. an agent's idle
/// spare buffers). pid 0 = the calling process. Zeros for a file that cannot
/// be read (process gone, no permission).
struct Resident {
  size_t rss = 0;
  size_t lazy_free = 0;
  /// Memory the kernel cannot take back: rss - lazy_free.
  size_t held() const { return rss > lazy_free ? rss - lazy_free : 0; }
};
Resident resident_memory(pid_t pid = 0);

/// Provider names that offer FI_EP_RDM + FI_RMA on this machine, in
/// preference order ("shm" first); as `fi_info -c FI_RMA -t FI_EP_RDM`.
std::vector<std::string> available_rma_providers();

/// Start libfabric's one-time initialisation (fi_getinfo loads and
/// initialises every built-in provider; the verbs and efa providers scan
/// /proc/kallsyms, ~0.4 s of the ~0.45 s a process's first Fabric cost on
/// the test machine) on a background thread, once per process; a Fabric
/// constructed meanwhile waits for it inside libfabric. libicheck.so calls
/// it when loaded, so that the cost overlaps MPI_Init and the application's
/// set-up instead of lengthening icheck_init (the relaunch of a resize).
void prepare_fabric();

class Fabric {
 public:
  /// Open fabric, domain, AV, CQ and an enabled RDM endpoint; starts the
  /// progress thread. Throws FabricError when no provider matches.
  explicit Fabric(const FabricOptions& opt = {});
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  const std::string& provider() const { return provider_; }
  uint64_t mr_mode() const { return mr_mode_; }
  /// Endpoint address (opaque bytes, hex-encoded for the control channel).
  std::string address_hex() const;
  /// Insert a peer's address (hex from address_hex()); returns its fi_addr_t.
  uint64_t add_peer(const std::string& hex);

  /// What a registration allows (least privilege: only the access the transfer needs).
  enum class Access {
    any,     ///< local and remote read and write (buffers used both ways)
    source,  ///< data only leaves: peers may fi_read it, we fi_write from it
    target,  ///< data only arrives: peers may fi_write it, we fi_read into it
  };
  /// Register [buf, buf+len) with `access`. The remote key is random (64
  /// bits from getrandom) where the provider lets us choose it, so keys of
  /// other registrations cannot be guessed from one's own. Throws FabricError.
  std::unique_ptr<MemRegion> register_memory(void* buf, size_t len, Access access = Access::any);

  /// fi_read: copy `len` bytes from the peer's region (remote address
  /// `raddr` = remote_base + offset, key `rkey`) into local->base + loff.
  /// Splits into max_chunk operations, keeps `depth` in flight, blocks until
  /// all completed. Throws FabricError on any failed completion or timeout
  /// (timeout_ms, default 60 s without progress).
  void read(uint64_t peer, MemRegion& local, size_t loff, size_t len, uint64_t raddr, uint64_t rkey,
            int timeout_ms = 60000);
  /// fi_write: same shape as read(), data flows local -> peer.
  void write(uint64_t peer, MemRegion& local, size_t loff, size_t len, uint64_t raddr, uint64_t rkey,
             int timeout_ms = 60000);

  /// While a Busy guard lives the progress thread polls without napping
  /// (use on the target side of a transfer).
  class Busy {
   public:
    explicit Busy(Fabric& f) : f_(f) { f_.busy_++; }
    ~Busy() { f_.busy_--; }

   private:
    Fabric& f_;
  };

 private:
  void rma(bool is_read, uint64_t peer, MemRegion& local, size_t loff, size_t len, uint64_t raddr,
           uint64_t rkey, int timeout_ms);
  void progress_loop();
  int progress_once();

  std::string provider_;
  FabricOptions opt_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  uint64_t mr_mode_ = 0;
  size_t key_size_ = 8;  ///< bytes of a requested key (domain_attr->mr_key_size)
  size_t max_msg_ = 0;
  std::atomic<uint64_t> next_key_{1};
  std::mutex mu_;  // serialises calls on ep/cq
  std::atomic<int> busy_{0};
  std::atomic<int> inflight_{0};
  std::atomic<bool> stop_{false};
  std::thread progress_;
};

}  // namespace dynres::icheck
