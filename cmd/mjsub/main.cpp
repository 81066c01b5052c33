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
  dynres::SubmitRequest req;
  std::string home;
  bool json = false;
  // The job options (the table of lib/jobspec, getopt_long rules: unique
  // prefixes, -Xvalue, bundled flags) are parsed by dynres::parse_job_args,
  // the same table the #SBATCH directives use; CLI11 parses mjsub's own
  // options, and lists the table in --help only: adding its 200 options to
  // CLI11 costs more than the rest of a submission.
  auto describe = [&](CLI::App& a, bool table) {
    a.set_help_flag();  // -h/--help are in the table
    static const std::vector<dynres::OptionDef> none;
    for (auto& o : table ? dynres::job_options() : none) {
      std::string names;
      for (auto& n : o.names) names += (names.empty() ? "" : ",") + n;
      const char* group = o.how == dynres::Treatment::warned    ? "sbatch options without effect here (warning)"
                          : o.how == dynres::Treatment::refused ? "sbatch options refused on this cluster"
                                                                : "Job options";
      auto* opt = o.takes_value ? a.add_option(names, o.help) : a.add_flag(names, o.help);
      opt->group(group);
    }
    a.add_flag("--json", json, "print the created job as JSON");
    a.add_option("--home", home, "cluster directory (default: $DYNRES_HOME)");
    a.add_option("script", req.script_path, "job script (default or '-': standard input); arguments after it go to the script");
  };
  const char* about = "Submit a job script to the dynres scheduler. Directives come from #SBATCH and #MJ lines "
                      "of the script and from these options (options win). Every option of sbatch(1) is known: "
                      "see mjsub(1) for what dynres does with each.";
  CLI::App app{about, "mjsub"};
  describe(app, false);
  auto help = [&] {
    CLI::App full{about, "mjsub"};
    describe(full, true);
    return full.help();
  };
  // Everything after the script name is the script's (sbatch): find it,
  // skipping options and their values.
  int script_at = dynres::script_position(argc, argv, {"--home"});
  if (script_at > 0)
    for (int k = script_at + 1; k < argc; ++k) req.args.push_back(argv[k]);
  std::vector<std::string> words, rest;
  for (int k = 1; k < (script_at > 0 ? script_at : argc); ++k) words.push_back(argv[k]);
  bool parsable = false, test_only = false, wait = false;
  try {
    req.options = dynres::parse_job_args(words, {{"--home", true}, {"--json", false}}, rest);
  } catch (const dynres::SpecError& e) {
    std::cerr << "mjsub: error: " << e.what() << "\nTry \"mjsub --help\" for more information\n";
    return 1;
  }
  std::vector<std::pair<std::string, std::string>> job_opts;
  for (auto& [name, value] : req.options) {
    if (name == "--help" || name == "--usage") {
      std::cout << help();
      return 0;
    }
    if (name == "--version") {
      std::cout << "mjsub (dynres), sbatch 22.05 options\n";
      return 0;
    }
    if (name == "--parsable") parsable = true;
    else if (name == "--test-only") test_only = true;
    else job_opts.push_back({name, value});
  }
  req.options = job_opts;
  std::vector<std::string> cli_args{argv[0]};
  cli_args.insert(cli_args.end(), rest.begin(), rest.end());
  if (script_at > 0) cli_args.push_back(argv[script_at]);
  std::vector<char*> cargv;
  for (auto& a : cli_args) cargv.push_back(a.data());
  CLI11_PARSE(app, static_cast<int>(cargv.size()), cargv.data());
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
    // sbatch's warnings (options without effect here, Slurm's adjustments), unless -Q
    if (reply.contains("warnings") && reply["warnings"].is_array())
      for (auto& w : reply["warnings"])
        if (w.is_string()) std::cerr << "mjsub: warning: " << w.get<std::string>() << "\n";
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
    if (wait || reply.value("wait", false)) {  // sbatch -W (command line, #SBATCH or SBATCH_WAIT): the job's exit code
      std::cout << std::flush;
      return dynres::wait_for_job(req.home, id);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mjsub: error: " << e.what() << "\n";
    return 1;
  }
}
