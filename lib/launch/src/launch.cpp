#include "dynres/launch.hpp"

#include <fcntl.h>
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

void kill_step(std::optional<int64_t> pgid) {
  if (pgid && *pgid > 1 && ::kill(-static_cast<pid_t>(*pgid), 0) == 0) ::kill(-static_cast<pid_t>(*pgid), SIGKILL);
}

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
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    std::string id = std::to_string(cfg.job_id), kw = std::to_string(cfg.kill_wait);
    std::vector<const char*> argv = {stepd_path.c_str(), "--home", cfg.home.c_str(), "--job", id.c_str(),
                                     "--launcher", cfg.launcher.c_str(), "--kill-wait", kw.c_str(),
                                     "--go-fd", "3", nullptr};
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGCHLD, SIG_DFL);
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

void write_file(const std::string& path, const std::string& text, mode_t mode) {
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
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + tmp + ": " + std::strerror(errno));
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

// Record the end, retrying if the state file is briefly unavailable.
void record_end(State& st, int64_t id, const std::string& state, std::optional<int> code, const std::string& why) {
  for (int attempt = 0;; ++attempt) {
    try {
      st.finish_job(id, state, code, why, now_seconds());
      return;
    } catch (const DbError& e) {
      if (attempt >= 20) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
}

}  // namespace

int run_step(const StepConfig& cfg, int go_fd) {
  // Block the signals we handle synchronously with sigtimedwait; the child
  // unblocks them before exec.
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&set, s);
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

  std::vector<std::string> names, hosts;
  for (auto& n : st.nodes())
    if (n.job_id == cfg.job_id) names.push_back(n.name), hosts.push_back(n.host);
  std::string spool = spool_dir(cfg.home);
  ::mkdir(spool.c_str(), 0700);
  std::string script = spool + "/job" + std::to_string(cfg.job_id) + ".sh";
  std::string nodefile = spool + "/job" + std::to_string(cfg.job_id) + ".hosts";
  int out = -1, err = -1;
  try {
    write_file(script, job->script, 0700);
    std::string hl;
    for (auto& h : hosts) hl += h + "\n";
    write_file(nodefile, hl, 0644);
    out = ::open(job->stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) throw std::runtime_error("cannot open output " + job->stdout_path + ": " + std::strerror(errno));
    if (job->stderr_path == job->stdout_path) {
      err = out;
    } else {
      err = ::open(job->stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (err < 0) throw std::runtime_error("cannot open error " + job->stderr_path + ": " + std::strerror(errno));
    }
  } catch (const std::exception& e) {
    record_end(st, cfg.job_id, kFailed, 1, e.what());
    proto::notify(sched_socket(cfg.home), {{"op", "wake"}, {"why", "end"}, {"job", cfg.job_id}});
    return 1;
  }

  pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (::chdir(job->workdir.c_str()) != 0) {
      std::fprintf(stderr, "mjstepd: job %lld: cannot chdir to %s: %s\n", (long long)cfg.job_id,
                   job->workdir.c_str(), std::strerror(errno));
      ::_exit(1);
    }
    if (!job->env.empty()) apply_job_environment(job->env);
    ::setenv("MJ_JOB_ID", std::to_string(cfg.job_id).c_str(), 1);
    ::setenv("MJ_JOB_NAME", job->name.c_str(), 1);
    ::setenv("MJ_JOB_NODELIST", job->nodelist.c_str(), 1);
    ::setenv("MJ_JOB_NUM_NODES", std::to_string(names.size()).c_str(), 1);
    ::setenv("MJ_NODEFILE", nodefile.c_str(), 1);
    ::setenv("MJ_SOCKET", sched_socket(cfg.home).c_str(), 1);
    ::setenv("MJ_SUBMIT_DIR", (job->submit_dir.empty() ? job->workdir : job->submit_dir).c_str(), 1);
    std::vector<std::string> args;
    if (cfg.launcher == "srun") {
      const char* sj = std::getenv("SLURM_JOB_ID");
      args = {"srun", "--overlap", "-N1", "-n1", "-w", hosts.empty() ? "" : hosts[0],
              "-J", "mj" + std::to_string(cfg.job_id), "--export=ALL", "--kill-on-bad-exit=1"};
      if (sj) args.insert(args.begin() + 1, std::string("--jobid=") + sj);
    }
    if (job->script.rfind("#!", 0) != 0) args.push_back("/bin/sh");
    args.push_back(script);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "mjstepd: cannot exec %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  if (child > 0) {
    ::setpgid(child, child);
    try {
      st.set_step_pgid(cfg.job_id, child);
    } catch (const std::exception&) {
      // only used to clean up after a lost supervisor; the job runs regardless
    }
  }
  ::close(out);
  if (err != out) ::close(err);
  if (child < 0) {
    record_end(st, cfg.job_id, kFailed, 1, std::string("fork failed: ") + std::strerror(errno));
    return 1;
  }

  const double start = job->start_time.value_or(now_seconds());
  const double limit_at = job->time_limit > 0 ? start + static_cast<double>(job->time_limit) : INFINITY;
  bool cancelled = false, timed_out = false;
  double kill_at = INFINITY;  // SIGKILL deadline once SIGTERM was sent
  int status = 0;
  auto terminate = [&](double now) {
    if (std::isinf(kill_at)) {
      ::kill(-child, SIGTERM);
      kill_at = now + cfg.kill_wait;
    }
  };
  for (;;) {
    pid_t w = ::waitpid(child, &status, WNOHANG);
    if (w == child) break;
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
  }
  ::kill(-child, SIGKILL);  // like Slurm: the step's leftover processes end with it

  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto fresh = st.job(cfg.job_id);
  if (fresh && fresh->cancel_requested) cancelled = true;
  std::string final_state = cancelled ? kCancelled : timed_out ? kTimeout : code == 0 ? kCompleted : kFailed;
  std::string why = cancelled ? "Cancelled" : timed_out ? "TimeLimit" : code == 0 ? "None" : "NonZeroExitCode";
  record_end(st, cfg.job_id, final_state, code, why);
  proto::notify(sched_socket(cfg.home), {{"op", "wake"}, {"why", "end"}, {"job", cfg.job_id}});
  return 0;
}

}  // namespace dynres::launch

namespace dynres::launch {

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
    kill_step(j->step_pgid);
    st.finish_job(id, kCancelled, std::nullopt, "Cancelled (supervisor gone)", now_seconds());
    proto::notify(sched_socket(home), {{"op", "wake"}, {"why", "cancel"}, {"job", id}});
  }
  return CancelResult::signalled_running;
}

}  // namespace dynres::launch
