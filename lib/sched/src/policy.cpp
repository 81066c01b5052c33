// FCFS, Backfilling and EASY-Backfilling as one pure pass over a snapshot
// (seed 000 Algorithm 1 line 4; seed 002 §"Job scheduling algorithms" with
// the moldable extension; EASY per Lifka 1995 / Mu'alem & Feitelson 2001).
// Semantics are documented at decide() in dynres/sched.hpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "dynres/sched.hpp"

namespace dynres::sched {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Nodes that become free at time t (seconds).
struct Release {
  double t;
  int nodes;
};

/// Seconds a job is assumed to run for a reservation: its limit, else the
/// configured default; a negative default means "never ends".
double assumed_limit(double limit, double dflt) {
  if (limit >= 0) return limit;
  return dflt >= 0 ? dflt : kInf;
}

/// Shadow time and extra nodes for a head needing `need` nodes when `have`
/// are free now; `a` and `b` are sorted by time. The caller guarantees that
/// have + all releases >= need. Releases at the shadow time all count.
std::pair<double, int64_t> reserve(int need, int64_t have, double now,
                                   const std::vector<Release>& a,
                                   const std::vector<Release>& b) {
  size_t i = 0, k = 0;
  double t = now;
  auto next = [&]() -> const Release& {
    if (k == b.size() || (i < a.size() && a[i].t <= b[k].t)) return a[i++];
    return b[k++];
  };
  while (have < need) {
    const Release& r = next();
    have += r.nodes;
    t = r.t;
  }
  for (; i < a.size() && a[i].t <= t; ++i) have += a[i].nodes;
  for (; k < b.size() && b[k].t <= t; ++k) have += b[k].nodes;
  return {t, have - need};
}

}  // namespace

int min_size(const WaitingJob& j) {
  if (j.kind == JobKind::rigid)
    return admissible(j.constraint, j.req_nodes) ? j.req_nodes : 0;
  return smallest_admissible(j.constraint, j.min_nodes, j.max_nodes);
}

int start_size(const WaitingJob& j, int free) {
  if (j.kind == JobKind::rigid)
    return admissible(j.constraint, j.req_nodes) && j.req_nodes <= free ? j.req_nodes : 0;
  return largest_admissible(j.constraint, j.min_nodes, std::min(j.max_nodes, free));
}

Decision decide(const Snapshot& snap, const PolicyConfig& cfg) {
  Decision d;
  const auto& nodes = snap.nodes;

  // Idle, up nodes in ascending order; free[next..] are still unallocated.
  std::vector<int> free;
  free.reserve(nodes.size());
  int up = 0;
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    if (!nodes[i].up) continue;
    ++up;
    if (nodes[i].job == 0) free.push_back(i);
  }
  size_t next = 0;
  auto avail = [&] { return static_cast<int>(free.size() - next); };
  auto start = [&](const WaitingJob& j, int k) {
    d.starts.push_back({j.id, std::vector<int>(free.begin() + next, free.begin() + next + k)});
    next += k;
  };
  auto hold = [&](const WaitingJob& j, const char* why) { d.holds.emplace_back(j.id, why); };
  auto never = [&](const WaitingJob& j) {
    int m = min_size(j);
    return m == 0 || m > up;
  };

  d.starts.reserve(std::min<size_t>(snap.waiting.size(), free.size()));
  d.holds.reserve(snap.waiting.size());

  switch (cfg.policy) {
    case Policy::fcfs: {
      bool blocked = false;
      for (const auto& j : snap.waiting) {
        if (never(j)) { hold(j, "Resources"); continue; }
        if (blocked) { hold(j, "Priority"); continue; }
        if (int s = start_size(j, avail())) start(j, s);
        else { hold(j, "Resources"); blocked = true; }
      }
      break;
    }
    case Policy::backfill:
      for (const auto& j : snap.waiting) {
        if (int s = start_size(j, avail())) start(j, s);
        else hold(j, "Resources");
      }
      break;
    case Policy::easy: {
      // Releases of running jobs (up nodes only; down nodes stay unusable),
      // sorted once by expected end, never earlier than now.
      std::vector<Release> running;
      running.reserve(snap.running.size());
      int64_t reach = 0;  // nodes released at a finite time, running + this pass
      for (const auto& r : snap.running) {
        int k = 0;
        for (int n : r.nodes)
          k += n >= 0 && n < static_cast<int>(nodes.size()) && nodes[n].up;
        double end = r.start_time + assumed_limit(r.time_limit, cfg.default_time_limit);
        if (k == 0 || !(end < kInf)) continue;
        running.push_back({std::max(end, snap.now), k});
        reach += k;
      }
      std::sort(running.begin(), running.end(),
                [](const Release& a, const Release& b) { return a.t < b.t; });
      std::vector<Release> pass;  // starts ahead of the head; sorted once it is found

      bool head = false;
      double shadow = 0;
      int64_t extra = 0;
      for (const auto& j : snap.waiting) {
        if (never(j)) { hold(j, "Resources"); continue; }
        int s = start_size(j, avail());
        double lim = j.time_limit;
        if (!head) {
          if (s) {
            start(j, s);
            double end = snap.now + assumed_limit(lim, cfg.default_time_limit);
            if (end < kInf) { pass.push_back({end, s}); reach += s; }
          } else if (min_size(j) <= avail() + reach) {
            std::stable_sort(pass.begin(), pass.end(),
                             [](const Release& a, const Release& b) { return a.t < b.t; });
            std::tie(shadow, extra) = reserve(min_size(j), avail(), snap.now, running, pass);
            head = true;
            hold(j, "Resources");
          } else {
            hold(j, "Resources");  // unreachable by known ends: no reservation
          }
          continue;
        }
        if (s && lim >= 0 && snap.now + lim <= shadow) { start(j, s); continue; }
        if (s) s = start_size(j, static_cast<int>(std::min<int64_t>(avail(), extra)));
        if (s) { start(j, s); extra -= s; continue; }
        hold(j, "Priority");
      }
      break;
    }
  }
  return d;
}

}  // namespace dynres::sched
