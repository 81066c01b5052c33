// iCheck-aware scheduling: the scheduler's side of lending nodes to the
// checkpoint service and taking them back [John24 §7.3.2.2, Alg. 10, 11].
// Semantics are documented at decide() in dynres/sched.hpp. Pure: no I/O.
#include <algorithm>
#include <string>

#include "detail.hpp"
#include "dynres/sched.hpp"

namespace dynres::sched {

std::optional<IcheckFavour> parse_icheck_favour(const std::string& s) {
  if (s == "icheck") return IcheckFavour::icheck;
  if (s == "applications") return IcheckFavour::applications;
  return std::nullopt;
}

const char* to_string(IcheckFavour f) { return f == IcheckFavour::icheck ? "icheck" : "applications"; }

namespace detail {
namespace {

int nodes_held(const Snapshot& s) {
  int k = std::max(0, s.icheck.fixed_nodes);
  for (const auto& n : s.nodes) k += n.job == kIcheckJob;
  return k;
}

/// Idle, up nodes of `s` that decision `d` neither starts nor expands on,
/// ascending.
std::vector<int> idle_after(const Snapshot& s, const Decision& d) {
  std::vector<char> used(s.nodes.size(), 0);
  auto mark = [&](const std::vector<int>& v) {
    for (int n : v)
      if (n >= 0 && n < static_cast<int>(used.size())) used[n] = 1;
  };
  for (const auto& st : d.starts) mark(st.nodes);
  for (const auto& e : d.expands) mark(e.nodes);
  std::vector<int> v;
  for (int i = 0; i < static_cast<int>(s.nodes.size()); ++i)
    if (s.nodes[i].up && s.nodes[i].job == 0 && !used[i]) v.push_back(i);
  return v;
}

/// Alg. 10 lines 21-33: shrink resizable malleable jobs of `s`, lowest MTCT
/// first (unknown last; ties: latest start first), until `need` nodes are
/// on their way. Marks the shrunk jobs adapting in `s`. Returns the nodes
/// ordered released.
int shrink_for_icheck(Snapshot& s, const PolicyConfig& cfg, int need, std::vector<Resize>& out) {
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(s.running.size()); ++i)
    if (resizable(s.running[i], s, cfg)) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const RunningJob &x = s.running[a], &y = s.running[b];
    const bool kx = x.mtct >= 0, ky = y.mtct >= 0;
    if (kx != ky) return kx;
    if (kx && x.mtct != y.mtct) return x.mtct < y.mtct;
    return x.start_time > y.start_time;
  });
  int got = 0;
  for (int i : order) {
    if (got >= need) break;
    RunningJob& r = s.running[i];
    const int cur = static_cast<int>(r.nodes.size());
    const int to = down_by_need(r, cur, need - got);
    if (to <= 0 || to >= cur) continue;
    std::vector<int> nodes = r.nodes;
    std::sort(nodes.begin(), nodes.end());
    std::vector<int> released(nodes.end() - (cur - to), nodes.end());
    got += cur - to;
    r.adapting = true;
    out.push_back({r.id, std::move(released), true});
  }
  return got;
}

/// Alg. 11 lines 8-17 and 28-31: reclaim candidates for the highest-priority
/// waiting job `d` did not start, when idle nodes plus candidates cover it
/// (sets d.icheck_reclaim_job when it returns some).
std::vector<int> reclaim_for_head(const Snapshot& s, const PolicyConfig& cfg, Decision& d, int idle_left,
                                  bool keep_headroom = false) {
  const IcheckView& ic = s.icheck;
  const int floor = std::max(1, ic.min_nodes);
  const int spare = nodes_held(s) - floor;
  if (spare <= 0) return {};
  std::vector<const WaitingJob*> head;
  for (const auto& j : s.waiting) {
    bool started = std::any_of(d.starts.begin(), d.starts.end(), [&](const Start& st) { return st.job == j.id; });
    if (started) continue;
    head.push_back(&j);
    break;
  }
  if (head.empty() || !head[0]->required.empty() || !head[0]->excluded.empty()) return {};
  int up = 0;
  for (const auto& n : s.nodes) up += n.up;
  const int need = min_size(*head[0]);
  if (need <= idle_left || need == 0 || need > up) return {};
  std::vector<const IcheckNode*> cand;
  for (const auto& n : ic.nodes) {
    if (n.node < 0 || n.node >= static_cast<int>(s.nodes.size())) continue;
    if (s.nodes[n.node].job != kIcheckJob || !s.nodes[n.node].up || !(n.total_mem > 0) || n.reclaim_wait) continue;
    if (n.avail_mem > cfg.icheck_reclaim_free * n.total_mem) cand.push_back(&n);
  }
  const int take = need - idle_left;
  if (take > std::min<int>(spare, static_cast<int>(cand.size()))) return {};
  std::sort(cand.begin(), cand.end(), [](const IcheckNode* a, const IcheckNode* b) {
    if (a->avail_mem != b->avail_mem) return a->avail_mem > b->avail_mem;
    if (a->agents != b->agents) return a->agents < b->agents;
    return a->node < b->node;
  });
  std::vector<int> v;
  double kept = ic.total_mem;
  for (int i = 0; i < take; ++i) v.push_back(cand[i]->node), kept -= cand[i]->total_mem;
  if (keep_headroom && !(ic.used_mem <= 0.5 * kept)) return {};
  std::sort(v.begin(), v.end());
  d.icheck_reclaim_job = head[0]->id;
  return v;
}

}  // namespace

Decision decide_icheck(const Snapshot& snap, const PolicyConfig& cfg) {
  const IcheckView& ic = snap.icheck;
  const int request = std::max(0, ic.request_nodes);
  const bool high = request > 0 && ic.request_urgency == Urgency::high;
  if (ic.in_flight > 0) {  // one exchange at a time: the request waits
    Decision d = decide_base(snap, cfg);
    d.icheck_request_left = request;
    return d;
  }
  const int want = std::min(request, std::max(0, ic.max_nodes - nodes_held(snap)));
  auto grant = [](Decision& d, const std::vector<int>& idle, int k) {
    for (int i = 0; i < k && i < static_cast<int>(idle.size()); ++i) d.icheck_grants.push_back(idle[i]);
  };

  if (cfg.icheck_favour == IcheckFavour::icheck) {
    Snapshot s = snap;
    std::vector<int> first;  // Alg. 10 lines 2-8: HIGH from idle nodes first
    if (high)
      for (int i = 0; i < static_cast<int>(s.nodes.size()) && static_cast<int>(first.size()) < want; ++i)
        if (s.nodes[i].up && s.nodes[i].job == 0) {
          first.push_back(i);
          s.nodes[i].job = kIcheckJob;
        }
    std::vector<Resize> shrinks;
    const int short_by = want - static_cast<int>(first.size());
    bool any_adapting = s.adapting;
    for (const auto& r : s.running) any_adapting = any_adapting || r.adapting;
    if (high && short_by > 0 && !any_adapting) {
      shrink_for_icheck(s, cfg, short_by, shrinks);
      if (!shrinks.empty()) s.adapting = true;  // the base policy resizes nothing else
    }
    Decision d = decide_base(s, cfg);
    d.shrinks.insert(d.shrinks.begin(), shrinks.begin(), shrinks.end());
    d.icheck_grants = first;
    if (high) {
      d.icheck_request_left = want - static_cast<int>(first.size());
    } else if (want > 0) {  // Alg. 10 lines 35-41: LOW from what the pass left idle
      grant(d, idle_after(s, d), want);
    } else if (request == 0) {
      // no request: nodes iCheck no longer fills go back to a waiting job
      // ([John24 §7.3.2]: "iRM can reclaim nodes from iCheck ... to cater to
      // the resource demands of a high priority job")
      d.icheck_reclaims = reclaim_for_head(snap, cfg, d, static_cast<int>(idle_after(s, d).size()), true);
    }
    return d;
  }

  // favour applications (Alg. 11)
  Decision d = decide_base(snap, cfg);
  std::vector<int> idle = idle_after(snap, d);
  if (request > 0 && !high)
    d.notes.push_back("iCheck LOW request for " + std::to_string(request) +
                      " node(s) dropped (scheduler.icheck.favour: applications)");
  if (high) {
    grant(d, idle, want);  // lines 34-38: idle nodes left, the rest dropped
  } else {
    d.icheck_reclaims = reclaim_for_head(snap, cfg, d, static_cast<int>(idle.size()));
  }
  return d;
}

}  // namespace detail
}  // namespace dynres::sched
