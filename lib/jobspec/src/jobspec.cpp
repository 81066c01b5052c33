#include "dynres/jobspec.hpp"

#include "dynres/hostlist.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <cmath>
#include <set>
#include <sstream>
#include <tuple>

#include "dynres/sched.hpp"
#include "dynres/paths.hpp"
#include "dynres/slurmtime.hpp"

namespace dynres {

const char* to_string(Treatment t) {
  switch (t) {
    case Treatment::honoured: return "honoured";
    case Treatment::warned: return "warning";
    case Treatment::refused: return "refused";
    case Treatment::client: return "mjsub";
  }
  return "?";
}

// Every sbatch option of Slurm 22.05 (the entries of src/common/slurm_opt.c at
// slurm-22-05-8-1 that sbatch accepts, 106 of them) and dynres's own. For
// warned and refused options `help` is the reason printed.
const std::vector<OptionDef>& job_options() {
  using T = Treatment;
  static const std::vector<OptionDef> opts = {
      // ---- honoured: resolved as Slurm resolves them
      {{"-J", "--job-name"}, true, "job name (default: script file name)"},
      {{"-N", "--nodes"}, true, "node count N, or a range MIN-MAX (makes the job moldable)"},
      {{"-n", "--ntasks"}, true, "number of tasks; without -N the node count follows from the nodes' CPUs"},
      {{"--tasks-per-node", "--ntasks-per-node"}, true, "tasks per node (at most the node's CPUs / --cpus-per-task)"},
      {{"-c", "--cpus-per-task"}, true, "CPUs per task (default 1)"},
      {{"--mincpus"}, true, "CPUs a node must have at least"},
      {{"--mem"}, true, "memory per node, N[K|M|G|T] (default MB); 0: all of a node's memory"},
      {{"--mem-per-cpu"}, true, "memory per allocated CPU, N[K|M|G|T] (default MB)"},
      {{"--mem-per-gpu"}, true, "memory per allocated GPU, N[K|M|G|T] (default MB)"},
      {{"--gres"}, true, "generic resources per node: gpu[:type]:N (nodes declare them: vcluster-boot --gres)"},
      {{"-G", "--gpus"}, true, "GPUs of the whole job, [type:]N"},
      {{"--gpus-per-node"}, true, "GPUs per node, [type:]N"},
      {{"--gpus-per-task"}, true, "GPUs per task, [type:]N"},
      {{"--cpus-per-gpu"}, true, "CPUs per allocated GPU (sets --cpus-per-task when it is not given)"},
      {{"--ntasks-per-gpu"}, true, "tasks per GPU (sets --ntasks from the GPUs when it is not given)"},
      {{"-t", "--time"}, true,
       "time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (seconds round up to minutes), "
       "UNLIMITED or 0 (no limit)"},
      {{"-o", "--output"}, true, "standard output file (%j = job id, %x = job name); default slurm-%j.out "
                                 "(slurm-%A_%a.out for an array)"},
      {{"-e", "--error"}, true, "standard error file (default: with the output)"},
      {{"-D", "--chdir"}, true, "working directory of the job"},
      {{"--export"}, true,
       "ALL (default): the submitter's environment; NONE: the scheduler's; [ALL,]VAR[=value],...: "
       "only (or also) these variables"},
      {{"-d", "--dependency"}, true,
       "start after other jobs: TYPE:ID[:ID...][,...] with TYPE after, afterany, afterok or afternotok; or singleton"},
      {{"-a", "--array"}, true, "job array: indices 1-5, 1,3,7, 0-15:4, with %N at most N running at once"},
      {{"-W", "--wait"}, false, "wait until the job ends; exit with its exit code"},
      {{"-H", "--hold"}, false, "submit the job held: it waits until 'mjcontrol release ID'"},
      {{"--requeue"}, false, "after a node failure the job is requeued (the default, as Slurm's JobRequeue=1)"},
      {{"--no-requeue"}, false, "after a node failure the job ends NODE_FAIL instead of being requeued"},
      {{"-b", "--begin"}, true, "start no earlier than: now+N[s|m|h|d], HH:MM[:SS] or YYYY-MM-DD[THH:MM[:SS]]"},
      {{"-w", "--nodelist"}, true, "nodes the job must get, e.g. n[1-2] (more are added up to its node count)"},
      {{"-F", "--nodefile"}, true, "a file naming the nodes the job must get (as -w)"},
      {{"-x", "--exclude"}, true, "nodes the job must not get, e.g. n[7-8]"},
      {{"--exclusive"}, false, "nodes are always exclusive in dynres (accepted, says so)", T::honoured, true},
      {{"--wrap"}, true, "run this shell command as the job (/bin/sh -c; no script file, command line only)"},
      {{"-O", "--overcommit"}, false, "more tasks than CPUs: -n alone asks for one node per task at most"},
      {{"--ignore-pbs"}, false, "no #PBS directives are read (mjsub never reads them)"},
      {{"-Q", "--quiet"}, false, "no warnings about options without effect"},
      // ---- dynres's own
      {{"--time-exact"}, true,
       "time limit as --time but to the second, not rounded up to minutes (time-scaled workloads, tests)"},
      {{"--min-nodes", "--min-nodes-invasic"}, true, "fewest nodes a moldable/malleable job accepts"},
      {{"--max-nodes", "--max-nodes-invasic"}, true, "most nodes a moldable/malleable job accepts"},
      {{"--node-constraint", "--node-constraints"}, true, "node counts allowed: none|even|odd|pof2|square|cube"},
      {{"--min-power"}, true, "lowest power per node the job draws, watts"},
      {{"--max-power"}, true, "highest power per node the job draws, watts"},
      {{"--rigid"}, false, "run on exactly --nodes nodes even when a range is known"},
      {{"--malleable"}, false,
       "the job may grow and shrink while it runs, within --min-nodes/--max-nodes (mj(3); default range 1 to the "
       "cluster)"},
      // ---- mjsub's own (command line; ignored in directives)
      {{"--parsable"}, false, "print only the job id", T::client},
      {{"--test-only"}, false, "do not submit: check the job and print when it would start", T::client},
      {{"-v", "--verbose"}, false, "accepted (mjsub has nothing more to say)", T::client},
      {{"-h", "--help"}, false, "print the options", T::client},
      {{"--usage"}, false, "print the options", T::client},
      {{"-V", "--version"}, false, "print the version", T::client},
      // ---- accepted with a warning: no effect in a dynres cluster
      {{"-A", "--account"}, true, "dynres keeps no accounts", T::warned},
      {{"--acctg-freq"}, true, "dynres gathers no accounting samples", T::warned},
      {{"--bb"}, true, "dynres has no burst buffer", T::warned},
      {{"--bbf"}, true, "dynres has no burst buffer", T::warned},
      {{"--cluster-constraint"}, true, "dynres is one cluster", T::warned},
      {{"--comment"}, true, "dynres keeps no job comments", T::warned},
      {{"--container"}, true, "dynres runs no OCI containers", T::warned},
      {{"--context"}, true, "dynres sets no SELinux context", T::warned},
      {{"--contiguous"}, false, "dynres nodes have no network order", T::warned},
      {{"-S", "--core-spec"}, true, "no cores are reserved for system use", T::warned},
      {{"--cores-per-socket"}, true, "nodes are counted in CPUs, not sockets and cores", T::warned},
      {{"--cpu-freq"}, true, "dynres does not set CPU frequencies (power: --min-power/--max-power)", T::warned},
      {{"--deadline"}, true, "dynres schedules no deadlines", T::warned},
      {{"--delay-boot"}, true, "dynres nodes are never rebooted", T::warned},
      {{"-m", "--distribution"}, true, "the srun of a dynres job places tasks block-wise", T::warned},
      {{"--export-file"}, true, "environment files are not read; use --export", T::warned},
      {{"-B", "--extra-node-info"}, true, "nodes are counted in CPUs, not sockets and cores", T::warned},
      {{"--get-user-env"}, false, "the job gets the submitter's environment (--export)", T::warned, true},
      {{"--gpu-bind"}, true, "GPUs are bound through CUDA_VISIBLE_DEVICES only", T::warned},
      {{"--gpu-freq"}, true, "dynres does not set GPU frequencies", T::warned},
      {{"--gres-flags"}, true, "GPUs are not bound to sockets", T::warned},
      {{"--gpus-per-socket"}, true, "nodes are counted in CPUs, not sockets (use --gpus-per-node)", T::warned},
      {{"--hint"}, true, "dynres does not bind tasks to cores", T::warned},
      {{"-i", "--input"}, true, "the standard input of a batch job is /dev/null", T::warned},
      {{"--kill-on-invalid-dep"}, true, "a job whose dependency can never be met stays pending "
                                          "(DependencyNeverSatisfied)", T::warned},
      {{"--mail-type"}, true, "dynres sends no mail", T::warned},
      {{"--mail-user"}, true, "dynres sends no mail", T::warned},
      {{"--mcs-label"}, true, "dynres has no MCS labels", T::warned},
      {{"--mem-bind"}, true, "dynres does not bind memory", T::warned},
      {{"--network"}, true, "dynres configures no network", T::warned},
      {{"--nice"}, false, "dynres orders jobs by its policy, not by priority", T::warned, true},
      {{"-k", "--no-kill"}, false, "a failed node ends the job", T::warned, true},
      {{"--ntasks-per-core"}, true, "nodes are counted in CPUs, not cores", T::warned},
      {{"--ntasks-per-socket"}, true, "nodes are counted in CPUs, not sockets", T::warned},
      {{"--ntasks-per-tres"}, true, "use --ntasks-per-gpu", T::warned},
      {{"--open-mode"}, true, "output files are always created anew (truncated) when the job starts", T::warned},
      {{"-s", "--oversubscribe"}, false, "dynres nodes are exclusive to one job", T::warned},
      {{"-p", "--partition"}, true, "dynres has one partition", T::warned},
      {{"--power"}, true, "power is managed by the corridor (--min-power/--max-power)", T::warned},
      {{"--priority"}, true, "dynres orders jobs by its policy, not by priority", T::warned},
      {{"--profile"}, true, "dynres gathers no profiles (see mjprof)", T::warned},
      {{"--propagate"}, false, "resource limits of the submitter are not propagated", T::warned, true},
      {{"-q", "--qos"}, true, "dynres has no QOS", T::warned},
      {{"--reboot"}, false, "dynres nodes are never rebooted", T::warned},
      {{"--signal"}, true, "at its time limit a job gets SIGTERM, then SIGKILL", T::warned},
      {{"--sockets-per-node"}, true, "nodes are counted in CPUs, not sockets", T::warned},
      {{"--spread-job"}, false, "dynres places jobs by its policy", T::warned},
      {{"--switches"}, true, "dynres has no network topology", T::warned},
      {{"--thread-spec"}, true, "no threads are reserved for system use", T::warned},
      {{"--threads-per-core"}, true, "nodes are counted in CPUs, not threads", T::warned},
      {{"--time-min"}, true, "dynres does not shorten time limits", T::warned},
      {{"--use-min-nodes"}, false, "a node range is resolved by the scheduling policy", T::warned},
      {{"--wait-all-nodes"}, true, "dynres nodes are ready when the job starts", T::warned},
      {{"--wckey"}, true, "dynres keeps no workload characterization keys", T::warned},
      // ---- refused, as Slurm refuses them on a cluster like this one
      {{"-C", "--constraint"}, true, "Invalid feature specification: the nodes of a dynres cluster declare no features",
       T::refused},
      {{"-L", "--licenses"}, true, "Invalid license specification: a dynres cluster has no licenses", T::refused},
      {{"--reservation"}, true, "Requested reservation is invalid: a dynres cluster has no reservations", T::refused},
      {{"--tmp"}, true, "Requested node configuration is not available: the nodes declare no temporary disk",
       T::refused},
      {{"--batch"}, true, "Job --batch option is invalid or not a subset of --constraints: the nodes declare no features",
       T::refused},
      {{"--prefer"}, true, "Invalid preferred feature specification: the nodes declare no features", T::refused},
      {{"--cluster"}, true, "a dynres cluster is one cluster and keeps no cluster database", T::refused},
      {{"-M", "--clusters"}, true, "a dynres cluster is one cluster and keeps no cluster database", T::refused},
      {{"--uid"}, true, "a job runs as its submitter (accepted when it names the submitter)", T::refused},
      {{"--gid"}, true, "a job runs with its submitter's group (accepted when it names that group)", T::refused},
  };
  return opts;
}

namespace {

// A whole number for option opt: digits only, 1..max. The message names the
// option and the value as given (never an empty one), and the bound.
int parse_bounded(const std::string& opt, const std::string& v, const std::string& what, int max) {
  auto bad = [&](const std::string& why) {
    return SpecError(opt + ": invalid " + what + " '" + v + "' (" + why + ")");
  };
  if (v.empty()) throw SpecError(opt + ": needs a " + what);
  if (v[0] == '-' || v[0] == '+') throw bad("a whole number from 1 to " + std::to_string(max));
  if (!std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); }))
    throw bad("not a whole number");
  if (v.size() > 9 || std::stoll(v) > max) throw bad("at most " + std::to_string(max));
  int n = std::stoi(v);
  if (n < 1) throw bad("at least 1");
  return n;
}

int parse_count(const std::string& opt, const std::string& v) { return parse_bounded(opt, v, "node count", 9999999); }

int parse_positive(const std::string& opt, const std::string& v, const std::string& what) {
  return parse_bounded(opt, v, what, 9999999);
}

// [type:]N of --gpus*; the count (the type is not checked: nodes declare untyped GPUs).
int parse_gpu_count(const std::string& opt, const std::string& v) {
  auto colon = v.rfind(':');
  return parse_bounded(opt, colon == std::string::npos ? v : v.substr(colon + 1), "GPU count", 1000000);
}

// --uid/--gid naming the submitter's own user or group (name or number).
bool names_submitter(const std::string& key, const std::string& v) {
  const bool all_digits = !v.empty() && v.size() < 10 && std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); });
  if (key == "--uid") {
    if (all_digits) return std::stoll(v) == static_cast<long long>(::getuid());
    struct passwd pw, *res = nullptr;
    std::vector<char> buf(16384);
    return ::getpwnam_r(v.c_str(), &pw, buf.data(), buf.size(), &res) == 0 && res && res->pw_uid == ::getuid();
  }
  if (all_digits) return std::stoll(v) == static_cast<long long>(::getgid());
  struct group gr, *res = nullptr;
  std::vector<char> buf(16384);
  return ::getgrnam_r(v.c_str(), &gr, buf.data(), buf.size(), &res) == 0 && res && res->gr_gid == ::getgid();
}

std::string fmt_watts(double w) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", w);
  return b;
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
  if (w > 1e6) throw SpecError(opt + ": '" + v + "' is more than 1000000 W per node");
  return w;
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

const OptionDef& find_job_option(const std::string& name) {
  for (auto& o : job_options())
    for (auto& n : o.names)
      if (n == name) return o;
  if (name.size() > 2 && name.rfind("--", 0) == 0) {  // getopt_long: a unique prefix of a long name
    std::vector<const OptionDef*> hits;
    std::vector<std::string> names;
    for (auto& o : job_options())
      for (auto& n : o.names)
        if (n.size() > 2 && n.rfind(name, 0) == 0) {
          if (std::find(hits.begin(), hits.end(), &o) == hits.end()) hits.push_back(&o);
          names.push_back(n);
        }
    if (hits.size() == 1) return *hits.front();
    if (hits.size() > 1) {
      std::sort(names.begin(), names.end());
      std::string c;
      for (auto& n : names) c += " '" + n + "'";
      throw SpecError("option '" + name + "' is ambiguous; possibilities:" + c);  // (names sorted above)
    }
  }
  throw SpecError("unrecognized option '" + name + "'");
}

std::vector<std::pair<std::string, std::string>> parse_job_args(const std::vector<std::string>& words,
                                                                const std::vector<std::pair<std::string, bool>>& own,
                                                                std::vector<std::string>& rest) {
  std::vector<std::pair<std::string, std::string>> out;
  auto own_takes = [&](const std::string& n) -> std::optional<bool> {
    for (auto& [name, v] : own)
      if (name == n) return v;
    return std::nullopt;
  };
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& a = words[i];
    if (a == "--") break;  // end of the options
    if (a == ":") throw SpecError("':': heterogeneous jobs (components separated by ':') are not supported by dynres");
    if (a.size() < 2 || a[0] != '-') throw SpecError("'" + a + "' is not an option");
    if (a.rfind("--", 0) == 0) {
      auto eq = a.find('=');
      std::string name = a.substr(0, eq);
      if (auto t = own_takes(name)) {
        rest.push_back(a);
        if (*t && eq == std::string::npos && i + 1 < words.size()) rest.push_back(words[++i]);
        continue;
      }
      const OptionDef& o = find_job_option(name);
      const std::string& key = o.names.back();
      std::string value;
      if (eq != std::string::npos) {
        if (!o.takes_value && !o.optional_value) throw SpecError("option '" + key + "' doesn't allow an argument");
        value = a.substr(eq + 1);
      } else if (o.takes_value) {
        if (i + 1 >= words.size()) throw SpecError("option '" + key + "' requires an argument");
        value = words[++i];
      }
      out.push_back({key, value});
      continue;
    }
    if (auto t = own_takes(a)) {
      rest.push_back(a);
      if (*t && i + 1 < words.size()) rest.push_back(words[++i]);
      continue;
    }
    for (size_t k = 1; k < a.size(); ++k) {  // -X, -Xvalue, -X value, -HQ
      const OptionDef& o = find_job_option(std::string("-") + a[k]);
      const std::string& key = o.names.back();
      if (o.takes_value) {
        if (k + 1 < a.size()) out.push_back({key, a.substr(k + 1)});
        else if (i + 1 < words.size()) out.push_back({key, words[++i]});
        else throw SpecError("option '" + key + "' (-" + a[k] + ") requires an argument");
        break;
      }
      if (o.optional_value) {
        out.push_back({key, a.substr(k + 1)});
        break;
      }
      out.push_back({key, ""});
    }
  }
  return out;
}

int64_t parse_mem_mb(const std::string& opt, const std::string& v) {
  auto bad = [&] {
    return SpecError(opt + ": invalid memory size '" + v + "' (N[K|M|G|T], default unit MB)");
  };
  size_t k = 0;
  while (k < v.size() && std::isdigit(static_cast<unsigned char>(v[k]))) ++k;
  if (k == 0) throw bad();
  std::string unit = v.substr(k);
  if (unit.size() == 2 && (unit[1] == 'B' || unit[1] == 'b')) unit.pop_back();
  if (unit.size() > 1) throw bad();
  const int64_t max = int64_t{1} << 40;  // MB: 1 EB
  if (k > 13) throw SpecError(opt + ": memory size '" + v + "' is more than 1 EB");
  int64_t n = std::stoll(v.substr(0, k));
  switch (unit.empty() ? 'M' : std::toupper(static_cast<unsigned char>(unit[0]))) {
    case 'K': n = (n + 1023) / 1024; break;
    case 'M': break;
    case 'G': n = n > max ? max + 1 : n * 1024; break;
    case 'T': n = n > max ? max + 1 : n * 1024 * 1024; break;
    default: throw bad();
  }
  if (n > max) throw SpecError(opt + ": memory size '" + v + "' is more than 1 EB");
  return n;
}

int64_t parse_sbatch_time(const std::string& opt, const std::string& v) {
  int64_t t;
  try {
    t = parse_time_limit(v);
  } catch (const std::invalid_argument& e) {
    throw SpecError(opt + ": " + e.what());
  } catch (const std::out_of_range&) {
    t = kMaxTimeLimitDays * 86400 + 1;  // a field of more than 12 digits: past the bound below
  }
  if (t == kUnlimited) return t;
  if (t == 0) return kUnlimited;  // as Slurm: -t 0 is no limit
  if (t > kMaxTimeLimitDays * 86400)
    throw SpecError(opt + ": time limit '" + v + "' is longer than " + std::to_string(kMaxTimeLimitDays) +
                    " days (UNLIMITED for no limit)");
  return (t + 59) / 60 * 60;  // Slurm's time_str2mins rounds seconds up to whole minutes
}

void apply_option(JobSpec& s, const std::string& name, const std::string& v) {
  const OptionDef* o = &find_job_option(name);
  const std::string& key = o->names.back();  // canonical long name
  if (o->takes_value && v.empty()) throw SpecError(key + ": needs a value");
  if (!o->takes_value && !o->optional_value && !v.empty()) throw SpecError(key + ": takes no value");
  if (o->how == Treatment::client) return;  // mjsub's own; nothing of the job
  if (key == "--tmp" && parse_mem_mb(key, v) == 0) return;  // no temporary disk asked for
  if ((key == "--uid" || key == "--gid") && names_submitter(key, v)) return;  // what it would be anyway
  if (o->how == Treatment::refused) throw SpecError(key + ": " + o->help);
  if (o->how == Treatment::warned) {
    s.warnings.push_back(key + ": " + o->help + "; ignored");
    return;
  }
  if (key == "--job-name") {
    s.name = v;
  } else if (key == "--nodes") {
    // -N is one field: a later -N replaces an earlier -N entirely
    auto dash = v.find('-');
    if (dash == 0) throw SpecError(key + ": invalid node count '" + v + "' (N or MIN-MAX, at least 1)");
    if (dash != std::string::npos) {
      auto part = [&](const std::string& p) {
        if (p.empty()) throw SpecError(key + ": invalid node range '" + v + "' (MIN-MAX)");
        return parse_count(key, p);
      };
      int lo = part(v.substr(0, dash)), hi = part(v.substr(dash + 1));
      s.min_nodes = lo, s.max_nodes = hi, s.nodes.reset(), s.range_from_N = true;
    } else {
      int n = parse_count(key, v);
      if (s.range_from_N) s.min_nodes.reset(), s.max_nodes.reset(), s.range_from_N = false;
      s.nodes = n;
    }
    s.nodes_given = true;
  } else if (key == "--time") {
    s.time_limit = parse_sbatch_time(key, v);
  } else if (key == "--time-exact") {
    const int64_t t = parse_sbatch_time(key, v);  // the same formats and bound
    try {
      const int64_t exact = parse_time_limit(v);
      s.time_limit = exact == 0 ? kUnlimited : exact;
    } catch (const std::exception&) {
      s.time_limit = t;
    }
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
    s.wait = true;
  } else if (key == "--mem") {
    s.mem_per_node = parse_mem_mb(key, v);
  } else if (key == "--mem-per-cpu") {
    s.mem_per_cpu = parse_mem_mb(key, v);
  } else if (key == "--mem-per-gpu") {
    s.mem_per_gpu = parse_mem_mb(key, v);
  } else if (key == "--gres") {
    // gres list: name[[:type]:count][,...]; only GPUs exist in a dynres cluster
    std::stringstream ss(v);
    for (std::string g; std::getline(ss, g, ',');) {
      std::string gname = g.substr(0, g.find(':'));
      if (gname != "gpu")
        throw SpecError("--gres: Invalid generic resource (gres) specification '" + g +
                        "': the nodes of this cluster declare only gpu");
      auto colon = g.rfind(':');
      s.gpus_per_node = colon == std::string::npos ? 1 : parse_gpu_count(key, g.substr(colon + 1));
    }
  } else if (key == "--gpus") {
    s.gpus = parse_gpu_count(key, v);
  } else if (key == "--gpus-per-node") {
    s.gpus_per_node = parse_gpu_count(key, v);
  } else if (key == "--gpus-per-task") {
    s.gpus_per_task = parse_gpu_count(key, v);
  } else if (key == "--cpus-per-gpu") {
    s.cpus_per_gpu = parse_positive(key, v, "CPU count");
  } else if (key == "--ntasks-per-gpu") {
    s.ntasks_per_gpu = parse_positive(key, v, "task count");
  } else if (key == "--mincpus") {
    s.mincpus = parse_positive(key, v, "CPU count");
  } else if (key == "--exclusive") {
    if (!v.empty() && v != "user" && v != "mcs")
      throw SpecError("--exclusive: invalid value '" + v + "' (user or mcs)");
    s.exclusive = true;
  } else if (key == "--overcommit") {
    s.overcommit = true;
  } else if (key == "--quiet") {
    s.quiet = true;
  } else if (key == "--ignore-pbs") {
  } else if (key == "--nodefile") {
    std::ifstream f(v);
    if (!f) throw SpecError("--nodefile: cannot read '" + v + "'");
    std::string names, w;
    while (f >> w && names.size() < 1000000) names += (names.empty() ? "" : ",") + w;
    if (names.empty()) throw SpecError("--nodefile: '" + v + "' names no node");
    apply_option(s, "--nodelist", names);
  } else if (key == "--ntasks") {
    s.ntasks = parse_positive(key, v, "task count");
  } else if (key == "--ntasks-per-node") {
    s.ntasks_per_node = parse_positive(key, v, "task count");
  } else if (key == "--cpus-per-task") {
    s.cpus_per_task = parse_positive(key, v, "CPU count");
  } else if (key == "--dependency") {
    s.dependency = format_dependency(parse_dependency(v));
  } else if (key == "--hold") {
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
    s.rigid = true;
  } else if (key == "--malleable") {
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
      } else if (w == "hetjob" || w == "packjob") {
        throw SpecError("line " + std::to_string(no) + ": '" + line + "': " + w +
                        ": heterogeneous jobs are not supported by dynres");
      } else {
        throw SpecError("line " + std::to_string(no) + ": '" + line + "': '" + w +
                        "' is not an option (the value of an option that takes none?)");
      }
      const OptionDef* o;
      try {
        o = &find_job_option(d.name);
      } catch (const SpecError& e) {
        throw SpecError("line " + std::to_string(no) + ": '" + line + "': " + e.what());
      }
      if (o->takes_value && d.value.empty() && w.find('=') == std::string::npos) {
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
    if (w.empty()) throw bad("missing number (indices are 0 to 1000000: A, A-B, A-B:STEP, A,B,...)");
    if (!std::all_of(w.begin(), w.end(), [](unsigned char c) { return std::isdigit(c); }))
      throw bad("invalid number '" + w + "'");
    if (w.size() > 7) throw bad("index " + w + " above 1000000");
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
  take(s.mem_per_node, c.mem_per_node);
  take(s.mem_per_cpu, c.mem_per_cpu);
  take(s.mem_per_gpu, c.mem_per_gpu);
  take(s.gpus, c.gpus);
  take(s.gpus_per_node, c.gpus_per_node);
  take(s.gpus_per_task, c.gpus_per_task);
  take(s.cpus_per_gpu, c.cpus_per_gpu);
  take(s.ntasks_per_gpu, c.ntasks_per_gpu);
  take(s.mincpus, c.mincpus);
  s.wait = s.wait || c.wait;
  s.quiet = s.quiet || c.quiet;
  s.exclusive = s.exclusive || c.exclusive;
  s.overcommit = s.overcommit || c.overcommit;
  s.warnings.insert(s.warnings.end(), c.warnings.begin(), c.warnings.end());
  take(s.requeue, c.requeue);
  s.hold = s.hold || c.hold;
  s.rigid = s.rigid || c.rigid;
  s.malleable = s.malleable || c.malleable;
  return s;
}

void apply_directives(JobSpec& spec, const std::vector<Directive>& ds) {
  for (auto& d : ds) {
    if (d.name.size() > 3 && std::string("--wrap").rfind(d.name, 0) == 0)
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
                      const std::string& default_name, const std::string& cwd, int cpus_per_node,
                      int64_t node_mem_mb, int node_gpus, std::vector<std::string>* warnings) {
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
  // tasks and CPUs (sbatch -n, --ntasks-per-node, -c), Slurm's rules
  auto warn = [&](const std::string& w) {
    if (warnings) warnings->push_back(w);
  };
  const int P = std::max(1, cpus_per_node);
  const bool gpu_asked = s.gpus || s.gpus_per_node || s.gpus_per_task || s.ntasks_per_gpu;
  if (gpu_asked && node_gpus < 1)
    throw SpecError(std::string(s.gpus ? "--gpus" : s.gpus_per_task ? "--gpus-per-task" : s.ntasks_per_gpu ? "--ntasks-per-gpu"
                                                                                                  : "--gres/--gpus-per-node") +
                    ": Invalid generic resource (gres) specification: the nodes of this cluster declare no GPUs "
                    "(vcluster-boot --gres gpu:N)");
  if (s.gpus_per_task && s.ntasks_per_gpu)
    throw SpecError("--gpus-per-task is mutually exclusive with --ntasks-per-gpu");
  const int C = s.cpus_per_task.value_or(s.cpus_per_gpu.value_or(1));
  const std::string per_node = " CPUs of a node (" + std::to_string(P) + "): Requested node configuration is not available";
  if (C > P) throw SpecError("--cpus-per-task (" + std::to_string(C) + ") is more than the" + per_node);
  if (s.mincpus && *s.mincpus > P) throw SpecError("--mincpus (" + std::to_string(*s.mincpus) + ") is more than the" + per_node);
  if (s.ntasks_per_node && *s.ntasks_per_node * C > P && !s.overcommit)
    throw SpecError("--ntasks-per-node (" + std::to_string(*s.ntasks_per_node) + ") x --cpus-per-task (" +
                    std::to_string(C) + ") is more than the" + per_node);
  // tasks a node can hold: --ntasks-per-node, else the CPUs (-O: any number)
  const int tpn = s.ntasks_per_node.value_or(s.overcommit ? 1 << 30 : P / C);
  std::optional<int> ntasks_opt = s.ntasks;
  if (!ntasks_opt && s.ntasks_per_gpu) {  // --ntasks-per-gpu: tasks follow from the GPUs
    int g = s.gpus.value_or(s.gpus_per_node.value_or(node_gpus) * s.nodes.value_or(1));
    ntasks_opt = *s.ntasks_per_gpu * g;
  }
  // the node range as given (range) or the fixed count
  int lo = s.min_nodes.value_or(1), hi = s.max_nodes.value_or(std::max(cluster, lo));
  std::optional<int> fixed = range ? std::nullopt : s.nodes;
  std::optional<int> task_nodes;  // node count that follows from the tasks
  int ntasks = 0;
  if (ntasks_opt) {
    ntasks = *ntasks_opt;
    const int need = static_cast<int>((static_cast<int64_t>(ntasks) + tpn - 1) / tpn);
    if (fixed) {
      if (ntasks < *fixed) {  // Slurm: "can't run 1 processes on 2 nodes, setting nnodes to 1"
        warn("can't run " + std::to_string(ntasks) + " processes on " + std::to_string(*fixed) +
             " nodes, setting nnodes to " + std::to_string(ntasks));
        fixed = ntasks;
      }
      if (need > *fixed)
        throw SpecError("--ntasks (" + std::to_string(ntasks) + ") does not fit on --nodes (" + std::to_string(*fixed) +
                        ") with " + std::to_string(tpn) + " task(s) per node: Requested node configuration is not available");
    } else if (range) {  // narrow the range to the sizes that can hold the tasks
      if (lo > ntasks) {
        warn("can't run " + std::to_string(ntasks) + " processes on " + std::to_string(lo) +
             " nodes, setting nnodes to " + std::to_string(ntasks));
        lo = ntasks;
      }
      hi = std::min(hi, ntasks);
      lo = std::max(lo, need);
      if (lo > hi)
        throw SpecError("--ntasks (" + std::to_string(ntasks) + ") does not fit on at most " + std::to_string(hi) +
                        " nodes with " + std::to_string(tpn) + " task(s) per node");
    } else {
      task_nodes = need;
    }
  } else if (s.ntasks_per_node && !range) {
    ntasks = fixed.value_or(1) * *s.ntasks_per_node;
  }
  // GPUs per node: --gres=gpu:N/--gpus-per-node, -G spread over the nodes, --gpus-per-task x tasks of a node
  int gpn = s.gpus_per_node.value_or(0);
  if (s.gpus && !s.gpus_per_node) {
    if (!fixed && !task_nodes && !range)
      task_nodes = (*s.gpus + node_gpus - 1) / node_gpus;  // as few nodes as hold the GPUs
    int n = task_nodes.value_or(fixed.value_or(range ? lo : 1));
    gpn = (*s.gpus + n - 1) / n;
  }
  if (s.gpus_per_task) {
    int n = task_nodes.value_or(fixed.value_or(range ? lo : 1));
    int tasks_here = ntasks ? (ntasks + n - 1) / n : s.ntasks_per_node.value_or(1);
    gpn = std::max(gpn, *s.gpus_per_task * tasks_here);
  }
  if (gpn > node_gpus && gpu_asked)
    throw SpecError("GPUs per node (" + std::to_string(gpn) + ") are more than a node has (" + std::to_string(node_gpus) +
                    "): Requested node configuration is not available");
  j.gpus_per_node = gpn;
  // memory: --mem per node, --mem-per-cpu, --mem-per-gpu (one of them), Slurm's str_to_mbytes units
  if ((s.mem_per_node ? 1 : 0) + (s.mem_per_cpu ? 1 : 0) + (s.mem_per_gpu ? 1 : 0) > 1)
    throw SpecError("--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive");
  const std::string mem_note = " MB): Memory specification can not be satisfied";
  if (s.mem_per_node) {
    if (node_mem_mb > 0 && *s.mem_per_node > node_mem_mb)
      throw SpecError("--mem (" + std::to_string(*s.mem_per_node) + " MB) is more than the memory of a node (" +
                      std::to_string(node_mem_mb) + mem_note);
    j.mem_per_node = *s.mem_per_node;
  } else if (s.mem_per_cpu) {  // Slurm refuses more than a node has for one CPU (not x --cpus-per-task)
    if (node_mem_mb > 0 && *s.mem_per_cpu > node_mem_mb)
      throw SpecError("--mem-per-cpu (" + std::to_string(*s.mem_per_cpu) + " MB) is more than the memory of a node (" +
                      std::to_string(node_mem_mb) + mem_note);
    j.mem_per_cpu = *s.mem_per_cpu;
  } else if (s.mem_per_gpu) {
    const int64_t m = *s.mem_per_gpu * std::max(1, gpn);
    if (node_mem_mb > 0 && m > node_mem_mb)
      throw SpecError("--mem-per-gpu (" + std::to_string(*s.mem_per_gpu) + " MB) x " + std::to_string(std::max(1, gpn)) +
                      " GPU(s) is more than the memory of a node (" + std::to_string(node_mem_mb) + mem_note);
    j.mem_per_node = m;
  }
  if (s.exclusive) warn("--exclusive: nodes are always exclusive in a dynres cluster; nothing to change");
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
    j.min_nodes = lo;
    j.max_nodes = hi;
    if (j.min_nodes > j.max_nodes)
      throw SpecError("--min-nodes (" + std::to_string(j.min_nodes) + ") is greater than --max-nodes (" +
                      std::to_string(j.max_nodes) + ")");
    j.req_nodes = s.nodes.value_or(j.max_nodes);
    if (ntasks) j.req_nodes = std::clamp(j.req_nodes, j.min_nodes, j.max_nodes);  // the tasks narrowed the range
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
    j.req_nodes = j.min_nodes = j.max_nodes = task_nodes.value_or(fixed.value_or(1));
    if (j.req_nodes > cluster)
      throw SpecError((task_nodes ? (ntasks ? "--ntasks (" + std::to_string(ntasks) + ") needs " : "--gpus needs ") +
                                        std::to_string(*task_nodes) + " nodes of " + std::to_string(P) +
                                        " CPUs, more than the cluster has ("
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
    throw SpecError("--min-power (" + fmt_watts(*s.min_power) + " W) is greater than --max-power (" +
                    fmt_watts(*s.max_power) + " W)");
  j.min_power = s.min_power;
  j.max_power = s.max_power;
  j.time_limit = s.time_limit.value_or(kUnlimited);
  j.workdir = s.chdir.value_or(cwd);
  if (j.workdir.empty() || j.workdir[0] != '/') j.workdir = cwd + "/" + j.workdir;
  auto abs = [&](const std::string& p) { return p.empty() || p[0] == '/' ? p : j.workdir + "/" + p; };
  j.stdout_path = abs(s.output.value_or(s.array_tasks.empty() ? "slurm-%j.out" : "slurm-%A_%a.out"));
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
