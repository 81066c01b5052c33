// mjsched — the dynres scheduler daemon (mjsched(8)).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "dynres/config.hpp"
#include "dynres/power_source.hpp"
#include "dynres/hostlist.hpp"
#include "dynres/launch.hpp"
#include "dynres/paths.hpp"
#include "dynres/schedd.hpp"

namespace {
/// The cluster directory and state file must be this user's alone: a
/// directory another user owns or can write could hold a state file,
/// configuration or job scripts of theirs (dynres(7), SECURITY).
void check_private(const std::string& home) {
  const uid_t me = ::geteuid();
  struct stat sb {};
  if (::stat(home.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode))
    throw std::runtime_error("no cluster directory " + home + (errno == EACCES ? " (permission denied)" : ""));
  if (sb.st_uid != me)
    throw std::runtime_error("the cluster directory " + home + " belongs to uid " + std::to_string(sb.st_uid) +
                             ", not to this user (uid " + std::to_string(me) + "): refusing to use it");
  if (sb.st_mode & 022)
    throw std::runtime_error("the cluster directory " + home + " is writable by its group or others: chmod go-w " + home);
  for (const char* f : {"/state.db", "/state.db-wal", "/state.db-shm", "/dynres.yaml"}) {
    std::string p = home + f;
    if (::lstat(p.c_str(), &sb) != 0) continue;
    if (!S_ISREG(sb.st_mode) || sb.st_uid != me)
      throw std::runtime_error(p + " is not a regular file of this user (uid " + std::to_string(me) + "): refusing to use it");
    if (sb.st_mode & 022) throw std::runtime_error(p + " is writable by its group or others: chmod go-w " + p);
  }
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dynres scheduler daemon: runs the scheduling policy on every tick, submission and job end, "
               "and starts job steps.",
               "mjsched"};
  std::string home, nodes, hosts, policy, launcher;
  double tick = 0;
  bool daemon = false;
  app.add_option("--home", home, "cluster directory (default: $DYNRES_HOME)");
  app.add_option("--nodes", nodes, "register these nodes first, e.g. n[1-34]");
  app.add_option("--hosts", hosts, "real host of each node (same order) for the srun launcher; default: the node names");
  app.add_option("--policy", policy, "override scheduler.policy: fcfs|backfill|easy|fpsma|egs|minagree|perf|power");
  app.add_option("--launcher", launcher, "override launcher.type: local|srun");
  app.add_option("--tick", tick, "override scheduler.tick (seconds)");
  app.add_flag("--daemon", daemon, "detach; log to $DYNRES_HOME/mjsched.log");
  CLI11_PARSE(app, argc, argv);
  try {
    dynres::schedd::Daemon d;
    d.home = dynres::cluster_home(home);
    check_private(d.home);
    // the whole file is checked before the daemon reports that it started:
    // the scheduler's sections here, the power model whatever the policy
    d.cfg = dynres::load_config(dynres::config_path(d.home));
    (void)dynres::power::load_power_model(dynres::config_path(d.home));
    if (!policy.empty()) {
      auto p = dynres::sched::parse_policy(policy);
      if (!p)
        throw std::runtime_error("--policy: unknown policy '" + policy +
                                 "' (fcfs|backfill|easy|fpsma|egs|minagree|perf|power)");
      d.cfg.policy.policy = *p;
    }
    if (!launcher.empty()) {
      if (launcher != "local" && launcher != "srun")
        throw std::runtime_error("--launcher: unknown launcher '" + launcher + "' (local|srun)");
      d.cfg.launcher = launcher;
    }
    if (app.count("--tick")) {
      if (!(tick > 0 && tick <= 3600)) throw std::runtime_error("--tick must be in (0, 3600] seconds");
      d.cfg.tick = tick;
    }
    d.stepd_path = dynres::launch::self_dir() + "/mjstepd";
    if (::access(d.stepd_path.c_str(), X_OK) != 0)
      throw std::runtime_error("cannot find the job supervisor " + d.stepd_path);
    // The state file holds job scripts and environments: owner-only files.
    ::umask(077);
    // Lock first: a refused second daemon must not touch the state file. The
    // lock is kept across the --daemon fork.
    d.lock();
    std::vector<std::pair<std::string, std::string>> nh;
    if (!nodes.empty()) {
      auto n = dynres::expand_hostlist(nodes);
      auto h = hosts.empty() ? n : dynres::expand_hostlist(hosts);
      if (h.size() != n.size()) throw std::runtime_error("--hosts must name as many hosts as --nodes has nodes");
      for (size_t i = 0; i < n.size(); ++i) nh.push_back({n[i], h[i]});
    }
    {  // closed before any fork: an SQLite connection must not cross fork()
      dynres::State st(dynres::state_path(d.home), true);
      if (!nh.empty()) st.register_nodes(nh);
      if (st.nodes().empty()) throw std::runtime_error("the cluster has no nodes: pass --nodes (see vcluster-boot(1))");
    }
    if (daemon) {
      pid_t pid = ::fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid > 0) return 0;
      ::setsid();
      int log = ::open((d.home + "/mjsched.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      int nul = ::open("/dev/null", O_RDONLY);
      ::dup2(nul, 0);
      ::dup2(log, 1);
      ::dup2(log, 2);
      if (nul > 2) ::close(nul);
      if (log > 2) ::close(log);
    }
    return d.run();
  } catch (const std::exception& e) {
    std::cerr << "mjsched: error: " << e.what() << "\n";
    return 1;
  }
}
