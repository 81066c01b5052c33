// What the scheduler does about running jobs on nodes that are no longer up:
// a pure function over a Snapshot (no I/O, no clock), so the daemon and the
// simulator share it. Node states follow Slurm's (scontrol update
// NodeName=... State=DOWN|DRAIN|RESUME): a DRAIN node takes no new work and
// its jobs end normally, a DOWN node takes none and its jobs lost it.
// Malleability is used for fault tolerance: a malleable job that lost a node
// (or holds a drained one) is shrunk away from it instead of being killed
// [John24 §4.2 (expand/shrink orders); HoG14 §5.4 (moving work off a node)].
#pragma once
#include <cstdint>
#include <vector>

#include "dynres/sched.hpp"

namespace dynres::sched {

/// A running job that lost nodes and cannot shrink away from them: the
/// caller requeues it (sbatch --requeue) or ends it NODE_FAIL.
struct NodeFailure {
  int64_t job = 0;
  std::vector<int> lost;  ///< its nodes that are down, ascending
};

struct NodeReaction {
  /// Shrinks away from lost or drained nodes: the nodes named are the lost
  /// or drained ones, plus (only when the node constraint requires a smaller
  /// size) the job's highest healthy nodes other than its first.
  std::vector<Resize> shrinks;
  /// Restarts away from lost nodes (nodes named as for shrinks): the job's
  /// listener died with the failure, so its script is run again on the
  /// remaining nodes and restores its last checkpoint there (a restart order
  /// begun on its behalf) [John24 §7.4.4].
  std::vector<Resize> restarts;
  /// Per restart (same index): idle, up nodes that take the lost ones'
  /// place once the restart committed (an expand onto them), so that the
  /// job keeps its size; empty when none is idle.
  std::vector<std::vector<int>> replacements;
  std::vector<NodeFailure> failures;
};

/// For every running job holding a node that is not up (Snapshot::nodes[i].up
/// false; lost = down, else drained). A job's first node is its lowest node
/// index (its batch script and coordinator run there).
///   lost nodes: a malleable job that accepts orders, has none outstanding,
///     kept its first node and keeps an admissible size >= min_nodes is
///     shrunk away from them (in place, or by the job's own checkpoint-
///     restart); a restartable one (RunningJob::restartable) under the same
///     conditions, whether or not an order is outstanding, is restarted on
///     the remaining nodes; a malleable job with an order outstanding (whether or not it
///     accepts orders meanwhile) that would qualify otherwise is left for a
///     later pass (its order settles first, within the resize timeout); a
///     restarted job gets idle, up nodes (lowest first, each to one job) as
///     replacements, at most one per node it gives back, up to the
///     largest admissible size <= its size now and its max_nodes; any other job
///     (rigid, moldable, unregistered, first node lost, at its minimum) is a
///     failure.
///   drained nodes only: a malleable job under the same conditions is shrunk
///     away from them (drain by evacuation); otherwise nothing (it ends
///     normally, the node becomes DRAINED).
/// Never touches a job whose nodes are all up; each job appears at most once.
NodeReaction react_to_nodes(const Snapshot& snap);

}  // namespace dynres::sched
