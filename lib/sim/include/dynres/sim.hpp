// mjsim's discrete-event simulator ([John24 Ch. 9]): replays
// a workload through the very same sched::decide() the live daemon runs, in
// simulated time, and reports the very same metrics (lib/metrics).
//
// Units: seconds (simulated), whole nodes, node-seconds of work. Jobs carry
// work, not a fixed runtime: a job's progress rate at n nodes follows its
// runtime model, so a resize changes its remaining time ([Finnerty24] §"Malleable
// Runtime Performance" for the resize costs).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dynres/metrics.hpp"
#include "dynres/sched.hpp"

namespace dynres::sim {

/// Speedup model of a job. Amdahl (default): time factor at n nodes relative
/// to one node f(n) = s + (1-s)/n. Downey (1997), average parallelism
/// A = 1/s, variance sigma: f(n) = 1/S(n) with Downey's S(n; A, sigma).
enum class Model { amdahl, downey };

/// Cost model of an expansion (SimOptions::resize_model).
enum class ResizeModel { stall, overlap };

/// Time factor f(n) (time at n nodes / time at 1 node) of a job whose serial
/// (non-scaling) fraction is s; f(1) = 1, f is non-increasing in n.
/// s in [0, 1]; sigma >= 0 (Downey only). n >= 1.
double time_factor(Model m, double s, int n, double sigma = 1.0);

/// MTCT ratio ([John24 §4.1]: time in MPI / time computing) the model
/// reports for serial fraction s at n nodes: the non-scaling part is counted
/// as MPI time, so MTCT(n) = s*n / (1-s) (grows with n; s = 1 gives 1e9).
/// Conversely a phase with ratio r at n nodes has s = r / (n + r).
double mtct_of(double s, int n);

/// One phase of a job's MTCT profile: until `until` (fraction of the job's
/// work, increasing, the last one 1) its serial fraction is `serial`.
/// Models an AMR code whose communication share changes with refinement
/// ([John24 §9.1]: the tsunami code).
struct Phase {
  double until = 1;
  double serial = 0.05;
};

/// A job to simulate.
struct SimJob {
  int64_t id = 0;
  std::string name;
  double submit = 0;           ///< seconds since the workload's start
  sched::JobKind kind = sched::JobKind::rigid;
  int req_nodes = 1;           ///< --nodes; the size `runtime` refers to
  int min_nodes = 1, max_nodes = 1;
  sched::Constraint constraint = sched::Constraint::none;
  double runtime = 0;          ///< seconds at req_nodes (phases included)
  double time_limit = -1;      ///< the user's estimate, seconds; < 0 unlimited
  int limit_nodes = 1;         ///< the size time_limit refers to
  double serial = 0.05;        ///< nominal serial fraction (the scheduler's view)
  std::vector<Phase> phases;   ///< empty: one phase with `serial`
  /// Per-node draw in watts (the --min-power/--max-power hints); < 0:
  /// unknown, [SimOptions::idle_watts, node_max_watts] (one given: used for
  /// both). The modelled draw of a job is the midpoint; the power policy
  /// gets the hints as given (< 0 when unknown).
  double min_power = -1, max_power = -1;
};

/// A change of the power corridor: from `t` (seconds since the workload's
/// start) the corridor is [lower, upper] watts [John24 §5.2.1, §9.2.3].
struct CorridorChange {
  double t = 0, lower = 0, upper = 0;
};

/// Read a corridor file (mjsim(1) "CORRIDOR FILE"): one change per line,
/// "TIME LOWER UPPER" (seconds since the workload's start, watts; TIME also
/// with a unit s/m/h), '#' starts a comment, blank lines ignored; times
/// strictly increasing, 0 <= LOWER < UPPER, all finite, at most 100,000
/// lines of at most 4096 bytes. Throws std::runtime_error "FILE:LINE: ..."
/// naming the problem, or when the file cannot be read or holds no change.
std::vector<CorridorChange> read_corridor(const std::string& path);

/// Simulator options.
struct SimOptions {
  int nodes = 1;                        ///< cluster size
  sched::PolicyConfig policy;           ///< policy and its parameters
  Model model = Model::amdahl;
  double downey_sigma = 1.0;
  double grow_cost = 14.55;             ///< seconds of an expand's pause [Finnerty24]
  double shrink_cost = 7.41;            ///< seconds without progress per shrink [Finnerty24]
  /// What a job does during an expand's pause. stall: nothing (the whole job
  /// waits for grow_cost, as an MPI code whose processes all enter the
  /// adaptation window; [John24] iMPI). overlap: it goes on at its old size
  /// and the added nodes contribute from the pause's end on ([Finnerty24]
  /// "Malleable Runtime Performance": while the new places start, "the
  /// actual computation of the tasks and the work-stealing of the unaffected
  /// workers remain undisturbed"). A shrink stalls the job in both.
  ResizeModel resize_model = ResizeModel::stall;
  double tick = 0;                      ///< extra passes every `tick` s while jobs wait or run (0: events only)
  double tau = 10;                      ///< bounded-slowdown threshold, seconds
  bool keep_nodelists = false;          ///< fill AllocationRecord::nodelist (Gantt charts)
  /// Power corridor over time (empty: no corridor, no power tracking and
  /// the results are those of a run without power). Sorted by t.
  std::vector<CorridorChange> corridor;
  double idle_watts = 71;               ///< draw of an idle node, watts [John24 §9.2.4]
  double node_max_watts = 250;          ///< draw per node of a job without power hints, watts
  /// Violation grace, seconds: an episode outside the corridor counts as a
  /// violation only when longer (power::count_violations; 0: any positive
  /// duration). The same rule as pcorridor show --grace.
  double grace = 0;
  /// Called with each note of a Decision (the power policy's reasons), if set.
  std::function<void(double now, const std::string& note)> on_note;
  /// Called about every 2 % of the jobs finished (progress of long runs).
  std::function<void(size_t done, size_t total, double now)> progress;
};

/// What a run produced; times in simulated seconds, t = 0 at the workload start.
struct SimResult {
  std::vector<JobRecord> jobs;            ///< one per job, final states
  std::vector<AllocationRecord> allocs;   ///< one per job and size (a resize opens a new one)
  std::vector<ResizeRecord> resizes;      ///< every expand/shrink carried out
  Metrics metrics;                        ///< compute_metrics() over the above
  double work = 0;                        ///< node-seconds held by jobs in total
  size_t passes = 0;                      ///< scheduling passes run
  size_t never_started = 0;               ///< jobs still waiting when nothing else could happen
  /// Makespan lower bound: max(node-seconds of all jobs at their smallest
  /// admissible size / nodes, max over jobs of submit + shortest run (largest
  /// admissible size)), seconds; resize costs excluded.
  double lower_bound = 0;
  /// Its first term alone: node-seconds of all jobs at their smallest
  /// admissible size / nodes, seconds (what a perfectly packed machine needs).
  double lower_bound_work = 0;
  // ---- power (only with SimOptions::corridor) -------------------------------
  bool power_tracked = false;
  /// The modelled draw (watts) and the corridor from each point's time on,
  /// recorded after every scheduling pass and every change; several points
  /// may share a time (a break seen by one pass and corrected by the next
  /// pass of the same instant). Ends at the last job's end.
  std::vector<PowerSample> power;
  /// Per point of `power`: the running jobs' sizes, "id:nodes" separated by
  /// blanks, in id order.
  std::vector<std::string> power_jobs;
  /// Violations, breaks and watt-seconds as power::count_violations
  /// (lib/power violations.hpp, the same function pcorridor(1) applies to a
  /// live run's samples) over `power` up to its last point: violations =
  /// episodes of positive duration longer than SimOptions::grace with the
  /// draw outside the corridor (a new one starts when the draw leaves it, or
  /// crosses from above to below); breaks = points that take the draw
  /// outside (also those corrected at the same instant); corrected =
  /// episodes of positive duration within the grace.
  int violations = 0, breaks = 0, corrected = 0;
  double above_ws = 0, below_ws = 0;    ///< watt-seconds above the upper / below the lower bound
  double max_draw = 0, min_draw = 0;    ///< extremes of the draw while jobs ran, watts
};

/// Largest submit time, runtime or time limit a job may have, seconds (2^31,
/// 68 years): up to submit + runtime = 2^32 s a double still tells instants
/// 1 us apart, the simulator's resolution. Beyond it time stops advancing
/// (t + dt == t) and a run would never end.
constexpr double kMaxSimTime = 2147483648.0;

/// Run the workload. Deterministic: same jobs and options give the same
/// result. At one instant job ends are handled before arrivals, then one
/// scheduling pass. Jobs are never killed at their time limit: a job that
/// overruns its estimate is predicted to end now. Throws std::invalid_argument
/// for nodes < 1, a job with no admissible size, negative submit or runtime,
/// a submit time, runtime or time limit above kMaxSimTime, or duplicate ids.
SimResult simulate(std::vector<SimJob> jobs, const SimOptions& opts);

// ---- workloads --------------------------------------------------------------

/// Submission order (priority order of the queue): submit time, then id.
bool submitted_before(const SimJob& a, const SimJob& b);
/// Keep only the first n jobs in submission order (n = 0 or >= size: all).
void keep_first(std::vector<SimJob>& jobs, size_t n);

/// Result of reading a Standard Workload Format trace.
struct SwfTrace {
  std::vector<SimJob> jobs;
  int max_nodes = 0;       ///< from "; MaxNodes:" (or MaxProcs / procs per node), 0 if absent
  size_t dropped_too_large = 0;  ///< jobs needing more nodes than the machine
  size_t dropped_invalid = 0;    ///< jobs without a run time or processor count
};

/// Read an SWF trace (Feitelson's Parallel Workloads Archive format), plain or
/// gzip-compressed (.swf.gz, detected by content): field 1
/// id, 2 submit, 4 run time, 5 allocated processors (else 8 requested), 9
/// requested time. Nodes = ceil(processors / procs_per_node). Estimate: the
/// requested time, raised to the run time where the job ran past it; the run
/// time where none is requested. Jobs run rigid for their recorded run time.
/// nodes > 0 is the machine size (else the header's); larger jobs are
/// dropped and counted. Throws std::runtime_error "FILE:LINE: ..." for a
/// line that does not parse or is longer than 4096 bytes, a submit, run or
/// requested time above kMaxSimTime, "FILE: ..." when the file cannot be read
/// or its gzip data is damaged.
SwfTrace read_swf(const std::string& path, int procs_per_node = 1, int nodes = 0);

/// How the jobs of a trace are made malleable or moldable (mjsim(1) "Malleable
/// and moldable shares of a trace"). Defaults: range [max(1, ceil(size/2)), min(2 size, N)],
/// serial fraction log-uniform in [0.005, 0.1] (ESP's distribution).
struct ShareOptions {
  double malleable = 0;            ///< share of the jobs made malleable, [0, 1]
  double moldable = 0;             ///< share made moldable, [0, 1 - malleable]
  uint64_t seed = 1;               ///< which jobs, and their serial fractions
  int nodes = 1;                   ///< machine size N (caps the range)
  double range_lo = 0.5;           ///< smallest size = max(1, ceil(LO x size)), LO in (0, 1]
  double range_hi = 2;             ///< largest size = min(N, floor(HI x size)), HI >= 1
  /// Amdahl serial fraction: log-uniform in [serial_lo, serial_hi]
  /// (serial_lo == serial_hi: that value for every job); 0 <= lo <= hi < 1,
  /// lo > 0 unless lo == hi.
  double serial_lo = 0.005, serial_hi = 0.1;
};

/// What apply_shares() changed.
struct ShareCounts {
  size_t malleable = 0, moldable = 0;
};

/// Make round(n x malleable) of `jobs` malleable and the next round(n x
/// moldable) moldable, n = jobs.size(). The jobs are chosen by one seeded
/// shuffle of the submission order, so a smaller share is a subset of a
/// larger one with the same seed, and a job's range and serial fraction do
/// not depend on the shares. A chosen job keeps its recorded size as
/// --nodes (req_nodes) and its recorded run time at that size: the
/// simulator measures work at req_nodes, so at its recorded size it runs
/// exactly the recorded time whatever the model; at n nodes it runs
/// runtime x f(n) / f(size) (f = time_factor). Its estimate is scaled the
/// same way: time_limit = ceil(recorded estimate x f(lo) / f(size)) at the
/// smallest size lo (limit_nodes = lo), so the estimate at the recorded
/// size is the recorded one. Node constraints: none. With both shares 0 the
/// jobs are left untouched (bit-identical runs). Throws
/// std::invalid_argument for a share outside [0, 1], shares summing above
/// 1, nodes < 1, LO outside (0, 1], HI < 1, or a bad serial range.
ShareCounts apply_shares(std::vector<SimJob>& jobs, const ShareOptions& o);

/// Parse --malleable-range "LO:HI" (factors of the recorded size) and
/// --serial-fraction "S" or "LO:HI" into `o`; throws std::invalid_argument
/// naming the option and the problem.
void parse_share_range(const std::string& s, ShareOptions& o);
void parse_serial_fraction(const std::string& s, ShareOptions& o);

/// The ESP benchmark [John24 Table 9.1] on `nodes` nodes with a share of
/// malleable jobs (chosen independently of the submission order, Z never):
/// malleable jobs keep the type's size as --nodes and range over the lowest
/// to highest admissible size (unconstrained 1..32, [John24 §9.1]). Each job
/// gets a nominal serial fraction, log-uniform in [0.005, 0.1], and a
/// four-phase MTCT profile (serial x 0.5 .. 2); its runtime at --nodes is the
/// table's. Time limit: ceil(1.2 x the runtime at the smallest size). `scale`
/// multiplies runtimes and the 30 s interval before the limits are rounded,
/// exactly as share/dynres/esp submits a time-scaled run (mjworkload esp).
std::vector<SimJob> esp_jobs(int nodes, double malleable_fraction, uint64_t seed, double scale = 1.0);

/// One job batch of [Finnerty24 Table 2]: 25 jobs drawn with the table's
/// relative probabilities, the first five at t = 0, the rest uniform in
/// [0, 600) s; `malleable_fraction` of them (round(25 f), the same nested
/// subset for every share) malleable over the table's range. Runtimes follow
/// a per-program Amdahl model calibrated so that a batch averages 8
/// node-hours at the rigid sizes (batch_row_model()). Every job's time
/// limit is kBatchRequiredTime, the estimate Finnerty et al.'s job scripts give the
/// scheduler (so EASY reserves with it, as in Finnerty et al.'s runs).
std::vector<SimJob> batch_jobs(uint64_t seed, double malleable_fraction);

/// The time limit of every batch job, seconds: Finnerty et al.'s ElasticJobScheduler
/// job scripts (scripts/apgas-jobs/*.sh) all state "#REQUIRED_TIME 800000"
/// (ms), whatever the program, size or class; the batch runtimes are 40-500 s.
inline constexpr double kBatchRequiredTime = 800;

/// One row of [Finnerty24 Table 2] with dynres's runtime model.
struct BatchRow {
  std::string program;   ///< e.g. "UTS d=18"
  int rigid_nodes;
  double probability;    ///< relative
  int lo, hi;            ///< malleable range
  double work;           ///< relative one-node work of the program configuration
  double serial;         ///< Amdahl serial fraction of the program
};
const std::vector<BatchRow>& batch_table();
/// Seconds of one unit of `work` at one node (the calibration constant).
double batch_work_unit();

/// Built-in power workloads of [John24 §9.2] (mjsim(1) "Power workloads"):
///   power-mix     §9.2.4 / Table 9.2: 20 jobs every 2 s, alternately Pi
///                 (170 W/node) and heat (250 W/node), --nodes 1-4 (seeded),
///                 malleable 1-14 (the share `malleable_fraction`, else rigid)
///   power-upper   §9.2.2 upper enforcement: App 1 (300 W/node) on 12 nodes,
///                 App 2 (110 W/node) on 2, both malleable 1-24
///   power-lower   §9.2.2 lower enforcement: App 1 (110 W/node) and App 2
///                 (140 W/node) on 4 nodes each, malleable 1-16
///   power-dynamic §9.2.3: one malleable Pi job (120 W/node) on 1 node, 1-16
/// Throws std::invalid_argument for another name. default_nodes() and
/// default_corridor() give the cluster size and the corridor of the dissertation's
/// experiment (power-dynamic: 100-600 -> 700-1200 at 240 s -> 1300-1900 at
/// 480 s -> 100-600 at 720 s; power-mix: 1700-2500 -> 1000-1700 at 480 s ->
/// 2500-3500 at 720 s).
std::vector<SimJob> power_jobs(const std::string& name, double malleable_fraction, uint64_t seed);
bool is_power_workload(const std::string& name);
int power_default_nodes(const std::string& name);
double power_default_idle_watts(const std::string& name);
std::vector<CorridorChange> power_default_corridor(const std::string& name);

/// Write the power series (t,draw_w,lower_w,upper_w,state,jobs with state
/// in, above, below and jobs the running jobs' "id:nodes") to `path`; throws std::runtime_error when it cannot be
/// written.
void write_power_csv(const std::string& path, const SimResult& r);

/// Write one CSV row per job (id,name,kind,submit,start,end,wait,response,
/// nodes_start,nodes_end,min,max,expands,shrinks) to `path`; throws
/// std::runtime_error when it cannot be written.
void write_jobs_csv(const std::string& path, const SimResult& r);

/// JSON of a run: metrics (lib/metrics to_json), work, passes, resizes.
nlohmann::json to_json(const SimResult& r);

}  // namespace dynres::sim
