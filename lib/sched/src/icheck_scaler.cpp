// [John24 Alg. 8 (and its scale-down side), Alg. 9 lines 31-38]; semantics in dynres/icheck_scaler.hpp.
#include "dynres/icheck_scaler.hpp"

#include <algorithm>
#include <set>

namespace dynres::sched::icheck {

const char* to_string(ScalerAction a) {
  switch (a) {
    case ScalerAction::request_high: return "request HIGH";
    case ScalerAction::request_low: return "request LOW";
    case ScalerAction::query: return "query";
    case ScalerAction::none: break;
  }
  return "none";
}

namespace {
double used_fraction(const ScalerNode& n) {
  if (!(n.total_mem > 0)) return 0;
  return 1.0 - std::clamp(n.avail_mem, 0.0, n.total_mem) / n.total_mem;
}
}  // namespace

ScalerResult proactive_scaler(const std::vector<ScalerNode>& nodes, const ScalerConfig& cfg,
                              const ScalerState& state) {
  ScalerResult res;
  res.state = state;
  int up = 0;
  for (const auto& n : nodes) up += n.up;
  const bool room = up < cfg.max_nodes;

  // memory pass (lines 2-20)
  std::vector<const ScalerNode*> flagged;
  double combined = 0;
  for (const auto& n : nodes) {
    if (!n.up) continue;
    if (used_fraction(n) > cfg.lower) flagged.push_back(&n);
    else combined += std::clamp(n.avail_mem, 0.0, std::max(0.0, n.total_mem));
  }
  for (const ScalerNode* n : flagged) {
    if (used_fraction(*n) > cfg.upper && n->depletion_rate > cfg.depletion_rate) {
      res.flagged = {n->name};
      if (!room) return res;
      res.action = combined < n->total_mem ? ScalerAction::request_high : ScalerAction::request_low;
      res.nodes = 1;
      return res;
    }
    combined -= n->total_mem;
  }

  // bandwidth / checkpoint frequency pass (lines 21-35)
  if (!(cfg.bw_threshold > 0)) return res;
  res.flagged.clear();
  for (const auto& n : nodes)
    if (n.up && n.bandwidth >= 0 && n.bandwidth < cfg.bw_threshold && n.cp_frequency > cfg.cp_threshold)
      res.flagged.push_back(n.name);
  if (res.flagged.empty() || !room) return res;
  if (state.pending_query && state.idle_nodes >= 1) {
    res.state.pending_query = false;
    res.state.idle_nodes = -1;
    res.action = ScalerAction::request_low;
    res.nodes = 1;
    return res;
  }
  res.state.pending_query = true;
  res.state.idle_nodes = -1;
  res.action = ScalerAction::query;
  return res;
}

std::vector<std::string> removal_candidates(const std::vector<ScalerNode>& nodes, int count, int min_nodes) {
  std::vector<const ScalerNode*> up;
  for (const auto& n : nodes)
    if (n.up) up.push_back(&n);
  const int spare = static_cast<int>(up.size()) - std::max(1, min_nodes);
  const int k = std::clamp(count, 0, std::max(0, spare));
  std::sort(up.begin(), up.end(), [](const ScalerNode* a, const ScalerNode* b) {
    if (a->avail_mem != b->avail_mem) return a->avail_mem > b->avail_mem;
    if (a->agents != b->agents) return a->agents < b->agents;
    return a->name < b->name;
  });
  std::vector<std::string> v;
  for (int i = 0; i < k; ++i) v.push_back(up[i]->name);
  return v;
}

ReleaseResult idle_release(const std::vector<ScalerNode>& nodes, const std::vector<std::string>& lent,
                           const ReleaseConfig& cfg, double now, const ReleaseState& state) {
  ReleaseResult res;
  const std::set<std::string> borrowed(lent.begin(), lent.end());
  int up = 0;
  double used = 0, total = 0;
  std::vector<const ScalerNode*> due;
  for (const auto& n : nodes) {
    if (!n.up) continue;
    ++up;
    const double t = std::max(0.0, n.total_mem);
    total += t;
    used += t - std::clamp(n.avail_mem, 0.0, t);
    if (!borrowed.count(n.name)) continue;
    if (n.agents > 0 && !(used_fraction(n) < cfg.below)) continue;  // busy: starts over
    auto it = state.idle_since.find(n.name);
    auto ag = state.agents.find(n.name);
    const bool same = it != state.idle_since.end() && ag != state.agents.end() && ag->second == n.agents;
    const double since = same ? std::min(it->second, now) : now;
    res.state.idle_since[n.name] = since;
    res.state.agents[n.name] = n.agents;
    if (cfg.after > 0 && now - since >= cfg.after) due.push_back(&n);
  }
  if (due.empty() || up <= std::max(1, cfg.min_nodes)) return res;
  std::sort(due.begin(), due.end(), [](const ScalerNode* a, const ScalerNode* b) {
    if (a->avail_mem != b->avail_mem) return a->avail_mem > b->avail_mem;
    if (a->agents != b->agents) return a->agents < b->agents;
    return a->name < b->name;
  });
  for (const ScalerNode* n : due) {
    const double stays = total - std::max(0.0, n->total_mem);
    if (used > cfg.lower * stays) continue;  // the others could not hold what it holds
    res.node = n->name;
    res.state.idle_since.erase(n->name);
    res.state.agents.erase(n->name);
    break;
  }
  return res;
}

}  // namespace dynres::sched::icheck
