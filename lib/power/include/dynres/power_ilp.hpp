// The node redistribution ILP of [John24] Eq. 5.3 (§5.1.1) solved with
// lp_solve, and the feasibility guarantees of Eq. 5.4/5.5 (§5.1.2).
//
// A pure function over a small input struct: no I/O, no state file, so the
// scheduler's power policy (Algorithm 4) and the simulator can call it.
// Units: watts (per node unless named total), seconds, node counts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dynres::power {

/// Node-count constraint of a job (Listing 4.1 --node-constraint).
enum class NodeConstraint { none, even, odd, pof2, square, cube };
/// "none", "even", ... ; throws std::invalid_argument for anything else.
NodeConstraint parse_constraint(const std::string& s);
const char* to_string(NodeConstraint c);
/// True when n (>= 0) satisfies c.
bool satisfies(int n, NodeConstraint c);

/// A running job: k_i in [min_nodes, max_nodes] (a rigid job has
/// min = max = current). p_min/p_max: its draw per node in watts.
struct IlpJob {
  int64_t id = 0;
  int current = 1, min_nodes = 1, max_nodes = 1;
  NodeConstraint constraint = NodeConstraint::none;
  double p_min = 0, p_max = 0;  ///< watts per node
};

/// A waiting job the plan must start (m_j of Eq. 5.3): m_j in [min_nodes,
/// max_nodes] (a rigid job: min = max = its request).
struct IlpCandidate {
  int64_t id = 0;
  int min_nodes = 1, max_nodes = 1;
  NodeConstraint constraint = NodeConstraint::none;
  double p_min = 0, p_max = 0;  ///< watts per node
};

struct IlpInput {
  std::vector<IlpJob> running;          ///< K running jobs
  std::vector<IlpCandidate> candidates; ///< waiting jobs to start (0, 1 or 2 usually)
  int nodes = 0;                        ///< N: usable nodes (busy + idle)
  double idle_watts = 71;               ///< p_idle, watts per idle node (§9.2.4: 71 W)
  double lower = 0, upper = 0;          ///< corridor [l, u], total watts
  double time_limit_s = 0.2;            ///< wall-clock budget of the whole solve, seconds (> 0); ignored with step_limit
  /// Deterministic bound (what the scheduler's power policy uses): phase 1
  /// stops after this many calls of lp_solve's abort callback (lp_solve
  /// calls it at fixed points of its simplex iterations and branch-and-bound
  /// nodes, so the count depends on the model only). > 0: the clock is not
  /// read at all, time_limit_s and moves_time_limit_s are ignored and the
  /// result is the same on any machine under any load. 0: wall clock only.
  long step_limit = 0;
  /// Phase 2's steps with step_limit (0: phase 2 is skipped).
  long moves_step_limit = 0;
  bool fewest_moves = true;             ///< phase 2: fewest node moves among the least-idle plans
  /// Cap of phase 2's budget, seconds (within time_limit_s): phase 2 gets
  /// half of phase 1's time, at least 0.3 ms, at most this (adaptive), or
  /// all of it (adaptive_moves_budget false: the plan then depends on the
  /// machine's speed only when phase 2 needs longer than this).
  double moves_time_limit_s = 0.003;
  bool adaptive_moves_budget = true;
  /// lp_solve's absolute MIP gap for both phases (set_mip_gap). Both
  /// objectives are integral, yet lp_solve's pruning is not "bound > best -
  /// gap" in plain units: 0.5 lost the optimum in t/unit/power's enumeration
  /// test, 0.3 matched it on every instance there and on every bench
  /// instance the exact search (1e-11, lp_solve's default) proved
  /// (bench/power/README). Not a proof: 1e-11 is the exact setting.
  double mip_gap = 0.3;
  /// Honour DYNRES_ILP_WRITE_LP (debugging, below). The scheduler's power
  /// policy sets false: lib/sched does no I/O.
  bool debug_write = true;
};

/// optimal: least idle power proven (and, with fewest_moves, fewest moves
/// among those proven); feasible: a plan within the corridor whose idle power or move
/// count is not proven best because the time limit hit (still usable);
/// timeout: no plan within the time limit.
enum class IlpStatus { optimal, feasible, infeasible, timeout, invalid, error };
const char* to_string(IlpStatus s);

struct IlpResult {
  IlpStatus status = IlpStatus::error;
  std::string reason;          ///< why not optimal (names the bound or job); "" when optimal
  std::vector<int> k;          ///< new node count per running job (input order)
  std::vector<int> m;          ///< node count per candidate (input order)
  int idle = 0;                ///< k_idle
  double idle_power = 0;       ///< objective: k_idle * p_idle, watts
  double min_draw = 0, max_draw = 0;  ///< total watts of the plan at p_min / p_max
  int moves = 0;               ///< sum |k_i - current_i| (the tie-break among minimal-idle plans)
  bool moves_optimal = false;  ///< phase 2 proved `moves` the fewest among the least-idle plans (else: best found in its budget)
  double solve_seconds = 0;    ///< wall time of lp_solve's solve() (0 with IlpInput::step_limit: no clock read)
  long steps = 0;              ///< abort-callback calls of both phases (lp_solve's work, deterministic)
};

/// Solve Eq. 5.3: minimise k_idle * p_idle subject to
///   l <= sum k_i p_min_i + sum m_j p_min_j + k_idle p_idle,
///   u >= sum k_i p_max_i + sum m_j p_max_j + k_idle p_idle,
///   sum k_i + sum m_j + k_idle = N, k_i in [min_i, max_i] satisfying its
///   node constraint (even/odd: k = 2a(+1); pof2/square/cube: k = sum v*b_v
///   with binary b_v, sum b_v = 1), k_idle >= 0.
/// Phase 1 minimises k_idle (the idle power k_idle * p_idle; with p_idle = 0
/// the fewest idle nodes); phase 2 (fewest_moves) fixes k_idle at that
/// optimum and minimises the node moves sum |k_i - current_i| (phase 1's
/// plan as the incumbent) within max(0.3 ms, half of phase 1's time) capped
/// at moves_time_limit_s, on the same model (lp_solve restarts from the last
/// basis), both with lp_solve's absolute MIP gap `mip_gap`. Both share
/// time_limit_s (lp_solve's abort callback). Status optimal means the idle power is proven least;
/// moves_optimal says whether phase 2 also proved the fewest moves (else its
/// best plan, or phase 1's, is returned). Status feasible: phase 1 ran out of
/// time (or steps) with a plan. With step_limit > 0 both phases are bounded
/// by lp_solve steps instead (phase 1: step_limit, phase 2:
/// moves_step_limit) and the clock is never read: a pure function.
/// Never throws for a well-formed call: bad input (N < 1, l >= u, min > max,
/// negative watts, no allowed count in [min, max], time limit <= 0) gives IlpStatus::invalid,
/// lp_solve's INFEASIBLE gives infeasible with a reason that says whether the
/// guarantees of Eq. 5.4/5.5 explain it, no plan within time_limit_s gives
/// timeout.
IlpResult solve_corridor(const IlpInput& in);

/// Debugging: with DYNRES_ILP_WRITE_LP=FILE set, the model is written to FILE
/// (lp_solve LP format) before each solve.
///
/// Same model with the integrality dropped (LP relaxation): the benchmark's
/// baseline. k/m/idle are the rounded relaxed values (not necessarily valid).
IlpResult solve_corridor_relaxed(const IlpInput& in);

/// The guarantees of §5.1.2 for the running jobs of `in` (candidates ignored).
struct Guarantees {
  /// Eq. 5.4: u >= sum_i min_i * p_max_i + (N - sum_i min_i) * p_idle (each
  /// job at its minimum size, one node in [John24]; every other node idle).
  bool upper = false;
  double upper_need = 0;   ///< that right-hand side, watts
  /// Eq. 5.5: l <= sum_{i != A} min_i * p_max_i + (N - sum_{i != A} min_i) * p_max_A,
  /// A the job with the largest p_max (it takes every node the others leave).
  /// Unlike the seed, A's share is capped at its max_nodes (the rest idle at
  /// p_idle), so a rigid A is not assumed to grow.
  bool lower = false;
  double lower_reach = 0;  ///< that right-hand side, watts
  int64_t hungriest = 0;   ///< id of A (0 when no job runs)
  std::string words;       ///< both statements in plain words
};
Guarantees guarantees(const IlpInput& in);

}  // namespace dynres::power
