// FCFS, Backfilling and EASY-Backfilling as one pure pass over a snapshot
// ([John24 Alg. 1 line 4]; [Finnerty24 §"Job scheduling algorithms"] with
// the moldable extension; EASY per Lifka 1995 / Mu'alem & Feitelson 2001).
// Semantics are documented at decide() in dynres/sched.hpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "detail.hpp"
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

int requested_size(const WaitingJob& j) {
  if (j.kind == JobKind::rigid) return min_size(j);
  if (int s = largest_admissible(j.constraint, j.min_nodes, std::min(j.req_nodes, j.max_nodes))) return s;
  return smallest_admissible(j.constraint, j.min_nodes, j.max_nodes);
}

namespace detail {

Pool::Pool(const Snapshot& s) {
  if (s.idle_known) {
    free = s.idle;
    up = s.up_count;
    return;
  }
  free.reserve(s.nodes.size());
  for (int i = 0; i < static_cast<int>(s.nodes.size()); ++i) {
    if (!s.nodes[i].up) continue;
    ++up;
    if (s.nodes[i].job == 0) free.push_back(i);
  }
}

std::vector<int> Pool::take(int k) {
  const int idle = std::min<int>(k, static_cast<int>(free.size() - next));
  std::vector<int> v(free.begin() + next, free.begin() + next + idle);
  next += idle;
  if (idle < k) {
    v.insert(v.end(), extra.end() - (k - idle), extra.end());
    extra.resize(extra.size() - (k - idle));
    std::sort(v.begin(), v.end());
  }
  return v;
}

int Pool::avail_for(const WaitingJob& j) const {
  if (j.required.empty() && j.excluded.empty()) return avail();
  auto unallocated = [&](int n) {
    return std::find(free.begin() + next, free.end(), n) != free.end() ||
           std::find(extra.begin(), extra.end(), n) != extra.end();
  };
  for (int n : j.required)
    if (!unallocated(n)) return 0;
  auto allowed = [&](int n) { return std::find(j.excluded.begin(), j.excluded.end(), n) == j.excluded.end(); };
  int k = 0;
  for (size_t i = next; i < free.size(); ++i) k += allowed(free[i]);
  for (int n : extra) k += allowed(n);
  return k;
}

std::vector<int> Pool::take_for(const WaitingJob& j, int k) {
  std::vector<int> v = j.required;
  auto chosen = [&](int n) { return std::find(v.begin(), v.end(), n) != v.end(); };
  auto allowed = [&](int n) { return std::find(j.excluded.begin(), j.excluded.end(), n) == j.excluded.end(); };
  for (size_t i = next; i < free.size() && static_cast<int>(v.size()) < k; ++i)
    if (allowed(free[i]) && !chosen(free[i])) v.push_back(free[i]);
  for (size_t i = 0; i < extra.size() && static_cast<int>(v.size()) < k; ++i)
    if (allowed(extra[i]) && !chosen(extra[i])) v.push_back(extra[i]);
  // remove them from the pool; the unallocated part of `free` stays ascending
  std::vector<int> rest(free.begin() + next, free.end());
  std::erase_if(rest, chosen);
  free.resize(next);
  free.insert(free.end(), rest.begin(), rest.end());
  std::erase_if(extra, chosen);
  std::sort(v.begin(), v.end());
  return v;
}

namespace {
/// The size a malleable job asks for under `rule`, capped by the up nodes.
int rule_size(const WaitingJob& j, SizeRule rule, int up) {
  if (rule == SizeRule::minimum) return min_size(j);
  WaitingJob c = j;
  c.req_nodes = std::min(j.req_nodes, up);
  return requested_size(c);
}
}  // namespace

int need_of(const WaitingJob& j, SizeRule rule, int up) {
  if (j.kind != JobKind::malleable || rule == SizeRule::fit) return min_size(j);
  return rule_size(j, rule, up);
}

int size_of(const WaitingJob& j, SizeRule rule, int up, int free) {
  if (j.kind != JobKind::malleable || rule == SizeRule::fit) return start_size(j, free);
  int s = rule_size(j, rule, up);
  return s > 0 && s <= free ? s : 0;
}

int start_phase(const Snapshot& snap, const PolicyConfig& cfg, Queue q, SizeRule rule, Pool& pool,
                Decision& d) {
  const auto& nodes = snap.nodes;
  const int up = pool.up;
  int head_index = -1;
  auto restricted = [](const WaitingJob& j) { return !j.required.empty() || !j.excluded.empty(); };
  auto start = [&](const WaitingJob& j, int k) {
    d.starts.push_back({j.id, restricted(j) ? pool.take_for(j, k) : pool.take(k)});
  };
  auto hold = [&](const WaitingJob& j, const char* why) { d.holds.emplace_back(j.id, why); };
  auto never = [&](const WaitingJob& j) {
    int m = need_of(j, rule, up);
    return m == 0 || m > up;
  };
  // the size j starts with when `free` nodes are idle: restricted jobs count
  // only the nodes they may get, and need all their required ones
  auto size = [&](const WaitingJob& j, int free) {
    if (!restricted(j)) return size_of(j, rule, up, free);
    int s = size_of(j, rule, up, std::min(free, pool.avail_for(j)));
    return s >= static_cast<int>(j.required.size()) ? s : 0;
  };

  d.starts.reserve(d.starts.size() + std::min<size_t>(snap.waiting.size(), pool.free.size()));
  d.holds.reserve(d.holds.size() + snap.waiting.size());
  const int W = static_cast<int>(snap.waiting.size());

  switch (q) {
    case Queue::fcfs: {
      bool blocked = false;
      for (int i = 0; i < W; ++i) {
        const auto& j = snap.waiting[i];
        if (never(j)) { hold(j, "Resources"); continue; }
        if (blocked) { hold(j, "Priority"); continue; }
        if (int s = size(j, pool.avail())) start(j, s);
        else { hold(j, "Resources"); blocked = true; head_index = i; }
      }
      break;
    }
    case Queue::backfill:
      for (int i = 0; i < W; ++i) {
        const auto& j = snap.waiting[i];
        if (int s = size(j, pool.avail())) start(j, s);
        else {
          hold(j, "Resources");
          if (head_index < 0 && !never(j)) head_index = i;
        }
      }
      break;
    case Queue::easy: {
      // Releases of running jobs (up nodes only; down nodes stay unusable),
      // sorted once by expected end, never earlier than now.
      std::vector<Release> running;
      running.reserve(snap.running.size());
      int64_t reach = 0;  // nodes released at a finite time, running + this pass
      for (const auto& r : snap.running) {
        int k = 0;
        if (snap.idle_known && snap.up_count == static_cast<int>(nodes.size()))  // all valid and up (Snapshot::idle_known)
          k = static_cast<int>(r.nodes.size());
        else
          for (int n : r.nodes) k += n >= 0 && n < static_cast<int>(nodes.size()) && nodes[n].up;
        double end = r.predicted_end >= 0 ? r.predicted_end
                                          : r.start_time + assumed_limit(r.time_limit, cfg.default_time_limit);
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
      for (int i = 0; i < W; ++i) {
        const auto& j = snap.waiting[i];
        if (never(j)) { hold(j, "Resources"); continue; }
        int s = size(j, pool.avail());
        double lim = j.time_limit;
        if (!head) {
          const int need = need_of(j, rule, up);
          if (s) {
            start(j, s);
            double end = snap.now + assumed_limit(lim, cfg.default_time_limit);
            if (end < kInf) { pass.push_back({end, s}); reach += s; }
          } else if (need <= pool.avail() + reach) {
            std::stable_sort(pass.begin(), pass.end(),
                             [](const Release& a, const Release& b) { return a.t < b.t; });
            std::tie(shadow, extra) = reserve(need, pool.avail(), snap.now, running, pass);
            head = true;
            head_index = i;
            hold(j, "Resources");
          } else {
            hold(j, "Resources");  // unreachable by known ends: no reservation
          }
          continue;
        }
        if (s && lim >= 0 && snap.now + lim <= shadow) { start(j, s); continue; }
        if (s) s = size(j, static_cast<int>(std::min<int64_t>(pool.avail(), extra)));
        if (s) { start(j, s); extra -= s; continue; }
        hold(j, "Priority");
      }
      break;
    }
  }
  return head_index;
}

}  // namespace detail

Decision decide(const Snapshot& snap, const PolicyConfig& cfg) {
  return snap.icheck.present ? detail::decide_icheck(snap, cfg) : detail::decide_base(snap, cfg);
}

Decision detail::decide_base(const Snapshot& snap, const PolicyConfig& cfg) {
  if (cfg.policy == Policy::power) return detail::decide_power(snap, cfg);
  if (is_malleable_policy(cfg.policy)) return detail::decide_malleable(snap, cfg);
  Decision d;
  detail::Pool pool(snap);
  detail::Queue q = cfg.policy == Policy::fcfs       ? detail::Queue::fcfs
                    : cfg.policy == Policy::backfill ? detail::Queue::backfill
                                                     : detail::Queue::easy;
  detail::start_phase(snap, cfg, q, detail::SizeRule::fit, pool, d);
  return d;
}

}  // namespace dynres::sched
