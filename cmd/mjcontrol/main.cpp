// mjcontrol — hold, release and show jobs, like scontrol (mjcontrol(1)).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "dynres/jobsel.hpp"
#include "dynres/jobspec.hpp"
#include "dynres/paths.hpp"
#include "dynres/views.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Hold, release or show dynres jobs (like scontrol).", "mjcontrol"};
  std::string home, hold_ids, release_ids, show_what, show_id;
  bool json = false;
  app.add_option("--home", home, "cluster directory (default: $DYNRES_HOME)");
  app.add_flag("--json", json, "show: print JSON");
  auto* hold = app.add_subcommand("hold", "hold pending jobs: they are not scheduled until released");
  hold->add_option("job_ids", hold_ids, "job ids, comma separated")->required();
  auto* release = app.add_subcommand("release", "release held jobs");
  release->add_option("job_ids", release_ids, "job ids, comma separated")->required();
  auto* show = app.add_subcommand("show", "show jobs in detail: show job [ID]");
  show->add_option("entity", show_what, "what to show: job")->required()->check(CLI::IsMember({"job", "jobs"}));
  show->add_option("job_id", show_id, "job id (default: every pending or running job)");
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  try {
    home = dynres::cluster_home(home);
    dynres::State st(dynres::state_path(home));
    if (show->parsed()) {
      std::vector<dynres::JobRecord> jobs;
      if (!show_id.empty()) {
        for (auto id : dynres::parse_id_list(show_id)) {
          auto j = st.job(id);
          if (!j) throw std::invalid_argument("invalid job id " + std::to_string(id));
          jobs.push_back(*j);
        }
      } else {
        jobs = dynres::select_jobs(st, {});
      }
      double now = dynres::now_seconds();
      for (auto& j : jobs) std::cout << (json ? dynres::job_to_json(j).dump(2) + "\n" : dynres::render_detail(j, now) + "\n");
      return 0;
    }
    const bool h = hold->parsed();
    int rc = 0;
    for (auto id : dynres::parse_id_list(h ? hold_ids : release_ids)) {
      switch (dynres::hold_job(st, home, id, static_cast<int64_t>(::getuid()), h)) {
        case dynres::HoldResult::done:
          break;
        case dynres::HoldResult::not_pending:
          std::cerr << "mjcontrol: error: job " << id << " is not pending (" << st.job(id)->state
                    << "): not " << (h ? "held" : "released") << "\n";
          rc = 1;
          break;
        case dynres::HoldResult::not_found:
          std::cerr << "mjcontrol: error: invalid job id " << id << "\n";
          rc = 1;
          break;
        case dynres::HoldResult::not_owner:
          std::cerr << "mjcontrol: error: job " << id << ": Access/permission denied (job of user "
                    << dynres::user_name(st.job(id)->uid) << ")\n";
          rc = 1;
          break;
      }
    }
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "mjcontrol: error: " << e.what() << "\n";
    return 1;
  }
}
