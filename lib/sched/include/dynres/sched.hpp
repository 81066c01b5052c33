// Scheduling policies as pure functions over a snapshot (seed 000 Ch. 4,
// Algorithm 1 line 4 "schedule jobs in priority order"; seed 002 §3-4).
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

/// Node-count constraint of a job (seed 000 Listing 4.1 --node-constraints).
enum class Constraint { none, even, odd, pof2, square, cube };

/// Parse "none|even|odd|pof2|square|cube" (also "ncube" for cube).
/// Returns std::nullopt for anything else.
std::optional<Constraint> parse_constraint(const std::string& s);
std::string to_string(Constraint c);

/// True if n >= 1 satisfies c.
bool admissible(Constraint c, int n);
/// Largest admissible n in [lo, hi], or 0 when none exists.
int largest_admissible(Constraint c, int lo, int hi);
/// Smallest admissible n in [lo, hi], or 0 when none exists.
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
};

struct RunningJob {
  int64_t id = 0;
  JobKind kind = JobKind::rigid;
  std::vector<int> nodes;  ///< node indices held (into Snapshot::nodes)
  int min_nodes = 1, max_nodes = 1;
  Constraint constraint = Constraint::none;
  double start_time = 0;
  double time_limit = -1;  ///< seconds; < 0 means unlimited
};

struct Node {
  std::string name;
  bool up = true;       ///< false: down or drained, never allocated
  int64_t job = 0;      ///< job holding it, 0 when idle
};

/// Everything a policy may look at. `waiting` is in priority order (FCFS:
/// by submit time, then id); the policy must not reorder priorities.
struct Snapshot {
  double now = 0;
  std::vector<Node> nodes;
  std::vector<RunningJob> running;
  std::vector<WaitingJob> waiting;
};

struct Start {
  int64_t job = 0;
  std::vector<int> nodes;  ///< node indices, ascending
};

struct Resize {
  int64_t job = 0;
  std::vector<int> nodes;  ///< nodes added (expand) or removed (shrink)
};

/// What the policy wants done. `holds` gives, for waiting jobs not started,
/// a short reason ("Resources", "Priority", "Reservation") like squeue.
struct Decision {
  std::vector<Start> starts;
  std::vector<Resize> expands;
  std::vector<Resize> shrinks;
  std::vector<std::pair<int64_t, std::string>> holds;
};

enum class Policy { fcfs, backfill, easy };
std::optional<Policy> parse_policy(const std::string& s);
std::string to_string(Policy p);

struct PolicyConfig {
  Policy policy = Policy::easy;
  /// time limit assumed for jobs without one, when a policy needs one
  /// (EASY reservations); seconds
  double default_time_limit = 3600;
};

/// Run one scheduling pass. Pure: same snapshot and config give the same
/// decision. Guarantees: a node is given to at most one start; only idle, up
/// nodes are used; started sizes respect the job's kind, range and
/// constraint. Moldable jobs start with the largest admissible size that
/// fits (seed 002 "moldable extension").
///   fcfs     — start in priority order; stop at the first job that does not fit.
///   backfill — first fit over the whole queue, no reservation.
///   easy     — EASY-backfilling: the first job that does not fit gets a
///              reservation (shadow time from running jobs' start+time limit);
///              a later job starts only if it fits now and does not delay it.
Decision decide(const Snapshot& snap, const PolicyConfig& cfg);

}  // namespace dynres::sched
