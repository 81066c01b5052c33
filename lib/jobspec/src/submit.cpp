#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "dynres/hostlist.hpp"
#include "dynres/jobspec.hpp"
#include "dynres/paths.hpp"
#include "dynres/proto.hpp"

namespace dynres {

JobRecord submit_job(const SubmitRequest& req, SubmitNotes* notes) {
  State st(state_path(req.home));
  std::vector<int> tasks;
  JobRecord j = prepare_job(req, st, &tasks, notes);
  j.id = tasks.empty() ? st.submit(j) : st.submit_array(j, tasks, j.array_max).front();
  proto::notify(sched_socket(req.home), {{"op", "wake"}, {"why", "submit"}, {"job", j.id}});
  return *st.job(j.id);
}

namespace {
std::string script_label(const SubmitRequest& req) { return req.script_path.empty() ? "-" : req.script_path; }

std::string too_big(const std::string& what, size_t limit) {
  return what + " is larger than " + std::to_string(limit >> 20) + " MiB (" + std::to_string(limit) +
         " bytes; Slurm's default max_script_size)";
}

// Read at most limit + 1 bytes of a stream: a larger input is refused without being read whole.
std::string read_capped(std::istream& in, size_t limit, const std::string& what) {
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > limit) throw SpecError(too_big(what, limit));
  }
  return text;
}
}  // namespace

void gather_submission(SubmitRequest& req) {
  if (req.gathered) return;
  JobSpec cli;
  for (auto& [name, value] : req.options) apply_option(cli, name, value);
  std::string text, default_name;
  if (cli.wrap) {  // sbatch --wrap: the job is "#!/bin/sh" plus the command
    if (!req.script_path.empty())
      throw SpecError("--wrap: a job script ('" + req.script_path + "') cannot be given as well");
    if (cli.wrap->find('\0') != std::string::npos) throw SpecError("--wrap: the command contains a NUL byte");
    text = "#!/bin/sh\n" + *cli.wrap + "\n";
    if (text.size() > kMaxScriptBytes) throw SpecError(too_big("--wrap: the command", kMaxScriptBytes));
    default_name = "wrap";
  } else if (req.script_path.empty() && ::isatty(0)) {
    throw SpecError("no job script given (and standard input is a terminal): mjsub [options] SCRIPT");
  } else if (req.script_path.empty() || req.script_path == "-") {
    text = read_capped(std::cin, kMaxScriptBytes, "the job script on standard input");
    default_name = "sbatch";
  } else {
    struct stat sb;
    if (::stat(req.script_path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode))
      throw SpecError("cannot read job script '" + req.script_path + "': no such regular file");
    if (static_cast<uint64_t>(sb.st_size) > kMaxScriptBytes)
      throw SpecError(too_big("job script '" + req.script_path + "'", kMaxScriptBytes));
    std::ifstream f(req.script_path, std::ios::binary);
    if (!f) throw SpecError("cannot read job script '" + req.script_path + "': permission denied");
    text = read_capped(f, kMaxScriptBytes, "job script '" + req.script_path + "'");
    if (f.bad()) throw SpecError("cannot read job script '" + req.script_path + "': read error");
    default_name = req.script_path.substr(req.script_path.rfind('/') + 1);
  }
  req.environment.clear();
  size_t env_bytes = 0;
  for (char** e = environ; e && *e; ++e) {
    req.environment.push_back(*e);
    env_bytes += req.environment.back().size();
  }
  if (env_bytes > kMaxEnvironmentBytes || req.environment.size() > kMaxEnvironmentVars)
    throw SpecError("the environment (" + std::to_string(req.environment.size()) + " variables, " +
                    std::to_string(env_bytes) + " bytes) is larger than a job may record (" +
                    std::to_string(kMaxEnvironmentVars) + " variables, " + std::to_string(kMaxEnvironmentBytes) +
                    " bytes): use --export=NONE or --export=VAR,...");
  mode_t m = ::umask(022);
  ::umask(m);
  req.umask = static_cast<int>(m & 0777);
  req.script_text = std::move(text);
  req.default_name = std::move(default_name);
  req.gathered = true;
}

JobRecord prepare_job(const SubmitRequest& given, State& st, std::vector<int>* array_tasks, SubmitNotes* notes) {
  SubmitRequest gathered_copy;
  const SubmitRequest* rp = &given;
  if (!given.gathered) {
    gathered_copy = given;
    gather_submission(gathered_copy);
    rp = &gathered_copy;
  }
  const SubmitRequest& req = *rp;
  JobSpec cli;
  for (auto& [name, value] : req.options) apply_option(cli, name, value);
  const std::string& text = req.script_text;
  const std::string& default_name = req.default_name;
  if (text.size() > kMaxScriptBytes) throw SpecError(too_big("job script '" + script_label(req) + "'", kMaxScriptBytes));
  if (cli.wrap && !req.script_path.empty())
    throw SpecError("--wrap: a job script ('" + req.script_path + "') cannot be given as well");
  if (text.empty() && !cli.wrap) throw SpecError("job script '" + script_label(req) + "' is empty");
  if (text.find('\0') != std::string::npos) throw SpecError("job script '" + req.script_path + "' is a binary file");
  if (req.environment.size() > kMaxEnvironmentVars) throw SpecError("too many environment variables");
  std::map<std::string, std::string> envmap;  // the submitter's environment, first definition wins (getenv)
  {
    size_t bytes = 0;
    for (auto& kv : req.environment) {
      bytes += kv.size();
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) continue;
      envmap.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
    if (bytes > kMaxEnvironmentBytes) throw SpecError("the environment is larger than a job may record");
  }

  JobSpec script_spec;
  if (!cli.wrap) apply_directives(script_spec, parse_directives(text));
  JobSpec env_spec;  // SBATCH_* input variables: over the script, under the command line
  for (auto& [var, opt] : sbatch_input_variables()) {
    auto v = envmap.find(var);
    if (v == envmap.end() || opt.empty()) continue;
    try {
      apply_option(env_spec, opt, v->second);
    } catch (const SpecError& e) {
      throw SpecError(var + ": " + e.what());
    }
  }
  JobSpec spec = merge_specs(merge_specs(script_spec, env_spec), cli);  // command line wins, field by field

  std::vector<std::string> warnings = spec.warnings;
  JobRecord j = resolve_job(spec, st.usable_node_count(), text, default_name, req.cwd, st.node_cpus(), st.node_mem_mb(),
                            st.node_gpus(), &warnings);
  if (notes) {
    notes->wait = spec.wait;
    if (!spec.quiet) notes->warnings = warnings;
  }
  if (!j.req_nodelist.empty() || !j.exc_nodelist.empty()) {  // -w/-x name nodes of this cluster
    std::set<std::string> known;
    for (auto& n : st.nodes()) known.insert(n.name);
    for (auto [list, opt] : {std::pair{&j.req_nodelist, "-w/--nodelist"}, std::pair{&j.exc_nodelist, "-x/--exclude"}})
      if (!list->empty())
        for (auto& n : expand_hostlist(*list))
          if (!known.count(n)) throw SpecError(std::string(opt) + ": no node '" + n + "' in this cluster");
  }
  if (!j.dependency.empty())
    for (auto& d : parse_dependency(j.dependency))
      for (auto id : d.jobs)
        if (!st.job(id)) throw SpecError("--dependency: job " + std::to_string(id) + " does not exist");
  if (spec.export_env.value_or(true) || !spec.export_vars.empty()) {
    // sbatch --export=ALL: the job runs in the submitter's environment;
    // --export=VAR,...: only these variables (plus ALL when listed)
    nlohmann::json env = nlohmann::json::object();
    for (auto& [name, value] : envmap) {
      bool listed = spec.export_env.value_or(true);
      for (auto& w : spec.export_vars)
        if (w == name) listed = true;
      if (listed) env[name] = value;
    }
    for (auto& w : spec.export_vars)
      if (w.find('=') != std::string::npos) env[w.substr(0, w.find('='))] = w.substr(w.find('=') + 1);
    // variables that are not valid UTF-8 get U+FFFD instead of failing the submission
    j.env = env.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  if (!req.args.empty()) j.args = nlohmann::json(req.args).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  j.submit_time = now_seconds();
  if (array_tasks) *array_tasks = spec.array_tasks;
  j.array_max = spec.array_max;
  j.gid = static_cast<int64_t>(::getgid());
  j.umask = req.umask & 0777;
  return j;
}

const std::vector<std::pair<std::string, std::string>>& sbatch_input_variables() {
  static const std::vector<std::pair<std::string, std::string>> v = {
      {"SBATCH_JOB_NAME", "--job-name"}, {"SBATCH_TIMELIMIT", "--time"}, {"SBATCH_OUTPUT", "--output"},
      {"SBATCH_ERROR", "--error"},       {"SBATCH_EXPORT", "--export"},  {"SBATCH_ACCOUNT", ""},
      {"SBATCH_PARTITION", ""},          {"SBATCH_QOS", ""},             {"SBATCH_MEM_PER_NODE", "--mem"},
      {"SBATCH_MEM_PER_CPU", "--mem-per-cpu"}, {"SBATCH_MEM_PER_GPU", "--mem-per-gpu"}, {"SBATCH_GRES", "--gres"},
      {"SBATCH_GPUS", "--gpus"},         {"SBATCH_EXCLUSIVE", "--exclusive"}};
  return v;
}

int script_position(int argc, char** argv, const std::vector<std::string>& extra_valued) {
  std::set<std::string> valued(extra_valued.begin(), extra_valued.end());
  auto takes_value = [&](const std::string& name) {
    if (valued.count(name)) return true;
    try {
      return find_job_option(name).takes_value;
    } catch (const SpecError&) {
      return false;  // unknown or ambiguous: the option parser says so
    }
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") return i + 1 < argc ? i + 1 : 0;
    if (a == ":") continue;  // a heterogeneous job separator: the option parser refuses it
    if (a.size() > 1 && a[0] == '-') {
      if (a.rfind("--", 0) == 0 ? a.find('=') == std::string::npos && takes_value(a) : a.size() == 2 && takes_value(a))
        ++i;  // its value
      continue;
    }
    return i;  // the script (or "-")
  }
  return 0;
}

int wait_for_job(const std::string& home, int64_t id, double poll_s) {
  State st(state_path(home));
  for (;;) {
    auto j = st.job(id);
    if (!j) throw DbError("job " + std::to_string(id) + " vanished from the state file");
    if (is_final_state(j->state)) return j->state == kCompleted ? 0 : (j->exit_code && *j->exit_code ? *j->exit_code : 1);
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
}

nlohmann::json job_to_json(const JobRecord& j) {
  nlohmann::json o = {{"job_id", j.id},
                      {"name", j.name},
                      {"uid", j.uid},
                      {"state", j.state},
                      {"reason", j.reason},
                      {"kind", j.kind},
                      {"nodes_requested", j.req_nodes},
                      {"min_nodes", j.min_nodes},
                      {"max_nodes", j.max_nodes},
                      {"node_constraint", j.constraint},
                      {"time_limit_s", j.time_limit},
                      {"num_nodes", j.num_nodes},
                      {"nodelist", j.nodelist},
                      {"submit_time", j.submit_time},
                      {"workdir", j.workdir},
                      {"submit_dir", j.submit_dir},
                      {"stdout", j.stdout_path},
                      {"stderr", j.stderr_path}};
  o["start_time"] = j.start_time ? nlohmann::json(*j.start_time) : nlohmann::json(nullptr);
  o["end_time"] = j.end_time ? nlohmann::json(*j.end_time) : nlohmann::json(nullptr);
  o["exit_code"] = j.exit_code ? nlohmann::json(*j.exit_code) : nlohmann::json(nullptr);
  o["min_power_w"] = j.min_power ? nlohmann::json(*j.min_power) : nlohmann::json(nullptr);
  o["max_power_w"] = j.max_power ? nlohmann::json(*j.max_power) : nlohmann::json(nullptr);
  o["held"] = j.held;
  o["dependency"] = j.dependency;
  o["req_nodelist"] = j.req_nodelist;  // sbatch -w
  o["exc_nodelist"] = j.exc_nodelist;  // sbatch -x
  o["requeue"] = j.requeue;            // --requeue / --no-requeue
  o["restarts"] = j.restarts;          // requeued after node failures
  o["lost_nodes"] = j.node_fail;       // nodes a running job lost ('' = none)
  o["array_job_id"] = j.array_job_id ? nlohmann::json(*j.array_job_id) : nlohmann::json(nullptr);
  o["array_task_id"] = j.array_task_id ? nlohmann::json(*j.array_task_id) : nlohmann::json(nullptr);
  // tasks: as given, else --ntasks-per-node (default 1) on the nodes it holds; a pending job with a node
  // range counts its fewest nodes (as Slurm shows a pending job)
  o["ntasks"] = j.ntasks ? j.ntasks
                         : std::max(1, j.ntasks_per_node) *
                               (j.num_nodes ? j.num_nodes : j.kind == "rigid" ? j.req_nodes : j.min_nodes);
  o["ntasks_per_node"] = j.ntasks_per_node ? nlohmann::json(j.ntasks_per_node) : nlohmann::json(nullptr);
  o["cpus_per_task"] = j.cpus_per_task;
  o["begin_time"] = j.begin_time ? nlohmann::json(*j.begin_time) : nlohmann::json(nullptr);
  o["mem_per_node_mb"] = j.mem_per_node >= 0 ? nlohmann::json(j.mem_per_node) : nlohmann::json(nullptr);
  o["mem_per_cpu_mb"] = j.mem_per_cpu > 0 ? nlohmann::json(j.mem_per_cpu) : nlohmann::json(nullptr);
  o["gpus_per_node"] = j.gpus_per_node;
  o["array_max"] = j.array_max;
  return o;
}

}  // namespace dynres
