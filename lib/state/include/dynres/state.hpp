// The shared state file of a virtual cluster: nodes, jobs, allocations over
// time, events ([John24 Ch. 4] job records).
//
// Several tools use it at once (mjsub, mjstat, mjcancel, mjsched, mjstepd):
// every change that touches more than one row runs in one write transaction,
// so a crash at any moment leaves either the old or the new state.
// Times are seconds since the epoch (double); time limits whole seconds,
// -1 = unlimited.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dynres/db.hpp"

namespace dynres {

/// Job states, named like Slurm's.
inline constexpr const char* kPending = "PENDING";
inline constexpr const char* kRunning = "RUNNING";
inline constexpr const char* kCompleted = "COMPLETED";
inline constexpr const char* kFailed = "FAILED";
inline constexpr const char* kCancelled = "CANCELLED";
inline constexpr const char* kTimeout = "TIMEOUT";
inline constexpr const char* kNodeFail = "NODE_FAIL";

/// True for states a job never leaves.
bool is_final_state(const std::string& s);

struct NodeRecord {
  int64_t id = 0;
  std::string name;   ///< label used in node lists (n1, n2 …)
  std::string host;   ///< real host for the srun launcher (== name inside Slurm)
  std::string state;  ///< "up" | "down" | "drain"
  int64_t job_id = 0; ///< job holding the node, 0 when idle
  int cpus = 1;       ///< CPUs of the node (vcluster-boot --cpus-per-node)
  std::string reason;                ///< why it is down or drained ('' when up)
  std::optional<double> reason_time; ///< when its state last changed (seconds since the epoch)
  std::optional<int64_t> reason_uid; ///< who set it (uid; mjsched's own uid for a detected failure)
  int64_t mem_mb = 0; ///< memory of the node, MB (vcluster-boot --mem-per-node; 0 = unknown)
  int gpus = 0;       ///< GPUs of the node (vcluster-boot --gres gpu:N)
};

/// One result of State::update_nodes.
struct NodeUpdate {
  std::string name, from, to;  ///< states "up" | "down" | "drain"
};

/// An ended attempt of a requeued job (its node failure), as sacct --duplicates.
struct AttemptRecord {
  int64_t job_id = 0;
  std::string state;  ///< NODE_FAIL
  std::optional<double> start_time;
  double end_time = 0;
  int num_nodes = 0;
  std::string nodelist, reason;
};

struct JobRecord {
  int64_t id = 0;
  std::string name;
  int64_t uid = 0;
  std::string state = kPending;
  std::string kind = "rigid";     ///< rigid | moldable | malleable
  int req_nodes = 1, min_nodes = 1, max_nodes = 1;
  std::string constraint = "none";
  int64_t time_limit = -1;        ///< seconds, -1 unlimited
  std::optional<double> min_power, max_power;  ///< watts per node
  std::string script;             ///< the job script's text (stored copy)
  std::string workdir, stdout_path, stderr_path;  ///< %j/%x already expanded
  std::string submit_dir;         ///< where mjsub ran (MJ_SUBMIT_DIR)
  std::string env;                ///< submitter's environment as a JSON object; "" = --export=NONE
  std::optional<int64_t> step_pgid;  ///< process group of the running step
  std::optional<int64_t> step_start; ///< its leader's start time (ticks since boot), the group's identity
  double submit_time = 0;
  std::optional<double> start_time, end_time;
  int num_nodes = 0;              ///< nodes held now (or at the end)
  std::string nodelist;           ///< compressed, e.g. n[1-4]
  std::optional<int> exit_code;
  std::string reason;             ///< why pending / how it ended
  std::optional<int64_t> supervisor_pid;
  bool cancel_requested = false;
  bool held = false;                 ///< sbatch --hold / mjcontrol hold: not scheduled until released
  std::optional<double> begin_time;  ///< sbatch --begin: not scheduled before this time
  std::string dependency;            ///< sbatch --dependency, normalized; "" = none
  int ntasks = 0;                    ///< sbatch -n (0: one task per node)
  int ntasks_per_node = 0;           ///< sbatch --ntasks-per-node (0: not given)
  int cpus_per_task = 1;             ///< sbatch -c
  std::string args;                  ///< script arguments, JSON array of strings; "" = none
  std::optional<int64_t> array_job_id;  ///< sbatch --array: the array's id (its first task's job id)
  std::optional<int> array_task_id;     ///< the task's index
  int array_max = 0;                    ///< %max: tasks of the array running at once (0: no limit)
  std::string req_nodelist;             ///< sbatch -w: nodes the job must get (node list); "" = none
  std::string exc_nodelist;             ///< sbatch -x: nodes the job must not get (node list); "" = none
  int64_t gid = -1;                     ///< submitter's primary group (from SO_PEERCRED); -1 = unknown
  int umask = 022;                      ///< submitter's umask: job output files are created with it
  bool requeue = true;                  ///< sbatch --requeue (default, Slurm's JobRequeue=1) / --no-requeue
  int restarts = 0;                     ///< times requeued after a node failure
  std::string node_fail;                ///< nodes a RUNNING job lost (node list); "" = none
  int64_t mem_per_node = -1;            ///< sbatch --mem, MB per node (0: all of it; -1: not given)
  int64_t mem_per_cpu = 0;              ///< sbatch --mem-per-cpu, MB per CPU (0: not given)
  int gpus_per_node = 0;                ///< sbatch --gres=gpu:N/--gpus*: GPUs the job gets on each node
};

/// squeue's job id: "A_T" for an array task, else the id.
std::string display_id(const JobRecord& j);

struct AllocationRecord {
  int64_t job_id = 0;
  std::string nodelist;
  int num_nodes = 0;
  double start_time = 0;
  std::optional<double> end_time;
};

class State {
 public:
  /// Open the state file (create=true also creates it) and bring the core
  /// schema up to date. Throws DbError (missing file names the path).
  explicit State(const std::string& path, bool create = false);

  Db& db() { return db_; }

  // ---- nodes -------------------------------------------------------------
  /// Insert nodes not yet known (name, host); existing ones keep their state.
  void register_nodes(const std::vector<std::pair<std::string, std::string>>& name_host);
  std::vector<NodeRecord> nodes();
  /// Number of nodes that are not down (what a job may ask for at most).
  int usable_node_count();
  /// CPUs per node a job can count on: the smallest CPU count of the nodes
  /// that are not down (1 when there is none).
  int node_cpus();
  /// Set the CPU count of the named nodes (all when names is empty) in one
  /// transaction. Returns the nodes changed. Throws DbError for an unknown
  /// node or cpus < 1 (nothing changed).
  int set_node_cpus(const std::vector<std::string>& names, int cpus);
  /// Memory (MB) and GPUs per node a job can count on: the smallest of the
  /// nodes that are not down (0: unknown memory / no GPUs).
  int64_t node_mem_mb();
  int node_gpus();
  /// Set column "cpus", "mem_mb" or "gpus" of the named nodes (all when names is
  /// empty) in one transaction. Returns the nodes changed. Throws DbError for
  /// an unknown node or a negative value (nothing changed).
  int set_node_resource(const std::vector<std::string>& names, const std::string& column, int64_t value);

  // ---- jobs --------------------------------------------------------------
  /// Insert a PENDING job and a "submit" event in one transaction; fills
  /// %j in the output paths with the new id. Returns the id.
  int64_t submit(JobRecord job);
  /// Insert the tasks of a job array (sbatch --array) as PENDING jobs in one
  /// transaction: task k gets index tasks[k]; the first task's id is the
  /// array's id (array_job_id of every task); %A/%a in output paths become
  /// the array id and the task index. Returns the ids.
  std::vector<int64_t> submit_array(JobRecord job, const std::vector<int>& tasks, int max_running);
  /// Ids of the tasks of array array_id (only index task when given), by index.
  std::vector<int64_t> array_task_ids(int64_t array_id, std::optional<int> task = std::nullopt);
  std::optional<JobRecord> job(int64_t id);
  /// Jobs in the given states (empty = all), ordered by (submit_time, id).
  std::vector<JobRecord> jobs(const std::vector<std::string>& states = {});

  /// Start a PENDING job on nodes (ids of idle, up nodes), recording the
  /// supervisor pid: job RUNNING, allocation opened, nodes taken, event.
  /// Returns false (and changes nothing) when the job is no longer PENDING or
  /// a node is no longer idle. `also`, when given, runs inside the same
  /// transaction after the start (e.g. the resize module's per-job record);
  /// an exception from it rolls the whole start back and propagates.
  bool start_job(int64_t id, const std::vector<int64_t>& node_ids, int64_t supervisor_pid, double now,
                 const std::function<void()>& also = {});

  /// Record the end of a RUNNING job: final state, exit code, reason, end
  /// time; closes its allocation and frees its nodes. Returns false when the
  /// job was not RUNNING (already recorded).
  bool finish_job(int64_t id, const std::string& final_state, std::optional<int> exit_code,
                  const std::string& reason, double now);

  /// Cancel a PENDING job. Returns false when it is not pending any more.
  bool cancel_pending(int64_t id, double now);
  /// Mark a running job so its supervisor records CANCELLED when it ends.
  void request_cancel(int64_t id);

  void set_reason(int64_t id, const std::string& reason);
  /// Hold (reason JobHeldUser) or release (reason None) a PENDING job, with
  /// a hold/release event. Returns false when the job is not pending.
  bool set_held(int64_t id, bool held, double now);
  /// Record the process group of a RUNNING job's step and its leader's start
  /// time (set by its supervisor before the step may exec the job script).
  /// Returns false when the job is not RUNNING any more.
  bool set_step_pgid(int64_t id, int64_t pgid, int64_t leader_start);
  void event(double time, int64_t job_id, const std::string& kind, const std::string& detail);

  std::vector<AllocationRecord> allocations();

  // ---- node health [Slurm scontrol update NodeName= State=] ---------------
  /// Set the named nodes to "down" or "drain" (a reason is required) or
  /// "resume" them (back to "up"), in one transaction, each with a "node"
  /// event. Refused (DbError, nothing changed): an unknown node, an unknown
  /// state, a missing reason, resume of an up node, drain of a down node.
  /// Running jobs are not touched here: mjsched reacts to the new states.
  std::vector<NodeUpdate> update_nodes(const std::vector<std::string>& names, const std::string& state,
                                       const std::string& reason, int64_t uid, double now);
  /// Record that RUNNING job id lost nodes `lost` (node list): from now on its
  /// end, whatever its step reports, is recorded as a node failure (unless
  /// it was cancelled). Returns false when not running or already marked.
  bool mark_node_fail(int64_t id, const std::string& lost, double now);
  /// Ended attempts of requeued jobs, oldest first.
  std::vector<AttemptRecord> attempts();

 private:
  /// Inside a write transaction: end RUNNING job id after the loss of `lost`:
  /// requeued (PENDING again, the attempt kept in job_attempts, restarts+1)
  /// or NODE_FAIL; its allocation is closed and its nodes freed.
  bool end_node_fail(int64_t id, const std::string& lost, bool requeue, double now);
  int64_t insert_job(const JobRecord& j, std::optional<int64_t> array_job, std::optional<int> task);
  Db db_;
};

/// Read one job row from a statement selecting kJobColumns.
JobRecord job_from_row(const Stmt& s);
extern const char* const kJobColumns;

}  // namespace dynres
