#include "dynres/node_health.hpp"

#include <algorithm>

namespace dynres::sched {

NodeReaction react_to_nodes(const Snapshot& snap) {
  NodeReaction out;
  std::vector<int> idle;  // idle, up nodes not yet given as a replacement, lowest first
  for (size_t i = 0; i < snap.nodes.size(); ++i)
    if (snap.nodes[i].up && snap.nodes[i].job == 0) idle.push_back(static_cast<int>(i));
  size_t next_idle = 0;
  for (const auto& r : snap.running) {
    if (r.nodes.empty()) continue;
    std::vector<int> lost, drained, healthy;
    for (int i : r.nodes) {
      if (i < 0 || i >= static_cast<int>(snap.nodes.size())) continue;
      const Node& n = snap.nodes[i];
      (n.up ? healthy : n.lost ? lost : drained).push_back(i);
    }
    if (lost.empty() && drained.empty()) continue;
    std::sort(lost.begin(), lost.end());
    std::sort(healthy.begin(), healthy.end());
    const int first = *std::min_element(r.nodes.begin(), r.nodes.end());
    // nodes to give back: all lost ones, and drained ones
    std::vector<int> away = lost;
    away.insert(away.end(), drained.begin(), drained.end());
    std::sort(away.begin(), away.end());
    const bool keeps_first = !std::binary_search(away.begin(), away.end(), first);
    const bool can_order = r.kind == JobKind::malleable && r.accepting;
    const int left = static_cast<int>(healthy.size());
    const int target = largest_admissible(r.constraint, std::max(1, r.min_nodes), left);
    const bool can_restart = r.kind == JobKind::malleable && r.restartable && !lost.empty();
    // an order outstanding (the job may not accept another meanwhile): it settles first
    if (r.kind == JobKind::malleable && r.adapting && keeps_first && target > 0 && !can_restart) continue;
    if ((can_order || can_restart) && keeps_first && target > 0) {
      Resize s{r.id, away};
      // a node constraint may need a smaller size: give back the highest
      // healthy nodes, never the first
      for (int k = left - 1, extra = left - target; k >= 0 && extra > 0; --k)
        if (healthy[k] != first) s.nodes.push_back(healthy[k]), --extra;
      std::sort(s.nodes.begin(), s.nodes.end());
      if (can_restart) {
        // idle nodes in the place of those given back: the job keeps its size
        const int now_n = static_cast<int>(r.nodes.size()), after = now_n - static_cast<int>(s.nodes.size());
        const int avail = static_cast<int>(idle.size() - next_idle);
        const int want = std::min({now_n, std::max(r.max_nodes, after), after + avail});
        const int to = largest_admissible(r.constraint, std::max(1, r.min_nodes), want);
        std::vector<int> repl;
        for (int k = after; k < to; ++k) repl.push_back(idle[next_idle++]);
        out.replacements.push_back(std::move(repl));
      }
      (can_restart ? out.restarts : out.shrinks).push_back(std::move(s));
      continue;
    }
    if (!lost.empty()) out.failures.push_back({r.id, lost});
  }
  return out;
}

}  // namespace dynres::sched
