// Malleable and moldable shares of a trace's jobs (sim.hpp apply_shares()):
// which jobs, their node ranges and their Amdahl serial fractions. The
// anchoring to the recorded run time is the engine's (work is measured at
// req_nodes, engine.cpp).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>
#include <stdexcept>

#include "dynres/sim.hpp"

namespace dynres::sim {

namespace {
double unit(std::mt19937_64& g) { return static_cast<double>(g() >> 11) / 9007199254740992.0; }

bool number(const std::string& s, double& v) {
  errno = 0;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return !s.empty() && errno == 0 && end && *end == 0 && std::isfinite(v);
}

void check(const ShareOptions& o) {
  auto share = [](double f) { return f >= 0 && f <= 1; };
  if (!share(o.malleable) || !share(o.moldable))
    throw std::invalid_argument("the malleable and moldable shares must lie in [0, 1]");
  if (o.malleable + o.moldable > 1 + 1e-12)
    throw std::invalid_argument("--malleable-fraction plus --moldable-fraction must not exceed 1");
  if (o.nodes < 1) throw std::invalid_argument("the machine needs at least one node");
  if (!(o.range_lo > 0 && o.range_lo <= 1) || !(o.range_hi >= 1) || !std::isfinite(o.range_hi))
    throw std::invalid_argument("--malleable-range LO:HI needs 0 < LO <= 1 <= HI");
  if (!(o.serial_lo >= 0 && o.serial_lo <= o.serial_hi && o.serial_hi < 1) ||
      (o.serial_lo == 0 && o.serial_hi > 0))
    throw std::invalid_argument("--serial-fraction needs 0 < LO <= HI < 1 (or one value in [0, 1))");
}
}  // namespace

void parse_share_range(const std::string& s, ShareOptions& o) {
  auto c = s.find(':');
  double lo, hi;
  if (c == std::string::npos || !number(s.substr(0, c), lo) || !number(s.substr(c + 1), hi))
    throw std::invalid_argument("--malleable-range: expected LO:HI (factors of the recorded size), got '" +
                                s.substr(0, 40) + "'");
  if (!(lo > 0 && lo <= 1) || !(hi >= 1 && hi <= 1e6))
    throw std::invalid_argument("--malleable-range: LO must lie in (0, 1] and HI in [1, 1e6], got '" + s.substr(0, 40) + "'");
  o.range_lo = lo;
  o.range_hi = hi;
}

void parse_serial_fraction(const std::string& s, ShareOptions& o) {
  auto c = s.find(':');
  double lo, hi;
  bool ok = c == std::string::npos ? number(s, lo) && (hi = lo, true)
                                   : number(s.substr(0, c), lo) && number(s.substr(c + 1), hi);
  if (!ok) throw std::invalid_argument("--serial-fraction: expected S or LO:HI, got '" + s.substr(0, 40) + "'");
  if (!(lo >= 0 && lo <= hi && hi < 1) || (lo == 0 && hi > 0))
    throw std::invalid_argument("--serial-fraction: need 0 < LO <= HI < 1 (a single value: 0 <= S < 1), got '" +
                                s.substr(0, 40) + "'");
  o.serial_lo = lo;
  o.serial_hi = hi;
}

ShareCounts apply_shares(std::vector<SimJob>& jobs, const ShareOptions& o) {
  check(o);
  ShareCounts n;
  if (o.malleable == 0 && o.moldable == 0) return n;  // untouched: today's rigid run, bit for bit
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return submitted_before(jobs[a], jobs[b]); });
  // one serial fraction per job in submission order (its own stream), then
  // the shuffle that picks the shares: neither depends on the shares
  std::mt19937_64 gs(o.seed ^ 0x73657269616cULL);
  std::vector<double> serial(jobs.size());
  for (size_t i : order)
    serial[i] = o.serial_lo == o.serial_hi ? o.serial_lo : o.serial_lo * std::pow(o.serial_hi / o.serial_lo, unit(gs));
  std::mt19937_64 g(o.seed ^ 0x7377667368617265ULL);
  std::shuffle(order.begin(), order.end(), g);
  const size_t total = jobs.size();
  const size_t km = static_cast<size_t>(std::llround(static_cast<double>(total) * o.malleable));
  const size_t kd = std::min(total - km, static_cast<size_t>(std::llround(static_cast<double>(total) * o.moldable)));
  for (size_t x = 0; x < km + kd; ++x) {
    SimJob& j = jobs[order[x]];
    const int size = j.req_nodes;
    if (size < 1) continue;
    const int lo = std::max(1, static_cast<int>(std::ceil(size * o.range_lo - 1e-9)));
    const int hi = std::max(size, static_cast<int>(std::min<double>(o.nodes, std::floor(size * o.range_hi + 1e-9))));
    j.kind = x < km ? sched::JobKind::malleable : sched::JobKind::moldable;
    j.min_nodes = std::min(lo, size);
    j.max_nodes = hi;
    j.constraint = sched::Constraint::none;
    j.serial = serial[order[x]];
    j.phases.clear();
    if (j.time_limit >= 0) {
      const double f0 = time_factor(Model::amdahl, j.serial, size), f1 = time_factor(Model::amdahl, j.serial, j.min_nodes);
      j.time_limit = std::ceil(j.time_limit * f1 / f0);
      j.limit_nodes = j.min_nodes;
    }
    ++(x < km ? n.malleable : n.moldable);
  }
  return n;
}

}  // namespace dynres::sim
