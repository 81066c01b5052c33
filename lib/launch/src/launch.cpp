#include "dynres/launch.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "dynres/hostlist.hpp"
#include "dynres/paths.hpp"
#include "dynres/proto.hpp"
#include "dynres/resize_store.hpp"
#include "dynres/state.hpp"

namespace dynres::launch {

std::string self_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

bool supervisor_alive(int64_t pid, int64_t job_id) {
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) != 0) return false;
  std::string base = "/proc/" + std::to_string(pid);
  std::ifstream st(base + "/stat");
  std::string stat((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
  auto rp = stat.rfind(')');
  if (rp == std::string::npos || rp + 2 >= stat.size() || stat[rp + 2] == 'Z') return false;  // gone or zombie
  // spawn_supervisor returns only after exec, so the command line is mjstepd's:
  // argv[0] ends in mjstepd and "--job <id>" names this job (no pid-reuse mix-up).
  std::ifstream f(base + "/cmdline");
  std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  for (size_t a = 0; a < cmd.size();) {
    size_t z = cmd.find('\0', a);
    if (z == std::string::npos) z = cmd.size();
    argv.push_back(cmd.substr(a, z - a));
    a = z + 1;
  }
  if (argv.empty() || argv[0].size() < 7 || argv[0].compare(argv[0].size() - 7, 7, "mjstepd") != 0) return false;
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == "--job") return argv[i + 1] == std::to_string(job_id);
  return false;
}

namespace {
// Fields of /proc/PID/stat after the command name: [0] = state (field 3).
std::vector<std::string> stat_fields(int64_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto rp = stat.rfind(')');
  std::vector<std::string> out;
  if (rp == std::string::npos) return out;
  std::istringstream in(stat.substr(rp + 1));
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}
}  // namespace

std::optional<int64_t> process_start_time(int64_t pid) {
  if (pid <= 0) return std::nullopt;
  auto f = stat_fields(pid);
  if (f.size() < 20) return std::nullopt;
  return std::stoll(f[19]);  // field 22: starttime
}

bool kill_step(std::optional<int64_t> pgid, std::optional<int64_t> leader_start) {
  return signal_step(pgid, leader_start, SIGKILL);
}

bool signal_step(std::optional<int64_t> pgid, std::optional<int64_t> leader_start, int sig) {
  if (!pgid || *pgid <= 1) return false;
  auto f = stat_fields(*pgid);
  if (f.size() >= 20) {
    // A process holds this pid: it must be the step's leader, still leading
    // its group; otherwise the pgid was reused by an unrelated group.
    if (!leader_start || std::stoll(f[19]) != *leader_start || std::stoll(f[2]) != *pgid) return false;
  }
  // Leader gone: while any member lives the group id cannot be reused.
  return ::kill(-static_cast<pid_t>(*pgid), sig) == 0;
}

std::string spool_file(const std::string& home, int64_t job_id, const std::string& ext) {
  return spool_dir(home) + "/job" + std::to_string(job_id) + "." + ext;
}

void remove_spool_files(const std::string& home, int64_t job_id) {
  for (const char* ext : {"sh", "hosts", "end"}) ::unlink(spool_file(home, job_id, ext).c_str());
}

namespace {
// Default dispositions for every signal (SIG_IGN survives exec: the
// daemon's ignored SIGPIPE would reach every job) and the given mask.
void reset_signals_for_exec(const sigset_t& mask) {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int s = 1; s < NSIG; ++s) ::sigaction(s, &sa, nullptr);  // fails harmlessly for KILL, STOP, RT internals
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
}
}  // namespace

Spawned spawn_supervisor(const std::string& stepd_path, const StepConfig& cfg) {
  int p[2], ex[2];  // p: the "go" pipe; ex: closes on a successful exec (or carries errno)
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(ex, O_CLOEXEC) != 0) {
    ::close(p[0]);
    ::close(p[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {p[0], p[1], ex[0], ex[1]}) ::close(fd);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(ex[0]);
    ::setsid();
    if (p[0] == 3) ::fcntl(3, F_SETFD, 0);  // dup2(3, 3) would keep close-on-exec
    else ::dup2(p[0], 3);                   // dup2 clears close-on-exec on fd 3
    int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0 && devnull != 0) ::dup2(devnull, 0);  // fd 0 without close-on-exec; devnull closes at exec
    // Nothing else the daemon holds or inherited reaches the supervisor (and
    // so the job): only 0, 1, 2 and the go pipe on 3; ex[1] is close-on-exec.
    if (::close_range(4, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
      for (int fd = 4; fd < 4096; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    std::string id = std::to_string(cfg.job_id), kw = std::to_string(cfg.kill_wait);
    std::vector<const char*> argv = {stepd_path.c_str(), "--home", cfg.home.c_str(), "--job", id.c_str(),
                                     "--launcher", cfg.launcher.c_str(), "--kill-wait", kw.c_str(),
                                     "--go-fd", "3", nullptr};
    // mjstepd handles TERM/INT/HUP with sigtimedwait: keep them blocked
    // across exec so an early cancel waits for it instead of killing it.
    sigset_t keep;
    sigemptyset(&keep);
    for (int sg : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaddset(&keep, sg);
    reset_signals_for_exec(keep);
    ::execv(stepd_path.c_str(), const_cast<char* const*>(argv.data()));
    int e = errno;
    (void)!::write(ex[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(p[0]);
  ::close(ex[1]);
  // Wait until the child has exec'd mjstepd, so liveness checks never see a
  // half-started supervisor.
  int e = 0;
  ssize_t n;
  while ((n = ::read(ex[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  ::close(ex[0]);
  if (n > 0) {
    ::close(p[1]);
    throw std::runtime_error("cannot exec " + stepd_path + ": " + std::strerror(e));
  }
  return {pid, p[1]};
}

void release(Spawned& s) {
  if (s.go_fd >= 0) {
    char g = 'g';
    (void)!::write(s.go_fd, &g, 1);
    ::close(s.go_fd);
    s.go_fd = -1;
  }
}

namespace {

/// Write `text` to `path` atomically (temporary file, then rename). With
/// `durable`, the temporary file is fsynced before the rename and the
/// directory after it, so the file survives a machine crash too (the exit
/// status hand-off); without, it survives any process crash.
void write_file(const std::string& path, const std::string& text, mode_t mode, bool durable = false) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < text.size()) {
    ssize_t w = ::write(fd, text.data() + off, text.size() - off);
    if (w < 0) {
      ::close(fd);
      throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
    }
    off += static_cast<size_t>(w);
  }
  if (durable && ::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error("cannot fsync " + tmp + ": " + std::strerror(e));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + tmp + ": " + std::strerror(errno));
  if (durable) {
    std::string dir = path.substr(0, path.find_last_of('/') + 1);
    int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || ::fsync(dfd) != 0) {
      int e = errno;
      if (dfd >= 0) ::close(dfd);
      throw std::runtime_error("cannot fsync the directory of " + path + ": " + std::strerror(e));
    }
    ::close(dfd);
  }
}

// Replace the environment by the submitter's (sbatch --export=ALL), keeping
// this process's SLURM_* variables: they describe the enclosing allocation
// and must never be overwritten. Called in the child just before exec.
void apply_job_environment(const std::string& json_env) {
  nlohmann::json env;
  try {
    env = nlohmann::json::parse(json_env);
  } catch (...) {
    return;  // keep the scheduler's environment
  }
  std::vector<std::pair<std::string, std::string>> slurm;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (kv.rfind("SLURM_", 0) == 0 && eq != std::string::npos) slurm.push_back({kv.substr(0, eq), kv.substr(eq + 1)});
  }
  ::clearenv();
  for (auto& [k, v] : env.items())
    if (k.rfind("SLURM_", 0) != 0 && v.is_string()) ::setenv(k.c_str(), v.get<std::string>().c_str(), 1);
  for (auto& [k, v] : slurm) ::setenv(k.c_str(), v.c_str(), 1);
}

// Record the end of the job. The result goes to the hand-off file
// spool/jobN.end first (collected by the daemon or mjcancel if this
// supervisor dies before it is recorded); then the state file is retried with
// back-off (0.1 s doubling to 5 s) until the end is recorded: an exit status
// is never dropped because the file stayed busy. Gives up (leaving the
// hand-off) only when the state file itself is gone.
void record_end(State& st, const std::string& home, int64_t id, const std::string& state, std::optional<int> code,
                const std::string& why) {
  const double end = now_seconds();
  nlohmann::json h = {{"state", state}, {"reason", why}, {"end_time", end}};
  h["exit_code"] = code ? nlohmann::json(*code) : nlohmann::json(nullptr);
  try {
    ::mkdir(spool_dir(home).c_str(), 0700);
    write_file(spool_file(home, id, "end"), h.dump() + "\n", 0600, /*durable=*/true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mjstepd: job %lld: %s\n", (long long)id, e.what());
  }
  double backoff = 0.1;
  for (int attempt = 0;; ++attempt) {
    try {
      st.finish_job(id, state, code, why, end);
      ::unlink(spool_file(home, id, "end").c_str());
      return;
    } catch (const DbError& e) {
      struct stat sb;
      if (::stat(state_path(home).c_str(), &sb) != 0) throw;  // no state file any more: leave the hand-off
      if (attempt == 0 || attempt % 20 == 0)
        std::fprintf(stderr, "mjstepd: job %lld: cannot record the end yet (%s); retrying\n", (long long)id, e.what());
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
      backoff = std::min(5.0, backoff * 2);
    }
  }
}

/// Who a job runs as: the submitter. When the supervisor runs as root (a
/// site-wide cluster), the job gets the submitter's uid, primary gid and
/// supplementary groups (initgroups), like slurmstepd; otherwise it can only
/// run as the supervisor's own user, and a job recorded for anyone else is
/// refused (the daemon never records one; the state file is its owner's).
struct JobIdentity {
  bool switch_user = false;  ///< root supervisor, job of another uid
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

JobIdentity job_identity(const JobRecord& j) {
  JobIdentity id;
  const uid_t me = ::geteuid();
  if (j.uid < 0 || j.uid > 0xfffffffeLL) throw std::runtime_error("job has an invalid uid " + std::to_string(j.uid));
  id.uid = static_cast<uid_t>(j.uid);
  if (id.uid == me) return id;
  if (me != 0)
    throw std::runtime_error("job of uid " + std::to_string(j.uid) + " cannot run on a cluster whose scheduler runs as uid " +
                             std::to_string(me) + " (only root runs jobs as other users)");
  passwd pw{}, *res = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(id.uid, &pw, buf.data(), buf.size(), &res) != 0 || !res)
    throw std::runtime_error("job of uid " + std::to_string(j.uid) + ": no such user");
  id.switch_user = true;
  id.gid = j.gid >= 0 && j.gid <= 0xfffffffeLL ? static_cast<gid_t>(j.gid) : pw.pw_gid;
  int n = 64;
  id.groups.resize(n);
  while (::getgrouplist(pw.pw_name, id.gid, id.groups.data(), &n) < 0) id.groups.resize(n = n * 2 + 1);
  id.groups.resize(n);
  return id;
}

/// Become the job's user for good (the job's process, before exec). False
/// when a step failed or root could be regained.
bool drop_privileges(const JobIdentity& id) {
  if (!id.switch_user) return true;
  if (::setgroups(id.groups.size(), id.groups.data()) != 0 || ::setgid(id.gid) != 0 || ::setuid(id.uid) != 0) return false;
  return ::setuid(0) != 0 && ::getuid() == id.uid && ::geteuid() == id.uid && ::getegid() == id.gid;
}

/// Run f with the effective (file-system) identity of the job: its output
/// files are created as the submitter, who must be allowed to write there.
template <class F>
auto as_job_user(const JobIdentity& id, F&& f) {
  if (!id.switch_user) return f();
  std::vector<gid_t> saved(::getgroups(0, nullptr) > 0 ? ::getgroups(0, nullptr) : 0);
  if (!saved.empty()) saved.resize(::getgroups(saved.size(), saved.data()));
  if (::setgroups(id.groups.size(), id.groups.data()) != 0 || ::setegid(id.gid) != 0 || ::seteuid(id.uid) != 0)
    throw std::runtime_error(std::string("cannot take the job user's identity: ") + std::strerror(errno));
  auto restore = [&] {
    if (::seteuid(0) != 0 || ::setegid(0) != 0 || ::setgroups(saved.size(), saved.data()) != 0) ::_exit(70);
  };
  try {
    auto r = f();
    restore();
    return r;
  } catch (...) {
    restore();
    throw;
  }
}

}  // namespace

namespace {
/// Seconds a supervisor waits, after a registered malleable job's script
/// failed, for mjsched's restart order on the remaining nodes.
constexpr double kNodeFailureGrace = 5.0;
/// The job registered for orders (mj_register) and has not deregistered.
bool registered(State& st, int64_t job) {
  auto info = resize::job_info(st, job);
  return info && info->phase == resize::Phase::accepting;
}
}  // namespace

int run_step(const StepConfig& cfg, int go_fd) {
  // Block the signals we handle synchronously with sigtimedwait (spawn_supervisor
  // already keeps TERM/INT/HUP blocked across exec); the job gets an empty mask.
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGUSR1}) sigaddset(&set, s);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);

  if (go_fd >= 0) {
    char c;
    while (::read(go_fd, &c, 1) < 0 && errno == EINTR) {
    }
    ::close(go_fd);
  }
  State st(state_path(cfg.home));
  auto job = st.job(cfg.job_id);
  if (!job || job->state != kRunning || job->supervisor_pid.value_or(-1) != ::getpid()) return 0;  // not ours
  JobIdentity ident;
  try {
    ident = job_identity(*job);
  } catch (const std::exception& e) {
    record_end(st, cfg.home, cfg.job_id, kFailed, 1, e.what());
    remove_spool_files(cfg.home, cfg.job_id);
    proto::notify(sched_socket(cfg.home), {{"op", "wake"}, {"why", "end"}, {"job", cfg.job_id}});
    return 1;
  }

  std::vector<int> array_tasks;  // indices of the job's array, sorted
  if (job->array_job_id)
    for (auto tid : st.array_task_ids(*job->array_job_id))
      if (auto t = st.job(tid); t && t->array_task_id) array_tasks.push_back(*t->array_task_id);
  // Restart-based resizes ([John24 §7.4.4], mj(3) MJ_ADAPT_RESTART): when the
  // script ends while the job has a restart order not yet relaunched, the
  // script runs again on the order's node list; otherwise the job ends.
  auto finish = [&](const std::string& state, std::optional<int> code, const std::string& why) {
    record_end(st, cfg.home, cfg.job_id, state, code, why);
    remove_spool_files(cfg.home, cfg.job_id);  // the record is final
    proto::notify(sched_socket(cfg.home), {{"op", "wake"}, {"why", "end"}, {"job", cfg.job_id}});
  };
  std::optional<resize::OrderRecord> relaunch;
  int round = 0;
  bool cancelled = false, timed_out = false;
  int status = 0;
  std::string secret;
  try {
    resize::migrate(st);
    if (auto info = resize::job_info(st, cfg.job_id)) secret = info->secret;
  } catch (const DbError&) {
  }
  for (;; ++round) {
  std::vector<std::string> names, hosts;
  int node_cpus = 0;
  std::vector<std::string> added = relaunch && relaunch->state != "rolled_back" && relaunch->order.kind == resize::Kind::expand
                                       ? relaunch->order.nodes
                                       : std::vector<std::string>{};
  std::vector<std::string> leaving = relaunch && relaunch->state != "rolled_back" && relaunch->order.kind == resize::Kind::shrink
                                         ? relaunch->order.nodes
                                         : std::vector<std::string>{};
  int old_count = 0;
  for (auto& n : st.nodes()) {
    bool mine = n.job_id == cfg.job_id;
    old_count += mine;
    bool in = (mine && std::find(leaving.begin(), leaving.end(), n.name) == leaving.end()) ||
              std::find(added.begin(), added.end(), n.name) != added.end();
    if (in) {
      names.push_back(n.name), hosts.push_back(n.host);
      node_cpus = node_cpus ? std::min(node_cpus, n.cpus) : n.cpus;
    }
  }
  const std::string nodelist = compress_hostlist(names);
  std::string spool = spool_dir(cfg.home);
  ::mkdir(spool.c_str(), 0700);
  if (ident.switch_user) ::chmod(spool.c_str(), 0711);
  std::string script = spool_file(cfg.home, cfg.job_id, "sh");
  std::string nodefile = spool_file(cfg.home, cfg.job_id, "hosts");
  const std::string shim = self_dir() + "/../share/dynres/shim", node_exec = shim + "/mj-node-exec";
  const bool by_name = cfg.launcher != "srun" && ::access(node_exec.c_str(), X_OK) == 0;
  int out = -1, err = -1;
  try {
    if (round == 0) {
      write_file(script, job->script, 0700);
      // the job's user runs its copy of the script (the spool is 0711: reachable, not listable)
      if (ident.switch_user && ::chown(script.c_str(), ident.uid, ident.gid) != 0)
        throw std::runtime_error("cannot give the job script to its user: " + std::string(std::strerror(errno)));
    }
    // Local virtual nodes share this machine: the node file names the
    // nodes, and mpiexec (MPICH's Hydra) reaches them through mj-node-exec
    // (its remote shell, below), so every rank carries its own node in
    // MJ_NODE and dies with that node (vcluster-fail) [John24 §7.4.4].
    std::string hl;
    for (size_t k = 0; k < hosts.size(); ++k) hl += (by_name ? names[k] : hosts[k]) + "\n";
    write_file(nodefile, hl, 0644);
    // %N (sbatch: the first node of the job) is known only now
    auto with_node = [&](std::string p) {
      for (size_t k; (k = p.find("%N")) != std::string::npos;) p.replace(k, 2, names.empty() ? "" : names[0]);
      return p;
    };
    job->stdout_path = with_node(job->stdout_path);
    job->stderr_path = with_node(job->stderr_path);
    const int trunc = round == 0 ? O_TRUNC : O_APPEND;  // a relaunch appends to the job's output
    // as the submitter, with the submitter's umask (Slurm's behaviour)
    ::umask(static_cast<mode_t>(job->umask & 0777));  // output files
    as_job_user(ident, [&] {
      out = ::open(job->stdout_path.c_str(), O_WRONLY | O_CREAT | trunc | O_CLOEXEC, 0666);
      if (out < 0) throw std::runtime_error("cannot open output " + job->stdout_path + ": " + std::strerror(errno));
      if (job->stderr_path == job->stdout_path) {
        err = out;
      } else {
        err = ::open(job->stderr_path.c_str(), O_WRONLY | O_CREAT | trunc | O_CLOEXEC, 0666);
        if (err < 0) throw std::runtime_error("cannot open error " + job->stderr_path + ": " + std::strerror(errno));
      }
      return 0;
    });
    ::umask(022);
  } catch (const std::exception& e) {
    if (out >= 0) ::close(out);
    finish(kFailed, 1, e.what());
    return 1;
  }

  // The step may exec the job only after its process group is recorded in
  // the state file (gate pipe): a supervisor that dies before that leaves no
  // job process behind, so no step ever runs unrecorded.
  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) {
    ::close(out);
    if (err != out) ::close(err);
    finish(kFailed, 1, std::string("pipe failed: ") + std::strerror(errno));
    return 1;
  }
  pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);
    ::close(gate[1]);
    char g = 0;
    ssize_t n;
    while ((n = ::read(gate[0], &g, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1 || g != 'g') ::_exit(0);  // the supervisor is gone or refused: never run unrecorded
    sigset_t none;
    sigemptyset(&none);
    reset_signals_for_exec(none);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)  // the job gets 0, 1 and 2 only
      for (int fd = 3; fd < 4096; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    ::umask(static_cast<mode_t>(job->umask & 0777));
    if (!drop_privileges(ident)) {
      std::fprintf(stderr, "mjstepd: job %lld: cannot run as uid %lld: %s\n", (long long)cfg.job_id,
                   (long long)job->uid, std::strerror(errno));
      ::_exit(1);
    }
    if (::chdir(job->workdir.c_str()) != 0) {
      std::fprintf(stderr, "mjstepd: job %lld: cannot chdir to %s: %s\n", (long long)cfg.job_id,
                   job->workdir.c_str(), std::strerror(errno));
      ::_exit(1);
    }
    if (!job->env.empty()) apply_job_environment(job->env);
    ::setenv("MJ_JOB_ID", std::to_string(cfg.job_id).c_str(), 1);
    ::setenv("MJ_JOB_NAME", job->name.c_str(), 1);
    ::setenv("MJ_JOB_NODELIST", nodelist.c_str(), 1);
    ::setenv("MJ_JOB_NUM_NODES", std::to_string(names.size()).c_str(), 1);
    ::setenv("MJ_NODEFILE", nodefile.c_str(), 1);
    ::setenv("MJ_SOCKET", sched_socket(cfg.home).c_str(), 1);
    // the resize protocol (mj(3)): the job's secret, its launcher, where this
    // process runs, and after a restart-based resize the order to commit
    if (!secret.empty()) ::setenv("MJ_SECRET", secret.c_str(), 1);
    ::setenv("MJ_LAUNCHER", cfg.launcher.c_str(), 1);
    ::setenv("MJ_NODE", names.empty() ? "" : names[0].c_str(), 1);
    ::setenv("MJ_RESTART_COUNT", std::to_string(round).c_str(), 1);
    if (relaunch) {
      ::setenv("MJ_RESUMED_ORDER", std::to_string(relaunch->order.id).c_str(), 1);
      ::setenv("MJ_OLD_NUM_NODES", std::to_string(old_count).c_str(), 1);
    } else {
      ::unsetenv("MJ_RESUMED_ORDER");
      ::unsetenv("MJ_OLD_NUM_NODES");
    }
    const std::string submit_dir = job->submit_dir.empty() ? job->workdir : job->submit_dir;
    ::setenv("MJ_SUBMIT_DIR", submit_dir.c_str(), 1);
    // The dynres job as Slurm would describe it (SLURM_*), and the srun shim
    // first on PATH so that `srun` inside the job runs on the job's nodes.
    const std::string nn = std::to_string(names.size()), id = std::to_string(cfg.job_id);
    // ntasks 0: --ntasks-per-node tasks (default one) on each node the job holds now
    const std::string nt = std::to_string(job->ntasks ? job->ntasks
                                                      : static_cast<int>(names.size()) * std::max(1, job->ntasks_per_node));
    ::setenv("MJ_NTASKS", nt.c_str(), 1);
    std::vector<std::pair<const char*, std::string>> slurm_env = {
        {"SLURM_JOB_ID", id},          {"SLURM_JOBID", id},           {"SLURM_JOB_NAME", job->name},
        {"SLURM_SUBMIT_DIR", submit_dir}, {"SLURM_JOB_NUM_NODES", nn}, {"SLURM_NNODES", nn},
        {"SLURM_JOB_NODELIST", nodelist}, {"SLURM_NODELIST", nodelist}, {"SLURM_NTASKS", nt},
        {"SLURM_NPROCS", nt}, {"SLURM_CPUS_PER_TASK", std::to_string(job->cpus_per_task)},
        {"SLURM_CPUS_ON_NODE", std::to_string(std::max(1, node_cpus))}};
    if (job->ntasks_per_node) slurm_env.push_back({"SLURM_NTASKS_PER_NODE", std::to_string(job->ntasks_per_node)});
    if (job->mem_per_node > 0) slurm_env.push_back({"SLURM_MEM_PER_NODE", std::to_string(job->mem_per_node)});
    if (job->mem_per_cpu > 0) slurm_env.push_back({"SLURM_MEM_PER_CPU", std::to_string(job->mem_per_cpu)});
    if (job->gpus_per_node > 0) {  // the job's GPUs on each of its nodes: 0..N-1 (nodes hold one job at a time)
      std::string dev;
      for (int g = 0; g < job->gpus_per_node; ++g) dev += (g ? "," : "") + std::to_string(g);
      slurm_env.push_back({"CUDA_VISIBLE_DEVICES", dev});
      slurm_env.push_back({"GPU_DEVICE_ORDINAL", dev});
      slurm_env.push_back({"SLURM_GPUS_ON_NODE", std::to_string(job->gpus_per_node)});
    }
    // a job requeued after a node failure knows it, as with Slurm
    if (job->restarts > 0) slurm_env.push_back({"SLURM_RESTART_COUNT", std::to_string(job->restarts)});
    if (job->array_job_id && job->array_task_id) {
      slurm_env.push_back({"SLURM_ARRAY_JOB_ID", std::to_string(*job->array_job_id)});
      slurm_env.push_back({"SLURM_ARRAY_TASK_ID", std::to_string(*job->array_task_id)});
      slurm_env.push_back({"SLURM_ARRAY_TASK_COUNT", std::to_string(array_tasks.size())});
      slurm_env.push_back({"SLURM_ARRAY_TASK_MIN", std::to_string(array_tasks.empty() ? 0 : array_tasks.front())});
      slurm_env.push_back({"SLURM_ARRAY_TASK_MAX", std::to_string(array_tasks.empty() ? 0 : array_tasks.back())});
    }
    if (by_name) {  // Hydra's rsh launcher is mj-node-exec; the ranks take its environment, not mpiexec's
      ::setenv("HYDRA_LAUNCHER", "rsh", 1);
      ::setenv("HYDRA_LAUNCHER_EXEC", node_exec.c_str(), 1);
      ::setenv("HYDRA_ENV", "none", 1);
    }
    if (::access((shim + "/srun").c_str(), X_OK) == 0) {
      const char* path = std::getenv("PATH");
      ::setenv("PATH", (shim + (path && *path ? ":" + std::string(path) : "")).c_str(), 1);
    }
    if (cfg.launcher == "srun") {
      // srun of the enclosing allocation must see its own SLURM_*: keep them,
      // saved as MJ_OUTER_SLURM_* for the shim; mj-step-env sets the job's
      // inside the step
      std::vector<std::pair<std::string, std::string>> outer;
      for (char** e = environ; e && *e; ++e) {
        std::string kv = *e;
        auto eq = kv.find('=');
        if (kv.rfind("SLURM_", 0) == 0 && eq != std::string::npos) outer.push_back({kv.substr(0, eq), kv.substr(eq + 1)});
      }
      for (auto& [k, v] : outer) ::setenv(("MJ_OUTER_" + k).c_str(), v.c_str(), 1);
      for (auto& [k, v] : slurm_env) ::setenv((std::string("MJ_JOBENV_") + k).c_str(), v.c_str(), 1);
    } else {
      for (auto& [k, v] : slurm_env) ::setenv(k, v.c_str(), 1);
    }
    std::vector<std::string> args;
    if (cfg.launcher == "srun") {
      const char* sj = std::getenv("SLURM_JOB_ID");
      args = {"srun", "--overlap", "-N1", "-n1", "-w", hosts.empty() ? "" : hosts[0],
              "-J", "mj" + std::to_string(cfg.job_id), "--export=ALL", "--kill-on-bad-exit=1"};
      if (sj) args.insert(args.begin() + 1, std::string("--jobid=") + sj);
      if (::access((shim + "/mj-step-env").c_str(), X_OK) == 0) args.push_back(shim + "/mj-step-env");
    }
    if (job->script.rfind("#!", 0) != 0) args.push_back("/bin/sh");
    args.push_back(script);
    if (!job->args.empty()) {  // mjsub SCRIPT ARGS...
      try {
        for (auto& a : nlohmann::json::parse(job->args)) args.push_back(a.get<std::string>());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "mjstepd: job %lld: bad script arguments: %s\n", (long long)cfg.job_id, e.what());
        ::_exit(1);
      }
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "mjstepd: cannot exec %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(gate[0]);
  ::close(out);
  if (err != out) ::close(err);
  if (child < 0) {
    ::close(gate[1]);
    finish(kFailed, 1, std::string("fork failed: ") + std::strerror(errno));
    return 1;
  }
  ::setpgid(child, child);
  {
    // Record the group and its leader's identity, then open the gate.
    auto leader_start = process_start_time(child);
    bool recorded = false;
    double backoff = 0.1;
    for (int attempt = 0; leader_start && attempt < 40 && !recorded; ++attempt) {
      try {
        if (!st.set_step_pgid(cfg.job_id, child, *leader_start)) break;  // no longer RUNNING (cancelled as lost)
        recorded = true;
      } catch (const DbError&) {
        std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
        backoff = std::min(2.0, backoff * 2);
      }
    }
    if (recorded) {
      char g = 'g';
      (void)!::write(gate[1], &g, 1);
    }
    ::close(gate[1]);  // without 'g' the step exits without running the job
    if (!recorded) {
      ::waitpid(child, nullptr, 0);
      finish(kFailed, 1, "cannot record the step's process group");
      return 1;
    }
  }

  const double start = job->start_time.value_or(now_seconds());
  const double limit_at = job->time_limit > 0 ? start + static_cast<double>(job->time_limit) : INFINITY;
  double kill_at = INFINITY;  // SIGKILL deadline once SIGTERM was sent
  auto terminate = [&](double now) {
    if (std::isinf(kill_at)) {
      ::kill(-child, SIGTERM);
      kill_at = now + cfg.kill_wait;
    }
  };
  // The child is reaped only after its group was killed (waitid WNOWAIT): an
  // unreaped leader keeps the group id from being reused, so -child never
  // names another group.
  for (;;) {
    siginfo_t si{};
    if (::waitid(P_PID, static_cast<id_t>(child), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == child) break;
    double now = now_seconds();
    if (now >= limit_at && !cancelled && !timed_out) timed_out = true, terminate(now);
    if (now >= kill_at) ::kill(-child, SIGKILL);
    double next = std::min({limit_at, kill_at, now + 1.0});
    double wait_s = std::max(0.01, next - now);
    timespec ts{static_cast<time_t>(wait_s), static_cast<long>((wait_s - std::floor(wait_s)) * 1e9)};
    int sig = ::sigtimedwait(&set, nullptr, &ts);
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
      if (!timed_out) cancelled = true;
      terminate(now_seconds());
    }
    // mjsched: a node of the job failed and the job is to run again on the
    // rest (a restart order, begun on its behalf): stop this run of the script
    // (only while that order waits for its relaunch: a late signal must not
    // stop the run started for it)
    if (sig == SIGUSR1) {
      bool pending = true;
      try {
        pending = resize::pending_relaunch(st, cfg.job_id).has_value();
      } catch (const DbError&) {
      }
      if (pending) terminate(now_seconds());
    }
  }
  ::kill(-child, SIGKILL);  // like Slurm: the step's leftover processes end with it
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (cancelled || timed_out) break;
  relaunch.reset();
  try {
    auto fresh = st.job(cfg.job_id);
    if (fresh && fresh->cancel_requested) break;
    relaunch = resize::take_relaunch(st, cfg.job_id);
    // A registered malleable job whose script failed may have lost a node:
    // mjsched then orders a restart on the remaining nodes within a pass or
    // two of the failure (mjsched(8) NODE FAILURES); wait that long for it.
    if (!relaunch && status != 0 && registered(st, cfg.job_id))
      for (double until = now_seconds() + kNodeFailureGrace; !relaunch && now_seconds() < until;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        auto j = st.job(cfg.job_id);
        if (!j || j->state != kRunning || j->cancel_requested) break;
        relaunch = resize::take_relaunch(st, cfg.job_id);
      }
  } catch (const DbError&) {
    relaunch.reset();  // the state file is unusable: end the job as it ended
  }
  if (!relaunch) break;
  {  // a SIGUSR1 still pending asked to stop the run that just ended, not the next one
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    timespec zero{0, 0};
    while (::sigtimedwait(&usr1, nullptr, &zero) == SIGUSR1) {
    }
  }
  std::fprintf(stderr, "mjstepd: job %lld: relaunching the script for %s order %llu (%s)\n", (long long)cfg.job_id,
               resize::to_string(relaunch->order.kind), (unsigned long long)relaunch->order.id,
               relaunch->state.c_str());
  }  // relaunch loop

  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  try {
    auto fresh = st.job(cfg.job_id);
    if (fresh && fresh->cancel_requested) cancelled = true;
  } catch (const DbError&) {
  }
  std::string final_state = cancelled ? kCancelled : timed_out ? kTimeout : code == 0 ? kCompleted : kFailed;
  std::string why = cancelled ? "Cancelled" : timed_out ? "TimeLimit" : code == 0 ? "None" : "NonZeroExitCode";
  finish(final_state, code, why);
  return 0;
}

bool collect_end_handoff(State& st, const std::string& home, int64_t job_id) {
  std::ifstream f(spool_file(home, job_id, "end"));
  if (!f) return false;
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(f);
  } catch (...) {
    return false;  // torn: the supervisor died while writing it (write_file renames, so unlikely)
  }
  std::optional<int> code;
  if (h.contains("exit_code") && h["exit_code"].is_number_integer()) code = h["exit_code"].get<int>();
  bool ok = st.finish_job(job_id, h.value("state", std::string(kFailed)), code, h.value("reason", std::string()),
                          h.value("end_time", now_seconds()));
  remove_spool_files(home, job_id);
  return ok;
}

bool end_orphaned_job(State& st, const std::string& home, int64_t job_id, const std::string& final_state,
                      const std::string& reason, double now) {
  auto j = st.job(job_id);
  if (!j || j->state != kRunning) return false;
  kill_step(j->step_pgid, j->step_start);  // its nodes are reused next
  if (collect_end_handoff(st, home, job_id)) return true;
  bool ok = j->cancel_requested
                ? st.finish_job(job_id, kCancelled, std::nullopt,
                                reason.rfind("Cancelled", 0) == 0 ? reason : "Cancelled (" + reason + ")", now)
                : st.finish_job(job_id, final_state, std::nullopt, reason, now);
  remove_spool_files(home, job_id);
  return ok;
}

}  // namespace dynres::launch

namespace dynres::launch {

SignalResult signal_job(State& st, int64_t id, int64_t uid, int sig) {
  auto j = st.job(id);
  if (!j) return SignalResult::not_found;
  if (uid != 0 && j->uid != uid) return SignalResult::not_owner;
  if (j->state != kRunning || !j->step_pgid) return SignalResult::not_running;
  return signal_step(j->step_pgid, j->step_start, sig) ? SignalResult::signalled : SignalResult::not_running;
}

CancelResult cancel_job(State& st, const std::string& home, int64_t id, int64_t uid) {
  auto j = st.job(id);
  if (!j) return CancelResult::not_found;
  if (uid != 0 && j->uid != uid) return CancelResult::not_owner;
  if (j->state == kPending) {
    if (st.cancel_pending(id, now_seconds())) {
      proto::notify(sched_socket(home), {{"op", "wake"}, {"why", "cancel"}, {"job", id}});
      return CancelResult::cancelled_pending;
    }
    j = st.job(id);  // it started meanwhile
  }
  if (j->state != kRunning) return CancelResult::already_finished;
  st.request_cancel(id);
  int64_t pid = j->supervisor_pid.value_or(0);
  if (supervisor_alive(pid, id)) {
    ::kill(static_cast<pid_t>(pid), SIGTERM);
  } else {
    end_orphaned_job(st, home, id, kCancelled, "Cancelled (supervisor gone)", now_seconds());
    proto::notify(sched_socket(home), {{"op", "wake"}, {"why", "cancel"}, {"job", id}});
  }
  return CancelResult::signalled_running;
}

}  // namespace dynres::launch
