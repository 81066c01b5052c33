// mjcancel — cancel pending jobs and stop running ones (mjcancel(1)).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "dynres/launch.hpp"
#include "dynres/paths.hpp"
#include "dynres/state.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Cancel dynres jobs: pending jobs are removed from the queue, running jobs get SIGTERM "
               "(SIGKILL after scheduler.kill_wait seconds).",
               "mjcancel"};
  std::string home, name, state;
  std::vector<int64_t> ids;
  bool quiet = false;
  app.add_option("--home", home, "cluster directory (default: $DYNRES_HOME)");
  app.add_option("-n,--name", name, "cancel every active job with this name");
  app.add_option("-t,--state", state, "only jobs in this state: PENDING or RUNNING")
      ->check(CLI::IsMember({"PENDING", "RUNNING"}, CLI::ignore_case));
  app.add_flag("-Q,--quiet", quiet, "no message for jobs that already ended");
  app.add_option("job_id", ids, "job ids");
  CLI11_PARSE(app, argc, argv);
  if (ids.empty() && name.empty() && state.empty()) {
    std::cerr << "mjcancel: error: no job id given (or use --name / --state)\n";
    return 1;
  }
  try {
    home = dynres::cluster_home(home);
    dynres::State st(dynres::state_path(home));
    for (auto& c : state) c = static_cast<char>(std::toupper(c));
    if (!name.empty() || (!state.empty() && ids.empty())) {
      for (auto& j : st.jobs({dynres::kPending, dynres::kRunning}))
        if ((name.empty() || j.name == name) && (state.empty() || j.state == state)) ids.push_back(j.id);
    }
    int rc = 0;
    for (auto id : ids) {
      auto j = st.job(id);
      if (j && !state.empty() && j->state != state) continue;
      switch (dynres::launch::cancel_job(st, home, id, static_cast<int64_t>(::getuid()))) {
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
          std::cerr << "mjcancel: error: job " << id << " belongs to another user\n";
          rc = 1;
          break;
      }
    }
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "mjcancel: error: " << e.what() << "\n";
    return 1;
  }
}
