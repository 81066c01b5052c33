// Scheduling policies as pure functions over a snapshot ([John24 Ch. 4],
// Alg. 1 line 4 "schedule jobs in priority order"; [Finnerty24 §3-4]).
//
// No I/O happens in this module: the live daemon (mjsched) and the simulator
// build a Snapshot, call decide(), and carry out the Decision themselves.
// All times are seconds (double, same clock as Snapshot::now); node counts
// are whole nodes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dynres::sched {

/// Node-count constraint of a job ([John24 Listing 4.1] --node-constraints).
enum class Constraint { none, even, odd, pof2, square, cube };

/// Parse "none|even|odd|pof2|square|cube" (also "ncube" for cube; exact,
/// lower case). Returns std::nullopt for anything else; never throws.
/// Source: [John24 Listing 4.1 line 7]-9 (--node-constraints).
std::optional<Constraint> parse_constraint(const std::string& s);
/// Canonical name ("none", "even", "odd", "pof2", "square", "cube"); the
/// inverse of parse_constraint.
std::string to_string(Constraint c);

/// True if the node count n (whole nodes) satisfies c. n < 1 is never
/// admissible. O(1), never throws. Source: [John24 §4.1] (node constraints:
/// even, odd, power of two, square, cube — e.g. Lulesh needs a cube).
bool admissible(Constraint c, int n);
/// Largest admissible node count in [lo, hi] (lo is raised to 1), or 0 when
/// none exists (also when lo > hi). O(1), never throws, no overflow.
int largest_admissible(Constraint c, int lo, int hi);
/// Smallest admissible node count in [lo, hi] (lo is raised to 1), or 0 when
/// none exists (also when lo > hi). O(1), never throws, no overflow.
int smallest_admissible(Constraint c, int lo, int hi);

/// rigid: runs on exactly req_nodes. moldable: the scheduler picks the size at
/// start within [min_nodes, max_nodes]. malleable: moldable, and may later be
/// expanded/shrunk while running (later policies).
enum class JobKind { rigid, moldable, malleable };

struct WaitingJob {
  int64_t id = 0;
  JobKind kind = JobKind::rigid;
  int req_nodes = 1;   ///< --nodes (rigid size; hint for moldable)
  int min_nodes = 1;   ///< == req_nodes for rigid jobs
  int max_nodes = 1;   ///< == req_nodes for rigid jobs
  Constraint constraint = Constraint::none;
  double time_limit = -1;  ///< seconds; < 0 means unlimited
  double submit_time = 0;
  /// Per-node draw in watts (--min-power/--max-power, else the history of
  /// earlier runs, [John24 §5.1.3]); < 0: unknown, the power policy plans
  /// with the midpoint of [Snapshot::power.idle_watts, node_max_watts] (one
  /// given: used for both). Only the power policy reads them.
  double min_power = -1, max_power = -1;
  /// sbatch -w / -x: node indices (into Snapshot::nodes) the job must get,
  /// and must not get; empty = no restriction. The start phase honours them
  /// (a restricted job starts only when all its required nodes are idle, on
  /// them plus the lowest allowed idle nodes); EASY's reservation for a
  /// restricted head is computed from node counts, as for any job.
  std::vector<int> required, excluded;
};

struct RunningJob {
  int64_t id = 0;
  JobKind kind = JobKind::rigid;
  std::vector<int> nodes;  ///< node indices held (into Snapshot::nodes)
  int req_nodes = 1;       ///< --nodes at submission (perf starts malleable jobs there)
  int min_nodes = 1, max_nodes = 1;
  Constraint constraint = Constraint::none;
  double start_time = 0;
  double time_limit = -1;  ///< seconds; < 0 means unlimited
  /// Malleable jobs only: the job currently accepts expand/shrink orders
  /// ([Finnerty24]: registered MalleableHandler; a job in its shutdown phase
  /// deregisters). A job that never registered is treated as rigid.
  bool accepting = false;
  /// This job has an order outstanding [John24 Alg. 3 line 9].
  bool adapting = false;
  /// Malleable jobs only: registered and never deregistered, but no process
  /// listens for orders any more (the listener died, e.g. with a failed
  /// node): the job can only be run again on its nodes by checkpoint-restart
  /// [John24 §7.4.4] (react_to_nodes' restarts).
  bool restartable = false;
  /// Predicted end at the current size, seconds on Snapshot::now's clock;
  /// < 0: unknown, start_time + time_limit is used instead. The simulator
  /// fills it from its runtime model (time limit scaled to the current size).
  double predicted_end = -1;
  /// Time of the last expand/shrink (same clock); < 0: never resized.
  double last_resize = -1;
  /// MPI-time / compute-time ratio ([John24 §4.1] "MTCT"); < 0 until the job
  /// reported one.
  double mtct = -1;
  /// Per-node draw in watts, as WaitingJob::min_power/max_power (measured or
  /// modelled); < 0: unknown. Only the power policy reads them.
  double min_power = -1, max_power = -1;
};

/// What the power policy plans on [John24 §5.1.4 and §9.2.4]:
///   aware      Algorithm 4 on the modelled draw (per-job hints x nodes,
///              idle nodes): the ILP also starts waiting jobs, a start that
///              would break the corridor is held (the dissertation's power-aware
///              scheduler, scenario 3; the default). PowerView::draw_min/max
///              are ignored.
///   runtime    scenario 2: jobs start as with backfill and are never held;
///              only running jobs are reconfigured when the corridor is
///              broken (modelled draw, or draw_min/max when given).
///   proactive  Algorithm 4 with the broken test on the forecast: the caller
///              puts the forecast min/max draw over the next scheduling
///              interval in draw_min/draw_max (the model where none is given);
///              starts are held as in aware.
///   reactive   acts only on a measured violation: the caller puts the last
///              measured total in draw_min = draw_max (the model where none
///              is given); when it is outside, Algorithm 4 lines 6-18 (the
///              ILP with waiting jobs, else the running jobs alone); jobs
///              start as with backfill and are never held for power.
enum class PowerMode { aware, runtime, proactive, reactive };
/// "aware|runtime|proactive|reactive" (exact), else nullopt.
std::optional<PowerMode> parse_power_mode(const std::string& s);
const char* to_string(PowerMode m);

/// The power corridor and power model of the cluster [John24 Ch. 5], read
/// only by the power policy; the defaults (known = false) leave every other
/// policy, and the power policy's corridor checks, unaffected.
struct PowerView {
  bool known = false;           ///< a corridor is in force
  double lower = 0, upper = 0;  ///< corridor [l, u], total watts of the cluster
  double idle_watts = 71;       ///< draw of an idle up node, watts (§9.2.4: 71 W)
  double node_max_watts = 250;  ///< most a busy node draws, watts (unknown jobs: midpoint with idle_watts)
  /// Total draw the caller measured or forecast for the next interval
  /// (proactive mode, §5.1.4), watts; < 0: the policy models it from the
  /// jobs' per-node [min_power, max_power] and the idle nodes.
  double draw_min = -1, draw_max = -1;
};

/// Node::job of a node lent to the checkpoint service (iCheck): neither idle
/// nor any job's; only the iCheck pass of decide() gives it back.
inline constexpr int64_t kIcheckJob = -1;

struct Node {
  std::string name;
  bool up = true;       ///< false: down or drained, never allocated
  int64_t job = 0;      ///< job holding it, 0 when idle, kIcheckJob when iCheck's
  /// Down (lost: crashed, not responding, or set down), not merely drained;
  /// only meaningful when !up. react_to_nodes() reads it; the policies never
  /// hand out a node that is not up either way.
  bool lost = false;
};

/// Which side an iCheck-aware pass favours (dynres.yaml
/// scheduler.icheck.favour) [John24 §7.3.2.2]:
///   icheck        Alg. 10: a HIGH request is served first, from idle nodes,
///                 else by shrinking running malleable jobs (lowest MTCT
///                 first); a LOW one from the idle nodes left after the
///                 pass; with no request, mostly free nodes are reclaimed
///                 for a waiting job as below.
///   applications  Alg. 11: LOW requests are dropped; a HIGH one gets the
///                 idle nodes left after the pass (the rest is dropped);
///                 iCheck nodes with mostly free memory are reclaimed for a
///                 waiting job that needs them.
enum class IcheckFavour { icheck, applications };
/// "icheck|applications" (exact), else nullopt.
std::optional<IcheckFavour> parse_icheck_favour(const std::string& s);
const char* to_string(IcheckFavour f);

/// Urgency of an iCheck resource request [John24 §7.3.1.1, Alg. 8].
enum class Urgency { low, high };

/// One node the checkpoint service holds, as its controller last reported
/// it in a Status message [John24 §7.3.1.1].
struct IcheckNode {
  int node = -1;          ///< index into Snapshot::nodes (its job is kIcheckJob)
  double total_mem = 0;   ///< bytes the agents may use on it
  double avail_mem = 0;   ///< bytes still free, in [0, total_mem]
  int agents = 0;         ///< agents running on it
  /// The controller refused to give it back and the scheduler's back-off
  /// has not expired (mjsched(8) ICHECK PROTOCOL): no reclaim candidate.
  bool reclaim_wait = false;
};

/// The checkpoint service as the scheduler sees it. `present` false (no
/// controller spoke to this scheduler) disables the iCheck pass entirely.
struct IcheckView {
  bool present = false;
  std::vector<IcheckNode> nodes;
  /// Nodes granted or reclaimed whose exchange with the controller is not
  /// finished; while either is non-zero the pass neither grants nor reclaims.
  int in_flight = 0;
  /// The controller's pending resource request (the latest one replaces the
  /// earlier); nodes == 0: none.
  int request_nodes = 0;
  Urgency request_urgency = Urgency::low;
  /// Nodes iCheck holds outside the batch pool (its boot nodes, not in
  /// Snapshot::nodes); counted with the kIcheckJob nodes for the bounds.
  int fixed_nodes = 0;
  /// iCheck keeps at least min_nodes (>= 1) and holds at most max_nodes.
  int min_nodes = 1, max_nodes = 1;
  /// Bytes in use and in all over every up node of the controller's Status
  /// (boot nodes too): favour icheck reclaims only while what stays is at
  /// most half used.
  double used_mem = 0, total_mem = 0;
};

/// Everything a policy may look at. `waiting` is in priority order (FCFS:
/// by submit time, then id); the policy must not reorder priorities.
struct Snapshot {
  double now = 0;
  /// Some job is adapting (an expand/shrink order is outstanding): no new
  /// resize decision is taken in this pass ([John24 Alg. 3] lines 8-16,
  /// IS_ADAPTING). Running jobs' `adapting` flags also set it implicitly.
  bool adapting = false;
  std::vector<Node> nodes;
  std::vector<RunningJob> running;
  std::vector<WaitingJob> waiting;
  /// Optional index kept by a caller that updates the snapshot in place (the
  /// simulator): when idle_known, `idle` is the ascending list of idle
  /// (job == 0), up nodes and `up_count` the number of up nodes, and decide()
  /// uses them instead of scanning `nodes`. The caller guarantees they match
  /// `nodes`, and that every running job's `nodes` are in range and held by
  /// it (nodes[n].job == id); when moreover every node is up (up_count ==
  /// nodes.size()), decide() does not check each running job's nodes again
  /// in every pass (O(nodes) per pass otherwise: mjsim on 10,000 nodes).
  /// The live daemon leaves idle_known false.
  bool idle_known = false;
  std::vector<int> idle;
  int up_count = 0;
  /// The corridor and power model (power policy only).
  PowerView power;
  /// The checkpoint service's nodes and pending request (iCheck pass only).
  IcheckView icheck;
};

struct Start {
  int64_t job = 0;
  std::vector<int> nodes;  ///< node indices, ascending
};

struct Resize {
  int64_t job = 0;
  std::vector<int> nodes;  ///< nodes added (expand) or removed (shrink)
  /// A shrink ordered to serve iCheck's HIGH request (Alg. 10 lines 21-33):
  /// the released nodes are granted to iCheck by the next pass (the request
  /// stays pending until then), not started on.
  bool for_icheck = false;
};

/// What the policy wants done. `holds` gives, for waiting jobs not started,
/// a short reason ("Resources", "Priority") like squeue.
struct Decision {
  std::vector<Start> starts;
  std::vector<Resize> expands;
  std::vector<Resize> shrinks;
  std::vector<std::pair<int64_t, std::string>> holds;
  /// Why the policy did (or could not do) something, for the log: the power
  /// policy explains a broken corridor it could not correct here (the ILP's
  /// reason and whether the guarantees of Eq. 5.4/5.5 explain it). Empty
  /// for the other policies.
  std::vector<std::string> notes;
  /// iCheck pass [John24 Alg. 10, 11]: idle nodes lent to the checkpoint
  /// service (NEW_NODES), iCheck nodes to be given back (REMOVE_NODES), both
  /// ascending node indices; and what becomes of the pending request:
  /// `icheck_request_left` nodes of it stay pending (0: served or dropped).
  std::vector<int> icheck_grants;
  std::vector<int> icheck_reclaims;
  int64_t icheck_reclaim_job = 0;  ///< the waiting job the reclaims are for
  int icheck_request_left = 0;
};

enum class Policy { fcfs, backfill, easy, fpsma, egs, minagree, perf, power };
/// Parse "fcfs|backfill|easy|fpsma|egs|minagree|perf|power" (exact, lower
/// case). std::nullopt for anything else; never throws. Source: [Finnerty24]
/// §"Job scheduling algorithms"; [John24 §4.2.2] (fpsma, egs), §4.2.3
/// (perf), Algorithm 4 (power).
std::optional<Policy> parse_policy(const std::string& s);
/// Canonical name; the inverse of parse_policy.
std::string to_string(Policy p);
/// True for the policies that expand and shrink running malleable jobs
/// (fpsma, egs, minagree, perf, power).
bool is_malleable_policy(Policy p);

/// Job management of fpsma and egs [John24 §4.2.1].
///   prma — priority to running malleable applications: start what fits, then
///          give every idle node to running malleable jobs; never shrink.
///   pwma — priority to waiting applications: shrink running malleable jobs to
///          start the highest-priority waiting job; grow only with the idle
///          nodes left (also when the waiting job cannot be started).
enum class Management { prma, pwma };
/// How far one pass moves a job (fpsma): `one` admissible step up/down per
/// pass, as the dissertation's worked examples (even 2 -> 4; odd 9 -> 7); `greedy`
/// as many nodes as the idle nodes / the waiting job's need allow.
enum class Step { one, greedy };

struct PolicyConfig {
  Policy policy = Policy::easy;
  /// time limit assumed for jobs without one, when a policy needs one
  /// (EASY reservations); seconds
  double default_time_limit = 3600;
  // ---- malleable policies (fpsma, egs, minagree, perf) --------------------
  Management management = Management::pwma;  ///< fpsma, egs
  Step step = Step::one;                      ///< fpsma
  /// Jobs predicted to end within this many seconds are never resized
  /// (Algorithm 2 line 9/28: "jobRemainingTime > 60.0").
  double min_remaining = 60;
  /// Seconds a job must run at its size before the next resize (thrashing guard).
  double min_resize_interval = 30;
  /// Expected pause of an expansion, seconds ([Finnerty24] §"Malleable Runtime
  /// Performance": 14.55 s). A job is grown only when, at best linear
  /// speedup, its predicted remaining time x (1 - old/new size) exceeds it;
  /// 0 disables the check.
  double grow_cost = 14.55;
  /// Grow running jobs with idle nodes while the highest-priority waiting job
  /// is held ([John24 §4.2.1] PWMA, Algorithm 3 line 23). false keeps idle
  /// nodes for the held job.
  bool grow_when_held = true;
  /// Start phase of fpsma, egs and perf: false — strict priority order
  /// (FCFS, as [John24] Algorithms 2-3); true — EASY-backfilling around the
  /// held head (a dynres option; minagree always uses EASY, [Finnerty24]).
  bool backfill = false;
  /// Size fpsma, egs and perf start malleable jobs with: false — their
  /// --nodes [John24 §4.2.3]; true — their smallest admissible size, grown
  /// later with idle nodes ([Finnerty24] minAgree's rule; minagree always does).
  bool start_at_minimum = false;
  /// The malleable jobs a pass starts take part in its growth phase like
  /// the running ones (the policy's growth order and caps, no grow_cost
  /// test); what they are given widens their start instead of an expansion
  /// ordered right after it, which would pause them for grow_cost with the
  /// new nodes idle ([Finnerty24]: 14.55 s). Also while another job is adapting
  /// (a start's size is no resize decision). false: jobs start at the start
  /// phase's size and are grown by later passes. Not perf: it grows by
  /// measured MTCT (Algorithm 3 line 13), which a job it starts has not
  /// reported yet.
  bool grow_at_start = true;
  /// perf: jobs whose MTCT ratio is above this are never grown, and give up
  /// nodes down to their minimum first when a waiting job needs them (seed
  /// 000 §4.2.2.2 last paragraph: the "predetermined threshold"); a job below
  /// it is grown at most to the size where its ratio would reach it (MTCT
  /// grows about linearly with the node count: n * threshold / MTCT).
  double mtct_threshold = 4.0;
  // ---- power ([John24 Alg. 4], Eq. 5.3; dynres.yaml scheduler.power) -
  /// What the power policy plans on (dynres.yaml scheduler.power.mode;
  /// [John24 §5.1.4, §9.2.4]): see PowerMode.
  PowerMode power_mode = PowerMode::aware;
  /// Proactive mode (scheduler.power.forecast_*): seconds between the
  /// equally spaced points the forecast is fitted on and how many of them
  /// (the callers, mjsched and mjsim, resample the modelled series; the
  /// horizon is the next scheduling interval). Read by the callers only.
  double power_forecast_interval = 1.0;
  int power_forecast_window = 30;
  /// Algorithm 4 line 7-8: try malleable waiting jobs before the others
  /// (each group in priority order) when the corridor is broken.
  bool power_favour_malleable = false;
  /// Waiting jobs tried as the ILP's candidate per pass (first feasible wins).
  int power_max_tries = 8;
  /// The ILP's size (dynres.yaml scheduler.power.ilp_jobs): at most this
  /// many variables may change size; resizable jobs of equal per-node draw
  /// and no node constraint count as one (their nodes summed), the rest of
  /// the jobs hold their size (those that can move the draw least, by range
  /// x |watts per node - idle watts|, then the highest id). 1-4096.
  int power_ilp_jobs = 32;
  /// lp_solve steps (calls of its abort callback: simplex iterations and
  /// branch-and-bound nodes; IlpInput::step_limit) one solve may take for
  /// the least idle power, and as many for the fewest moves. A count, not a
  /// clock: the same snapshot gives the same decision on any machine.
  long power_ilp_steps = 20000;
  /// lp_solve steps all solves of one pass may take together: a solve gets
  /// at most what is left, none once it is spent (the candidates not tried
  /// wait for the next pass).
  long power_pass_steps = 100000;
  // ---- iCheck-aware scheduling [John24 §7.3.2.2] (dynres.yaml scheduler.icheck)
  IcheckFavour icheck_favour = IcheckFavour::icheck;
  /// applications: an iCheck node whose free memory is above this fraction
  /// of its total is a reclaim candidate (Alg. 11 line 13: 90 %).
  double icheck_reclaim_free = 0.9;
};

/// Run one scheduling pass. Pure: same snapshot and config give the same
/// decision. Guarantees: a node is given to at most one start; only idle, up
/// nodes are used; started sizes respect the job's kind, range and
/// constraint. Moldable jobs start with the largest admissible size that
/// fits ([Finnerty24] "moldable extension").
///   fcfs     — start in priority order; stop at the first job that does not fit.
///   backfill — first fit over the whole queue, no reservation.
///   easy     — EASY-backfilling: the first job that does not fit gets a
///              reservation (shadow time from running jobs' start+time limit);
///              a later job starts only if it fits now and does not delay it.
///
/// Details fixed by the implementation (lib/sched/src/policy.cpp):
///   - Nodes: idle (job == 0) and up nodes are handed out in ascending index
///     order; `nodes` is authoritative for idleness.
///   - Size: see start_size(). Malleable jobs are treated as moldable (seed
///     002: these three algorithms "consider malleable jobs as moldable").
///   - A job that can never start (min_size() is 0, or larger than the number
///     of up nodes) is held "Resources" and skipped by every policy: it
///     blocks neither fcfs nor easy.
///   - easy: the head's need is min_size(); a running job releases its up
///     nodes at start_time + time_limit (default_time_limit when unlimited;
///     never earlier than now); jobs started earlier in the same pass release
///     at now + their limit. A head that cannot be reached even when every
///     job with a finite end has finished is skipped for reservation (held
///     "Resources") and the next job that does not fit becomes the head.
///     A later job starts if it ends by the shadow time (unlimited waiting
///     jobs never do) with its start_size(); otherwise it may start with the
///     largest size that fits in min(free, extra) and uses up `extra`.
///   - holds: one per waiting job not started, in queue order: fcfs — the
///     blocking job "Resources", jobs after it "Priority"; backfill —
///     "Resources"; easy — the head "Resources", later jobs "Priority".
///
/// The malleable policies (is_malleable_policy()) also expand and shrink
/// running jobs with kind == malleable && accepting. The carry-out order is
/// shrinks, then expands, then starts: a start may use nodes that a shrink of
/// the same decision releases; expansions use idle nodes only. Common rules:
///   - resizable: malleable, accepting, not adapting, predicted remaining time
///     (predicted_end, else start_time + time_limit) > min_remaining, and
///     now - last_resize >= min_resize_interval (or never resized);
///     no resize at all while Snapshot::adapting or any job is adapting;
///   - sizes stay in [min_nodes, max_nodes] and admissible for the constraint
///     (the next admissible size up or down); a job appears at most once in
///     shrinks + expands; a shrink releases the job's highest-index nodes;
///   - shrinks happen only to start the highest-priority held job and only
///     when its whole need is gathered, in the same decision;
///   - an expansion happens only when it may save more than grow_cost
///     (predicted remaining x (1 - old/new size) > grow_cost); the idle nodes
///     of a dropped expansion are offered to the other jobs once more.
///   fpsma    — [John24 Alg. 2]. Start in priority order (FCFS), malleable
///              jobs at --nodes. pwma: FPSMA_SHRINK (latest start first) for the
///              held head, then FPSMA_GROW (earliest start first) with idle
///              nodes; prma: FPSMA_GROW only. `step` = one or greedy.
///   egs      — [John24 §4.2.2.2] equi-grow/equi-shrink: the head's need is
///              taken equally from resizable jobs; idle nodes split equally,
///              remainder by start time. Constraints honoured.
///   minagree — [Finnerty24] "Malleable-Algorithm": EASY-backfilling with
///              malleable jobs started at their minimum; shrink the jobs with
///              most nodes to start the head; idle nodes to the jobs with fewest.
///   perf     — [John24 Alg. 3]: start in priority order (malleable at
///              --nodes); for a held head shrink in decreasing MTCT order (by
///              what is needed; jobs above mtct_threshold down to their
///              minimum); then distribute the idle nodes in increasing MTCT
///              order, one admissible step at a time to the job whose ratio
///              at its planned size (MTCT x planned / current) is lowest, never
///              past mtct_threshold (jobs above it are never grown). Jobs
///              without an MTCT come after those with one in both orders.
///   Options (PolicyConfig): backfill (EASY start phase for fpsma/egs/perf),
///   start_at_minimum, grow_when_held, step, management, grow_at_start (not
///   perf; the malleable jobs a pass starts are growth candidates of that pass: what
///   they get widens their Start, no Resize, no grow_cost test; also while
///   a job is adapting, when no resize is decided; -w/-x jobs excluded).
///   power    — [John24 Alg. 4] with the ILP of Eq. 5.3 (lp_solve,
///              dynres::power::solve_corridor; pure computation, bounded by
///              power_ilp_jobs variables and power_ilp_steps / power_pass_steps
///              lp_solve steps, never by the clock). Reads Snapshot::power and the jobs'
///              min_power/max_power (W per node; unknown: the midpoint of
///              [idle_watts, node_max_watts]). Draw = sum n x [min, max] + idle x
///              idle_watts (or PowerView::draw_min/max in the proactive and
///              reactive modes, see PowerMode); broken when above
///              upper or below lower. Resizable jobs (the common rule) get
///              k_i in their admissible [min, max], the others stay fixed.
///              No corridor (power.known false): start as backfill, nothing
///              else. power_mode runtime (§9.2.4 scenario 2): start as
///              backfill (malleable at their --nodes, never held for power);
///              if the corridor is broken and no job adapts, the ILP
///              redistributes the running jobs (this pass's starts fixed).
///              Aware (scenario 3): broken and no job adapting — the ILP is
///              given the smallest prefix of the queue (priority order;
///              malleable first with power_favour_malleable; at most
///              power_max_tries startable jobs) at their requested sizes,
///              then each job alone over its range [min, max]; the first
///              feasible plan is carried out with its starts; else the
///              running jobs alone; else the allocation is kept and a note
///              gives the ILP's reason (and whether Eq. 5.4/5.5 explain it).
///              Broken while a job adapts: nothing starts (held
///              "PowerCorridor"). Then (and when the corridor holds) jobs
///              start in queue order at their requested size only if the
///              modelled draw stays inside (or, when outside, moves towards
///              it without crossing the other bound); otherwise held
///              "PowerCorridor" even with nodes free, or "Resources". With
///              the corridor kept, the highest-priority jobs held for want
///              of nodes are offered to the ILP at their requested sizes
///              (it may shrink running jobs within the corridor); else the
///              idle nodes go one admissible step at a time, round robin by
///              start time, to resizable jobs while the corridor holds and
///              the expansion is worth grow_cost. Expansions of an ILP plan
///              may use nodes its shrinks release (carried out first, as
///              [John24 §5.2] orders them); a job is resized at most once.
///              Every waiting job not started gets one hold.
///
/// iCheck pass (only when Snapshot::icheck.present) [John24 §7.3.2.2]:
/// nodes whose job is kIcheckJob are never idle for the policy above. No
/// grant or reclaim while IcheckView::in_flight > 0; grants never take iCheck
/// past max_nodes (held + in flight), reclaims never below max(1, min_nodes).
///   favour icheck (Alg. 10): a HIGH request takes the lowest idle, up nodes
///     before the policy runs; what idle nodes cannot give is taken, when no
///     job adapts, by shrinking resizable malleable jobs in increasing MTCT
///     order (unknown MTCT last; ties: latest start first), each by what is
///     still needed down to its minimum (next admissible size down); those
///     shrinks carry for_icheck, their nodes are never started on in this
///     pass, and the request stays pending (icheck_request_left) until the
///     next pass grants the released nodes. A LOW request takes the idle
///     nodes left after the policy's starts and expansions, the rest is
///     dropped. With no request pending, nodes are reclaimed for a waiting
///     job as under favour applications ([John24 §7.3.2]: iRM reclaims
///     iCheck nodes for a high-priority job), but only while iCheck's used
///     memory stays at most half of the total of the nodes it keeps
///     (IcheckView::used_mem, total_mem): a node it just asked for and still
///     needs is not taken back.
///   favour applications (Alg. 11): a LOW request is dropped (a note says
///     so); a HIGH request takes the idle nodes left after the policy, the
///     rest is dropped. With no HIGH request, when the highest-priority
///     waiting job the policy held could start on the idle nodes left plus
///     iCheck's reclaim candidates (free memory above icheck_reclaim_free of
///     total; not IcheckNode::reclaim_wait), the fewest candidates that make
///     up its need are reclaimed (icheck_reclaim_job names that job):
///     most free memory first, then fewest agents, then lowest index
///     (Alg. 9 lines 32-33). The job starts in a later pass, once the
///     controller gave the nodes back.
/// Cost: O(N + W + R log R + nodes started), N nodes, W waiting, R running.
/// Never throws except std::bad_alloc. Source: [John24 Alg. 1 line 4]
/// ("schedule jobs in priority order"); [Finnerty24] FCFS / Backfilling /
/// Easy-Backfilling with the moldable extension; EASY per Lifka 1995 and
/// Mu'alem & Feitelson 2001.
Decision decide(const Snapshot& snap, const PolicyConfig& cfg);

/// Fewest nodes the job can ever start with: rigid — req_nodes (0 when
/// req_nodes < 1 or not admissible for its constraint); moldable/malleable —
/// smallest_admissible(constraint, min_nodes, max_nodes). 0 means the job
/// can never start. Source: [Finnerty24] moldable extension.
int min_size(const WaitingJob& j);
/// Nodes the job starts with when `free` nodes are idle, or 0 when it does
/// not fit now: rigid — req_nodes if min_size() > 0 and req_nodes <= free;
/// moldable/malleable — largest_admissible(constraint, min_nodes,
/// min(max_nodes, free)) ("start with as many nodes as fit", [Finnerty24]
/// FCFS moldable extension).
int start_size(const WaitingJob& j, int free);
/// Size a malleable policy starts a job with ([John24 §4.2.3]: "malleable
/// jobs are started with nodes requested in --nodes"): rigid — req_nodes;
/// moldable/malleable — the largest admissible size <= req_nodes in
/// [min_nodes, max_nodes], else the smallest admissible one; 0 if none.
int requested_size(const WaitingJob& j);

}  // namespace dynres::sched
