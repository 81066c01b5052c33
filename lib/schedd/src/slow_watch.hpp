// mjsched's watch for slow nodes (mjsched(8) SLOW NODES, [HoG14 §5.5]):
// adds up the ranks' mj_perf reports (compute, MPI, CPU and run-queue seconds, per node)
// into windows of scheduler.slow_nodes.window seconds, runs the pure
// detector (dynres/slow_nodes.hpp) and carries out its migrations over the
// resize protocol: a swap is a shrink away from the slow node, then, once
// that committed, an expand onto the idle node kept for the job meanwhile
// (expand_after.hpp); a shrink is one order. What a restarted mjsched needs
// is in the state file: the swaps' second halves (expand_after) and each
// job's last migration (its migrate event), so the cooldown holds across a
// restart; the windows are not kept (a slow node is found again within
// windows + 1 windows). Events (state file, mjstat --history):
//   slow_node  "node=N ratio=R windows=K"
//   migrate    "kind=swap|shrink from=N to=M|- order=K ratio=R remaining=S break_even=B cost=C"
//   migrate_expand "node=M order=K"   (the second half of a swap)
//   migrate_note   why a slow node was not moved (once per reason)
// Single-threaded: called from the daemon's loop.
#pragma once
#include <sys/types.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dynres/slow_nodes.hpp"

namespace dynres {
class State;
}

namespace dynres::schedd {

class ResizeServer;
class ExpandAfter;

class SlowWatch {
 public:
  using Log = std::function<void(const std::string&)>;
  /// `after` carries out the second half of swaps (outlives this watch).
  SlowWatch(sched::SlowNodeConfig cfg, ExpandAfter& after, Log log) : cfg_(cfg), after_(after), log_(std::move(log)) {}

  /// One rank's report (ResizeServer's perf listener): seconds computing,
  /// in MPI, on a CPU and waiting for one (the last two < 0: not reported)
  /// since its previous report, on `node` (one of the job's); r.node unused.
  void perf(int64_t job, pid_t pid, const std::string& node, const sched::RankSample& r, double now);

  /// Once per pass, before the policy (after ExpandAfter::pass): close the
  /// windows that are due, detect and migrate (not a job whose swap is still
  /// to be completed). Jobs no longer running are forgotten.
  void pass(State& st, ResizeServer& rz, double now);

 private:
  struct Acc {
    std::string node;
    sched::RankSample sum{-1, 0, 0, 0, 0};  ///< cpu_s/delay_s < 0 once a report had none
  };
  struct Job {
    double window_start = -1;
    std::map<pid_t, Acc> ranks;                  ///< the open window
    std::vector<std::vector<std::pair<std::string, Acc>>> windows;  ///< closed ones, oldest first
    std::vector<double> ends;                    ///< their end times
    double last_migration = -1;  ///< from the state file's migrate events at the first pass
    bool cooldown_read = false;
    std::set<std::string> announced;  ///< slow nodes logged (until the next migration)
    std::string last_note;
  };
  sched::SlowNodeConfig cfg_;
  ExpandAfter& after_;
  Log log_;
  std::map<int64_t, Job> jobs_;
};

}  // namespace dynres::schedd
