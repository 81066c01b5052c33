// mjsched's watch for slow nodes (slow_watch.hpp).
#include "slow_watch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "dynres/db.hpp"
#include "dynres/resize_store.hpp"
#include "dynres/schedd.hpp"
#include "dynres/state.hpp"
#include "expand_after.hpp"
#include "resize_server.hpp"

namespace dynres::schedd {

namespace {
constexpr size_t kMaxRanks = 4096;         ///< reporting processes kept per job and window

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

/// Seconds the job has left at its current pace: from its reported
/// progress when it reported some, else from its time limit; -1 unknown.
double remaining_time(State& st, const JobRecord& j, double now) {
  const double start = j.start_time.value_or(now);
  if (auto info = resize::job_info(st, j.id); info && info->progress > 0 && info->progress <= 1)
    return std::max(0.0, (now - start) * (1 - info->progress) / info->progress);
  if (j.time_limit > 0) return std::max(0.0, start + static_cast<double>(j.time_limit) - now);
  return -1;
}

/// Seconds the job's last committed restart-based resize took from its
/// adapt-begin (the pause) to its commit; -1 when it had none.
double measured_restart_cost(State& st, int64_t job) {
  double cost = -1;
  for (auto& o : resize::orders_of(st, job))
    if (o.state == "committed" && o.restart && o.settled >= 0)
      cost = o.settled - (o.begun >= 0 ? o.begun : o.order.sent);
  return cost;
}
}  // namespace

void SlowWatch::perf(int64_t job, pid_t pid, const std::string& node, const sched::RankSample& r, double now) {
  if (!cfg_.enabled) return;
  Job& j = jobs_[job];
  if (j.window_start < 0) j.window_start = now;
  auto it = j.ranks.find(pid);
  if (it == j.ranks.end()) {
    if (j.ranks.size() >= kMaxRanks) return;
    it = j.ranks.emplace(pid, Acc{node}).first;
  }
  if (it->second.node != node) it->second = Acc{node};  // a process cannot move: a new one with its pid
  sched::RankSample& s = it->second.sum;
  s.compute_s += r.compute_s;
  s.mpi_s += r.mpi_s;
  if (r.cpu_s >= 0 && r.delay_s >= 0 && s.cpu_s >= 0) {
    s.cpu_s += r.cpu_s;
    s.delay_s += r.delay_s;
  } else {
    s.cpu_s = s.delay_s = -1;  // a window's availability needs all its reports'
  }
}

void SlowWatch::pass(State& st, ResizeServer& rz, double now) {
  if (!cfg_.enabled || jobs_.empty()) return;
  std::map<int64_t, JobRecord> running;
  for (auto& j : st.jobs({kRunning})) running.emplace(j.id, j);
  for (auto it = jobs_.begin(); it != jobs_.end();)
    it = running.count(it->first) ? std::next(it) : jobs_.erase(it);
  for (auto& [id, j] : jobs_) {
    if (j.cooldown_read) continue;
    // the job's last migration, also one ordered before mjsched restarted
    Stmt s(st.db(), "SELECT MAX(time) FROM events WHERE job_id=? AND kind='migrate'");
    s.bind(1, id);
    if (s.step() && !s.is_null(0)) j.last_migration = s.f64(0);
    j.cooldown_read = true;
  }
  const size_t keep = static_cast<size_t>(std::max(16, 4 * cfg_.windows));
  bool enough = false;  // a window closed in this pass for a job that has enough of them
  for (auto& [id, j] : jobs_) {
    if (j.window_start >= 0 && now - j.window_start >= cfg_.window) {
      if (!j.ranks.empty()) {
        enough = enough || (!after_.pending(id) && j.windows.size() + 1 >= static_cast<size_t>(cfg_.windows));
        std::vector<std::pair<std::string, Acc>> w;
        for (auto& [pid, a] : j.ranks) w.emplace_back(a.node, a);
        j.windows.push_back(std::move(w));
        j.ends.push_back(now);
        if (j.windows.size() > keep) j.windows.erase(j.windows.begin()), j.ends.erase(j.ends.begin());
      }
      j.ranks.clear();
      j.window_start = now;
    }
  }
  if (!enough) return;
  std::vector<int64_t> node_ids;
  auto snap = build_snapshot(st, now, node_ids);
  rz.annotate(snap, now);
  after_.annotate(snap);
  std::map<std::string, int> index;
  for (size_t i = 0; i < snap.nodes.size(); ++i) index[snap.nodes[i].name] = static_cast<int>(i);
  std::vector<sched::JobWindows> jws;
  for (auto& [id, j] : jobs_) {
    if (after_.pending(id) || j.windows.size() < static_cast<size_t>(cfg_.windows)) continue;
    sched::JobWindows jw;
    jw.job = id;
    for (size_t k = 0; k < j.windows.size(); ++k) {
      sched::PerfWindow w{j.ends[k], {}};
      for (auto& [node, a] : j.windows[k])
        if (auto it = index.find(node); it != index.end()) {
          w.ranks.push_back(a.sum);
          w.ranks.back().node = it->second;
        }
      jw.windows.push_back(std::move(w));
    }
    jw.last_migration = j.last_migration;
    jw.remaining = remaining_time(st, running.at(id), now);
    jw.restart_cost = measured_restart_cost(st, id);
    jws.push_back(std::move(jw));
  }
  auto r = sched::find_slow_nodes(snap, jws, cfg_);
  for (auto& s : r.slow) {
    Job& j = jobs_[s.job];
    const std::string& name = snap.nodes.at(s.node).name;
    if (!j.announced.insert(name).second) continue;
    log_("job " + std::to_string(s.job) + ": node " + name + " is slow: its ranks' iteration time is " + fmt(s.ratio) +
         " x the job's median for " + std::to_string(cfg_.windows) + " windows of " + fmt(cfg_.window) + " s");
    st.event(now, s.job, "slow_node",
             "node=" + name + " ratio=" + fmt(s.ratio) + " windows=" + std::to_string(cfg_.windows));
  }
  for (auto& m : r.migrations) {
    Job& j = jobs_[m.job];
    const std::string from = snap.nodes.at(m.from).name, to = m.to >= 0 ? snap.nodes.at(m.to).name : "-";
    std::string why;
    auto oid = rz.shrink_away(st, m.job, {from}, now, &why);
    if (!oid) {
      log_("job " + std::to_string(m.job) + ": migration off " + from + " not ordered: " + why);
      continue;
    }
    const std::string detail = std::string("kind=") + sched::to_string(m.kind) + " from=" + from + " to=" + to +
                               " order=" + std::to_string(*oid) + " ratio=" + fmt(m.ratio) +
                               " remaining=" + (m.remaining >= 0 ? fmt(m.remaining) : "-") +
                               " break_even=" + fmt(m.break_even) + " cost=" + fmt(m.cost);
    log_("job " + std::to_string(m.job) + ": migrate off slow node: " + detail);
    st.event(now, m.job, "migrate", detail);
    j.last_migration = now;
    j.windows.clear(), j.ends.clear(), j.ranks.clear(), j.announced.clear();
    j.window_start = -1;
    if (m.kind == sched::MigrationKind::swap) after_.add(st, m.job, {*oid, {to}, "swap", from});
  }
  for (auto& [job, note] : r.notes) {
    Job& j = jobs_[job];
    const std::string key = note.substr(0, note.find(" ("));  // without the figures of this pass
    if (key == j.last_note) continue;
    j.last_note = key;
    log_("job " + std::to_string(job) + ": " + note);
    st.event(now, job, "migrate_note", note);
  }
}

}  // namespace dynres::schedd
