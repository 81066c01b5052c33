// The power corridor and power samples in the state file (migration module
// "power"), and what pcorridor(1) does with them: set with validation
// ([John24 §5.2.1] dynamic corridor), show the modelled draw against the
// corridor with the guarantees of Eq. 5.4/5.5, history, samples, plot.
// Units: watts, seconds since the epoch.
#pragma once
#include <nlohmann/json.hpp>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dynres/power_ilp.hpp"
#include "dynres/power_source.hpp"
#include "dynres/state.hpp"

namespace dynres::power {

/// Bad input from the user (pcorridor exits 2); what() names the problem.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The "power" schema: power_corridor (history of corridors), power_samples
/// (one row per node per sample), power_job_history (average watts per node
/// of finished jobs, by name and size, §5.1.3).
void migrate_power(Db& db);
/// True when the power tables exist (read-only commands use this so they never
/// change the state file).
bool has_power_schema(Db& db);

struct CorridorRow {
  int64_t id = 0;
  double set_time = 0;        ///< when it was recorded
  double effective_time = 0;  ///< from when it applies (--at)
  double lower = 0, upper = 0;  ///< watts
  std::string reason;
  bool forced = false;
};
/// The corridor in force at time t (latest effective_time <= t), if any.
std::optional<CorridorRow> corridor_at(Db& db, double t);
/// The next scheduled change after t, if any.
std::optional<CorridorRow> corridor_next(Db& db, double t);
/// Every corridor with effective_time >= since, in order.
std::vector<CorridorRow> corridor_history(Db& db, double since);

/// What the cluster can draw: N usable nodes, idle floor N * idle_watts,
/// maximum N * node_max_watts.
struct Limits {
  int nodes = 0;
  double idle_floor = 0, max_draw = 0;
};
Limits cluster_limits(State& st, const PowerModel& m);

/// Parse a time: "now", epoch seconds ("1764000000" or with a fraction),
/// relative "+90", "+5m", "-2h" (s/m/h/d) or local ISO 8601
/// "YYYY-MM-DD[ T]HH:MM[:SS]". Throws InputError naming the text.
double parse_time(const std::string& text, double now);
/// Parse watts: a finite decimal number. Throws InputError naming `what`.
double parse_watts(const std::string& text, const std::string& what);

struct SetRequest {
  double lower = 0, upper = 0;  ///< watts
  std::optional<double> at;     ///< effective time (default now); not in the past
  std::string reason;
  bool force = false;           ///< allow lower < the idle floor
  double now = 0;
};
struct SetOutcome {
  bool changed = false;  ///< false: the same corridor is already in force / scheduled
  CorridorRow row;
};
/// Validate (0 <= L < U; U <= the cluster's maximum draw; L >= idle floor
/// unless force; at >= now - 1 s) and record. Idempotent: nothing is written
/// when the same corridor already applies at that time. Throws InputError
/// (nothing written) or DbError.
SetOutcome set_corridor(State& st, const PowerModel& m, const SetRequest& req);

/// Wake mjsched (connect to home/mjsched.sock, send {"op":"wake","why":"corridor"}).
/// False when no scheduler listens.
bool wake_scheduler(const std::string& home);

/// One running job's modelled draw.
struct JobPower {
  int64_t id = 0;
  std::string name, kind;
  int nodes = 0, min_nodes = 0, max_nodes = 0;
  std::string constraint;
  JobDraw draw;  ///< per node
};
struct DrawNow {
  std::vector<JobPower> jobs;
  int idle_nodes = 0;
  double min = 0, max = 0, modelled = 0;  ///< totals in watts; modelled = midpoint per job
};
/// The modelled draw of the running jobs plus idle nodes (every figure is modelled).
DrawNow current_draw(State& st, const PowerModel& m);
/// The ILP input for the running jobs (malleable: [min, max]; others fixed).
IlpInput ilp_input(const DrawNow& d, const Limits& lim, const PowerModel& m, double lower, double upper);

/// Total modelled draw per sample time since `since` (watts), in time order.
std::vector<std::pair<double, double>> sampled_totals(Db& db, double since = 0);
/// Corridor violations of a live run: power::count_violations
/// (violations.hpp, the very function mjsim applies to its series) over the
/// sampled modelled totals and the corridor history within [since, until]:
/// the draw in force at `since` (the last sample before it) holds from
/// `since`; the series ends at the last sample (or at `until` when that is
/// earlier). count = episodes of positive duration longer than `grace`
/// seconds with the draw outside the corridor; breaks, corrected, and the
/// watt-seconds above / below the bounds as count_violations. The samples
/// are event-driven (mjsched records one at every allocation change and
/// corridor change, plus one a second), so the series has the shape of
/// mjsim's.
struct Violations {
  int count = 0, breaks = 0, corrected = 0;
  double above_ws = 0, below_ws = 0, outside_s = 0;
  size_t samples = 0;  ///< samples within the window
};
Violations violations(Db& db, double since = 0, double until = 1e300, double grace = 0);
/// Window and grace of the violation figures in show().
struct ViolationWindow {
  double since = 0, until = 1e300, grace = 0;
};

/// `pcorridor show` as JSON (also violations so far and, with >= 10 samples,
/// the forecast min/max draw of the next 5 samples, §5.1.4) (corridor, next change, draw, headroom, guarantees).
nlohmann::json show(State& st, const PowerModel& m, double now, const ViolationWindow& vw = {});
/// Render show()'s JSON as text for an administrator.
std::string show_text(const nlohmann::json& j);

struct NodeReading {
  std::string node;
  int64_t job_id = 0;   ///< 0 = idle
  double watts = 0;
  std::string source;   ///< "modelled" or "rapl"
};
/// One modelled reading per node (idle watts, or the job's midpoint per-node draw).
std::vector<NodeReading> modelled_readings(State& st, const PowerModel& m);
/// Record readings at time t (one transaction; migrates the schema) and fold
/// finished jobs' averages into power_job_history.
void record_samples(State& st, double t, const std::vector<NodeReading>& r);
/// Earlier runs for job_draw (from power_job_history; empty without the schema).
std::vector<HistoryRun> load_history(Db& db);

/// Total sampled draw over time and the corridor, as a PNG through gnuplot.
/// Data goes through files in a private temporary directory; paths are quoted
/// for gnuplot. Throws InputError (no samples, bad output path) or
/// std::runtime_error (gnuplot missing or failing, with its stderr).
void plot(State& st, const std::string& output, double since, double now);

}  // namespace dynres::power
