// Migration off slow nodes [HoG14 §5.5.1 "All waiting for one", §5.5 super
// node]: a pure function over a Snapshot and the jobs' recent performance
// windows (no I/O, no clock), so that mjsched and tests run the same code.
//
// Slowness is measured from what a job reports, not from CPU load (ranks
// waiting in MPI spin at 100 %): libmjprof sends, per rank, the seconds spent
// computing and in MPI since its previous report (mj_report_perf), with the
// node the rank runs on and the thread's CPU seconds and run-queue wait. The
// caller adds them up per rank over windows of equal length. In a
// bulk-synchronous job every rank completes the same iterations in a window,
// paced by the slowest one, so a rank's compute share (compute / (compute +
// MPI)) is its iteration time without waiting, over the common iteration
// period. A slow node's ranks compute while the others wait for them
// ([HoG14]'s "all waiting for one"): the others wait for the node's share
// beyond the job's median, so the job's iteration time is 1 / (1 - excess)
// times the one it would have if the node kept the median pace. That
// quotient, not the shares' own, is compared: in a message-bound job (shares
// of a few %) rank 0's time blocked outside MPI (its talks to the scheduler
// and iCheck, longer on a loaded machine) doubles its share and costs the
// job a few % (measured: shares' quotient 1.7-2.4, iteration time 1.05-1.2
// beside two busy processes). A node that is slow because it gives
// the rank less CPU (other work, a CPU quota) is seen by the compute share
// only when the rank is held off while computing: held off inside an MPI
// call (a spinning wait or a short message-bound iteration) it looks like a
// rank waiting for the others. So the rank's CPU availability (cpu / (cpu +
// run-queue wait)) is compared as well: its iteration time scales with the
// inverse, whatever part of the iteration the rank was held off in.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dynres/sched.hpp"

namespace dynres::sched {

/// dynres.yaml scheduler.slow_nodes (dynres.yaml(5)).
struct SlowNodeConfig {
  bool enabled = true;    ///< false: nothing is detected or migrated
  double factor = 1.5;    ///< a node is slow in a window when its iteration time > factor x the job's median
  int windows = 3;        ///< ... in this many consecutive windows with data ([HoG14]: 3 of 20 s)
  double window = 2.0;    ///< seconds per window (the caller forms the windows)
  double cooldown = 120;  ///< seconds: at most one migration per job within it
  /// Seconds one checkpoint-restart resize of a job costs (its pause), when
  /// the job has not measured one yet (JobWindows::restart_cost).
  double restart_cost = 10;
};

/// What one rank reported in one window (sums of its reports).
struct RankSample {
  int node = -1;         ///< index into Snapshot::nodes
  double compute_s = 0;  ///< seconds computing, >= 0
  double mpi_s = 0;      ///< seconds in MPI (waiting included), >= 0
  /// Seconds the rank's thread ran on a CPU and waited runnable on a run
  /// queue (held off by other work or a cgroup CPU quota) over the same
  /// reports; < 0: unknown (a report without them).
  double cpu_s = -1, delay_s = -1;
};

/// One window of one job: the ranks that reported in it.
struct PerfWindow {
  double end = 0;  ///< end of the window (Snapshot::now's clock)
  std::vector<RankSample> ranks;
};

/// A running job's recent windows and migration history.
struct JobWindows {
  int64_t job = 0;
  std::vector<PerfWindow> windows;  ///< oldest first, consecutive
  double last_migration = -1;       ///< when it was last migrated; < 0: never
  /// Predicted seconds left at the current pace; < 0: unknown (no bound).
  double remaining = -1;
  /// Seconds its last checkpoint-restart resize took; < 0: not measured.
  double restart_cost = -1;
};

/// A node whose ranks were slow in the last SlowNodeConfig::windows windows
/// with data for it.
struct SlowNode {
  int64_t job = 0;
  int node = -1;
  /// Its iteration time over the job's median, the smallest of those
  /// windows (what moving it off can gain at least).
  double ratio = 0;
};

enum class MigrationKind { swap, shrink };
const char* to_string(MigrationKind k);

/// Move job off node `from`: swap — onto the idle node `to` by checkpoint-
/// restart (shrink away from `from`, then expand onto `to`: two resizes);
/// shrink — give `from` back (one resize), `to` is -1.
struct Migration {
  int64_t job = 0;
  MigrationKind kind = MigrationKind::swap;
  int from = -1, to = -1;
  double ratio = 0;       ///< SlowNode::ratio
  double remaining = -1;  ///< JobWindows::remaining
  double break_even = 0;  ///< seconds: below this remaining time it would not pay
  double cost = 0;        ///< seconds of pause it costs (resizes x restart cost)
};

struct SlowReaction {
  std::vector<SlowNode> slow;            ///< every slow node found
  std::vector<Migration> migrations;     ///< at most one per job
  /// Jobs with a slow node that are not migrated, and why (for the log).
  std::vector<std::pair<int64_t, std::string>> notes;
};

/// The compute share of a sample: compute / (compute + MPI), or -1 when it
/// holds no time (never a value for the detector).
double compute_share(const RankSample& r);

/// The share of the CPU the rank got while it wanted one: cpu / (cpu +
/// delay), in [0, 1]; -1 when unknown, or when the rank was runnable for
/// less than a quarter of the sample's time (it mostly slept, e.g. blocked
/// in MPI: no measure of its node's speed).
double cpu_availability(const RankSample& r);

/// Break-even remaining time [HoG14 §5.5]: moving off a node whose ranks
/// are `ratio` times slower (the job runs at 1/ratio of its pace) costs
/// `cost` seconds and leaves `after` x remaining / ratio seconds of work
/// (swap: after = 1; shrink from n to n-1 nodes: n / (n-1)). It pays when
/// remaining > cost / (1 - after / ratio). Returns +infinity when it never
/// pays (after >= ratio), 0 when it costs nothing.
double break_even(double ratio, double after, double cost);

/// For every running job in `jobs` (others ignored):
///  detection — in each window, per measure (compute share; CPU
///    availability), a node's value is the median of its ranks'; the job's
///    median is over all its ranks (ranks reporting a node the job does not
///    hold, or no value, are ignored); a measure with fewer than 2 nodes
///    with values in a window has no comparison in it. A node's ratio in a
///    window is the larger of 1 / (1 - (its compute share - the job's
///    median share)) (the job's iteration time over the one without the
///    node's excess; +inf when the excess is 1) and the job's median
///    availability over its own (the iteration time it implies over the
///    job's). A node is slow in a window when its ratio >
///    factor; a window without data for the node neither
///    counts nor breaks its streak; one in which it is not slow does. Slow
///    when the streak reaches `windows`.
///  reaction — for the slowest node of a job (highest ratio; the job's
///    first node, its lowest index, is never moved: note): nothing when
///    the job is not malleable, not accepting orders, adapting, or some job
///    is adapting (Snapshot::adapting), or when now - last_migration <
///    cooldown (note). Swap onto the lowest idle, up node when one exists
///    and remaining > break_even(ratio, 1, 2 x cost); otherwise shrink when
///    the job keeps an admissible size >= max(1, min_nodes) without it and
///    remaining > break_even(ratio, n/(n-1), cost); otherwise a note. cost
///    = JobWindows::restart_cost when measured, else
///    SlowNodeConfig::restart_cost. An unknown remaining time (< 0) never
///    blocks. Each idle node is given to at most one swap.
/// Never migrates in a run where no node is slow. Never throws except
/// std::bad_alloc. O(W x R log R) per job (W windows, R ranks).
SlowReaction find_slow_nodes(const Snapshot& snap, const std::vector<JobWindows>& jobs, const SlowNodeConfig& cfg);

}  // namespace dynres::sched
