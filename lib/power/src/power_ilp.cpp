// Eq. 5.3 with lp_solve; guarantees of Eq. 5.4/5.5 [John24 §5.1.1-§5.1.2].
#include "dynres/power_ilp.hpp"

#include <lpsolve/lp_lib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace dynres::power {

NodeConstraint parse_constraint(const std::string& s) {
  if (s == "none" || s.empty()) return NodeConstraint::none;
  if (s == "even") return NodeConstraint::even;
  if (s == "odd") return NodeConstraint::odd;
  if (s == "pof2") return NodeConstraint::pof2;
  if (s == "square") return NodeConstraint::square;
  if (s == "cube") return NodeConstraint::cube;
  throw std::invalid_argument("unknown node constraint '" + s + "' (none|even|odd|pof2|square|cube)");
}

const char* to_string(NodeConstraint c) {
  switch (c) {
    case NodeConstraint::none: return "none";
    case NodeConstraint::even: return "even";
    case NodeConstraint::odd: return "odd";
    case NodeConstraint::pof2: return "pof2";
    case NodeConstraint::square: return "square";
    case NodeConstraint::cube: return "cube";
  }
  return "?";
}

bool satisfies(int n, NodeConstraint c) {
  if (n < 0) return false;
  switch (c) {
    case NodeConstraint::none: return true;
    case NodeConstraint::even: return n % 2 == 0;
    case NodeConstraint::odd: return n % 2 == 1;
    case NodeConstraint::pof2: return n > 0 && (n & (n - 1)) == 0;
    case NodeConstraint::square: {
      long r = std::lround(std::sqrt(static_cast<double>(n)));
      for (long v = std::max(0L, r - 1); v <= r + 1; ++v)
        if (v * v == n) return true;
      return false;
    }
    case NodeConstraint::cube: {
      long r = std::lround(std::cbrt(static_cast<double>(n)));
      for (long v = std::max(0L, r - 1); v <= r + 1; ++v)
        if (v * v * v == n) return true;
      return false;
    }
  }
  return false;
}

const char* to_string(IlpStatus s) {
  switch (s) {
    case IlpStatus::optimal: return "optimal";
    case IlpStatus::feasible: return "feasible";
    case IlpStatus::infeasible: return "infeasible";
    case IlpStatus::timeout: return "timeout";
    case IlpStatus::invalid: return "invalid";
    case IlpStatus::error: return "error";
  }
  return "?";
}

namespace {

std::string w(double x) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(0);
  o << x << " W";
  return o.str();
}

bool finite_nonneg(double x) { return std::isfinite(x) && x >= 0; }

/// One sized variable of the model (a running job or a candidate).
struct Var {
  std::string what;  // "job 12" / "candidate 14"
  int lo, hi, current;
  bool has_current;
  NodeConstraint c;
  double pmin, pmax;
  std::vector<int> allowed;  // for pof2/square/cube: allowed counts in [lo, hi]
};

std::string validate(const IlpInput& in, std::vector<Var>& vars) {
  if (in.nodes < 1) return "the cluster has no usable node (N = " + std::to_string(in.nodes) + ")";
  if (!std::isfinite(in.lower) || !std::isfinite(in.upper) || in.lower < 0)
    return "corridor bounds must be finite and the lower bound >= 0 W";
  if (!(in.lower < in.upper)) return "corridor lower bound " + w(in.lower) + " is not below the upper bound " + w(in.upper);
  if (!finite_nonneg(in.idle_watts)) return "idle watts must be finite and >= 0";
  if (in.step_limit < 0 || in.moves_step_limit < 0) return "step limits must be >= 0";
  if (in.step_limit == 0 && (!(in.time_limit_s > 0) || !std::isfinite(in.time_limit_s))) return "time limit must be > 0 s";
  if (!(in.moves_time_limit_s >= 0) || !std::isfinite(in.moves_time_limit_s)) return "moves time limit must be >= 0 s";
  if (!(in.mip_gap >= 0 && in.mip_gap < 1)) return "MIP gap must be in [0, 1)";
  auto add = [&](const std::string& what, int lo, int hi, int cur, bool has_cur, NodeConstraint c, double pmin,
                 double pmax) -> std::string {
    if (lo < 1 || lo > hi) return what + ": node range [" + std::to_string(lo) + ", " + std::to_string(hi) + "] is empty or below 1";
    if (!finite_nonneg(pmin) || !finite_nonneg(pmax) || pmin > pmax)
      return what + ": per-node power must satisfy 0 <= p_min <= p_max (got " + std::to_string(pmin) + ", " +
             std::to_string(pmax) + ")";
    Var v{what, lo, std::min(hi, in.nodes), cur, has_cur, c, pmin, pmax, {}};
    if (v.lo > v.hi)
      return what + ": needs at least " + std::to_string(lo) + " nodes, the cluster has " + std::to_string(in.nodes);
    int first = -1;
    for (int n = v.lo; n <= v.hi; ++n)
      if (satisfies(n, c)) {
        if (first < 0) first = n;
        if (c == NodeConstraint::pof2 || c == NodeConstraint::square || c == NodeConstraint::cube) v.allowed.push_back(n);
      }
    if (first < 0)
      return what + ": no node count in [" + std::to_string(v.lo) + ", " + std::to_string(v.hi) + "] is " + to_string(c);
    vars.push_back(std::move(v));
    return "";
  };
  for (auto& j : in.running) {
    auto e = add("job " + std::to_string(j.id), j.min_nodes, j.max_nodes, j.current, true, j.constraint, j.p_min, j.p_max);
    if (!e.empty()) return e;
  }
  for (auto& c : in.candidates) {
    auto e = add("waiting job " + std::to_string(c.id), c.min_nodes, c.max_nodes, 0, false, c.constraint, c.p_min, c.p_max);
    if (!e.empty()) return e;
  }
  long need = 0;
  for (auto& v : vars) need += v.lo;
  if (need > in.nodes)
    return "the jobs' minimum sizes need " + std::to_string(need) + " nodes, the cluster has " + std::to_string(in.nodes);
  return "";
}

/// Builds and solves the model; integer=false drops integrality.
IlpResult solve_impl(const IlpInput& in, bool integer) {
  IlpResult r;
  std::vector<Var> vars;
 
  if (auto e = validate(in, vars); !e.empty()) {
    r.status = IlpStatus::invalid;
    r.reason = e;
    return r;
  }
  const int nv = static_cast<int>(vars.size());
  const int nrun = static_cast<int>(in.running.size());
  // columns: 1 idle, 2..nv+1 sizes, then d_i for running jobs, then aux
  // idle first: lp_solve branches on the lowest fractional column, and deciding
  // k_idle first finds the optimum fastest (measured: ms instead of seconds)
  const int col_idle = 1;
  const int col_d0 = nv + 2;
  int ncols = nv + 1 + nrun;
  std::vector<int> aux_first(nv, 0);
  for (int i = 0; i < nv; ++i) {
    auto& v = vars[i];
    if (v.c == NodeConstraint::even || v.c == NodeConstraint::odd) {
      aux_first[i] = ncols + 1;
      ncols += 1;
    } else if (!v.allowed.empty() && v.allowed.size() > 1) {
      aux_first[i] = ncols + 1;
      ncols += static_cast<int>(v.allowed.size());
    }
  }
  lprec* lp = make_lp(0, ncols);
  if (!lp) {
    r.status = IlpStatus::error;
    r.reason = "lp_solve: make_lp failed (out of memory?)";
    return r;
  }
  struct Guard {
    lprec* lp;
    ~Guard() { delete_lp(lp); }
  } guard{lp};
  set_verbose(lp, NEUTRAL);
  set_add_rowmode(lp, TRUE);
  // Objective: Eq. 5.3 minimises k_idle * p_idle, i.e. the idle node count
  // (also when p_idle = 0: "use as few idle nodes as possible", §5.1.1).
  // Phase 2 (fewest_moves) fixes k_idle at its optimum and minimises the node
  // moves sum d_i, d_i >= |k_i - current_i|. Both objectives take integer
  // values on every feasible plan; lp_solve runs with the absolute MIP gap
  // IlpInput::mip_gap (bench/power/README: K = 16, two candidates, from
  // 1.2 ms to 0.5 ms median and no 200 ms timeout).
  const bool phase2 = integer && in.fewest_moves && nrun > 0;
  {
    double one = 1.0;
    int c = col_idle;
    set_obj_fnex(lp, 1, &one, &c);
    set_minim(lp);
  }
  std::vector<double> val;
  std::vector<int> col;
  auto row = [&](int type, double rhs) {
    add_constraintex(lp, static_cast<int>(val.size()), val.data(), col.data(), type, rhs);
    val.clear();
    col.clear();
  };
  // corridor
  for (int i = 0; i < nv; ++i) { val.push_back(vars[i].pmin); col.push_back(i + 2); }
  val.push_back(in.idle_watts); col.push_back(col_idle);
  row(GE, in.lower);
  for (int i = 0; i < nv; ++i) { val.push_back(vars[i].pmax); col.push_back(i + 2); }
  val.push_back(in.idle_watts); col.push_back(col_idle);
  row(LE, in.upper);
  // every node is a job's or idle
  for (int i = 0; i < nv; ++i) { val.push_back(1); col.push_back(i + 2); }
  val.push_back(1); col.push_back(col_idle);
  row(EQ, in.nodes);
  // d_i >= |k_i - current_i|
  for (int i = 0; i < nrun; ++i) {
    val = {1, -1}; col = {col_d0 + i, i + 2};
    row(GE, -vars[i].current);
    val = {1, 1}; col = {col_d0 + i, i + 2};
    row(GE, vars[i].current);
  }
  // node constraints through auxiliary integer variables
  for (int i = 0; i < nv; ++i) {
    auto& v = vars[i];
    if (v.c == NodeConstraint::even || v.c == NodeConstraint::odd) {
      val = {1, -2}; col = {i + 2, aux_first[i]};
      row(EQ, v.c == NodeConstraint::odd ? 1 : 0);
    } else if (v.allowed.size() > 1) {
      val.push_back(1); col.push_back(i + 2);
      for (size_t a = 0; a < v.allowed.size(); ++a) { val.push_back(-v.allowed[a]); col.push_back(aux_first[i] + static_cast<int>(a)); }
      row(EQ, 0);
      for (size_t a = 0; a < v.allowed.size(); ++a) { val.push_back(1); col.push_back(aux_first[i] + static_cast<int>(a)); }
      row(EQ, 1);
    }
  }
  set_add_rowmode(lp, FALSE);
  // bounds and integrality
  for (int i = 0; i < nv; ++i) {
    int lo = vars[i].lo, hi = vars[i].hi;
    if (vars[i].allowed.size() == 1) lo = hi = vars[i].allowed[0];
    set_bounds(lp, i + 2, lo, hi);
    if (integer) set_int(lp, i + 2, TRUE);
  }
  set_bounds(lp, col_idle, 0, in.nodes);
  if (integer) set_int(lp, col_idle, TRUE);
  for (int i = 0; i < nrun; ++i) set_bounds(lp, col_d0 + i, 0, in.nodes);
  for (int i = 0; i < nv; ++i) {
    auto& v = vars[i];
    if (v.c == NodeConstraint::even || v.c == NodeConstraint::odd) {
      set_bounds(lp, aux_first[i], 0, in.nodes);
      if (integer) set_int(lp, aux_first[i], TRUE);
    } else if (v.allowed.size() > 1) {
      for (size_t a = 0; a < v.allowed.size(); ++a) {
        set_bounds(lp, aux_first[i] + static_cast<int>(a), 0, 1);
        if (integer) set_int(lp, aux_first[i] + static_cast<int>(a), TRUE);
      }
    }
  }
  // the budget of both phases through lp_solve's abort callback: lp_solve
  // steps (deterministic, IlpInput::step_limit) or the wall clock
  using clock = std::chrono::steady_clock;
  const bool by_steps = in.step_limit > 0;
  const auto t0 = by_steps ? clock::time_point{} : clock::now();
  struct Budget {
    bool by_steps;
    long used, limit;
    clock::time_point at;
  } budget{by_steps, 0, in.step_limit,
           by_steps ? clock::time_point{}
                    : t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(in.time_limit_s))};
  put_abortfunc(
      lp,
      [](lprec*, void* h) -> int {
        auto* b = static_cast<Budget*>(h);
        if (b->by_steps) return ++b->used > b->limit ? TRUE : FALSE;
        ++b->used;
        return clock::now() >= b->at ? TRUE : FALSE;
      },
      &budget);
  if (!by_steps) set_timeout(lp, static_cast<long>(std::ceil(in.time_limit_s)) + 1);  // backstop
  auto seconds = [&] { return by_steps ? 0.0 : std::chrono::duration<double>(clock::now() - t0).count(); };
  const std::string limit_words = by_steps ? "step limit of " + std::to_string(in.step_limit) + " lp_solve steps"
                                           : "time limit of " + std::to_string(in.time_limit_s) + " s";
  // branching measured on bench_power_ilp's instances (K = 16..64): weight-
  // reverse node selection with reduced-cost fixing, floor branch
  // first, cut the median from ~200 ms (time limit) to a few ms; both keep
  // the search exact (an absolute mip gap would not: it lost an idle node)
  set_bb_rule(lp, NODE_FIRSTSELECT | NODE_WEIGHTREVERSEMODE | NODE_RCOSTFIXING);
  set_bb_floorfirst(lp, BRANCH_FLOOR);
  if (integer) {
    set_mip_gap(lp, TRUE, in.mip_gap);  // see IlpInput::mip_gap
    set_mip_gap(lp, FALSE, 0.0);
  }
  if (const char* f = in.debug_write ? std::getenv("DYNRES_ILP_WRITE_LP") : nullptr) { write_lp(lp, const_cast<char*>(f)); }
  int ret = solve(lp);
  std::vector<double> x(ncols);
  auto take = [&](IlpStatus st) {
    get_variables(lp, x.data());
    r = IlpResult{};
    r.status = st;
    for (int i = 0; i < nv; ++i) {
      int n = static_cast<int>(std::lround(x[i + 1]));
      if (i < nrun) r.k.push_back(n); else r.m.push_back(n);
      r.min_draw += n * vars[i].pmin;
      r.max_draw += n * vars[i].pmax;
      if (i < nrun) r.moves += std::abs(n - vars[i].current);
    }
    r.idle = static_cast<int>(std::lround(x[col_idle - 1]));
    r.idle_power = r.idle * in.idle_watts;
    r.min_draw += r.idle_power;
    r.max_draw += r.idle_power;
  };
  long phase1_steps = 0;
  auto finish = [&]() {
    r.solve_seconds = seconds();
    r.steps = phase1_steps + budget.used;
    if (r.status == IlpStatus::feasible) r.reason = limit_words + " hit; plan not proven best";
    return r;
  };
  if (ret == OPTIMAL || ret == PRESOLVED || ret == SUBOPTIMAL) {
    take(ret == SUBOPTIMAL ? IlpStatus::feasible : IlpStatus::optimal);
    if (!phase2 || r.status != IlpStatus::optimal) return finish();
    // phase 2 on the same model (warm: lp_solve restarts from the last
    // basis): k_idle fixed at its optimum, fewest node moves, within
    // moves_time_limit_s (else phase 1's plan or the best found is kept).
    // Phase 1's plan is the incumbent: a cut sum d_i <= moves - 1 asks only
    // for strictly fewer moves, so "infeasible" proves phase 1's plan best
    // and the search prunes from the start (lp_solve takes no MIP start).
    IlpResult first = r;
    if (first.moves == 0) {
      r.moves_optimal = true;
      return finish();
    }
    if (by_steps && in.moves_step_limit == 0) return finish();  // phase 2 not asked for
    set_bounds(lp, col_idle, first.idle, first.idle);
    set_obj(lp, col_idle, 0.0);
    std::vector<double> cv(nrun, 1.0);
    std::vector<int> cc(nrun);
    for (int i = 0; i < nrun; ++i) {
      set_obj(lp, col_d0 + i, 1.0);
      cc[i] = col_d0 + i;
    }
    add_constraintex(lp, nrun, cv.data(), cc.data(), LE, first.moves - 1);
    if (by_steps) {  // phase 2's own step budget
      phase1_steps = budget.used;
      budget.used = 0;
      budget.limit = in.moves_step_limit;
    } else {  // half of phase 1's time (at least 0.3 ms), at most moves_time_limit_s
      const double p1 = seconds();
      const double left =
          in.adaptive_moves_budget ? std::min(in.moves_time_limit_s, std::max(0.0003, 0.5 * p1)) : in.moves_time_limit_s;
      budget.at = std::min(budget.at, clock::now() + std::chrono::duration_cast<clock::duration>(
                                                         std::chrono::duration<double>(left)));
    }
    ret = solve(lp);
    if (ret == OPTIMAL || ret == PRESOLVED) {
      take(IlpStatus::optimal);
      r.moves_optimal = true;
    } else if (ret == INFEASIBLE) {
      r = first;  // no plan with fewer moves: phase 1's is the fewest
      r.moves_optimal = true;
    } else if (ret == SUBOPTIMAL) {
      take(IlpStatus::optimal);  // same (proven) idle power, fewer moves not proven fewest
      if (r.moves > first.moves) r = first;
    } else {
      r = first;  // idle optimum proven, fewest moves not
    }
    return finish();
  }
  r.solve_seconds = seconds();
  r.steps = budget.used;
  if (ret == TIMEOUT || ret == USERABORT) {
    r.status = IlpStatus::timeout;
    r.reason = "lp_solve found no plan within the " + limit_words;
    return r;
  }
  if (ret == INFEASIBLE) {
    r.status = IlpStatus::infeasible;
    // the guarantees with the candidates counted as running jobs at their minimum
    IlpInput all = in;
    for (auto& c : in.candidates)
      all.running.push_back({c.id, c.min_nodes, c.min_nodes, c.max_nodes, c.constraint, c.p_min, c.p_max});
    auto g = guarantees(all);
    std::string why = "no node distribution keeps the draw within [" + w(in.lower) + ", " + w(in.upper) + "]";
    if (!g.upper) why += "; Eq. 5.4 fails: with every job at its minimum size the cluster still draws up to " + w(g.upper_need);
    if (!g.lower) why += "; Eq. 5.5 fails: even the most power-hungry job on every free node reaches only " + w(g.lower_reach);
    if (g.upper && g.lower)
      why += "; the guarantees of Eq. 5.4/5.5 hold, so the jobs' node ranges, node constraints or the waiting job's size rule it out";
    r.reason = why;
    return r;
  }
  r.status = IlpStatus::error;
  r.reason = "lp_solve solve() returned " + std::to_string(ret) + (ret == UNBOUNDED ? " (UNBOUNDED)" : "");
  return r;
}

}  // namespace

IlpResult solve_corridor(const IlpInput& in) { return solve_impl(in, true); }
IlpResult solve_corridor_relaxed(const IlpInput& in) { return solve_impl(in, false); }

Guarantees guarantees(const IlpInput& in) {
  Guarantees g;
  long sum_min = 0;
  double busy_max = 0;
  const IlpJob* a = nullptr;
  for (auto& j : in.running) {
    sum_min += j.min_nodes;
    busy_max += j.min_nodes * j.p_max;
    if (!a || j.p_max > a->p_max) a = &j;
  }
  g.upper_need = busy_max + static_cast<double>(in.nodes - sum_min) * in.idle_watts;
  g.upper = in.upper >= g.upper_need;
  if (a) {
    g.hungriest = a->id;
    long others = sum_min - a->min_nodes;
    // A takes every node the others leave, up to its own maximum; the rest idle
    long a_nodes = std::min<long>(in.nodes - others, a->max_nodes);
    g.lower_reach = busy_max - a->min_nodes * a->p_max + static_cast<double>(a_nodes) * a->p_max +
                    static_cast<double>(in.nodes - others - a_nodes) * in.idle_watts;
  } else {
    g.lower_reach = in.nodes * in.idle_watts;  // nothing runs: every node idle
  }
  g.lower = in.lower <= g.lower_reach;
  std::ostringstream o;
  if (g.upper)
    o << "The upper bound " << w(in.upper) << " can always be kept: with every running job shrunk to its minimum size "
      << "the cluster draws at most " << w(g.upper_need) << " (Eq. 5.4 holds).";
  else
    o << "The upper bound " << w(in.upper) << " is NOT guaranteed: even with every running job shrunk to its minimum size "
      << "the cluster may draw " << w(g.upper_need) << " (Eq. 5.4 fails).";
  o << " ";
  if (!a)
    o << (g.lower ? "No job runs; the idle nodes alone draw " + w(g.lower_reach) + ", enough for the lower bound " + w(in.lower) + "."
                  : "No job runs; the idle nodes alone draw " + w(g.lower_reach) + ", below the lower bound " + w(in.lower) +
                        ", and no running job can be grown to close the gap.");
  else if (g.lower)
    o << "The lower bound " << w(in.lower) << " can always be reached: growing job " << a->id
      << " (the most power-hungry) onto every node the others leave (up to its maximum) draws " << w(g.lower_reach) << " (Eq. 5.5 holds).";
  else
    o << "The lower bound " << w(in.lower) << " is NOT guaranteed: even job " << a->id
      << " (the most power-hungry) on every node the others leave draws only " << w(g.lower_reach) << " (Eq. 5.5 fails).";
  g.words = o.str();
  return g;
}

}  // namespace dynres::power
