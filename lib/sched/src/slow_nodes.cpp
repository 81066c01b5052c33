#include "dynres/slow_nodes.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace dynres::sched {

const char* to_string(MigrationKind k) { return k == MigrationKind::swap ? "swap" : "shrink"; }

double compute_share(const RankSample& r) {
  if (!(r.compute_s >= 0) || !(r.mpi_s >= 0) || !std::isfinite(r.compute_s) || !std::isfinite(r.mpi_s)) return -1;
  const double t = r.compute_s + r.mpi_s;
  return t > 0 ? r.compute_s / t : -1;
}

double cpu_availability(const RankSample& r) {
  if (!(r.cpu_s >= 0) || !(r.delay_s >= 0) || !std::isfinite(r.cpu_s) || !std::isfinite(r.delay_s)) return -1;
  const double runnable = r.cpu_s + r.delay_s, wall = r.compute_s + r.mpi_s;
  if (!(runnable > 0) || !std::isfinite(wall) || runnable < 0.25 * wall) return -1;
  return r.cpu_s / runnable;
}

double break_even(double ratio, double after, double cost) {
  if (!(cost > 0)) return 0;
  if (!(ratio > after)) return std::numeric_limits<double>::infinity();
  return cost / (1 - after / ratio);
}

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Per node of the job: the iteration time its values in window w imply
/// over the job's median (the larger of the two measures), for the nodes
/// with data; empty when the window has no comparison.
std::map<int, double> ratios(const PerfWindow& w, const std::set<int>& held) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::map<int, std::vector<double>> share, avail;
  std::vector<double> all_share, all_avail;
  for (auto& r : w.ranks) {
    if (!held.count(r.node)) continue;
    if (const double v = compute_share(r); v >= 0) share[r.node].push_back(v), all_share.push_back(v);
    if (const double a = cpu_availability(r); a >= 0) avail[r.node].push_back(a), all_avail.push_back(a);
  }
  std::map<int, double> out;
  if (share.size() >= 2) {
    const double m = median(all_share);
    for (auto& [node, vals] : share) {
      // The job's ranks wait for the node's excess over the median (its
      // ranks' compute beyond the job's typical rank, a share of the common
      // iteration time): the job's iteration time over the one it would have
      // without that excess. Not the shares' quotient: in a message-bound
      // job (shares of a few %) a rank with a little extra work outside MPI
      // (rank 0 talking to the scheduler and iCheck, its time in a loaded
      // machine's run queues) has twice the median share and slows the job
      // by a few %.
      const double excess = median(vals) - m;
      out[node] = excess >= 1 ? inf : 1 / (1 - std::max(0.0, excess));
    }
  }
  if (avail.size() >= 2) {
    const double m = median(all_avail);
    for (auto& [node, vals] : avail) {
      const double a = median(vals);
      // a node that got no CPU at all while the others got some: slow
      const double r = a > 0 ? m / a : (m > 0 ? inf : 0);
      out[node] = out.count(node) ? std::max(out[node], r) : r;
    }
  }
  return out;
}
}  // namespace

SlowReaction find_slow_nodes(const Snapshot& snap, const std::vector<JobWindows>& jobs, const SlowNodeConfig& cfg) {
  SlowReaction out;
  if (!cfg.enabled || cfg.windows < 1) return out;
  std::set<int> given;  // idle nodes already promised to a swap of this call
  for (auto& jw : jobs) {
    auto rj = std::find_if(snap.running.begin(), snap.running.end(), [&](auto& r) { return r.id == jw.job; });
    if (rj == snap.running.end() || rj->nodes.empty()) continue;
    const std::set<int> held(rj->nodes.begin(), rj->nodes.end());
    // streaks, newest window first
    std::map<int, int> streak;
    std::map<int, double> least;  // smallest ratio over the streak
    std::set<int> broken;
    for (auto w = jw.windows.rbegin(); w != jw.windows.rend(); ++w) {
      for (auto& [node, ratio] : ratios(*w, held)) {
        if (broken.count(node)) continue;
        if (ratio > cfg.factor) {
          if (streak[node] < cfg.windows) {
            ++streak[node];
            least[node] = least.count(node) ? std::min(least[node], ratio) : ratio;
          }
        } else {
          broken.insert(node);
        }
      }
    }
    std::vector<SlowNode> found;
    for (auto& [node, n] : streak)
      if (n >= cfg.windows) found.push_back({jw.job, node, least[node]});
    if (found.empty()) continue;
    out.slow.insert(out.slow.end(), found.begin(), found.end());
    // the slowest node first; ties: the highest index
    std::sort(found.begin(), found.end(), [](auto& a, auto& b) { return a.ratio != b.ratio ? a.ratio > b.ratio : a.node > b.node; });
    const int first = *held.begin();
    const SlowNode* pick = nullptr;
    for (auto& s : found)
      if (s.node != first) {
        pick = &s;
        break;
      }
    auto note = [&](const std::string& why) { out.notes.push_back({jw.job, why}); };
    if (!pick) {
      note("slow node " + snap.nodes.at(first).name + " is the job's first node (its batch script runs there): not moved");
      continue;
    }
    const std::string name = snap.nodes.at(pick->node).name;
    if (rj->kind != JobKind::malleable || !rj->accepting) {
      note("slow node " + name + ": the job does not accept resize orders");
      continue;
    }
    if (rj->adapting || snap.adapting) {
      note("slow node " + name + ": a resize order is outstanding");
      continue;
    }
    if (jw.last_migration >= 0 && snap.now - jw.last_migration < cfg.cooldown) {
      note("slow node " + name + ": within the cooldown (migrated " +
           std::to_string(static_cast<long>(snap.now - jw.last_migration)) + " s ago)");
      continue;
    }
    const double cost = jw.restart_cost >= 0 ? jw.restart_cost : std::max(0.0, cfg.restart_cost);
    const bool known = jw.remaining >= 0;
    int idle = -1;
    for (size_t i = 0; i < snap.nodes.size() && idle < 0; ++i)
      if (snap.nodes[i].up && snap.nodes[i].job == 0 && !given.count(static_cast<int>(i))) idle = static_cast<int>(i);
    Migration m{jw.job, MigrationKind::swap, pick->node, idle, pick->ratio, jw.remaining, 0, 2 * cost};
    std::string why;
    if (idle >= 0) {
      m.break_even = break_even(pick->ratio, 1, m.cost);
      if (!known || jw.remaining > m.break_even) {  // the swap pays for its two resizes
        given.insert(idle);
        out.migrations.push_back(m);
        continue;
      }
      why = "swap onto " + snap.nodes[idle].name + " does not pay";
    } else {
      why = "no idle node";
    }
    const int n = static_cast<int>(held.size());
    const int left = largest_admissible(rj->constraint, std::max(1, rj->min_nodes), n - 1);
    if (left == n - 1) {
      m = {jw.job, MigrationKind::shrink, pick->node, -1, pick->ratio, jw.remaining, 0, cost};
      m.break_even = break_even(pick->ratio, static_cast<double>(n) / (n - 1), cost);
      if (!known || jw.remaining > m.break_even) {  // the shrink pays for its resize
        out.migrations.push_back(m);
        continue;
      }
      why += "; a shrink does not pay";
    } else {
      why += "; the job cannot shrink to " + std::to_string(n - 1) + " node(s)";
    }
    char b[160];
    std::snprintf(b, sizeof b, " (remaining %.0f s, ratio %.2f, restart cost %.1f s)", jw.remaining, pick->ratio, cost);
    note("slow node " + name + ": " + why + b);
  }
  return out;
}

}  // namespace dynres::sched
