// Starting and stopping job steps: each job runs under
// its own supervisor process, mjstepd (the role of Slurm's slurmstepd), which
// outlives the scheduler daemon and records the job's end in the state file
// itself. Launchers:
//   local — the job script runs on this machine; node names are labels of a
//           virtual cluster.
//   srun  — inside a Slurm allocation the script runs on the job's first node
//           via `srun --overlap -N1 -n1 -w <host> --jobid=$SLURM_JOB_ID -J mj<id>`.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace dynres {
class State;
}

namespace dynres::launch {

struct StepConfig {
  std::string home;             ///< cluster directory ($DYNRES_HOME)
  int64_t job_id = 0;
  std::string launcher = "local";  ///< local | srun
  double kill_wait = 5.0;       ///< seconds from SIGTERM to SIGKILL
};

/// A supervisor started but not yet released.
struct Spawned {
  pid_t pid = -1;
  int go_fd = -1;  ///< write end; the supervisor waits for it to close
};

/// Fork and exec `stepd_path` (mjstepd) for cfg.job_id in a new session, with
/// default signal dispositions (the daemon's ignored SIGPIPE does not reach
/// jobs), no inherited descriptors but standard ones and the go pipe, and
/// SIGTERM/SIGINT/SIGHUP kept blocked across exec (a cancel that arrives
/// before mjstepd's own handling is ready stays pending instead of killing
/// it). The
/// supervisor blocks until release() and then runs the job only if the state
/// file shows the job RUNNING with supervisor_pid == its own pid; so a
/// scheduler that dies between spawn and commit never starts a job twice or
/// leaves it half-started. Throws std::runtime_error if fork fails.
Spawned spawn_supervisor(const std::string& stepd_path, const StepConfig& cfg);

/// Let the supervisor go (it then checks the state file, see above).
void release(Spawned& s);

/// The supervisor itself (main of mjstepd). go_fd: read end to wait on, or -1.
/// Runs the job script with MJ_JOB_ID, MJ_JOB_NAME, MJ_JOB_NODELIST,
/// MJ_JOB_NUM_NODES, MJ_NODEFILE and MJ_SOCKET set (outer SLURM_* variables are
/// left untouched), writes its output files, enforces the time limit
/// (SIGTERM, then SIGKILL after kill_wait: TIMEOUT), forwards SIGTERM
/// (mjcancel / vcluster-down: CANCELLED), and records the end (COMPLETED,
/// FAILED with exit code, TIMEOUT, CANCELLED) in the state file.
/// Returns the process exit status for mjstepd.
int run_step(const StepConfig& cfg, int go_fd);

/// True if pid is a live (not zombie) mjstepd process supervising job_id
/// (guards against pid reuse).
bool supervisor_alive(int64_t pid, int64_t job_id);

/// Start time of process pid (clock ticks since boot, /proc/PID/stat field
/// 22), or nullopt when there is no such process.
std::optional<int64_t> process_start_time(int64_t pid);

/// SIGKILL the process group of a job step whose supervisor is gone, but only
/// if it is still that step's group: when a process with pid == pgid exists
/// it must be the recorded leader (same start time, still leading the group);
/// a pgid reused by an unrelated group is left alone. When the leader has
/// exited, the group id cannot be reused while any member is alive, so the
/// members are killed. No-op for an unset or vanished group. Returns true
/// when a signal was sent.
bool kill_step(std::optional<int64_t> pgid, std::optional<int64_t> leader_start);

/// Send sig to a step's process group with the identity check of kill_step.
bool signal_step(std::optional<int64_t> pgid, std::optional<int64_t> leader_start, int sig);

/// Files of a job in the spool directory: the script copy (jobN.sh), the
/// node file (jobN.hosts) and the end hand-off (jobN.end).
std::string spool_file(const std::string& home, int64_t job_id, const std::string& ext);

/// Remove a job's spool files (once its record is final).
void remove_spool_files(const std::string& home, int64_t job_id);

/// A supervisor that could not record its job's end in the state file
/// leaves the result in spool/jobN.end. If that file exists, record the end
/// it describes (final state, exit code, reason, end time) and return true.
bool collect_end_handoff(State& st, const std::string& home, int64_t job_id);

/// Record the end of a RUNNING job whose supervisor is gone: the supervisor's
/// hand-off file if it left one, else `final_state` with `reason` (CANCELLED
/// instead when a cancel was requested); its step's group is killed first
/// (with the identity check of kill_step) and its spool files removed.
/// Returns true when this call recorded the end.
bool end_orphaned_job(State& st, const std::string& home, int64_t job_id, const std::string& final_state,
                      const std::string& reason, double now);

/// Directory of the running executable (to find mjstepd next to mjsched).
std::string self_dir();

}  // namespace dynres::launch

namespace dynres::launch {

/// Outcome of cancel_job, for the message mjcancel prints.
enum class CancelResult { cancelled_pending, signalled_running, already_finished, not_found, not_owner };

/// Cancel job id as user `uid` (root may cancel any job): a PENDING job is
/// recorded CANCELLED at once; a RUNNING job is marked cancel-requested and
/// its supervisor gets SIGTERM (it stops the whole step, SIGKILL after the
/// grace period, and records CANCELLED). If the supervisor is already gone
/// the job is recorded CANCELLED and its nodes freed here.
CancelResult cancel_job(State& st, const std::string& home, int64_t id, int64_t uid);

/// Outcome of signal_job.
enum class SignalResult { signalled, not_running, not_found, not_owner };

/// scancel -s: send sig to every process of a RUNNING job's step (its
/// process group, identity-checked; with the srun launcher the local srun,
/// which forwards it), as user uid (root may signal any job). The job is not
/// marked cancelled: it ends as its processes decide.
SignalResult signal_job(State& st, int64_t id, int64_t uid, int sig);

}  // namespace dynres::launch
