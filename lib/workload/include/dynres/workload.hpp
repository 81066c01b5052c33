// Workloads for live runs and (later) the simulator.
//
// ESP: the modified Effective System Performance benchmark of [John24]
// Table 9.1 (after Wong et al., SC'00): 230 jobs of 14 types A–M and Z, each
// a fraction of the system size with a static runtime and a node-count
// constraint, submitted in a fixed pseudo-random order, one every 30 s.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dynres/sched.hpp"

namespace dynres::workload {

/// One row of [John24 Table 9.1].
struct EspType {
  char type;
  double fraction;     ///< of the system size
  int count;
  double runtime;      ///< static execution time, seconds (unscaled)
  sched::Constraint constraint;
};

/// The 14 rows of Table 9.1 (230 jobs in total).
const std::vector<EspType>& esp_table();

struct EspOptions {
  int nodes = 34;               ///< system size N
  uint64_t seed = 1;            ///< submission order and moldable choice
  double scale = 1.0;           ///< time-scale factor applied to runtimes, limits and the interval
  double interval = 30;         ///< seconds between submissions (unscaled)
  double moldable_fraction = 0; ///< probability a non-Z job is moldable
  double serial_fraction = 0.05;///< Amdahl serial fraction of the emulated application
  double limit_factor = 1.2;    ///< time limit = factor × runtime at the smallest size
  int moldable_max = 32;        ///< upper node bound of moldable jobs [John24 §9.1]
};

/// One job to submit.
struct EspJob {
  int seq;                 ///< 0-based submission index
  std::string name;        ///< e.g. "esp-F-3"
  char type;
  double submit_offset;    ///< seconds after the first submission (scaled)
  int nodes;               ///< requested size: the type's fraction of N, made admissible
  int min_nodes, max_nodes;///< == nodes for rigid jobs
  bool moldable;
  sched::Constraint constraint;
  double runtime;          ///< seconds at `nodes` (scaled)
  int64_t time_limit;      ///< whole seconds (scaled, rounded up)
};

/// Node count of a type on an N-node system: round(fraction × N), at least 1,
/// moved to the nearest admissible count (downwards first).
int esp_size(const EspType& t, int nodes);

/// Runtime on n nodes of a job that runs `runtime` seconds on n0 nodes, by
/// Amdahl's law with serial fraction s: T(n) = T(n0)·(s + (1−s)/n)/(s + (1−s)/n0).
double amdahl_runtime(double runtime, int n0, int n, double s);

/// The whole benchmark in submission order. The order is a Fisher–Yates
/// shuffle driven by a 64-bit Mersenne Twister with opts.seed, so it is the
/// same on every platform. Throws std::invalid_argument for nodes < 1,
/// scale <= 0, fractions outside [0, 1].
std::vector<EspJob> esp_workload(const EspOptions& opts);

}  // namespace dynres::workload
