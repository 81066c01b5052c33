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

/// A running malleable job on `nodes` (marked as its own in s.nodes) that
/// accepts orders, with a time limit of 100000 s from `start`; MTCT `mtct`.
inline RunningJob& malleable(Snapshot& s, int64_t id, std::vector<int> nodes, int lo, int hi, Constraint c,
                             double start, double mtct) {
  for (int n : nodes) s.nodes[n].job = id;
  RunningJob r;
  r.id = id;
  r.kind = JobKind::malleable;
  r.accepting = true;
  r.req_nodes = static_cast<int>(nodes.size());
  r.min_nodes = lo;
  r.max_nodes = hi;
  r.constraint = c;
  r.nodes = std::move(nodes);
  r.start_time = start;
  r.time_limit = 100000;
  r.mtct = mtct;
  s.running.push_back(std::move(r));
  return s.running.back();
}

}  // namespace dynres::sched::test
