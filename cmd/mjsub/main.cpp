// mjsub — submit a batch job script to a dynres virtual cluster (mjsub(1)).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <ctime>
#include <iostream>

#include "dynres/config.hpp"
#include "dynres/jobspec.hpp"
#include "dynres/requests.hpp"
#include "dynres/schedd.hpp"
#include "dynres/paths.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Submit a job script to the dynres scheduler. Directives come from #SBATCH and #MJ lines "
               "of the script and from these options (options win).",
               "mjsub"};
  dynres::SubmitRequest req;
  std::string home;
  bool parsable = false, json = false, wait = false, test_only = false;
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
  app.add_flag("--test-only", test_only,
               "do not submit: check the job and print when it would start (the policy replayed on time limits)");
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
    dynres::gather_submission(req);  // script, environment, umask: what only the submitter can read
    namespace sd = dynres::schedd;
    nlohmann::json r = {{"op", "submit"},
                        {"script", sd::encode_bytes(req.script_text)},
                        {"script_path", sd::encode_bytes(req.script_path)},
                        {"default_name", sd::encode_bytes(req.default_name)},
                        {"cwd", sd::encode_bytes(req.cwd)},
                        {"umask", req.umask},
                        {"test_only", test_only}};
    auto opts = nlohmann::json::array(), env = nlohmann::json::array(), args = nlohmann::json::array();
    for (auto& [n, v] : req.options) opts.push_back({n, sd::encode_bytes(v)});
    for (auto& e : req.environment) env.push_back(sd::encode_bytes(e));
    for (auto& a : req.args) args.push_back(sd::encode_bytes(a));
    r["options"] = opts;
    r["environment"] = env;
    r["args"] = args;
    auto reply = sd::call_scheduler(req.home, r);
    if (reply.contains("error") || !reply.value("err", std::string()).empty() || reply.value("rc", 1) != 0)
      return sd::print_reply("mjsub", reply);
    if (test_only) {
      if (!reply.contains("start") || !reply["start"].is_number()) {
        std::cout << "mjsub: Job could not start with the current queue (held, or waiting for a dependency)"
                  << "; not submitted\n";
        return 0;
      }
      time_t t = static_cast<time_t>(reply["start"].get<double>());
      char b[32];
      std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%S", std::localtime(&t));
      std::cout << "mjsub: Job to start at " << b << " using " << reply.value("nodes", 0) << " node(s) (policy "
                << reply.value("policy", std::string("?")) << "); not submitted\n";
      return 0;
    }
    const auto& job = reply["job"];
    const int64_t id = job.value("job_id", int64_t{0});
    if (json)  // names and paths may hold any bytes: replaced, never an error after the job is recorded
      std::cout << job.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else if (parsable)
      std::cout << id << "\n";
    else
      std::cout << "Submitted batch job " << id << "\n";
    if (wait) {  // sbatch -W: the job's exit code
      std::cout << std::flush;
      return dynres::wait_for_job(req.home, id);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mjsub: error: " << e.what() << "\n";
    return 1;
  }
}
