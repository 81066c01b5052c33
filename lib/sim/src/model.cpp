// Runtime models of resized jobs: Amdahl's law and Downey's speedup model
// (A. B. Downey, "A model for speedup of parallel programs", UCB/CSD-97-933).
#include <algorithm>
#include <cmath>

#include "dynres/sim.hpp"

namespace dynres::sim {

double time_factor(Model m, double s, int n, double sigma) {
  if (n <= 1) return 1.0;
  s = std::clamp(s, 0.0, 1.0);
  if (m == Model::amdahl) return s + (1 - s) / n;
  // Downey: average parallelism A = 1/s (Amdahl's asymptotic speedup).
  const double A = s > 0 ? 1 / s : 1e12, N = n;
  double S;
  if (sigma <= 1) {
    if (N <= A) S = A * N / (A + sigma * (N - 1) / 2);
    else if (N <= 2 * A - 1) S = A * N / (sigma * (A - 0.5) + N * (1 - sigma / 2));
    else S = A;
  } else {
    if (N <= A + A * sigma - sigma) S = N * A * (sigma + 1) / (sigma * (N + A - 1) + A);
    else S = A;
  }
  return 1 / std::max(S, 1.0);
}

double mtct_of(double s, int n) {
  s = std::clamp(s, 0.0, 1.0);
  if (s >= 1) return 1e9;
  return s * std::max(n, 1) / (1 - s);
}

}  // namespace dynres::sim
