// mjcancel — cancel pending jobs and stop or signal running ones (mjcancel(1)).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstring>
#include <iostream>

#include "dynres/jobsel.hpp"
#include "dynres/launch.hpp"
#include "dynres/paths.hpp"
#include "dynres/state.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Cancel dynres jobs: pending jobs are removed from the queue, running jobs get SIGTERM "
               "(SIGKILL after scheduler.kill_wait seconds); with -s, running jobs get that signal only.",
               "mjcancel"};
  std::string home, names, states, users, signal;
  std::vector<std::string> id_args;
  bool quiet = false, me = false;
  app.add_option("--home", home, "cluster directory (default: $DYNRES_HOME)");
  app.add_option("-n,--name,--jobname", names, "only jobs with these names (comma separated)");
  app.add_option("-t,--state", states, "only jobs in these states: PENDING|PD, RUNNING|R (comma separated)");
  app.add_option("-u,--user", users, "only jobs of these users (names or uids, comma separated)");
  app.add_flag("--me", me, "only my jobs");
  app.add_option("-s,--signal", signal, "send this signal (TERM, KILL, USR1, 10 ...) to running jobs instead of cancelling");
  app.add_flag("-Q,--quiet", quiet, "no message for jobs that already ended");
  app.add_option("job_id", id_args, "job ids (also comma separated lists)");
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<std::string> id_lists = id_args;
    dynres::JobFilter f;
    if (!names.empty()) {
      std::stringstream ss(names);
      for (std::string n; std::getline(ss, n, ',');)
        if (!n.empty()) f.names.insert(n);
    }
    if (!states.empty())
      for (auto& s : dynres::parse_state_list(states)) {
        if (s != dynres::kPending && s != dynres::kRunning)
          throw std::invalid_argument("--state: only PENDING or RUNNING jobs can be cancelled, not " + s);
        f.states.insert(s);
      }
    if (!users.empty())
      for (auto u : dynres::parse_user_list(users)) f.uids.insert(u);
    if (me) f.uids.insert(static_cast<int64_t>(::getuid()));
    int sig = signal.empty() ? 0 : dynres::parse_signal(signal);
    if (id_lists.empty() && f.names.empty() && f.states.empty() && f.uids.empty()) {
      std::cerr << "mjcancel: error: no job id given (or use --name, --state, --user, --me)\n";
      return 1;
    }
    home = dynres::cluster_home(home);
    dynres::State st(dynres::state_path(home));
    std::vector<int64_t> ids;  // 12, 12_3, 12_[1-4]: an array's tasks resolved to their job ids
    for (auto& a : id_lists)
      for (auto id : dynres::resolve_job_refs(st, a)) ids.push_back(id);
    const int64_t uid = static_cast<int64_t>(::getuid());
    std::vector<int64_t> targets;
    if (ids.empty()) {  // every active job matching the filter, as scancel
      if (f.states.empty()) f.states = sig ? std::set<std::string>{dynres::kRunning}  // only running jobs take signals
                                           : std::set<std::string>{dynres::kPending, dynres::kRunning};
      for (auto& j : dynres::select_jobs(st, f)) targets.push_back(j.id);
    } else {
      for (auto id : ids) {
        auto j = st.job(id);
        if (j && !(f.names.empty() && f.uids.empty() && f.states.empty()) && !f.matches(*j)) continue;
        targets.push_back(id);
      }
    }
    int rc = 0;
    for (auto id : targets) {
      auto denied = [&] {
        // as scancel: "Kill job error on job id N: Access/permission denied", exit 1
        std::cerr << "mjcancel: error: Kill job error on job id " << id << ": Access/permission denied (job of user "
                  << dynres::user_name(st.job(id)->uid) << ")\n";
        rc = 1;
      };
      if (sig) {
        switch (dynres::launch::signal_job(st, id, uid, sig)) {
          case dynres::launch::SignalResult::signalled:
            break;
          case dynres::launch::SignalResult::not_running:
            std::cerr << "mjcancel: error: job " << id << " is not running (" << st.job(id)->state
                      << "): not signalled\n";
            rc = 1;
            break;
          case dynres::launch::SignalResult::not_found:
            std::cerr << "mjcancel: error: invalid job id " << id << "\n";
            rc = 1;
            break;
          case dynres::launch::SignalResult::not_owner:
            denied();
            break;
        }
        continue;
      }
      switch (dynres::launch::cancel_job(st, home, id, uid)) {
        case dynres::launch::CancelResult::cancelled_pending:
        case dynres::launch::CancelResult::signalled_running:
          break;
        case dynres::launch::CancelResult::already_finished:
          if (!quiet) std::cerr << "mjcancel: job " << id << " has already ended (" << st.job(id)->state << ")\n";
          break;
        case dynres::launch::CancelResult::not_found:
          std::cerr << "mjcancel: error: invalid job id " << id << "\n";
          rc = 1;
          break;
        case dynres::launch::CancelResult::not_owner:
          denied();
          break;
      }
    }
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "mjcancel: error: " << e.what() << "\n";
    return 1;
  }
}
