// The application side of iCheck (libicheck; [John24 §6.1.3, §6.2, §6.5.1]).
// icheck.h is a thin C layer over this class. One Client per process.
//
// Modes: "rdma" (agents assigned by the controller or listed in the static
// file; MR layout: one slot per MPI rank, slot r served by agent r % M) and
// "direct" (no agent reachable: every rank writes its regions with ckstore
// to the second level, rank 0 writes the manifest).
// SHMR layout (§6.2.2, strategy "shmr"): the processes of a node copy their
// regions into one owner-only POSIX shared-memory segment; only the node
// leader connects to an agent (node i -> agent i % M) and moves the segment.
// Commit (§6.2.3.1): blocking MR commits register the application's regions
// and move them by RMA without a library copy (zero_copy); otherwise (async,
// zero_copy off) regions are copied into a bounded, pre-faulted, registered
// buffer; pull = the agent fi_reads, push = the library fi_writes into the
// agent's piece buffer. A version becomes current only
// after every rank's agent acknowledged its piece complete; then every agent
// is told to publish it (§6.2.3.2). Each piece carries the XXH3_64 checksum
// of every region (computed beside the transfer); a restart from agents
// checks the restored bytes against them and takes the second level (else
// ICHECK_ECORRUPT) when they differ. Any agent failure turns the commit into a
// direct write of the same version (§6.5.1) and the mode to "direct" until a
// later successful probe.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "icheck.h"

namespace dynres::icheck {

class ClientImpl;
class Comm;

/// One RMA read of icheck_redistribute: bytes [off, off+len) of old rank
/// `slot`'s piece of version v, held by agent `agent`, into dst (inside
/// memory given to Client::add_read_target first).
struct AgentRead {
  int agent = 0, slot = 0;
  int64_t v = 0;
  uint64_t off = 0, len = 0;
  char* dst = nullptr;
};

/// What the data redistribution (lib/icheck/src/adapt.cpp, [John24 §7.4.1])
/// needs to know about the restart a Client would do.
struct RestartView {
  bool inited = false;
  Comm* comm = nullptr;      ///< the client's communicator (collectives)
  int64_t restart_v = 0;     ///< newest restorable version, 0 = none
  std::string restart_src;   ///< "agents" or "pfs"
  std::string pfs_root, app;
  uint32_t uid = 0;
  int agent_nranks = 0;      ///< process count that committed restart_v, as this rank's agent recorded it (0 = unknown)
};

class Client {
 public:
  Client();
  ~Client();
  int init(const char* config, const char* app, const void* comm, int* status);
  int add(const char* label, void* ptr, size_t count, int type);
  int commit();
  int restart();
  int restore(const char* label, void* ptr, size_t count);
  int restart_all();
  int probe(const icheck_hints* hints);
  int enable_async(int flag);
  int wait();
  int finalize(int flags);
  int64_t version() const;
  const char* mode() const;
  /// Time of the last commit in seconds (t_sync of Alg. 5; -1 when none).
  double last_commit_seconds() const;
  /// Text of the last failure the library handled (e.g. an agent's refusal
  /// that made a commit fall back to the second level); "" when none.
  const char* last_error() const;
  /// For adapt.cpp: see RestartView.
  RestartView restart_view();
  /// Collective: every rank linked to an agent asks it to flush its versions
  /// to the second level. true when every flush succeeded.
  bool flush_agents();
  /// Collective (MR strategy): where the agents hold version v as committed
  /// by n processes [John24 §7.4.4]. Rank 0 asks every agent of the
  /// application for its pieces of v (each agent checks the regions'
  /// XXH3_64 first), checks that every old rank 0..n-1 is there, and reads
  /// each old rank's region `meta_label` (at most max_meta bytes). Returns
  /// the same JSON text on every rank: {"ok":true, "slots":[{"agent", "total",
  /// "regions"}] (index = old rank), "meta":[text]} or {"ok":false, "err"}.
  /// defer_verify (icheck_redistribute): the agents check their pieces'
  /// checksums on a second connection each while the ranks already read;
  /// verify_wait() collects the verdict.
  std::string agent_pieces(int64_t v, int n, const std::string& meta_label, size_t max_meta, bool defer_verify = false);
  /// Collective: "" when every agent asked by a deferred agent_pieces found
  /// its pieces intact (or none was asked), else why not; same on every rank.
  std::string verify_wait();
  /// This rank: RMA of bytes [off, off+len) of old rank `slot`'s piece of v
  /// from agent `agent` (index in the agent list) into dst. false (and
  /// last_error) on any failure.
  bool read_agent(int agent, int slot, int64_t v, uint64_t off, void* dst, uint64_t len);
  /// icheck_redistribute (redistribute.cpp): register [p, p+n) once as the
  /// target of read_agents; clear_read_targets drops every registration.
  bool add_read_target(char* p, uint64_t n);
  void clear_read_targets();
  /// This rank: every read of `reads`, the agents in parallel (one request
  /// in flight per agent; per agent one rbegin/rend per old rank). false
  /// (and last_error) on any failure.
  bool read_agents(const std::vector<AgentRead>& reads);
  /// Record a failure text for last_error().
  void set_error(const std::string& e);

 private:
  std::unique_ptr<ClientImpl> impl_;
};

/// Safe label / app name: non-empty, <= 128 bytes, no '/', no control
/// characters, not starting with '.', no "..".
bool safe_name(const std::string& s);

}  // namespace dynres::icheck
