#include "dynres/views.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "dynres/jobsel.hpp"
#include "dynres/slurmtime.hpp"

namespace dynres {
namespace {

std::string iso(std::optional<double> t) {
  if (!t) return "Unknown";
  time_t s = static_cast<time_t>(*t);
  char b[32];
  strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%S", localtime(&s));
  return b;
}

std::string elapsed(const JobRecord& j, double now) {
  if (!j.start_time) return "0:00";
  double e = (j.end_time ? *j.end_time : now) - *j.start_time;
  return format_duration(static_cast<int64_t>(std::max(0.0, e)));
}

/// A row holds one job: control characters (a newline in a job name or
/// reason) are shown as '?', as squeue does for unprintable bytes.
std::string cell_raw(const JobRecord& j, const std::string& c, double now);
std::string cell(const JobRecord& j, const std::string& c, double now) {
  std::string v = cell_raw(j, c, now);
  for (auto& ch : v)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return v;
}

std::string cell_raw(const JobRecord& j, const std::string& c, double now) {
  if (c == "jobid") return display_id(j);
  if (c == "arrayjobid") return std::to_string(j.array_job_id.value_or(j.id));
  if (c == "arraytaskid") return j.array_task_id ? std::to_string(*j.array_task_id) : "N/A";
  if (c == "name") return j.name;
  if (c == "user") return user_name(j.uid);
  if (c == "state") return j.state;
  if (c == "st") return compact_state(j.state);
  if (c == "nodes") return std::to_string(j.state == kPending ? j.req_nodes : j.num_nodes);
  if (c == "time") return elapsed(j, now);
  if (c == "timelimit") return format_duration(j.time_limit);
  if (c == "nodelist") return j.state == kPending ? "(" + j.reason + ")" : j.nodelist;
  if (c == "reason") return j.reason;
  if (c == "kind") return j.kind;
  if (c == "minnodes") return std::to_string(j.min_nodes);
  if (c == "maxnodes") return std::to_string(j.max_nodes);
  if (c == "constraint") return j.constraint;
  if (c == "submit") return iso(j.submit_time);
  if (c == "start") return iso(j.start_time);
  if (c == "end") return iso(j.end_time);
  if (c == "exitcode") return j.exit_code ? std::to_string(*j.exit_code) : "-";
  if (c == "wait")
    return format_duration(static_cast<int64_t>((j.start_time ? *j.start_time : now) - j.submit_time));
  throw std::invalid_argument("unknown column '" + c + "'");
}

std::string upper(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

const std::vector<std::string>& queue_columns() {
  static const std::vector<std::string> cols = {"jobid", "name", "user", "state", "st", "nodes", "time", "timelimit",
                                                "nodelist", "reason", "kind", "minnodes", "maxnodes",
                                                "constraint", "submit", "start", "end", "exitcode", "wait"};
  return cols;
}

const std::string& default_format() {
  static const std::string f = "jobid,name,state,nodes,time,timelimit,nodelist";
  return f;
}

const std::string& long_format() {
  static const std::string f = "jobid,name,user,state,time,timelimit,nodes,nodelist";
  return f;
}

namespace {
struct Field {
  std::string literal;  ///< text before the field
  std::string column;   ///< "" for trailing text only
  int width = 0;        ///< 0: natural
  bool right = false;
};

// squeue % codes -> our columns and squeue's headers
const std::map<char, std::pair<std::string, std::string>>& percent_codes() {
  static const std::map<char, std::pair<std::string, std::string>> m = {
      {'i', {"jobid", "JOBID"}},        {'A', {"arrayjobid", "ARRAY_JOB_ID"}}, {'a', {"arraytaskid", "ARRAY_TASK_ID"}},        {'j', {"name", "NAME"}},
      {'u', {"user", "USER"}},          {'T', {"state", "STATE"}},        {'t', {"st", "ST"}},
      {'M', {"time", "TIME"}},          {'l', {"timelimit", "TIME_LIMIT"}}, {'D', {"nodes", "NODES"}},
      {'R', {"nodelist", "NODELIST(REASON)"}}, {'N', {"nodelist_only", "NODELIST"}}, {'r', {"reason", "REASON"}},
      {'V', {"submit", "SUBMIT_TIME"}}, {'S', {"start", "START_TIME"}}, {'e', {"end", "END_TIME"}}};
  return m;
}

std::vector<Field> parse_percent_format(const std::string& f) {
  std::vector<Field> out;
  Field cur;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      cur.literal += f[i];
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '%') {
      cur.literal += '%';
      ++i;
      continue;
    }
    size_t k = i + 1;
    bool right = false;
    if (k < f.size() && (f[k] == '.' || f[k] == '-')) right = f[k] == '.', ++k;
    int width = 0;
    while (k < f.size() && std::isdigit(static_cast<unsigned char>(f[k])) && width < 1000) width = width * 10 + (f[k++] - '0');
    if (k >= f.size()) throw std::invalid_argument("--format: '" + f + "' ends inside a % field");
    auto it = percent_codes().find(f[k]);
    if (it == percent_codes().end())
      throw std::invalid_argument(std::string("--format: unknown field code '%") + f[k] +
                                  "' (known: %i %A %a %j %u %T %t %M %l %D %R %N %r %V %S %e)");
    cur.column = it->second.first;
    cur.width = width;
    cur.right = right;
    out.push_back(cur);
    cur = Field{};
    i = k;
  }
  if (!cur.literal.empty()) out.push_back(cur);
  return out;
}

std::string fit(const std::string& v, int width, bool right) {
  if (width <= 0) return v;
  if (static_cast<int>(v.size()) >= width) return v.substr(0, width);
  std::string pad(width - v.size(), ' ');
  return right ? pad + v : v + pad;
}

std::string percent_cell(const JobRecord& j, const std::string& c, double now) {
  if (c == "nodelist_only") return j.nodelist;
  return cell(j, c, now);
}

std::string render_percent(const std::vector<JobRecord>& jobs, const std::string& format, double now, bool header) {
  auto fields = parse_percent_format(format);
  std::string out;
  auto line = [&](auto value_of) {
    std::string l;
    for (auto& f : fields) {
      l += f.literal;
      if (!f.column.empty()) l += fit(value_of(f), f.width, f.right);
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  if (header) {
    line([](const Field& f) {
      for (auto& [code, ch] : percent_codes())
        if (ch.first == f.column) return ch.second;
      return std::string();
    });
  }
  for (auto& j : jobs) line([&](const Field& f) { return percent_cell(j, f.column, now); });
  return out;
}
}  // namespace

std::string render_table(const std::vector<JobRecord>& jobs, const std::string& format, double now, bool header) {
  if (format.find('%') != std::string::npos) return render_percent(jobs, format, now, header);
  std::vector<std::string> cols;
  std::stringstream ss(format);
  for (std::string c; std::getline(ss, c, ',');) {
    std::transform(c.begin(), c.end(), c.begin(), [](unsigned char x) { return std::tolower(x); });
    if (std::find(queue_columns().begin(), queue_columns().end(), c) == queue_columns().end())
      throw std::invalid_argument("--format: unknown column '" + c + "'");
    cols.push_back(c);
  }
  if (cols.empty()) throw std::invalid_argument("--format: no columns");
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head;
  for (auto& c : cols) head.push_back(c == "nodelist" ? "NODELIST(REASON)" : upper(c));
  if (header) rows.push_back(head);
  for (auto& j : jobs) {
    std::vector<std::string> r;
    for (auto& c : cols) r.push_back(cell(j, c, now));
    rows.push_back(r);
  }
  std::vector<size_t> w(cols.size(), 0);
  for (auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  std::string out;
  for (auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      bool num = cols[i] == "jobid" || cols[i] == "nodes";
      std::string v = r[i];
      std::string padding(w[i] - v.size(), ' ');
      line += (i ? " " : "") + (num ? padding + v : (i + 1 < r.size() ? v + padding : v));
    }
    out += line + "\n";
  }
  return out;
}

std::string render_detail(const JobRecord& j, double now) {
  std::ostringstream o;
  o << "JobId=" << j.id
    << (j.array_job_id ? " ArrayJobId=" + std::to_string(*j.array_job_id) +
                             " ArrayTaskId=" + std::to_string(j.array_task_id.value_or(0))
                       : std::string())
    << " JobName=" << j.name << "\n"
    << "   UserId=" << j.uid << " JobState=" << j.state << " Reason=" << j.reason
    << " ExitCode=" << (j.exit_code ? std::to_string(*j.exit_code) : "-") << "\n"
    << "   Kind=" << j.kind << " NumNodes=" << (j.state == kPending ? j.req_nodes : j.num_nodes)
    << " MinNodes=" << j.min_nodes << " MaxNodes=" << j.max_nodes << " NodeConstraint=" << j.constraint << "\n"
    << "   RunTime=" << elapsed(j, now) << " TimeLimit=" << format_duration(j.time_limit) << "\n"
    << "   SubmitTime=" << iso(j.submit_time) << " StartTime=" << iso(j.start_time) << " EndTime=" << iso(j.end_time)
    << "\n"
    << "   NodeList=" << (j.nodelist.empty() ? "(null)" : j.nodelist)
    << " ReqNodeList=" << (j.req_nodelist.empty() ? "(null)" : j.req_nodelist)
    << " ExcNodeList=" << (j.exc_nodelist.empty() ? "(null)" : j.exc_nodelist) << "\n"
    << "   Held=" << (j.held ? "yes" : "no") << " BeginTime=" << (j.begin_time ? iso(j.begin_time) : "None") << "\n"
    << "   NumTasks=" << (j.ntasks ? j.ntasks : (j.state == kPending ? j.req_nodes : j.num_nodes) * std::max(1, j.ntasks_per_node))
    << " CPUs/Task=" << j.cpus_per_task << " NtasksPerN=" << j.ntasks_per_node
    << (j.mem_per_cpu > 0 ? " MinMemoryCPU=" + std::to_string(j.mem_per_cpu) + "M"
                          : " MinMemoryNode=" + (j.mem_per_node > 0 ? std::to_string(j.mem_per_node) + "M" : "0"))
    << " Gres=" << (j.gpus_per_node ? "gpu:" + std::to_string(j.gpus_per_node) : "(null)") << "\n"
    << "   Dependency=" << (j.dependency.empty() ? "(null)" : j.dependency)
    << (j.array_job_id ? " ArrayTaskThrottle=" + std::to_string(j.array_max) : std::string()) << "\n"
    << "   Requeue=" << (j.requeue ? 1 : 0) << " Restarts=" << j.restarts
    << (j.node_fail.empty() ? std::string() : " LostNodes=" + j.node_fail) << "\n";
  if (j.min_power || j.max_power)
    o << "   MinPower=" << (j.min_power ? std::to_string(*j.min_power) + "W" : "-")
      << " MaxPower=" << (j.max_power ? std::to_string(*j.max_power) + "W" : "-") << "\n";
  o << "   WorkDir=" << j.workdir << "\n   StdOut=" << j.stdout_path << "\n   StdErr=" << j.stderr_path << "\n";
  return o.str();
}

std::string node_state_name(const NodeRecord& n) {
  if (n.state == "down") return "down";
  if (n.state == "drain") return n.job_id ? "draining" : "drained";
  return n.job_id ? "allocated" : "idle";
}

std::string icheck_state_name(const IcheckNodeInfo& i) {
  if (i.manager == "down") return "down";
  if (i.lent == "granting") return "lending";
  if (i.lent == "reclaiming") return "returning";
  return "icheck";
}

namespace {
nlohmann::json icheck_json(const IcheckNodeInfo& i) {
  return {{"lent", i.lent.empty() ? nlohmann::json(nullptr) : nlohmann::json(i.lent)},
          {"since", i.since > 0 ? nlohmann::json(i.since) : nlohmann::json(nullptr)},
          {"change", i.change},
          {"manager", i.manager.empty() ? nlohmann::json(nullptr) : nlohmann::json(i.manager)},
          {"agents", i.agents}};
}
std::string icheck_reason(const IcheckNodeInfo& i) {
  return "checkpoint node (iCheck), " + std::to_string(i.agents) + " agent" + (i.agents == 1 ? "" : "s");
}
}  // namespace

nlohmann::json nodes_to_json(const std::vector<NodeRecord>& nodes, const std::map<std::string, IcheckNodeInfo>& ic) {
  nlohmann::json arr = nlohmann::json::array();
  for (auto& n : nodes) {
    auto it = ic.find(n.name);
    const bool lent = it != ic.end();
    nlohmann::json o = {{"name", n.name},
                        {"state", lent && n.state == "up" ? icheck_state_name(it->second) : node_state_name(n)},
                        {"base_state", n.state},
                        {"partition", lent ? "icheck" : "batch"},
                        {"cpus", n.cpus},
                        {"reason", n.reason},
                        {"host", n.host}};
    o["job_id"] = n.job_id ? nlohmann::json(n.job_id) : nlohmann::json(nullptr);
    o["reason_time"] = n.reason_time ? nlohmann::json(*n.reason_time) : nlohmann::json(nullptr);
    o["reason_uid"] = n.reason_uid ? nlohmann::json(*n.reason_uid) : nlohmann::json(nullptr);
    if (lent) o["icheck"] = icheck_json(it->second);
    arr.push_back(o);
  }
  std::set<std::string> pool;
  for (auto& n : nodes) pool.insert(n.name);
  for (auto& [name, i] : ic) {
    if (pool.count(name)) continue;
    arr.push_back({{"name", name}, {"state", icheck_state_name(i)}, {"base_state", i.manager == "down" ? "down" : "up"},
                   {"partition", "icheck"}, {"cpus", nullptr}, {"reason", ""}, {"host", ""}, {"job_id", nullptr},
                   {"reason_time", nullptr}, {"reason_uid", nullptr}, {"icheck", icheck_json(i)}});
  }
  return {{"nodes", arr}};
}

std::string render_nodes(const std::vector<NodeRecord>& nodes, bool header,
                         const std::map<std::string, IcheckNodeInfo>& ic) {
  std::ostringstream o;
  char b[512];
  if (header) {
    std::snprintf(b, sizeof b, "%-10s %-10s %4s %-8s %-19s %-10s %s\n", "NODELIST", "STATE", "CPUS", "JOBID", "TIMESTAMP",
                  "USER", "REASON");
    o << b;
  }
  for (auto& n : nodes) {
    auto it = ic.find(n.name);
    if (it != ic.end() && n.state == "up") {  // lent to iCheck: its state, since when, by the scheduler
      const IcheckNodeInfo& i = it->second;
      std::snprintf(b, sizeof b, "%-10s %-10s %4d %-8s %-19s %-10s %s\n", n.name.c_str(), icheck_state_name(i).c_str(),
                    n.cpus, "-", i.since > 0 ? iso(i.since).c_str() : "Unknown", "-", icheck_reason(i).c_str());
      o << b;
      continue;
    }
    std::string user = n.reason_uid ? user_name(*n.reason_uid) : "Unknown";
    std::snprintf(b, sizeof b, "%-10s %-10s %4d %-8s %-19s %-10s %s\n", n.name.c_str(), node_state_name(n).c_str(),
                  n.cpus, n.job_id ? std::to_string(n.job_id).c_str() : "-",
                  n.reason_time && !n.reason.empty() ? iso(n.reason_time).c_str() : "Unknown",
                  n.reason.empty() ? "-" : user.c_str(), n.reason.empty() ? "none" : n.reason.c_str());
    o << b;
  }
  std::set<std::string> pool;
  for (auto& n : nodes) pool.insert(n.name);
  for (auto& [name, i] : ic) {  // iCheck's boot nodes
    if (pool.count(name)) continue;
    std::snprintf(b, sizeof b, "%-10s %-10s %4s %-8s %-19s %-10s %s\n", name.c_str(), icheck_state_name(i).c_str(), "-",
                  "-", "Unknown", "-", icheck_reason(i).c_str());
    o << b;
  }
  return o.str();
}

std::string render_icheck_events(const std::vector<IcheckEvent>& ev) {
  std::ostringstream o;
  char b[600];
  std::snprintf(b, sizeof b, "%-19s %-15s %s\n", "ICHECK_TIME", "EVENT", "DETAIL");
  o << b;
  for (auto& e : ev) {
    std::string kind = e.kind.rfind("icheck_", 0) == 0 ? e.kind.substr(7) : e.kind;
    std::string detail = e.detail.substr(0, 400);
    for (char& c : detail)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    std::snprintf(b, sizeof b, "%-19s %-15s %s\n", iso(e.time).c_str(), kind.c_str(), detail.c_str());
    o << b;
  }
  return o.str();
}

std::string render_metrics(const Metrics& m, int nodes) {
  char b[2048];
  std::snprintf(b, sizeof b,
                "jobs                      %d (%d finished) on %d nodes\n"
                "makespan                  %.1f s\n"
                "average utilisation       %.1f %%\n"
                "average wait              %.1f s\n"
                "average response          %.1f s\n"
                "average bounded slowdown  %.2f (tau = %.0f s)\n"
                "resizes                   %d expands, %d shrinks (%d jobs resized)\n",
                m.jobs, m.finished, nodes, m.makespan, 100 * m.utilisation, m.avg_wait, m.avg_response,
                m.avg_bounded_slowdown, m.tau, m.expands, m.shrinks, m.resized_jobs);
  std::string out = b;
  out += "jobs by state            ";
  for (auto& [s, n] : m.by_state) out += " " + s + "=" + std::to_string(n);
  return out + "\n";
}

std::string render_summary(const std::vector<JobRecord>& jobs) {
  int done = 0, run = 0, pend = 0;
  std::map<std::string, int> fin;
  for (auto& j : jobs) {
    if (j.state == kRunning) ++run;
    else if (j.state == kPending) ++pend;
    else ++done, ++fin[j.state];
  }
  std::string s = std::to_string(jobs.size()) + " jobs: " + std::to_string(done) + " done, " + std::to_string(run) +
                  " running, " + std::to_string(pend) + " pending";
  if (!fin.empty()) {
    s += " (";
    bool first = true;
    for (auto& [k, v] : fin) s += (first ? "" : " ") + k + "=" + std::to_string(v), first = false;
    s += ")";
  }
  return s;
}

}  // namespace dynres
