// Expands that wait for an order to commit: nodes kept for a job until the
// job, resized by an earlier order, can take them. Two users:
//   swap     the second half of a migration off a slow node (slow_watch.hpp):
//            shrink away from the slow node, then expand onto the idle one
//            ([HoG14 §5.5] super node);
//   replace  a malleable job that lost a node and runs again from its last
//            checkpoint on the remaining nodes (faults.cpp) takes an idle node
//            in the lost one's place, so that it keeps its size.
// Kept in the state file (table expand_after), so that a restarted mjsched
// still sends the expand and keeps the nodes from the policy meanwhile.
// Events (state file, mjstat --history):
//   swap:    migrate_expand "node=M order=K" / migrate_note "swap to M not completed: why"
//   replace: replace_expand "node=M order=K" / replace_note "replacement M not taken: why"
// Single-threaded: called from the daemon's loop.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dynres/sched.hpp"

namespace dynres {
class State;
}

namespace dynres::schedd {

class ResizeServer;

class ExpandAfter {
 public:
  using Log = std::function<void(const std::string&)>;
  struct Pending {
    uint64_t after = 0;  ///< the order that must commit first
    std::vector<std::string> nodes;  ///< the nodes kept for the job
    std::string kind;    ///< "swap" | "replace"
    std::string from;    ///< the node(s) they take the place of (hostlist)
  };
  explicit ExpandAfter(Log log) : log_(std::move(log)) {}

  /// Read the pending expands from the state file (creating the table).
  void load(State& st);
  /// Keep `p.nodes` for job until p.after committed, then expand onto them.
  void add(State& st, int64_t job, const Pending& p);
  bool pending(int64_t job) const { return jobs_.count(job) != 0; }
  /// The kept nodes marked as held by their job in snap (the policies, the
  /// node-failure reaction and the slow-node detector leave them alone).
  void annotate(sched::Snapshot& snap) const;
  /// Send the expands whose order committed; drop those whose order was
  /// rolled back, whose node is no longer idle and up, whose job ended, or
  /// that the job took no order for within `wait` seconds of the commit.
  void pass(State& st, ResizeServer& rz, double now, double wait = 120);

 private:
  void drop(State& st, int64_t job, double now, const std::string& why);
  Log log_;
  std::map<int64_t, Pending> jobs_;
  bool loaded_ = false;
};

}  // namespace dynres::schedd
