// Private to the application library: the state of one iCheck client
// (ClientImpl) and its helper types. The member functions live by
// concern: client.cpp (the C++ facade behind capi.cpp),
// client_session.cpp (the controller session: registration, probe,
// versions), client_rma.cpp (agents and RMA transfers, MR strategy),
// client_shmr.cpp (the SHMR node segment) and client_direct.cpp (the
// second level read and written by the processes themselves).
#pragma once
#include "dynres/icheck/client.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <thread>
#include <vector>

#include "comm.hpp"
#include "dynres/icheck/types.hpp"
#include "dynres/icheck/config.hpp"
#include "dynres/icheck/fabric.hpp"
#include "dynres/icheck/wire.hpp"
#include "dynres/ckstore.hpp"

namespace dynres::icheck {

namespace fs = std::filesystem;

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
/// Checksum of one region's bytes as sent to an agent with `end` ("sums")
/// and checked again on restore: XXH3_64, as ckstore's chunk checksums.
inline uint64_t region_sum(const void* p, size_t n) { return XXH3_64bits(p, n); }
inline std::string hostname() {
  char h[256] = {0};
  ::gethostname(h, sizeof h - 1);
  return h;
}
/// Library staging buffer (async commits, or blocking ones without zero
/// copy): pre-faulted, registered once, reused by every commit.
struct Buffer {
  std::unique_ptr<Mapping> mem;
  void* p = nullptr;
  size_t len = 0;
  std::unique_ptr<MemRegion> mr;
  ~Buffer() { mr.reset(); }
};
struct Region {
  std::string label;
  void* ptr;
  size_t count;
  int type;
  size_t bytes;
  size_t offset;
};
struct AgentLink {
  std::string addr, id, host;
  int index = 0;
  Socket sock;
  uint64_t peer = 0;
  json versions = json::array();
  json app_versions = json::array();  ///< every slot's: [{v, nranks}] (hello)
};

class ClientImpl {
 public:
  // ---- state
  bool inited = false;
  StaticConfig cfg;
  Comm comm;
  std::string app;
  uint32_t uid = 0;
  std::string mode = "none";  // none|rdma|direct
  std::vector<Region> regions;
  std::map<std::string, size_t> by_label;
  std::unique_ptr<Fabric> fab;
  std::string fab_prov;
  std::unique_ptr<Buffer> buf;
  /// Zero copy (DynamicConfig::zero_copy): each added region registered with
  /// `fab` once, index-parallel to `regions`; cleared before `fab` changes.
  std::vector<std::unique_ptr<MemRegion>> rmr;
  bool zc_broken = false;       ///< a region could not be registered: stage instead
  bool direct_restore = false;  ///< restart_all in progress: RMA into the regions
  bool restored_in_place = false;
  bool restore_corrupt = false;  ///< this restart: the agent copy failed verify_region
  std::unique_ptr<AgentLink> agent;  ///< MR: every process; SHMR: node leaders only
  /// SHMR node segment (§6.2.2): POSIX shared memory (mode 0600, unlinked
  /// once every node process mapped it) holding the checkpoints of all of
  /// the node's processes back to back; the leader registers it once.
  struct Segment {
    void* p = nullptr;
    size_t len = 0;
    std::unique_ptr<MemRegion> mr;
    ~Segment() {
      mr.reset();
      if (p) ::munmap(p, len);
    }
  };
  std::unique_ptr<Segment> seg;
  json agent_list = json::array();
  /// Links to the other agents of agent_list (index -> link), opened by a
  /// redistributing restore that reads the old ranks' pieces (link_to).
  std::map<int, std::unique_ptr<AgentLink>> extra;
  int resize_n = 0;  ///< discover(): the agents hold restart_v of this many processes (!= ours), else 0
  long long app_id = -1;
  std::string app_token;  ///< given by the controller at registration; sent with every app_id
  int64_t version = 0;
  int64_t restart_v = 0;
  std::string restart_src;  // agents|pfs
  bool restarted = false;
  std::vector<char> rdata;
  json rregions = json::array();
  bool async = false;
  std::thread worker;
  bool worker_ok = false;
  std::string worker_err;
  int64_t pending_v = 0;
  /// While an asynchronous commit is in flight: where this rank's copy of
  /// that version lives (staging buffer or SHMR segment), laid out like
  /// regions' offsets; the fallback writes it instead of the live regions.
  const char* fallback_src = nullptr;
  double commit_t0 = 0;
  double last_tsync = -1;
  double last_probe = 0;
  std::string last_error_;
  struct ErrRef {
    std::string& s;
    ErrRef& operator=(const std::string& v) {
      s = v;
      if (std::getenv("ICHECK_DEBUG")) std::fprintf(stderr, "icheck: %s\n", v.c_str());
      return *this;
    }
    const char* c_str() const { return s.c_str(); }
    operator const std::string&() const { return s; }
  };
  ErrRef last_error{last_error_};

  size_t total_bytes() const {
    size_t t = 0;
    for (auto& r : regions) t += r.bytes;
    return t;
  }
  json regions_json() const {
    json a = json::array();
    for (auto& r : regions)
      a.push_back({{"label", r.label}, {"type", r.type}, {"count", r.count}, {"rank", comm.rank()},
                   {"nranks", comm.size()}, {"offset", r.offset}, {"bytes", r.bytes}});
    return a;
  }
  size_t chunk_bytes() const { return std::max<size_t>(64 << 10, size_t(cfg.dyn.chunk_mb * 1048576.0)); }

  /// Gather [off, off+len) of the concatenated regions into dst.
  void copy_out(size_t off, size_t len, char* dst) const {
    for (auto& r : regions) {
      if (off >= r.offset + r.bytes || off + len <= r.offset) continue;
      size_t a = std::max(off, r.offset), b = std::min(off + len, r.offset + r.bytes);
      std::memcpy(dst + (a - off), static_cast<char*>(r.ptr) + (a - r.offset), b - a);
    }
  }

  // ---- controller
  /// msg plus this application's token when it names the application.
  json with_token(const json& msg) const;
  json ctl(const json& msg0, int timeout_ms);
  void ctl_quiet(const json& msg0);

  // ---- agents
  std::string choose_provider(const std::string& agent_addr, const std::string& host);
  void ensure_fabric(const std::string& prov);
  /// Collective: connect every rank to its agent. true when all succeeded.
  /// When it fails only because agents were slow to answer (every failing
  /// rank timed out: none was refused or found its agent gone), the list is
  /// kept in slow_agents, at most kMaxSlowConnects times in a row.
  bool connect_agents(const json& list);
  /// Agents alive but slow to answer the hello (a new agent loads libfabric
  /// and opens its endpoint first: 8-25 s on a loaded 2-core node): the
  /// controller is not told they failed, since it would replace them by new
  /// agents that start just as slowly (and the application, told to
  /// reconnect at every probe, never caught one ready); the next probes try
  /// them again. The same on every rank (from collective verdicts).
  json slow_agents = json::array();
  json slow_reply;        ///< the reply that named slow_agents (its "readers")
  int slow_connects = 0;  ///< connect_agents that failed only by timeouts, in a row
  static constexpr int kMaxSlowConnects = 3;
  /// The register request (with the batch job id, MJ_JOB_ID, when set).
  json register_msg() const;
  /// Append the reply's "readers" (agents retired by an MA-MA shrink that
  /// still hold the old ranks' pieces) to agent_list, for the restore only.
  void add_readers(const json& reply);

  void ensure_buffer(size_t total);

  /// Apply the transfer settings the controller sends with a registration
  /// and with every probe reply ("params": the dynamic configuration of
  /// [John24 Listing 6.2] as the controller last read it): transfer
  /// (pull|push), chunk_mb and buffer_mb (MiB, > 0), zero_copy. Every rank
  /// applies the same broadcast reply, so all ranks agree. ICHECK_TRANSFER
  /// and ICHECK_ZERO_COPY in the environment win; values of the wrong type
  /// or out of range are ignored. The strategy (MR/SHMR) is fixed for the
  /// life of a registration (it shapes the agents' slots).
  void apply_params(const json& p);

  struct Skip {};
  bool shmr() const { return cfg.dyn.strategy == "shmr"; }

  /// Collective over the node: map a node segment of at least `bytes`
  /// (reused while large enough). Returns the same verdict on every node
  /// process.
  bool ensure_segment(size_t bytes);

  /// SHMR commit (§6.2.2, Eq. 6.2): every process of a node copies its
  /// regions into the node segment (t_shmcopy), then the node leader moves
  /// the whole segment to its agent with one RMA stream; the version becomes
  /// current when all leaders' agents hold it. Collective over the world.
  int commit_shmr(int64_t v);

  /// SHMR restart: the node leader fetches the node's piece into the node
  /// segment with one RMA, every node process takes its own regions (by
  /// world rank). Collective over the node; same verdict on all of it.
  bool restore_shmr(int64_t v);

  /// Register every added region with the fabric (once per region and
  /// fabric). false (and zero copy off for this client) when the provider
  /// refuses one, e.g. memory it cannot register.
  bool register_regions();

  /// Zero-copy part of a blocking RDMA commit (§6.2.3.1): the application's
  /// registered regions are the RMA source. pull: one `chunk` request per
  /// region slice (<= max(chunk, 64 MiB)) carrying that region's key, the
  /// agent fi_reads it into its piece; push: the library fi_writes each
  /// region into the piece at the region's offset. No library copy.
  void transfer_direct(int64_t v);

  /// Checksums of the added regions (region_sum), in the order of regions_json().
  json region_sums() const;

  /// Check restored bytes against the checksums the library sent with the
  /// version (`end` "sums", kept by the agent in the region's "xxh3"): a
  /// region without a checksum or whose bytes differ is refused, so a
  /// corrupted agent copy is never handed to the application. Returns ""
  /// when it matches, else the reason ("corrupt: ...").
  std::string verify_region(const json& x, const void* p, size_t n, int64_t v) const;
  /// verify_region's verdict for a restore: "" passes; else noted and thrown.
  void require_intact(const std::string& bad);

  /// Local part of an RDMA commit: begin + chunks + end with this rank's agent.
  /// staged: the whole checkpoint is already in the buffer at its offset.
  void transfer(int64_t v, bool staged) { transfer_via(v, staged, *buf->mr, buf->len, total_bytes(), regions_json()); }

  /// Move `total` bytes described by `regs` through the registered buffer
  /// `mr` (length `blen`): staged = the data already sits in the buffer at
  /// its offset (async MR commits, SHMR node segments), else the regions are
  /// copied in chunk by chunk (pipelining, §6.2.3.1).
  void transfer_via(int64_t v, bool staged, MemRegion& bmr, size_t blen, size_t total, const json& regs);

  /// Collective tail of a commit: agree, publish, or fall back to direct writes.
  int finish_commit(int64_t v, bool ok);

  /// Drop the agent link and fence every RMA target of this process: all
  /// registrations (regions, staging buffer, SHMR segment) and the endpoint
  /// are closed, so nothing an agent still sends can land; direct mode until
  /// a later probe reconnects. Tells the controller (rank 0).
  void drop_agents();

  std::string pfs_root();

  /// Collective: write version v of every rank's regions to the second level.
  int direct_write(int64_t v);

  /// Collective: find the newest restorable version (agents and second level).
  void discover();

  /// The stored regions of this rank are exactly the added ones (label,
  /// type, count and offset), so a restart can land in place.
  bool in_place_ok() const;

  bool restore_from_agent(int64_t v);

  int restore_from_pfs(int64_t v);
  /// A control connection to agent `a` (index idx of the list), the fabric
  /// set up for it first (keep_fabric: an existing one is used as is).
  std::unique_ptr<AgentLink> open_link(const json& a, int idx, bool keep_fabric);
  /// A reader connection to agent idx (second: another one, kept in
  /// `extra` under -1 - idx, for the deferred checksum check).
  AgentLink& link_to(int idx, bool second = false);
  std::string agent_pieces(int64_t v, int n, const std::string& meta_label, size_t max_meta, bool defer_verify);
  /// Deferred checksum checks in flight: agent index -> its verify link
  /// (kept in `extra` under key -1 - index, so it is dropped with the others).
  std::vector<int> verifying;
  std::string verify_wait();
  bool read_agent(int idx, int slot, int64_t v, uint64_t off, void* dst, uint64_t len);
  /// icheck_redistribute's RMA targets (client_redist.cpp), registered once.
  std::vector<std::pair<char*, std::unique_ptr<MemRegion>>> rtargets;
  bool add_read_target(char* p, uint64_t n);
  bool read_agents(const std::vector<AgentRead>& reads);
};

}  // namespace dynres::icheck
