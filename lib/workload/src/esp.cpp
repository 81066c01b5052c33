#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "dynres/workload.hpp"

namespace dynres::workload {

using sched::Constraint;

const std::vector<EspType>& esp_table() {
  static const std::vector<EspType> t = {
      {'A', 0.03125, 75, 267, Constraint::none}, {'B', 0.06250, 9, 322, Constraint::pof2},
      {'C', 0.50000, 3, 534, Constraint::none},  {'D', 0.25000, 3, 616, Constraint::even},
      {'E', 0.50000, 3, 315, Constraint::none},  {'F', 0.06250, 9, 1846, Constraint::pof2},
      {'G', 0.12500, 6, 1334, Constraint::even}, {'H', 0.15625, 6, 1067, Constraint::odd},
      {'I', 0.03125, 24, 1432, Constraint::none}, {'J', 0.06250, 24, 725, Constraint::pof2},
      {'K', 0.09375, 15, 487, Constraint::none}, {'L', 0.12500, 36, 366, Constraint::even},
      {'M', 0.25000, 15, 187, Constraint::none}, {'Z', 1.00000, 2, 100, Constraint::none},
  };
  return t;
}

int esp_size(const EspType& t, int nodes) {
  int n = std::max(1, static_cast<int>(std::lround(t.fraction * nodes)));
  n = std::min(n, nodes);
  int down = sched::largest_admissible(t.constraint, 1, n);
  if (down > 0) return down;
  int up = sched::smallest_admissible(t.constraint, n, nodes);
  if (up > 0) return up;
  throw std::invalid_argument(std::string("ESP type ") + t.type + ": no admissible size on " + std::to_string(nodes) +
                              " nodes");
}

double amdahl_runtime(double runtime, int n0, int n, double s) {
  return runtime * (s + (1 - s) / n) / (s + (1 - s) / n0);
}

std::vector<EspJob> esp_workload(const EspOptions& o) {
  if (o.nodes < 1) throw std::invalid_argument("ESP: --nodes must be >= 1");
  if (!(o.scale > 0)) throw std::invalid_argument("ESP: --scale must be > 0");
  if (o.moldable_fraction < 0 || o.moldable_fraction > 1)
    throw std::invalid_argument("ESP: --moldable-fraction must be in [0, 1]");
  if (o.serial_fraction < 0 || o.serial_fraction > 1)
    throw std::invalid_argument("ESP: --serial-fraction must be in [0, 1]");
  std::vector<std::pair<const EspType*, int>> jobs;  // (type, instance)
  for (auto& t : esp_table())
    for (int k = 1; k <= t.count; ++k) jobs.push_back({&t, k});
  std::mt19937_64 rng(o.seed);
  for (size_t i = jobs.size() - 1; i > 0; --i) std::swap(jobs[i], jobs[rng() % (i + 1)]);  // Fisher–Yates
  std::vector<EspJob> out;
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto& [t, k] = jobs[i];
    EspJob j;
    j.seq = static_cast<int>(i);
    j.type = t->type;
    j.name = std::string("esp-") + t->type + "-" + std::to_string(k);
    j.submit_offset = i * o.interval * o.scale;
    j.nodes = esp_size(*t, o.nodes);
    j.constraint = t->constraint;
    j.runtime = t->runtime * o.scale;
    double r = static_cast<double>(rng() >> 11) / 9007199254740992.0;  // [0,1)
    j.moldable = t->type != 'Z' && r < o.moldable_fraction;
    j.min_nodes = j.max_nodes = j.nodes;
    if (j.moldable) {
      int hi = std::min(o.moldable_max, o.nodes);
      j.min_nodes = sched::smallest_admissible(t->constraint, 1, hi);
      j.max_nodes = std::max(j.nodes, sched::largest_admissible(t->constraint, 1, hi));
    }
    double worst = amdahl_runtime(j.runtime, j.nodes, j.min_nodes, o.serial_fraction);
    j.time_limit = static_cast<int64_t>(std::ceil(worst * o.limit_factor));
    out.push_back(j);
  }
  return out;
}

}  // namespace dynres::workload
