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
  std::optional<int64_t> mem_per_node;   ///< --mem, MB (0: all of a node's memory, as Slurm)
  std::optional<int64_t> mem_per_cpu;    ///< --mem-per-cpu, MB
  std::optional<int64_t> mem_per_gpu;    ///< --mem-per-gpu, MB
  std::optional<int> gpus;               ///< -G/--gpus: GPUs of the whole job
  std::optional<int> gpus_per_node;      ///< --gpus-per-node, or --gres=gpu:N
  std::optional<int> gpus_per_task;      ///< --gpus-per-task
  std::optional<int> cpus_per_gpu;       ///< --cpus-per-gpu
  std::optional<int> mincpus;            ///< --mincpus: CPUs a node must have at least
  std::optional<int> ntasks_per_gpu;     ///< --ntasks-per-gpu
  bool wait = false;                     ///< -W/--wait (command line or #SBATCH): mjsub waits for the end
  bool quiet = false;                    ///< -Q/--quiet: no warnings
  bool exclusive = false;                ///< --exclusive (dynres nodes are always exclusive)
  bool overcommit = false;               ///< -O/--overcommit: more tasks than CPUs allowed
  std::vector<std::string> warnings;     ///< one line per accepted option without effect ("--qos: ...")
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

/// What dynres does with an option (the column of mjsub(1)'s option table).
enum class Treatment {
  honoured,  ///< resolved as Slurm resolves it
  warned,    ///< accepted; one line on stderr says why it has no effect here
  refused,   ///< refused as Slurm refuses it on a cluster like this one
  client,    ///< an option of the mjsub command itself (--parsable, --help, ...)
};
const char* to_string(Treatment t);

/// One option of the table shared by the command line and the directives:
/// every option of Slurm 22.05's sbatch(1) (the sbatch entries of
/// src/common/slurm_opt.c, slurm-22-05-8-1) plus dynres's own.
struct OptionDef {
  std::vector<std::string> names;  ///< e.g. {"-N", "--nodes"}; the last one is canonical
  bool takes_value;                ///< a value is required (getopt_long required_argument)
  std::string help;                ///< for honoured options the help; for warned/refused the reason
  Treatment how = Treatment::honoured;
  bool optional_value = false;     ///< --opt[=value] (getopt_long optional_argument): only with '='
};

/// The option table, in the order mjsub --help and mjsub(1) list it.
const std::vector<OptionDef>& job_options();

/// The option a command-line or directive name stands for: an exact name,
/// else (long options, as getopt_long) a unique prefix of one option's long
/// names. Throws SpecError naming the option: "unrecognized option '--x'",
/// "option '--cpus' is ambiguous; possibilities: '--cpus-per-gpu' '--cpus-per-task'".
const OptionDef& find_job_option(const std::string& name);

/// Set option `name` (any of its names or a unique prefix, with dashes) to
/// `value` in spec. Throws SpecError naming the option on a bad value, for
/// an unknown or ambiguous name, and for options refused on this cluster
/// (Treatment::refused); options without effect add a line to
/// spec.warnings.
void apply_option(JobSpec& spec, const std::string& name, const std::string& value);

/// Parse command-line words (those before the job script) as getopt_long
/// does with the option table: "--name=value", "--name value", unique
/// prefixes of long names, "-Xvalue", "-X value", bundled short flags
/// ("-HQ"), optional values only after '='. Words naming one of `own`
/// (mjsub's options outside the table, mapped to whether they take a value)
/// go to `rest` with their value. Returns (canonical long name, value) per
/// job option, in order. Throws SpecError naming the option.
std::vector<std::pair<std::string, std::string>> parse_job_args(const std::vector<std::string>& words,
                                                                const std::vector<std::pair<std::string, bool>>& own,
                                                                std::vector<std::string>& rest);

/// sbatch memory sizes (Slurm's str_to_mbytes): N[K|M|G|T][B], default MB;
/// K rounds up. Returns MB. Throws SpecError naming opt. At most 2^40 MB.
int64_t parse_mem_mb(const std::string& opt, const std::string& v);

/// Slurm's time limit (time_str2mins): the formats of parse_time_limit,
/// seconds rounded up to whole minutes, 0 = no limit; at most
/// kMaxTimeLimitDays days. Returns seconds (-1 unlimited). Throws SpecError
/// naming opt.
int64_t parse_sbatch_time(const std::string& opt, const std::string& v);
inline constexpr int64_t kMaxTimeLimitDays = 365 * 100;

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
///
/// Memory (MB; node_mem_mb = the nodes' memory, 0 = unknown: not checked):
/// --mem M per node (0: all of it), --mem-per-cpu M per allocated CPU,
/// --mem-per-gpu M per GPU; at most one of them. Refused as Slurm refuses it
/// ("Memory specification can not be satisfied") when a node can never give
/// it. GPUs (node_gpus = GPUs per node, 0 = none: any GPU request is refused
/// as Slurm's "Invalid generic resource (gres) specification"):
/// --gres=gpu[:type]:N and --gpus-per-node N per node, -G N for the job
/// (spread over its nodes), --gpus-per-task N times the tasks of a node.
/// Tasks fewer than -N: Slurm's warning ("can't run K processes on N nodes,
/// setting nnodes to K") in warnings and K nodes. A node range with tasks:
/// the range narrowed to the node counts that can hold the tasks.
JobRecord resolve_job(const JobSpec& spec, int cluster_nodes, const std::string& script_text,
                      const std::string& default_name, const std::string& cwd, int cpus_per_node = 1,
                      int64_t node_mem_mb = 0, int node_gpus = 0, std::vector<std::string>* warnings = nullptr);

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
/// SBATCH_ERROR (-e), SBATCH_EXPORT (--export), SBATCH_MEM_PER_NODE,
/// SBATCH_MEM_PER_CPU, SBATCH_MEM_PER_GPU, SBATCH_GRES, SBATCH_GPUS,
/// SBATCH_EXCLUSIVE, SBATCH_WAIT (as their options, warnings included);
/// SBATCH_ACCOUNT, SBATCH_PARTITION and SBATCH_QOS are accepted and ignored.
/// They override the script's directives and are overridden by the command line.
const std::vector<std::pair<std::string, std::string>>& sbatch_input_variables();

/// Index in argv of the job script of an mjsub command line: the first word
/// that is neither an option nor an option's value (value-taking options:
/// those of job_options() that take one (or unique prefixes of them), plus
/// extra_valued), or the word after "--". 0 when there is none.
int script_position(int argc, char** argv, const std::vector<std::string>& extra_valued);

/// sbatch -W: wait until job id has ended; returns its exit code (0 for
/// COMPLETED; the job's exit code, or 1 when it has none, otherwise).
int wait_for_job(const std::string& home, int64_t id, double poll_s = 0.2);

/// Read the script, apply its directives then the command-line options,
/// validate against the cluster, and record the job as PENDING in one
/// transaction; then wake the scheduler (if it is down the job waits for its
/// next pass). Throws SpecError (bad input; nothing is written) or DbError.
/// What a submission tells its submitter besides the job: the warnings
/// (options without effect, Slurm's task/node adjustment; none with -Q) and
/// whether -W/--wait was asked for (on the command line or in the script).
struct SubmitNotes {
  std::vector<std::string> warnings;
  bool wait = false;
};

JobRecord submit_job(const SubmitRequest& req, SubmitNotes* notes = nullptr);

/// Everything submit_job does before recording: check the gathered script,
/// environment and options (gather_submission is called first when
/// req.gathered is false) against the cluster in st. Nothing is written.
/// The job's uid is the calling process's; the scheduler daemon replaces it
/// (and gid) by the peer's SO_PEERCRED identity.
/// array_tasks (when given) receives the --array indices and array_max.
JobRecord prepare_job(const SubmitRequest& req, State& st, std::vector<int>* array_tasks = nullptr,
                      SubmitNotes* notes = nullptr);

/// The JSON form of a job used by mjsub --json and mjstat --json.
nlohmann::json job_to_json(const JobRecord& j);


}  // namespace dynres
