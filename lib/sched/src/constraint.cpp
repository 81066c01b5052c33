// Node-count constraints and name parsing ([John24 Listing 4.1],
// --node-constraints; [Finnerty24 §"Job scheduling algorithms"]).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <utility>

#include "dynres/sched.hpp"

namespace dynres::sched {
namespace {

// floor(sqrt(n)) and floor(cbrt(n)) for 0 <= n < 2^40, exact.
int64_t isqrt(int64_t n) {
  auto r = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
  while (r * r > n) --r;
  while ((r + 1) * (r + 1) <= n) ++r;
  return r;
}
int64_t icbrt(int64_t n) {
  auto r = static_cast<int64_t>(std::cbrt(static_cast<double>(n)));
  while (r * r * r > n) --r;
  while ((r + 1) * (r + 1) * (r + 1) <= n) ++r;
  return r;
}

}  // namespace

std::optional<Constraint> parse_constraint(const std::string& s) {
  if (s == "none") return Constraint::none;
  if (s == "even") return Constraint::even;
  if (s == "odd") return Constraint::odd;
  if (s == "pof2") return Constraint::pof2;
  if (s == "square") return Constraint::square;
  if (s == "cube" || s == "ncube") return Constraint::cube;
  return std::nullopt;
}

std::string to_string(Constraint c) {
  switch (c) {
    case Constraint::none: return "none";
    case Constraint::even: return "even";
    case Constraint::odd: return "odd";
    case Constraint::pof2: return "pof2";
    case Constraint::square: return "square";
    case Constraint::cube: return "cube";
  }
  return "none";
}

bool admissible(Constraint c, int n) {
  if (n < 1) return false;
  switch (c) {
    case Constraint::none: return true;
    case Constraint::even: return n % 2 == 0;
    case Constraint::odd: return n % 2 == 1;
    case Constraint::pof2: return std::has_single_bit(static_cast<unsigned>(n));
    case Constraint::square: { int64_t r = isqrt(n); return r * r == n; }
    case Constraint::cube: { int64_t r = icbrt(n); return r * r * r == n; }
  }
  return false;
}

int largest_admissible(Constraint c, int lo, int hi) {
  lo = std::max(lo, 1);
  if (hi < lo) return 0;
  int64_t h = hi, r = 0;
  switch (c) {
    case Constraint::none: r = h; break;
    case Constraint::even: r = h - (h & 1); break;
    case Constraint::odd: r = h - !(h & 1); break;
    case Constraint::pof2: r = std::bit_floor(static_cast<uint64_t>(h)); break;
    case Constraint::square: r = isqrt(h); r *= r; break;
    case Constraint::cube: r = icbrt(h); r = r * r * r; break;
  }
  return r >= lo ? static_cast<int>(r) : 0;
}

int smallest_admissible(Constraint c, int lo, int hi) {
  lo = std::max(lo, 1);
  if (hi < lo) return 0;
  int64_t l = lo, r = 0;
  switch (c) {
    case Constraint::none: r = l; break;
    case Constraint::even: r = l + (l & 1); break;
    case Constraint::odd: r = l + !(l & 1); break;
    case Constraint::pof2: r = std::bit_ceil(static_cast<uint64_t>(l)); break;
    case Constraint::square: r = isqrt(l); if (r * r < l) ++r; r *= r; break;
    case Constraint::cube: r = icbrt(l); if (r * r * r < l) ++r; r = r * r * r; break;
  }
  return r <= hi ? static_cast<int>(r) : 0;
}

namespace {
constexpr std::pair<Policy, const char*> kPolicyNames[] = {
    {Policy::fcfs, "fcfs"},   {Policy::backfill, "backfill"}, {Policy::easy, "easy"},
    {Policy::fpsma, "fpsma"}, {Policy::egs, "egs"},           {Policy::minagree, "minagree"},
    {Policy::perf, "perf"},   {Policy::power, "power"}};
}  // namespace

std::optional<Policy> parse_policy(const std::string& s) {
  for (auto& [p, n] : kPolicyNames)
    if (s == n) return p;
  return std::nullopt;
}

std::string to_string(Policy p) {
  for (auto& [q, n] : kPolicyNames)
    if (p == q) return n;
  return "fcfs";
}

bool is_malleable_policy(Policy p) {
  return p == Policy::fpsma || p == Policy::egs || p == Policy::minagree || p == Policy::perf ||
         p == Policy::power;
}

}  // namespace dynres::sched
