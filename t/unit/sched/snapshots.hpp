// Helpers shared by the hand-made-snapshot tests of lib/sched.
#pragma once
#include <numeric>
#include <string>
#include <vector>

#include "dynres/sched.hpp"

namespace dynres::sched::test {

/// n idle, up nodes named n0..n{n-1}, at time `now` (seconds).
inline Snapshot cluster(int n, double now) {
  Snapshot s;
  s.now = now;
  for (int i = 0; i < n; ++i) s.nodes.push_back({"n" + std::to_string(i), true, 0});
  return s;
}

/// Node indices [lo, hi).
inline std::vector<int> range(int lo, int hi) {
  std::vector<int> v(hi - lo);
  std::iota(v.begin(), v.end(), lo);
  return v;
}

}  // namespace dynres::sched::test
