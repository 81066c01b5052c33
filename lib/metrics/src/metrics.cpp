#include "dynres/metrics.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "dynres/hostlist.hpp"

namespace dynres {

std::string gnuplot_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";  // the only escape inside a single-quoted gnuplot string
    else if (c == '\n' || c == '\r') out += ' ';  // a newline would end the command
    else out += c;
  }
  return out + "'";
}

Metrics compute_metrics(const std::vector<JobRecord>& jobs, const std::vector<AllocationRecord>& allocs, int nodes,
                        double tau, const std::vector<ResizeRecord>& resizes) {
  Metrics m;
  m.tau = tau;
  std::unordered_map<int64_t, bool> resized;
  for (auto& r : resizes) {
    (r.expand ? m.expands : m.shrinks)++;
    resized[r.job_id] = true;
  }
  m.resized_jobs = static_cast<int>(resized.size());
  m.jobs = static_cast<int>(jobs.size());
  double first_submit = std::numeric_limits<double>::infinity(), last_end = -first_submit;
  double wait_sum = 0, resp_sum = 0, bsld_sum = 0;
  for (auto& j : jobs) {
    m.by_state[j.state]++;
    first_submit = std::min(first_submit, j.submit_time);
    // One population for wait, response and bounded slowdown: the finished jobs.
    if (j.start_time && j.end_time && is_final_state(j.state)) {
      ++m.finished;
      wait_sum += *j.start_time - j.submit_time;
      double run = *j.end_time - *j.start_time, resp = *j.end_time - j.submit_time;
      resp_sum += resp;
      bsld_sum += std::max(1.0, resp / std::max(run, tau));
      last_end = std::max(last_end, *j.end_time);
    }
  }
  if (m.finished == 0) return m;
  m.makespan = last_end - first_submit;
  m.avg_wait = wait_sum / m.finished;
  m.avg_response = resp_sum / m.finished;
  m.avg_bounded_slowdown = bsld_sum / m.finished;
  double busy = 0;
  for (auto& a : allocs) {
    double s = std::max(a.start_time, first_submit), e = std::min(a.end_time.value_or(last_end), last_end);
    if (e > s) busy += (e - s) * a.num_nodes;
  }
  if (nodes > 0 && m.makespan > 0) m.utilisation = busy / (nodes * m.makespan);
  return m;
}

std::vector<ResizeRecord> resize_events(State& st) {
  std::vector<ResizeRecord> out;
  Stmt s(st.db(), "SELECT job_id, time, kind, detail FROM events WHERE kind IN ('expand','shrink') ORDER BY time, id");
  while (s.step()) {
    ResizeRecord r{s.i64(0), s.f64(1), s.text(2) == "expand", 0, 0};
    if (std::sscanf(s.text(3).c_str(), "from=%d to=%d", &r.from, &r.to) == 2) out.push_back(r);
  }
  return out;
}

std::vector<AllocationRecord> icheck_allocations(State& st, double now) {
  std::vector<AllocationRecord> out;
  Stmt t(st.db(), "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'icheck_lent_history'");
  if (!t.step()) return out;
  Stmt s(st.db(), "SELECT node, start_time, end_time FROM icheck_lent_history ORDER BY start_time, id");
  while (s.step())
    out.push_back({kIcheckAllocation, s.text(0), 1, s.f64(1), s.opt_f64(2).value_or(std::max(now, s.f64(1)))});
  return out;
}

namespace {
bool has_table(State& st, const char* name) {
  Stmt t(st.db(), "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  t.bind(1, std::string(name));
  return t.step();
}
}  // namespace

std::map<std::string, IcheckNodeInfo> icheck_nodes_view(State& st) {
  std::map<std::string, IcheckNodeInfo> out;
  st.db().read_tx([&] {
    if (has_table(st, "icheck_lent")) {
      Stmt s(st.db(), "SELECT n.name, l.state, l.since, l.change_id FROM icheck_lent l JOIN nodes n ON n.id = l.node_id");
      while (s.step()) {
        IcheckNodeInfo& i = out[s.text(0)];
        i.name = s.text(0), i.lent = s.text(1), i.since = s.f64(2), i.change = s.i64(3);
      }
    }
    if (has_table(st, "icheck_nodes")) {
      const bool agents = has_table(st, "icheck_agents");
      Stmt s(st.db(), agents ? "SELECT n.node, n.state, (SELECT COUNT(*) FROM icheck_agents a WHERE a.node = n.node "
                               "AND a.state = 'up') FROM icheck_nodes n"
                             : "SELECT node, state, 0 FROM icheck_nodes");
      std::set<std::string> pool;
      Stmt p(st.db(), "SELECT name FROM nodes");
      while (p.step()) pool.insert(p.text(0));
      while (s.step()) {
        const std::string name = s.text(0), state = s.text(1);
        auto it = out.find(name);
        if (it == out.end()) {  // not lent: a boot node, unless it is a batch node given back
          if (pool.count(name) || state == "removed") continue;
          it = out.emplace(name, IcheckNodeInfo{}).first;
          it->second.name = name;
        }
        it->second.manager = state;
        it->second.agents = static_cast<int>(s.i64(2));
      }
    }
  });
  return out;
}

std::vector<IcheckEvent> icheck_events(State& st) {
  std::vector<IcheckEvent> out;
  Stmt s(st.db(), "SELECT time, kind, detail FROM events WHERE kind LIKE 'icheck\\_%' ESCAPE '\\' ORDER BY time, id");
  while (s.step()) out.push_back({s.f64(0), s.text(1), s.text(2)});
  return out;
}

void rescale_times(std::vector<JobRecord>& jobs, std::vector<AllocationRecord>& allocs, double f) {
  double t0 = std::numeric_limits<double>::infinity();
  for (auto& j : jobs) t0 = std::min(t0, j.submit_time);
  for (auto& a : allocs) t0 = std::min(t0, a.start_time);
  if (!std::isfinite(t0)) return;
  auto sc = [&](double t) { return t0 + (t - t0) * f; };
  for (auto& j : jobs) {
    j.submit_time = sc(j.submit_time);
    if (j.start_time) j.start_time = sc(*j.start_time);
    if (j.end_time) j.end_time = sc(*j.end_time);
  }
  for (auto& a : allocs) {
    a.start_time = sc(a.start_time);
    if (a.end_time) a.end_time = sc(*a.end_time);
  }
}

nlohmann::json to_json(const Metrics& m) {
  return {{"jobs", m.jobs},
          {"finished", m.finished},
          {"makespan_s", m.makespan},
          {"utilisation", m.utilisation},
          {"avg_wait_s", m.avg_wait},
          {"avg_response_s", m.avg_response},
          {"avg_bounded_slowdown", m.avg_bounded_slowdown},
          {"bsld_tau_s", m.tau},
          {"expands", m.expands},
          {"shrinks", m.shrinks},
          {"resized_jobs", m.resized_jobs},
          {"by_state", m.by_state}};
}

namespace {
/// Run gnuplot on dir/plot.gp (no shell), then remove `files`, the script
/// and dir. Throws std::runtime_error with gnuplot's stderr when it fails.
void run_gnuplot(const std::string& dir, const std::vector<std::string>& files) {
  const std::string gp = dir + "/plot.gp";
  // No shell: gnuplot gets the script path as its only argument.
  int rc = -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    int e = ::open((dir + "/err.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (e >= 0) ::dup2(e, 2);
    ::execlp("gnuplot", "gnuplot", gp.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  if (pid > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  }
  std::ifstream ef(dir + "/err.txt");
  std::string err((std::istreambuf_iterator<char>(ef)), std::istreambuf_iterator<char>());
  for (auto& f : files) std::remove(f.c_str());
  std::remove(gp.c_str());
  std::remove((dir + "/err.txt").c_str());
  ::rmdir(dir.c_str());
  if (rc != 0)
    throw std::runtime_error("gnuplot failed (is gnuplot-nox installed?): " + err.substr(0, 400));
}
}  // namespace

void write_gantt_png(const std::string& png, const std::vector<AllocationRecord>& allocs,
                     const std::vector<std::string>& node_order, const std::string& title) {
  std::unordered_map<std::string, int> y;
  for (size_t i = 0; i < node_order.size(); ++i) y[node_order[i]] = static_cast<int>(i);
  double t0 = std::numeric_limits<double>::infinity(), t1 = 0;
  for (auto& a : allocs) t0 = std::min(t0, a.start_time);
  constexpr int64_t kIcheckColour = 0xd62728;
  bool icheck = false;
  char tmpl[] = "/tmp/dynres-gantt-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("cannot create a temporary directory");
  std::string dir = tmpl, data = dir + "/gantt.dat", gp = dir + "/plot.gp";
  {
    std::ofstream d(data);
    for (auto& a : allocs) {
      double s = a.start_time - t0, e = a.end_time.value_or(a.start_time) - t0;
      t1 = std::max(t1, e);
      for (auto& n : expand_hostlist(a.nodelist)) {
        auto it = y.find(n);
        if (it == y.end()) continue;
        // x, y, xlow, xhigh, ylow, yhigh, colour (by job id)
        d << (s + e) / 2 << ' ' << it->second << ' ' << s << ' ' << e << ' ' << it->second - 0.4 << ' '
          << it->second + 0.4 << ' '
          << (a.job_id == kIcheckAllocation ? kIcheckColour : (a.job_id * 2654435761u) % 0xFFFFFF) << '\n';
        icheck = icheck || a.job_id == kIcheckAllocation;
      }
    }
  }
  {
    std::ofstream g(gp);
    g << "set terminal pngcairo size 1400,800 noenhanced\n"
      << "set output " << gnuplot_quote(png) << "\n"
      << "set title " << gnuplot_quote(title) << "\n"
      << "set xlabel 'time since first start [s]'\nset ylabel 'node'\n"
      << "set yrange [-1:" << node_order.size() << "]\n"
      << "set xrange [0:" << std::max(1.0, t1) << "]\n"
      << "set style fill solid 0.85 border rgb 'black'\n"
      << (icheck ? "set key outside top right\n" : "unset key\n");
    if (node_order.size() <= 40) {
      g << "set ytics (";
      for (size_t i = 0; i < node_order.size(); ++i) g << (i ? "," : "") << gnuplot_quote(node_order[i]) << " " << i;
      g << ")\n";
    }
    g << "plot " << gnuplot_quote(data) << " using 1:2:3:4:5:6:7 with boxxyerror lc rgb variable notitle";
    if (icheck)  // a key entry for iCheck's colour (a point outside the ranges)
      g << ", NaN with boxes lc rgb '#d62728' title 'iCheck'";
    g << "\n";
  }
  run_gnuplot(dir, {data});
}

void write_power_png(const std::string& png, const std::vector<PowerSample>& samples, const std::string& title) {
  char tmpl[] = "/tmp/dynres-power-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("cannot create a temporary directory");
  std::string dir = tmpl, data = dir + "/power.dat", gp = dir + "/plot.gp";
  {
    std::ofstream d(data);
    d.precision(12);
    // steps drawn as lines: each value holds until the next sample's time
    for (size_t i = 0; i < samples.size(); ++i) {
      const auto& x = samples[i];
      if (i > 0) {
        const auto& p = samples[i - 1];
        d << x.t << ' ' << p.draw << ' ' << p.lower << ' ' << p.upper << '\n';
      }
      d << x.t << ' ' << x.draw << ' ' << x.lower << ' ' << x.upper << '\n';
    }
  }
  {
    std::ofstream g(gp);
    g << "set terminal pngcairo size 1400,700 noenhanced\n"
      << "set output " << gnuplot_quote(png) << "\n"
      << "set title " << gnuplot_quote(title) << "\n"
      << "set xlabel 'time [s]'\nset ylabel 'power [W]'\nset key outside bottom center horizontal\n"
      << "set style fill transparent solid 0.15 noborder\n"
      << "plot " << gnuplot_quote(data) << " using 1:3:4 with filledcurves lc rgb '#2a9d2a' title 'corridor', "
      << "'' using 1:3 with lines lc rgb '#2a9d2a' notitle, '' using 1:4 with lines lc rgb '#2a9d2a' notitle, "
      << "'' using 1:2 with lines lw 2 lc rgb '#c0392b' title 'draw (modelled)'\n";
  }
  run_gnuplot(dir, {data});
}

}  // namespace dynres
