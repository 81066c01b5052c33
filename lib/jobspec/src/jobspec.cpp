#include "dynres/jobspec.hpp"

#include "dynres/hostlist.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <cmath>
#include <set>
#include <sstream>
#include <tuple>

#include "dynres/sched.hpp"
#include "dynres/paths.hpp"
#include "dynres/slurmtime.hpp"

namespace dynres {

const std::vector<OptionDef>& job_options() {
  static const std::vector<OptionDef> opts = {
      {{"-J", "--job-name"}, true, "job name (default: script file name)"},
      {{"-N", "--nodes"}, true, "node count N, or a range MIN-MAX (makes the job moldable)"},
      {{"-t", "--time"}, true, "time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, UNLIMITED or 0 (no limit)"},
      {{"-o", "--output"}, true, "standard output file (%j = job id, %x = job name); default mj-%j.out"},
      {{"-e", "--error"}, true, "standard error file (default: with the output)"},
      {{"-D", "--chdir"}, true, "working directory of the job"},
      {{"--min-nodes", "--min-nodes-invasic"}, true, "fewest nodes a moldable/malleable job accepts"},
      {{"--max-nodes", "--max-nodes-invasic"}, true, "most nodes a moldable/malleable job accepts"},
      {{"--node-constraint", "--node-constraints"}, true, "node counts allowed: none|even|odd|pof2|square|cube"},
      {{"--min-power"}, true, "lowest power per node the job draws, watts"},
      {{"--max-power"}, true, "highest power per node the job draws, watts"},
      {{"--rigid"}, false, "run on exactly --nodes nodes even when a range is known"},
      {{"--malleable"}, false,
       "the job may grow and shrink while it runs, within --min-nodes/--max-nodes (mj(3); default range 1 to the "
       "cluster)"},
      {{"--export"}, true,
       "ALL (default): the submitter's environment; NONE: the scheduler's; [ALL,]VAR[=value],...: "
       "only (or also) these variables"},
      {{"-d", "--dependency"}, true,
       "start after other jobs: after|afterany|afterok|afternotok:ID[:ID...][,...] or singleton"},
      {{"-a", "--array"}, true, "job array: indices 1-5, 1,3,7, 0-15:4, with %N at most N running at once"},
      {{"-W", "--wait"}, false, "wait until the job ends; exit with its exit code (command line only)"},
      {{"--hold"}, false, "submit the job held: it waits until 'mjcontrol release ID'"},
      {{"--requeue"}, false, "after a node failure the job is requeued (the default, as Slurm's JobRequeue=1)"},
      {{"--no-requeue"}, false, "after a node failure the job ends NODE_FAIL instead of being requeued"},
      {{"--begin"}, true, "start no earlier than: now+N[s|m|h|d], HH:MM[:SS] or YYYY-MM-DD[THH:MM[:SS]]"},
      {{"-w", "--nodelist"}, true, "nodes the job must get, e.g. n[1-2] (more are added up to its node count)"},
      {{"-x", "--exclude"}, true, "nodes the job must not get, e.g. n[7-8]"},
      {{"-n", "--ntasks"}, true, "number of tasks; without -N the node count follows from the nodes' CPUs"},
      {{"--ntasks-per-node"}, true, "tasks per node (at most the node's CPUs / --cpus-per-task)"},
      {{"-c", "--cpus-per-task"}, true, "CPUs per task (default 1)"},
      {{"--wrap"}, true, "run this shell command as the job (/bin/sh -c; no script file, command line only)"},
  };
  return opts;
}

const std::vector<OptionDef>& ignored_sbatch_options() {
  static const std::vector<OptionDef> opts = {
      {{"-p", "--partition"}, true, "accepted for sbatch compatibility; no effect"},
      {{"-A", "--account"}, true, "accepted for sbatch compatibility; no effect"},
      {{"-q", "--qos"}, true, "accepted for sbatch compatibility; no effect"},
      {{"--mem"}, true, "accepted for sbatch compatibility; no effect"},
      {{"--mail-type"}, true, "accepted for sbatch compatibility; no effect"},
      {{"--mail-user"}, true, "accepted for sbatch compatibility; no effect"},
      {{"--exclusive"}, false, "accepted for sbatch compatibility; no effect"},
      {{"--get-user-env"}, false, "accepted for sbatch compatibility; no effect"},
  };
  return opts;
}

namespace {

const std::set<std::string> kIgnored = [] {
  std::set<std::string> s;
  for (auto& o : ignored_sbatch_options())
    for (auto& n : o.names) s.insert(n);
  return s;
}();

int parse_count(const std::string& opt, const std::string& v) {
  if (v.empty() || v.size() > 7) throw SpecError(opt + ": invalid node count '" + v + "'");
  for (char c : v)
    if (!std::isdigit(static_cast<unsigned char>(c))) throw SpecError(opt + ": invalid node count '" + v + "'");
  int n = std::stoi(v);
  if (n < 1) throw SpecError(opt + ": node count must be at least 1, got '" + v + "'");
  return n;
}

int parse_positive(const std::string& opt, const std::string& v, const std::string& what) {
  if (v.empty() || v.size() > 7 || !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); }) ||
      std::stoi(v) < 1)
    throw SpecError(opt + ": invalid " + what + " '" + v + "' (a whole number >= 1)");
  return std::stoi(v);
}

double parse_watts(const std::string& opt, const std::string& v) {
  size_t pos = 0;
  double w;
  try {
    w = std::stod(v, &pos);
  } catch (...) {
    throw SpecError(opt + ": '" + v + "' is not a number of watts");
  }
  if (pos != v.size() || !std::isfinite(w)) throw SpecError(opt + ": '" + v + "' is not a number of watts");
  if (w < 0) throw SpecError(opt + ": power must not be negative, got '" + v + "'");
  return w;
}

const OptionDef* find_option(const std::string& name) {
  for (auto& o : job_options())
    for (auto& n : o.names)
      if (n == name) return &o;
  return nullptr;
}

std::vector<std::string> shell_words(const std::string& s, int line) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
      else cur += c;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
      continue;
    }
    if (c == '#') break;  // trailing comment
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) out.push_back(cur), cur.clear(), in_word = false;
      continue;
    }
    cur += c;
    in_word = true;
  }
  if (quote) throw SpecError("line " + std::to_string(line) + ": unterminated quote");
  if (in_word) out.push_back(cur);
  return out;
}

}  // namespace

void apply_option(JobSpec& s, const std::string& name, const std::string& v) {
  if (kIgnored.count(name)) return;
  const OptionDef* o = find_option(name);
  if (!o) throw SpecError("unknown option '" + name + "'");
  const std::string& key = o->names.back();  // canonical long name
  if (o->takes_value && v.empty()) throw SpecError(key + ": needs a value");
  if (key == "--job-name") {
    s.name = v;
  } else if (key == "--nodes") {
    // -N is one field: a later -N replaces an earlier -N entirely
    auto dash = v.find('-');
    if (dash != std::string::npos) {
      int lo = parse_count(key, v.substr(0, dash)), hi = parse_count(key, v.substr(dash + 1));
      s.min_nodes = lo, s.max_nodes = hi, s.nodes.reset(), s.range_from_N = true;
    } else {
      int n = parse_count(key, v);
      if (s.range_from_N) s.min_nodes.reset(), s.max_nodes.reset(), s.range_from_N = false;
      s.nodes = n;
    }
    s.nodes_given = true;
  } else if (key == "--time") {
    try {
      s.time_limit = parse_time_limit(v);
    } catch (const std::invalid_argument& e) {
      throw SpecError(key + ": " + e.what());
    }
    if (*s.time_limit == 0) s.time_limit = kUnlimited;  // as Slurm: -t 0 is no limit
  } else if (key == "--output") {
    s.output = v;
  } else if (key == "--error") {
    s.error = v;
  } else if (key == "--chdir") {
    s.chdir = v;
  } else if (key == "--min-nodes-invasic") {
    s.min_nodes = parse_count("--min-nodes", v);
    s.range_from_N = false;
  } else if (key == "--max-nodes-invasic") {
    s.max_nodes = parse_count("--max-nodes", v);
    s.range_from_N = false;
  } else if (key == "--node-constraints") {
    if (!sched::parse_constraint(v))
      throw SpecError("--node-constraint: unknown constraint '" + v + "' (none|even|odd|pof2|square|cube)");
    s.constraint = v;
  } else if (key == "--min-power") {
    s.min_power = parse_watts(key, v);
  } else if (key == "--max-power") {
    s.max_power = parse_watts(key, v);
  } else if (key == "--export") {
    std::string u = v;
    for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    s.export_vars.clear();
    if (u == "ALL" || u == "NONE") {
      s.export_env = u == "ALL";
    } else {  // [ALL,]VAR[=value],...
      std::stringstream ss(v);
      bool all = false;
      for (std::string w; std::getline(ss, w, ',');) {
        std::string uw = w;
        for (auto& c : uw) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (uw == "ALL") {
          all = true;
          continue;
        }
        std::string name = w.substr(0, w.find('='));
        bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                  std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
        if (!ok) throw SpecError("--export: invalid variable name '" + name + "' in '" + v + "'");
        if (uw == "NONE") throw SpecError("--export: NONE cannot be combined with variables");
        s.export_vars.push_back(w);
      }
      s.export_env = all;
    }
  } else if (key == "--wrap") {
    s.wrap = v;
  } else if (key == "--array") {
    std::tie(s.array_tasks, s.array_max) = parse_array(v);
  } else if (key == "--wait") {
    if (!v.empty()) throw SpecError("--wait takes no value");
  } else if (key == "--ntasks") {
    s.ntasks = parse_positive(key, v, "task count");
  } else if (key == "--ntasks-per-node") {
    s.ntasks_per_node = parse_positive(key, v, "task count");
  } else if (key == "--cpus-per-task") {
    s.cpus_per_task = parse_positive(key, v, "CPU count");
  } else if (key == "--dependency") {
    s.dependency = format_dependency(parse_dependency(v));
  } else if (key == "--hold") {
    if (!v.empty()) throw SpecError("--hold takes no value");
    s.hold = true;
  } else if (key == "--requeue" || key == "--no-requeue") {
    if (!v.empty()) throw SpecError(key + " takes no value");
    s.requeue = key == "--requeue";
  } else if (key == "--nodelist" || key == "--exclude") {
    const std::string opt = key == "--nodelist" ? "-w/--nodelist" : "-x/--exclude";
    std::vector<std::string> names;
    try {
      names = expand_hostlist(v);
    } catch (const std::exception& e) {
      throw SpecError(opt + ": bad node list '" + v + "': " + e.what());
    }
    if (names.empty()) throw SpecError(opt + ": empty node list");
    if (names.size() > 100000) throw SpecError(opt + ": more than 100000 nodes");
    std::sort(names.begin(), names.end());
    if (std::adjacent_find(names.begin(), names.end()) != names.end())
      throw SpecError(opt + ": a node is named twice in '" + v + "'");
    (key == "--nodelist" ? s.nodelist : s.exclude) = compress_hostlist(names);
  } else if (key == "--begin") {
    s.begin = parse_begin_time(v, now_seconds());
  } else if (key == "--rigid") {
    if (!v.empty()) throw SpecError("--rigid takes no value");
    s.rigid = true;
  } else if (key == "--malleable") {
    if (!v.empty()) throw SpecError("--malleable takes no value");
    s.malleable = true;
  }
}

std::vector<Directive> parse_directives(const std::string& script) {
  std::vector<Directive> out;
  std::istringstream in(script);
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    size_t i = 0;
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i == line.size()) continue;          // blank
    if (line[i] != '#') break;               // first command ends the directives
    std::string rest = line.substr(i);
    std::string body;
    if (rest.rfind("#SBATCH", 0) == 0) body = rest.substr(7);
    else if (rest.rfind("#MJ", 0) == 0) body = rest.substr(3);
    else continue;                            // ordinary comment / shebang
    if (!body.empty() && !std::isspace(static_cast<unsigned char>(body[0]))) continue;  // e.g. #SBATCHX
    auto words = shell_words(body, no);
    for (size_t k = 0; k < words.size(); ++k) {
      const std::string& w = words[k];
      Directive d{no, line, "", ""};
      if (w.rfind("--", 0) == 0) {
        auto eq = w.find('=');
        d.name = w.substr(0, eq);
        if (eq != std::string::npos) d.value = w.substr(eq + 1);
      } else if (w.size() >= 2 && w[0] == '-') {
        d.name = w.substr(0, 2);
        d.value = w.substr(2);
      } else {
        throw SpecError("line " + std::to_string(no) + ": '" + line + "': expected an option, got '" + w + "'");
      }
      const OptionDef* o = find_option(d.name);
      if (!o)
        for (auto& ig : ignored_sbatch_options())
          for (auto& n : ig.names)
            if (n == d.name) o = &ig;
      bool takes = o && o->takes_value;
      if (takes && d.value.empty() && w.find('=') == std::string::npos) {
        if (k + 1 >= words.size())
          throw SpecError("line " + std::to_string(no) + ": '" + line + "': " + d.name + " needs a value");
        d.value = words[++k];
      }
      out.push_back(d);
    }
  }
  return out;
}

std::pair<std::vector<int>, int> parse_array(const std::string& v) {
  auto bad = [&](const std::string& why) { return SpecError("--array: " + why + " in '" + v + "'"); };
  auto number = [&](const std::string& w) {
    if (w.empty() || w.size() > 7 || !std::all_of(w.begin(), w.end(), [](unsigned char c) { return std::isdigit(c); }))
      throw bad("invalid number '" + w + "'");
    int n = std::stoi(w);
    if (n > 1000000) throw bad("index " + w + " above 1000000");
    return n;
  };
  std::string body = v;
  int max = 0;
  if (auto pct = v.find('%'); pct != std::string::npos) {
    body = v.substr(0, pct);
    max = number(v.substr(pct + 1));
    if (max < 1) throw bad("%0 would never run a task");
  }
  std::set<int> idx;
  std::stringstream ss(body);
  for (std::string part; std::getline(ss, part, ',');) {
    int step = 1;
    if (auto colon = part.find(':'); colon != std::string::npos) {
      step = number(part.substr(colon + 1));
      if (step < 1) throw bad("step 0");
      part = part.substr(0, colon);
    }
    auto dash = part.find('-');
    int lo = number(part.substr(0, dash)), hi = dash == std::string::npos ? lo : number(part.substr(dash + 1));
    if (hi < lo) throw bad("range " + part + " goes backwards");
    for (int k = lo; k <= hi; k += step) {
      idx.insert(k);
      if (idx.size() > 10000) throw bad("more than 10000 tasks");
    }
  }
  if (idx.empty()) throw bad("no index");
  return {std::vector<int>(idx.begin(), idx.end()), max};
}

std::vector<Dependency> parse_dependency(const std::string& v) {
  if (v.find('?') != std::string::npos)
    throw SpecError("--dependency: '?' (any of) is not supported, only ',' (all of): '" + v + "'");
  std::vector<Dependency> out;
  std::stringstream ss(v);
  for (std::string part; std::getline(ss, part, ',');) {
    if (part.empty()) throw SpecError("--dependency: empty condition in '" + v + "'");
    if (part == "singleton") {
      out.push_back({"singleton", {}});
      continue;
    }
    auto colon = part.find(':');
    std::string type = part.substr(0, colon);
    if (type != "after" && type != "afterany" && type != "afterok" && type != "afternotok")
      throw SpecError("--dependency: unknown type '" + type + "' (after, afterany, afterok, afternotok, singleton)");
    if (colon == std::string::npos) throw SpecError("--dependency: '" + part + "' names no job id");
    Dependency d{type, {}};
    std::stringstream ids(part.substr(colon + 1));
    for (std::string id; std::getline(ids, id, ':');) {
      if (id.empty() || id.size() > 15 || !std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c); }) ||
          std::stoll(id) < 1)
        throw SpecError("--dependency: invalid job id '" + id + "' in '" + part + "'");
      d.jobs.push_back(std::stoll(id));
    }
    if (d.jobs.empty()) throw SpecError("--dependency: '" + part + "' names no job id");
    out.push_back(d);
  }
  if (out.empty()) throw SpecError("--dependency: empty value");
  return out;
}

std::string format_dependency(const std::vector<Dependency>& ds) {
  std::string s;
  for (auto& d : ds) {
    s += (s.empty() ? "" : ",") + d.type;
    for (auto id : d.jobs) s += ":" + std::to_string(id);
  }
  return s;
}

std::string dependency_status(const std::string& dep,
                              const std::function<std::optional<JobRecord>(int64_t)>& lookup,
                              const std::function<bool()>& same_name_active) {
  if (dep.empty()) return "";
  bool waiting = false;
  for (auto& d : parse_dependency(dep)) {
    if (d.type == "singleton") {
      if (same_name_active()) waiting = true;
      continue;
    }
    for (auto id : d.jobs) {
      auto j = lookup(id);
      if (!j) return "DependencyNeverSatisfied";
      bool ended = is_final_state(j->state);
      bool ok = j->state == kCompleted && j->exit_code.value_or(0) == 0;
      if (d.type == "after") {
        if (j->state == kPending) waiting = true;
      } else if (d.type == "afterany") {
        if (!ended) waiting = true;
      } else if (d.type == "afterok") {
        if (ended && !ok) return "DependencyNeverSatisfied";
        if (!ended) waiting = true;
      } else {  // afternotok
        if (ended && ok) return "DependencyNeverSatisfied";
        if (!ended) waiting = true;
      }
    }
  }
  return waiting ? "Dependency" : "";
}

double parse_begin_time(const std::string& v, double now) {
  auto bad = [&] {
    return SpecError("--begin: invalid time '" + v +
                     "' (now, now+N[s|m|h|d], HH:MM[:SS] or YYYY-MM-DD[THH:MM[:SS]])");
  };
  std::string u;
  for (char c : v) u += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (u == "now") return now;
  if (u.rfind("now+", 0) == 0) {
    size_t k = 4;
    while (k < u.size() && std::isdigit(static_cast<unsigned char>(u[k]))) ++k;
    if (k == 4 || k - 4 > 9) throw bad();
    double n = std::stod(u.substr(4, k - 4));
    std::string unit = u.substr(k);
    double mult = 0;
    if (unit.empty() || unit == "s" || unit == "sec" || unit == "seconds") mult = 1;
    else if (unit == "m" || unit == "min" || unit == "minutes") mult = 60;
    else if (unit == "h" || unit == "hour" || unit == "hours") mult = 3600;
    else if (unit == "d" || unit == "day" || unit == "days") mult = 86400;
    else throw bad();
    return now + n * mult;
  }
  int Y = 0, M = 0, D = 0, h = 0, m = 0, sec = 0;
  char tail = 0;
  time_t t = static_cast<time_t>(now);
  struct tm tmv;
  ::localtime_r(&t, &tmv);
  auto valid_hms = [&] { return h >= 0 && h <= 23 && m >= 0 && m <= 59 && sec >= 0 && sec <= 59; };
  if (std::sscanf(v.c_str(), "%d:%d:%d%c", &h, &m, &sec, &tail) == 3 ||
      (sec = 0, std::sscanf(v.c_str(), "%d:%d%c", &h, &m, &tail) == 2)) {
    if (!valid_hms()) throw bad();
    tmv.tm_hour = h, tmv.tm_min = m, tmv.tm_sec = sec, tmv.tm_isdst = -1;
    double at = static_cast<double>(::mktime(&tmv));
    if (at < now) {
      tmv.tm_mday += 1;
      tmv.tm_isdst = -1;
      at = static_cast<double>(::mktime(&tmv));
    }
    return at;
  }
  h = m = sec = 0;
  int n = std::sscanf(v.c_str(), "%4d-%2d-%2dT%d:%d:%d%c", &Y, &M, &D, &h, &m, &sec, &tail);
  if (!(n == 3 && v.size() == 10) && n != 5 && n != 6) throw bad();
  if (n == 5 && v.find(':', v.find('T') + 1) != v.rfind(':')) throw bad();
  if (M < 1 || M > 12 || D < 1 || D > 31 || !valid_hms()) throw bad();
  struct tm at {};
  at.tm_year = Y - 1900, at.tm_mon = M - 1, at.tm_mday = D, at.tm_hour = h, at.tm_min = m, at.tm_sec = sec;
  at.tm_isdst = -1;
  return static_cast<double>(::mktime(&at));
}

JobSpec merge_specs(JobSpec s, const JobSpec& c) {
  if (c.nodes_given) {  // the command line's -N replaces the script's -N (count or range)
    if (s.range_from_N || c.range_from_N) s.min_nodes = c.min_nodes, s.max_nodes = c.max_nodes;
    s.nodes = c.nodes, s.range_from_N = c.range_from_N, s.nodes_given = true;
    if (c.range_from_N) s.rigid = c.rigid;  // a command-line range is not made rigid by the script
  }
  if (c.min_nodes && !c.range_from_N) s.min_nodes = c.min_nodes;
  if (c.max_nodes && !c.range_from_N) s.max_nodes = c.max_nodes;
  auto take = [](auto& dst, const auto& src) {
    if (src) dst = src;
  };
  take(s.name, c.name);
  take(s.constraint, c.constraint);
  take(s.nodelist, c.nodelist);
  take(s.exclude, c.exclude);
  take(s.time_limit, c.time_limit);
  take(s.output, c.output);
  take(s.error, c.error);
  take(s.chdir, c.chdir);
  take(s.min_power, c.min_power);
  take(s.max_power, c.max_power);
  take(s.export_env, c.export_env);
  if (c.export_env) s.export_vars = c.export_vars;
  take(s.wrap, c.wrap);
  take(s.begin, c.begin);
  take(s.dependency, c.dependency);
  if (!c.array_tasks.empty()) s.array_tasks = c.array_tasks, s.array_max = c.array_max;
  take(s.ntasks, c.ntasks);
  take(s.ntasks_per_node, c.ntasks_per_node);
  take(s.cpus_per_task, c.cpus_per_task);
  take(s.requeue, c.requeue);
  s.hold = s.hold || c.hold;
  s.rigid = s.rigid || c.rigid;
  s.malleable = s.malleable || c.malleable;
  return s;
}

void apply_directives(JobSpec& spec, const std::vector<Directive>& ds) {
  for (auto& d : ds) {
    if (d.name == "--wrap" || d.name == "-W" || d.name == "--wait")
      throw SpecError("line " + std::to_string(d.line) + ": '" + d.text + "': " + d.name +
                      " is only valid on the command line");
    try {
      apply_option(spec, d.name, d.value);
    } catch (const SpecError& e) {
      throw SpecError("line " + std::to_string(d.line) + ": '" + d.text + "': " + e.what());
    }
  }
}

JobRecord resolve_job(const JobSpec& s, int cluster, const std::string& script_text,
                      const std::string& default_name, const std::string& cwd, int cpus_per_node) {
  using namespace sched;
  JobRecord j;
  j.name = s.name.value_or(default_name);
  if (j.name.empty()) j.name = "script";
  if (j.name.size() > 200) throw SpecError("--job-name: name longer than 200 characters");
  auto c = parse_constraint(s.constraint.value_or("none"));
  j.constraint = to_string(*c);
  if (s.rigid && s.malleable) throw SpecError("--rigid: conflicts with --malleable");
  bool range = s.min_nodes || s.max_nodes || s.malleable;
  if (s.rigid && range) throw SpecError("--rigid: conflicts with a node range (--min-nodes/--max-nodes or -N MIN-MAX)");
  if (cluster < 1) throw SpecError("the cluster has no usable nodes");
  // tasks and CPUs (sbatch -n, --ntasks-per-node, -c)
  const int P = std::max(1, cpus_per_node), C = s.cpus_per_task.value_or(1);
  const std::string per_node = " CPUs of a node (" + std::to_string(P) + ")";
  if (C > P) throw SpecError("--cpus-per-task (" + std::to_string(C) + ") is more than the" + per_node);
  if (s.ntasks_per_node && *s.ntasks_per_node * C > P)
    throw SpecError("--ntasks-per-node (" + std::to_string(*s.ntasks_per_node) + ") x --cpus-per-task (" +
                    std::to_string(C) + ") is more than the" + per_node);
  const int tpn = s.ntasks_per_node.value_or(P / C);
  if (range && (s.ntasks || s.ntasks_per_node))
    throw SpecError("--ntasks/--ntasks-per-node need a fixed node count, not a node range");
  std::optional<int> task_nodes;  // node count that follows from the tasks
  int ntasks = 0;
  if (s.ntasks) {
    ntasks = *s.ntasks;
    if (s.nodes) {
      if (ntasks > *s.nodes * tpn)
        throw SpecError("--ntasks (" + std::to_string(ntasks) + ") does not fit on --nodes (" +
                        std::to_string(*s.nodes) + ") with " + std::to_string(tpn) + " task(s) per node");
      if (ntasks < *s.nodes)
        throw SpecError("--ntasks (" + std::to_string(ntasks) + ") is fewer tasks than --nodes (" +
                        std::to_string(*s.nodes) + ")");
    } else {
      task_nodes = (ntasks + tpn - 1) / tpn;
    }
  } else if (s.ntasks_per_node) {
    ntasks = s.nodes.value_or(1) * *s.ntasks_per_node;
  }
  // sbatch -w / -x (checked against the cluster's node names at submission)
  std::vector<std::string> want = s.nodelist ? expand_hostlist(*s.nodelist) : std::vector<std::string>{};
  std::vector<std::string> avoid = s.exclude ? expand_hostlist(*s.exclude) : std::vector<std::string>{};
  for (auto& n : want)
    if (std::find(avoid.begin(), avoid.end(), n) != avoid.end())
      throw SpecError("-w/--nodelist and -x/--exclude both name " + n);
  if (s.malleable && (!want.empty() || !avoid.empty()))
    throw SpecError("-w/--nodelist and -x/--exclude cannot be combined with --malleable (expansions could not honour them)");
  if (!want.empty() && static_cast<int>(want.size()) > cluster)
    throw SpecError("-w/--nodelist names " + std::to_string(want.size()) + " nodes, more than the cluster has (" +
                    std::to_string(cluster) + ")");
  j.req_nodelist = s.nodelist.value_or("");
  j.exc_nodelist = s.exclude.value_or("");
  j.ntasks = ntasks;
  j.ntasks_per_node = s.ntasks_per_node.value_or(0);
  j.cpus_per_task = C;
  if (range) {
    j.kind = s.malleable ? "malleable" : "moldable";
    j.min_nodes = s.min_nodes.value_or(1);
    j.max_nodes = s.max_nodes.value_or(std::max(cluster, j.min_nodes));
    if (j.min_nodes > j.max_nodes)
      throw SpecError("--min-nodes (" + std::to_string(j.min_nodes) + ") is greater than --max-nodes (" +
                      std::to_string(j.max_nodes) + ")");
    j.req_nodes = s.nodes.value_or(j.max_nodes);
    if (j.req_nodes < j.min_nodes || j.req_nodes > j.max_nodes)
      throw SpecError("--nodes (" + std::to_string(j.req_nodes) + ") is outside [--min-nodes, --max-nodes] = [" +
                      std::to_string(j.min_nodes) + ", " + std::to_string(j.max_nodes) + "]");
    if (j.min_nodes > cluster)
      throw SpecError("--min-nodes (" + std::to_string(j.min_nodes) + ") is more nodes than the cluster has (" +
                      std::to_string(cluster) + ")");
    j.max_nodes = std::min(j.max_nodes, cluster);
    j.req_nodes = std::min(j.req_nodes, j.max_nodes);
  } else {
    j.kind = "rigid";
    j.req_nodes = j.min_nodes = j.max_nodes = task_nodes.value_or(s.nodes.value_or(1));
    if (j.req_nodes > cluster)
      throw SpecError((task_nodes ? "--ntasks (" + std::to_string(ntasks) + ") needs " + std::to_string(*task_nodes) +
                                        " nodes of " + std::to_string(P) + " CPUs, more than the cluster has ("
                                  : "--nodes (" + std::to_string(j.req_nodes) + ") is more nodes than the cluster has (") +
                      std::to_string(cluster) + ")");
  }
  if (!want.empty() || !avoid.empty()) {
    // as Slurm: the job gets every -w node, so its node count is at least their number
    const int w = static_cast<int>(want.size());
    if (j.kind == "rigid") {
      j.req_nodes = j.min_nodes = j.max_nodes = std::max(j.req_nodes, w);
    } else {
      j.min_nodes = std::max(j.min_nodes, w);
      j.req_nodes = std::max(j.req_nodes, j.min_nodes);
      if (j.min_nodes > j.max_nodes)
        throw SpecError("-w/--nodelist names " + std::to_string(w) + " nodes, more than --max-nodes (" +
                        std::to_string(j.max_nodes) + ")");
    }
    const int left = cluster - static_cast<int>(avoid.size());
    if (j.min_nodes > left)
      throw SpecError("-x/--exclude leaves at most " + std::to_string(std::max(0, left)) + " nodes, fewer than the job's " +
                      std::to_string(j.min_nodes));
  }
  if (largest_admissible(*c, j.min_nodes, j.max_nodes) == 0)
    throw SpecError("--node-constraint=" + j.constraint + ": no admissible node count in [" +
                    std::to_string(j.min_nodes) + ", " + std::to_string(j.max_nodes) + "]");
  if (s.min_power && s.max_power && *s.min_power > *s.max_power)
    throw SpecError("--min-power (" + std::to_string(*s.min_power) + " W) is greater than --max-power (" +
                    std::to_string(*s.max_power) + " W)");
  j.min_power = s.min_power;
  j.max_power = s.max_power;
  j.time_limit = s.time_limit.value_or(kUnlimited);
  j.workdir = s.chdir.value_or(cwd);
  if (j.workdir.empty() || j.workdir[0] != '/') j.workdir = cwd + "/" + j.workdir;
  auto abs = [&](const std::string& p) { return p.empty() || p[0] == '/' ? p : j.workdir + "/" + p; };
  j.stdout_path = abs(s.output.value_or("mj-%j.out"));
  j.stderr_path = s.error ? abs(*s.error) : j.stdout_path;
  j.script = script_text;
  j.held = s.hold;
  j.requeue = s.requeue.value_or(true);
  j.begin_time = s.begin;
  j.dependency = s.dependency.value_or("");
  j.submit_dir = cwd;
  j.uid = static_cast<int64_t>(::getuid());
  j.state = kPending;
  return j;
}

}  // namespace dynres
