// mjsub — submit a batch job script to a dynres virtual cluster (mjsub(1)).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "dynres/jobspec.hpp"
#include "dynres/paths.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Submit a job script to the dynres scheduler. Directives come from #SBATCH and #MJ lines "
               "of the script and from these options (options win).",
               "mjsub"};
  dynres::SubmitRequest req;
  std::string home;
  bool parsable = false, json = false, wait = false;
  for (auto& o : dynres::job_options()) {
    std::string names;
    for (auto& n : o.names) names += (names.empty() ? "" : ",") + n;
    std::string canon = o.names.back();
    if (canon == "--wait") {  // handled here, not a job field
      app.add_flag(names, wait, o.help);
      continue;
    }
    if (o.takes_value)
      app.add_option_function<std::string>(names, [&req, canon](const std::string& v) { req.options.push_back({canon, v}); },
                                           o.help)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    else
      app.add_flag_callback(names, [&req, canon] { req.options.push_back({canon, ""}); }, o.help);
  }
  for (auto& o : dynres::ignored_sbatch_options()) {
    std::string names;
    for (auto& n : o.names) names += (names.empty() ? "" : ",") + n;
    auto* opt = o.takes_value ? app.add_option(names, o.help) : app.add_flag(names, o.help);
    opt->group("sbatch compatibility (no effect)");
  }
  app.add_flag("--parsable", parsable, "print only the job id");
  app.add_flag("--json", json, "print the created job as JSON");
  app.add_option("--home", home, "cluster directory (default: $DYNRES_HOME)");
  app.add_option("script", req.script_path, "job script (default or '-': standard input); arguments after it go to the script");
  // Everything after the script name is the script's (sbatch): find it,
  // skipping options and their values, and give CLI11 only what precedes.
  int script_at = dynres::script_position(argc, argv, {"--home"});
  if (script_at > 0)
    for (int k = script_at + 1; k < argc; ++k) req.args.push_back(argv[k]);
  CLI11_PARSE(app, script_at > 0 ? script_at + 1 : argc, argv);
  if (const char* w = std::getenv("SBATCH_WAIT"); w && *w) wait = true;
  try {
    req.home = dynres::cluster_home(home);
    char cwd[4096];
    req.cwd = ::getcwd(cwd, sizeof cwd) ? cwd : "/";
    auto job = dynres::submit_job(req);
    if (json)
      std::cout << dynres::job_to_json(job).dump(2) << "\n";
    else if (parsable)
      std::cout << job.id << "\n";
    else
      std::cout << "Submitted batch job " << job.id << "\n";
    if (wait) {  // sbatch -W: the job's exit code
      std::cout << std::flush;
      return dynres::wait_for_job(req.home, job.id);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mjsub: error: " << e.what() << "\n";
    return 1;
  }
}
