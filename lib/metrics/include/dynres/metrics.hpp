// Workload metrics ([John24 §9.1]; bounded slowdown after Feitelson et al.).
// Pure functions over job and allocation records; times in seconds.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dynres/state.hpp"

namespace dynres {

/// One expand or shrink carried out on a running malleable job.
struct ResizeRecord {
  int64_t job_id = 0;
  double time = 0;     ///< seconds, same clock as the job records
  bool expand = true;  ///< false: shrink
  int from = 0, to = 0;  ///< node counts before and after
};

struct Metrics {
  int jobs = 0;                ///< jobs considered (all in the records)
  int finished = 0;            ///< jobs in a final state that ran
  double makespan = 0;         ///< last end − first submit, s
  double utilisation = 0;      ///< node-seconds held / (nodes × makespan), 0..1; nodes = every
                               ///< registered node, down/drained time included (no node-state history)
  double avg_wait = 0;         ///< mean(start − submit) over finished jobs (as response, slowdown), s
  double avg_response = 0;     ///< mean(end − submit) over finished jobs, s
  double avg_bounded_slowdown = 0;  ///< mean(max(1, (end−submit)/max(end−start, τ))), finished jobs
  double tau = 10;             ///< bounded-slowdown threshold τ, s
  int expands = 0;             ///< expand orders carried out (all jobs)
  int shrinks = 0;             ///< shrink orders carried out (all jobs)
  int resized_jobs = 0;        ///< jobs with at least one expand or shrink
  std::map<std::string, int> by_state;
};

/// Compute metrics for `jobs` on a cluster of `nodes` nodes using the
/// allocation history (node-seconds inside [first submit, last end]).
/// With no finished job every time metric is 0. `resizes` (expand/shrink
/// records) gives the resize counts.
Metrics compute_metrics(const std::vector<JobRecord>& jobs, const std::vector<AllocationRecord>& allocs,
                        int nodes, double tau = 10.0, const std::vector<ResizeRecord>& resizes = {});

nlohmann::json to_json(const Metrics& m);

/// The expand/shrink events of a state file (events of kind "expand" or
/// "shrink" whose detail starts "from=N to=M"), oldest first. Events whose
/// detail does not parse are skipped.
std::vector<ResizeRecord> resize_events(State& st);

/// job_id of the allocations icheck_allocations() returns (no job has it).
inline constexpr int64_t kIcheckAllocation = -1;
/// Nodes of the batch pool lent to the checkpoint service, one allocation of
/// job kIcheckAllocation per node and lending (mjsched's table
/// icheck_lent_history [John24 §7.3.2]); a lending still open ends at `now`
/// (seconds). Empty when the scheduler never lent a node.
std::vector<AllocationRecord> icheck_allocations(State& st, double now);

/// A node the checkpoint service holds [John24 §7.3]: a node of the batch
/// pool the scheduler lent (mjsched's table icheck_lent) or one of iCheck's
/// own boot nodes (outside the batch pool, known from the controller's table
/// icheck_nodes), as mjstat -N shows it.
struct IcheckNodeInfo {
  std::string name;
  std::string lent;     ///< granting | held | reclaiming; "" for a boot node
  double since = 0;     ///< when the lending entered that state (seconds since the epoch); 0 unknown
  int64_t change = 0;   ///< Resource change id of the lending (0 for a boot node)
  std::string manager;  ///< the controller's view: up | relaunching | down | removed; "" unknown
  int agents = 0;       ///< agents up on the node
};
/// Every node iCheck holds, lent ones and boot ones (a node the controller
/// marked removed and the scheduler no longer lends is left out), by name.
/// Empty when neither table exists.
std::map<std::string, IcheckNodeInfo> icheck_nodes_view(State& st);

/// One iCheck event of the scheduler's log (kinds icheck_request,
/// icheck_grant, icheck_node_up, icheck_grant_failed, icheck_reclaim,
/// icheck_node_returned, icheck_reclaim_refused), oldest first.
struct IcheckEvent {
  double time = 0;
  std::string kind, detail;
};
std::vector<IcheckEvent> icheck_events(State& st);

/// Multiply every time of the records by factor (relative to the first
/// submission), to report a time-scaled run in unscaled seconds.
void rescale_times(std::vector<JobRecord>& jobs, std::vector<AllocationRecord>& allocs, double factor);

/// s as a single-quoted gnuplot string literal ('' for a quote; newlines
/// become spaces), safe for paths and titles with any characters.
std::string gnuplot_quote(const std::string& s);

/// Write a Gantt chart (nodes × time, one box per job per node) as PNG via
/// gnuplot. node_order gives the y position of each node name. Allocations
/// of kIcheckAllocation (nodes lent to iCheck) are drawn in one colour of
/// their own, red (#d62728), with a key entry "iCheck". Throws
/// std::runtime_error if gnuplot is missing or fails.
void write_gantt_png(const std::string& png, const std::vector<AllocationRecord>& allocs,
                     const std::vector<std::string>& node_order, const std::string& title);

/// One point of a power-over-time series: from time t (seconds) the total
/// draw is `draw` and the corridor [lower, upper] (watts).
struct PowerSample {
  double t = 0, draw = 0, lower = 0, upper = 0;
};
/// Plot the draw (a step line) against the corridor (a band) as PNG via
/// gnuplot [John24 Fig. 9.3]. Throws std::runtime_error if gnuplot is
/// missing or fails.
void write_power_png(const std::string& png, const std::vector<PowerSample>& samples, const std::string& title);

}  // namespace dynres
