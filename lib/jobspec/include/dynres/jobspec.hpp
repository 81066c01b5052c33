// What a job asks for: #SBATCH / #MJ directives and mjsub options
// ([John24 Listing 4.1 and 5.1]; sbatch(1) names where they exist).
#pragma once
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dynres/state.hpp"

namespace dynres {

/// Bad job input. what() names the option or directive (and script line).
class SpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Options as given (unset = not given); resolved by resolve_job().
struct JobSpec {
  std::optional<std::string> name;
  std::optional<int> nodes, min_nodes, max_nodes;  ///< -N n | -N min-max sets the range
  bool nodes_given = false;  ///< -N was given (a later -N replaces an earlier one entirely)
  bool range_from_N = false; ///< min_nodes/max_nodes came from -N MIN-MAX (not --min/--max-nodes)
  std::optional<std::string> constraint;
  std::optional<int64_t> time_limit;                ///< seconds, -1 unlimited
  std::optional<std::string> output, error, chdir;
  std::optional<double> min_power, max_power;       ///< watts per node
  bool rigid = false;
  bool malleable = false;          ///< --malleable: may grow and shrink while running (mj(3))
  std::optional<bool> export_env;  ///< --export=ALL (true, the default) | NONE
  std::optional<std::string> wrap; ///< --wrap: the job is this command (command line only)
  bool hold = false;               ///< --hold: submitted held (mjcontrol release)
  std::optional<bool> requeue;     ///< --requeue (true) / --no-requeue; unset: requeued (JobRequeue=1)
  std::optional<double> begin;     ///< --begin: earliest start, seconds since the epoch
  std::optional<std::string> dependency;  ///< --dependency, normalized (see parse_dependency)
  std::optional<std::string> nodelist;    ///< -w/--nodelist: nodes the job must get (compressed node list)
  std::optional<std::string> exclude;     ///< -x/--exclude: nodes the job must not get
  std::optional<int> ntasks, ntasks_per_node, cpus_per_task;  ///< -n, --ntasks-per-node, -c
  std::vector<std::string> export_vars;  ///< --export=[ALL,]VAR[=value],...: the listed variables
  std::vector<int> array_tasks;          ///< --array indices (empty: not an array)
  int array_max = 0;                     ///< --array ...%max
};

/// Parse sbatch --array: "1-5", "1,3,7", "0-15:4", any of them with "%N"
/// (at most N tasks running at once). Indices 0..1000000, at most 10000
/// tasks. Throws SpecError naming the bad part. Returns sorted, unique
/// indices and the limit (0 = none).
std::pair<std::vector<int>, int> parse_array(const std::string& v);

/// One condition of sbatch --dependency.
struct Dependency {
  std::string type;            ///< after | afterany | afterok | afternotok | singleton
  std::vector<int64_t> jobs;   ///< empty for singleton
};

/// Parse "type:id[:id...][,type:id...]" and "singleton" (all conditions must
/// hold, as Slurm's ','; '?' (any) is refused). Throws SpecError naming the
/// bad part.
std::vector<Dependency> parse_dependency(const std::string& v);
/// The canonical text of a parsed dependency list.
std::string format_dependency(const std::vector<Dependency>& d);

/// Whether a job with dependency `dep` (normalized text) may start:
/// "" (satisfied), "Dependency" (not yet) or "DependencyNeverSatisfied".
/// lookup(id) gives a job record (nullopt if unknown: never satisfied);
/// same_name_active(): for singleton, whether another job of the same user
/// and name is running, or pending and submitted earlier.
///   after      — each job has started (or was cancelled before starting)
///   afterany   — each job has ended (any final state)
///   afterok    — each job COMPLETED with exit code 0 (never, once one ended otherwise)
///   afternotok — each job ended in another final state (never, once one COMPLETED)
std::string dependency_status(const std::string& dep,
                              const std::function<std::optional<JobRecord>(int64_t)>& lookup,
                              const std::function<bool()>& same_name_active);

/// sbatch --begin values: now, now+N[s|m|h|d] (seconds without a unit; also
/// seconds/minutes/hours/days), HH:MM[:SS] (today, or tomorrow if passed),
/// YYYY-MM-DD[THH:MM[:SS]] (local time). Throws SpecError naming the value.
double parse_begin_time(const std::string& v, double now);

/// sbatch precedence: every field given on the command line (cli) replaces
/// the script's value of that field (script), whatever the order of options;
/// fields not given on the command line keep the script's. -N is one field
/// (count or range): `-N 4` over `#SBATCH -N 2-8` gives a rigid 4; a range
/// set with --min-nodes/--max-nodes stays, with -N as the requested size.
JobSpec merge_specs(JobSpec script, const JobSpec& cli);

/// One option of the table shared by the command line and the directives.
struct OptionDef {
  std::vector<std::string> names;  ///< e.g. {"-N", "--nodes"}
  bool takes_value;
  std::string help;
};

/// The job options, in the order mjsub --help lists them.
const std::vector<OptionDef>& job_options();

/// sbatch options accepted for compatibility that change nothing here
/// (e.g. --ntasks-per-node of [John24 Listing 4.1]).
const std::vector<OptionDef>& ignored_sbatch_options();

/// Set option `name` (any of its names, with dashes) to `value` in spec.
/// Throws SpecError("--nodes: invalid value 'x' ...") on a bad value and
/// SpecError("unknown option ...") for a name not in job_options() (options
/// of sbatch that have no meaning here, such as --ntasks-per-node, are
/// accepted and ignored).
void apply_option(JobSpec& spec, const std::string& name, const std::string& value);

/// A directive found in a job script.
struct Directive {
  int line;          ///< 1-based line number in the script
  std::string text;  ///< the whole line, for messages
  std::string name;  ///< option name with dashes
  std::string value; ///< "" for flags
};

/// Read #SBATCH and #MJ lines from the top of a script (up to the first
/// command, like sbatch); splits "--opt=v", "--opt v", "-N4", "-N 4"; honours
/// quotes. Throws SpecError("line N: ...") for malformed lines.
std::vector<Directive> parse_directives(const std::string& script);

/// Apply directives to spec; errors are prefixed "line N: <directive>: ".
/// Command-line-only options (--wrap) are refused in directives.
void apply_directives(JobSpec& spec, const std::vector<Directive>& ds);

/// Check the spec against a cluster of `cluster_nodes` usable nodes and turn
/// it into a PENDING job record. `cwd` is the submitter's directory.
/// Errors (SpecError naming the option): min > max, --nodes outside
/// [min, max], more nodes than the cluster has, a node constraint with no
/// admissible size in [min, max], --rigid with a node range, negative power,
/// min power > max power.
/// Kinds: --malleable makes the job malleable (range --min-nodes..--max-nodes,
/// default 1..cluster; [John24 Listing 4.1]); otherwise a node range
/// (--min-nodes/--max-nodes or -N a-b) makes it moldable; --rigid or no
/// range makes it rigid (--rigid with --malleable is refused).
///
/// Tasks (sbatch): with P = cpus_per_node CPUs per node and C =
/// --cpus-per-task (default 1), a node runs T = --ntasks-per-node tasks
/// (default floor(P / C)); -n K without -N asks for ceil(K / T) nodes
/// (rigid); with -N N, K must lie in [N, N*T]; --ntasks-per-node T with -N N
/// (default 1) gives K = N*T. Refused: C > P, T*C > P, tasks with a node
/// range. ntasks 0 in the record means one task per node.
JobRecord resolve_job(const JobSpec& spec, int cluster_nodes, const std::string& script_text,
                      const std::string& default_name, const std::string& cwd, int cpus_per_node = 1);

}  // namespace dynres

namespace dynres {

/// A submission as mjsub(1) receives it.
struct SubmitRequest {
  std::string home;         ///< cluster directory
  std::string script_path;  ///< "" or "-" = standard input
  std::vector<std::pair<std::string, std::string>> options;  ///< command line, applied after directives
  std::string cwd;          ///< submitter's working directory
  std::vector<std::string> args;  ///< arguments of the script (after its name)
  // What the submitting process read (gather_submission), so that the
  // scheduler daemon can check and record the job without reading the
  // submitter's files or environment:
  bool gathered = false;                 ///< the fields below are filled
  std::string script_text;               ///< the script (or "#!/bin/sh\n" + --wrap command)
  std::string default_name;              ///< job name when none is given (script basename, "wrap", "sbatch")
  std::vector<std::string> environment;  ///< the submitter's environment, "NAME=value" strings
  int umask = 022;                       ///< the submitter's umask (job output files)
};

/// Largest job script accepted, in bytes (4 MiB, Slurm's default
/// max_script_size): a larger script is refused before it is read whole.
constexpr size_t kMaxScriptBytes = size_t{4} << 20;
/// Largest submitter environment recorded with a job (bytes of "NAME=value"
/// text, and number of variables).
constexpr size_t kMaxEnvironmentBytes = size_t{1} << 20;
constexpr size_t kMaxEnvironmentVars = 8192;

/// The submitter's side of mjsub: read the job script (file, standard input,
/// or --wrap), the process environment and umask into req (gathered = true).
/// Throws SpecError for a missing, unreadable, empty, binary or oversized
/// (> kMaxScriptBytes) script, or an environment over the limits above.
void gather_submission(SubmitRequest& req);

/// sbatch's input environment variables that mjsub honours, as options:
/// SBATCH_JOB_NAME (-J), SBATCH_TIMELIMIT (-t), SBATCH_OUTPUT (-o),
/// SBATCH_ERROR (-e), SBATCH_EXPORT (--export); SBATCH_ACCOUNT,
/// SBATCH_PARTITION and SBATCH_QOS are accepted and ignored. They override
/// the script's directives and are overridden by the command line.
const std::vector<std::pair<std::string, std::string>>& sbatch_input_variables();

/// Index in argv of the job script of an mjsub command line: the first word
/// that is neither an option nor an option's value (value-taking options:
/// those of job_options() and ignored_sbatch_options() that take one, plus
/// extra_valued), or the word after "--". 0 when there is none.
int script_position(int argc, char** argv, const std::vector<std::string>& extra_valued);

/// sbatch -W: wait until job id has ended; returns its exit code (0 for
/// COMPLETED; the job's exit code, or 1 when it has none, otherwise).
int wait_for_job(const std::string& home, int64_t id, double poll_s = 0.2);

/// Read the script, apply its directives then the command-line options,
/// validate against the cluster, and record the job as PENDING in one
/// transaction; then wake the scheduler (if it is down the job waits for its
/// next pass). Throws SpecError (bad input; nothing is written) or DbError.
JobRecord submit_job(const SubmitRequest& req);

/// Everything submit_job does before recording: check the gathered script,
/// environment and options (gather_submission is called first when
/// req.gathered is false) against the cluster in st. Nothing is written.
/// The job's uid is the calling process's; the scheduler daemon replaces it
/// (and gid) by the peer's SO_PEERCRED identity.
/// array_tasks (when given) receives the --array indices and array_max.
JobRecord prepare_job(const SubmitRequest& req, State& st, std::vector<int>* array_tasks = nullptr);

/// The JSON form of a job used by mjsub --json and mjstat --json.
nlohmann::json job_to_json(const JobRecord& j);


}  // namespace dynres
