// Internals shared by the rigid passes (policy.cpp) and the malleable
// policies (malleable.cpp). Not installed; no I/O.
#pragma once
#include <string>
#include <vector>

#include "dynres/sched.hpp"

namespace dynres::sched::detail {

/// Queue discipline of a start phase ([Finnerty24] FCFS / Backfilling / EASY).
enum class Queue { fcfs, backfill, easy };

/// Size malleable jobs start with: `fit` as many as fit (moldable extension),
/// `minimum` their smallest admissible size (minagree), `requested` their
/// --nodes (fpsma, egs, perf). Rigid and moldable jobs always use `fit`'s
/// rule (rigid: exactly req_nodes).
enum class SizeRule { fit, minimum, requested };

/// Idle, up nodes in ascending index order; free[next..] are unallocated.
/// `extra` holds nodes released by shrinks of the same decision.
struct Pool {
  std::vector<int> free;
  size_t next = 0;
  std::vector<int> extra;
  int up = 0;  ///< up nodes in the cluster
  explicit Pool(const Snapshot& s);
  int avail() const { return static_cast<int>(free.size() - next + extra.size()); }
  /// Nodes job j may get now (-w/-x): 0 unless every required node is
  /// unallocated; else the unallocated nodes it does not exclude.
  int avail_for(const WaitingJob& j) const;
  /// Take k nodes for a restricted job (k <= avail_for(j), k >= its required
  /// count): its required nodes, then the lowest allowed ones; ascending.
  std::vector<int> take_for(const WaitingJob& j, int k);
  /// Take k unallocated nodes (k <= avail()): the lowest idle ones first,
  /// then released ones; returned in ascending order.
  std::vector<int> take(int k);
};

/// Nodes job j needs at least under `rule` (0: never startable).
int need_of(const WaitingJob& j, SizeRule rule, int up);
/// Size j starts with when `free` nodes are available under `rule`, 0 if it
/// does not fit now.
int size_of(const WaitingJob& j, SizeRule rule, int up, int free);

/// One start phase over snap.waiting: appends starts (in queue order) and
/// holds (one per job not started). Returns the index in snap.waiting of the
/// highest-priority held job that could start some day (the head: fcfs — the
/// blocking job; easy — the reservation holder; backfill — the first held
/// job), or -1 when there is none.
int start_phase(const Snapshot& snap, const PolicyConfig& cfg, Queue q, SizeRule rule, Pool& pool,
                Decision& d);

/// The malleable policies (fpsma, egs, minagree, perf); malleable.cpp.
Decision decide_malleable(const Snapshot& snap, const PolicyConfig& cfg);
/// The power policy [John24 Alg. 4]; power.cpp.
Decision decide_power(const Snapshot& snap, const PolicyConfig& cfg);

/// decide() without the iCheck pass (the policy of cfg.policy alone).
Decision decide_base(const Snapshot& snap, const PolicyConfig& cfg);
/// decide() with the iCheck pass around decide_base [John24 Alg. 10, 11];
/// icheck.cpp.
Decision decide_icheck(const Snapshot& snap, const PolicyConfig& cfg);

/// Size job r shrinks to from t to give up at least `need` nodes (largest
/// admissible <= t - need), else as many as it can (its smallest admissible
/// size below t); 0 if it cannot shrink. malleable.cpp.
int down_by_need(const RunningJob& r, int t, int need);

/// Predicted remaining seconds of a running job (predicted_end, else start +
/// limit; +inf when unlimited); malleable.cpp.
double remaining(const RunningJob& r, double now);
/// The "resizable" rule of sched.hpp decide() (malleable, accepting, not
/// adapting, > min_remaining left, min_resize_interval since the last resize,
/// every node up and its own).
bool resizable(const RunningJob& r, const Snapshot& s, const PolicyConfig& cfg);
/// An expansion cur -> to saves more than cfg.grow_cost at best linear speedup.
bool worth_growing(const RunningJob& r, int cur, int to, double now, const PolicyConfig& cfg);

}  // namespace dynres::sched::detail
