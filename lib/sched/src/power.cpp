// The power-aware policy: [John24 Alg. 4] with the node redistribution
// ILP of Eq. 5.3 (lib/power power_ilp.hpp, lp_solve), and the runtime-only
// mode of §9.2.4 scenario 2. One pure pass over a snapshot (no I/O; the ILP
// is pure computation); semantics are documented at decide() in
// dynres/sched.hpp.
//
// Draw model (watts): a job on n nodes draws n x [min_power, max_power] per
// node, an idle up node idle_watts; the cluster's draw is the interval
// [sum of the minima, sum of the maxima]. The corridor [l, u] is broken when
// the maximum is above u or the minimum below l (Eq. 5.1/5.2), unless the
// caller gives a measured/forecast draw (PowerView::draw_min/draw_max).
#include <algorithm>
#include <map>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <unordered_map>

#include "detail.hpp"
#include "dynres/power_ilp.hpp"
#include "dynres/sched.hpp"

namespace dynres::sched::detail {
namespace {

namespace pw = dynres::power;

constexpr double kEps = 1e-9;

/// Per-node [min, max] watts of a job from its hints (sched.hpp). Unknown:
/// the midpoint of [idle_watts, node_max_watts] for both (pcorridor's
/// "modelled" draw) — the whole interval would make every corridor narrower
/// than N x (node_max - idle) unreachable, since such a job could always
/// draw as little as an idle node.
std::pair<double, double> per_node(double mn, double mx, const PowerView& pv) {
  if (!(mn >= 0) && !(mx >= 0)) {
    double mid = (pv.idle_watts + std::max(pv.idle_watts, pv.node_max_watts)) / 2;
    return {mid, mid};
  }
  if (!(mn >= 0)) mn = mx;
  if (!(mx >= 0)) mx = mn;
  if (mn > mx) std::swap(mn, mx);
  return {mn, mx};
}

pw::NodeConstraint ilp_constraint(Constraint c) {
  switch (c) {
    case Constraint::none: return pw::NodeConstraint::none;
    case Constraint::even: return pw::NodeConstraint::even;
    case Constraint::odd: return pw::NodeConstraint::odd;
    case Constraint::pof2: return pw::NodeConstraint::pof2;
    case Constraint::square: return pw::NodeConstraint::square;
    case Constraint::cube: return pw::NodeConstraint::cube;
  }
  return pw::NodeConstraint::none;
}

std::string watts(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f W", x);
  return b;
}

/// The cluster during one pass: every job holding nodes (running, and the
/// starts of this pass), their ILP ranges and per-node power, the idle nodes.
struct Cluster {
  const Snapshot& snap;
  const PolicyConfig& cfg;
  std::vector<pw::IlpJob> jobs;  ///< current = size now; [min, max] the ILP may choose
  std::vector<int> run;          ///< index into snap.running; -1 for a start of this pass
  int idle = 0;                  ///< idle up nodes not handed out yet

  /// Watts of nodes reserved for a running job's pending expansion (the live
  /// resize server marks them held by the job before the order commits; the
  /// job's node list grows only then): they draw as the job's nodes, [min, max].
  double reserved_lo = 0, reserved_hi = 0;

  /// lp_solve steps (IlpResult::steps) the pass's solves have used; a solve
  /// gets at most what is left of PolicyConfig::power_pass_steps and none
  /// once it is spent. Counted, not timed: the pass is a pure function.
  long steps_used = 0;
  long left() const { return cfg.power_pass_steps - steps_used; }
  /// solve_corridor within what is left of the pass's steps.
  pw::IlpResult solve(pw::IlpInput in) {
    const long l = left();
    if (l <= 0) {
      pw::IlpResult r;
      r.status = pw::IlpStatus::timeout;
      r.reason = "the pass's lp_solve steps (" + std::to_string(cfg.power_pass_steps) +
                 ", scheduler.power.pass_steps) are spent";
      return r;
    }
    in.step_limit = std::min(in.step_limit, l);
    in.moves_step_limit = std::min(in.moves_step_limit, l);
    auto r = pw::solve_corridor(in);
    steps_used += r.steps;
    return r;
  }

  Cluster(const Snapshot& s, const PolicyConfig& c, int idle_nodes, bool may_resize) : snap(s), cfg(c), idle(idle_nodes) {
    {
      std::unordered_map<int64_t, int> held;
      for (const auto& n : s.nodes)
        if (n.up && n.job != 0) ++held[n.job];
      for (const auto& r : s.running) {
        auto it = held.find(r.id);
        int extra = it == held.end() ? 0 : it->second - static_cast<int>(r.nodes.size());
        if (extra <= 0) continue;
        auto [pmin, pmax] = per_node(r.min_power, r.max_power, s.power);
        reserved_lo += extra * pmin;
        reserved_hi += extra * pmax;
      }
    }
    for (int i = 0; i < static_cast<int>(s.running.size()); ++i) {
      const RunningJob& r = s.running[i];
      pw::IlpJob j;
      j.id = r.id;
      j.current = j.min_nodes = j.max_nodes = static_cast<int>(r.nodes.size());
      std::tie(j.p_min, j.p_max) = per_node(r.min_power, r.max_power, s.power);
      if (j.current < 1) continue;  // holds nothing: draws nothing
      if (may_resize && resizable(r, s, c)) {
        int lo = smallest_admissible(r.constraint, r.min_nodes, r.max_nodes);
        int hi = largest_admissible(r.constraint, r.min_nodes, r.max_nodes);
        // the ILP keeps the job's range and constraint (a job running at a
        // size outside them is moved into them when the ILP runs)
        if (lo > 0 && hi > 0) {
          j.min_nodes = lo;
          j.max_nodes = hi;
          j.constraint = ilp_constraint(r.constraint);
        }
      }
      jobs.push_back(j);
      run.push_back(i);
    }
  }
  int nodes() const {
    long n = idle;
    for (auto& j : jobs) n += j.current;
    return static_cast<int>(n);
  }
  /// Modelled draw with the current sizes plus `extra` nodes of a job drawing
  /// [pmin, pmax] per node taken from the idle ones.
  std::pair<double, double> draw(int extra = 0, double pmin = 0, double pmax = 0) const {
    const double i0 = snap.power.idle_watts;
    double lo = (idle - extra) * i0 + extra * pmin + reserved_lo, hi = (idle - extra) * i0 + extra * pmax + reserved_hi;
    for (auto& j : jobs) lo += j.current * j.p_min, hi += j.current * j.p_max;
    return {lo, hi};
  }
  bool inside(std::pair<double, double> d) const {
    return d.second <= snap.power.upper + kEps && d.first >= snap.power.lower - kEps;
  }
  /// The draw the broken test uses: the caller's forecast (proactive) or
  /// measurement (reactive, runtime) when given, else the model; aware mode
  /// plans on the model alone (PowerMode).
  std::pair<double, double> now() const {
    auto d = draw();
    if (cfg.power_mode == PowerMode::aware) return d;
    // what the cluster can draw at all: every node idle or at the lowest
    // per-node draw of its job, every node at the highest (a forecast that
    // extrapolates a step past these is clamped to them)
    const double i0 = snap.power.idle_watts;
    double floor = idle * i0 + reserved_lo, ceil = idle * std::max(i0, snap.power.node_max_watts) + reserved_hi;
    for (auto& j : jobs) floor += j.current * std::min(j.p_min, i0), ceil += j.current * std::max({j.p_max, i0, snap.power.node_max_watts});
    if (snap.power.draw_min >= 0) d.first = std::clamp(snap.power.draw_min, floor, ceil);
    if (snap.power.draw_max >= 0) d.second = std::clamp(snap.power.draw_max, floor, ceil);
    if (d.first > d.second) std::swap(d.first, d.second);
    return d;
  }
  /// The broken test's draw (now()), and the offset of that draw from the
  /// model kept for the ILP: Eq. 5.3 is then solved with the forecast or
  /// measurement (§5.1.4) -- the corridor the ILP sees is moved by what the
  /// model misses, so the modelled plan keeps the predicted draw inside.
  std::pair<double, double> measure() {
    auto d = now(), m = draw();
    off_lo = d.first - m.first;
    off_hi = d.second - m.second;
    return d;
  }
  double off_lo = 0, off_hi = 0;
  bool resizable_any() const {
    for (auto& j : jobs)
      if (j.min_nodes != j.max_nodes) return true;
    return false;
  }
  /// The ILP's variables (set by input()): each a group of indices into
  /// `jobs`; an empty group is the fixed rest (one pseudo-job whose size
  /// cannot change and whose draw is that of every job left out).
  std::vector<std::vector<size_t>> groups;

  /// Eq. 5.3 bounded by problem size, not by the clock: resizable jobs of
  /// equal per-node draw and no node constraint are one variable (their
  /// node counts summed: the least idle power and the fewest moves are the
  /// same as with one variable per job, split() gives each job its part);
  /// of the variables only the cfg.power_ilp_jobs that can move the draw
  /// most (range x |watts per node - idle watts|, then the lowest job id)
  /// stay resizable, every other job holds its size, and all jobs that hold
  /// their size are one fixed pseudo-job. Each solve gets
  /// cfg.power_ilp_steps lp_solve steps for phase 1 and as many for phase 2.
  pw::IlpInput input() {
    groups.clear();
    const double i0 = snap.power.idle_watts;
    std::map<std::pair<double, double>, std::vector<size_t>> same_draw;
    std::vector<std::vector<size_t>> vars;
    std::vector<size_t> fixed;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const auto& j = jobs[i];
      if (j.min_nodes == j.max_nodes && j.current == j.min_nodes) fixed.push_back(i);
      else if (j.constraint == pw::NodeConstraint::none) same_draw[{j.p_min, j.p_max}].push_back(i);
      else vars.push_back({i});
    }
    for (auto& [k, v] : same_draw) vars.push_back(std::move(v));
    auto weight = [&](const std::vector<size_t>& g) {
      double w = 0;
      for (size_t i : g)
        w += (jobs[i].max_nodes - jobs[i].min_nodes) * std::max(std::abs(jobs[i].p_max - i0), std::abs(jobs[i].p_min - i0));
      return w;
    };
    auto first_id = [&](const std::vector<size_t>& g) {
      int64_t m = jobs[g[0]].id;
      for (size_t i : g) m = std::min(m, jobs[i].id);
      return m;
    };
    std::vector<std::pair<double, int64_t>> key(vars.size());
    for (size_t v = 0; v < vars.size(); ++v) key[v] = {weight(vars[v]), first_id(vars[v])};
    std::vector<size_t> ord(vars.size());
    for (size_t v = 0; v < ord.size(); ++v) ord[v] = v;
    std::sort(ord.begin(), ord.end(), [&](size_t a, size_t b) {
      return key[a].first != key[b].first ? key[a].first > key[b].first : key[a].second < key[b].second;
    });
    const size_t K = static_cast<size_t>(std::max(1, cfg.power_ilp_jobs));
    pw::IlpInput in;
    for (size_t x = 0; x < ord.size(); ++x) {
      auto& g = vars[ord[x]];
      if (x >= K) {
        fixed.insert(fixed.end(), g.begin(), g.end());
        continue;
      }
      pw::IlpJob a;
      a.id = first_id(g);
      a.current = a.min_nodes = a.max_nodes = 0;
      a.constraint = jobs[g[0]].constraint;
      a.p_min = jobs[g[0]].p_min;
      a.p_max = jobs[g[0]].p_max;
      for (size_t i : g) {
        a.current += jobs[i].current;
        a.min_nodes += jobs[i].min_nodes;
        a.max_nodes += jobs[i].max_nodes;
      }
      in.running.push_back(a);
      groups.push_back(std::move(g));
    }
    long fixed_nodes = 0;
    double fixed_lo = 0, fixed_hi = 0;
    for (size_t i : fixed) {
      fixed_nodes += jobs[i].current;
      fixed_lo += jobs[i].current * jobs[i].p_min;
      fixed_hi += jobs[i].current * jobs[i].p_max;
    }
    if (fixed_nodes > 0) {  // one pseudo-job drawing what the fixed ones draw together
      pw::IlpJob f;
      f.id = 0;
      f.current = f.min_nodes = f.max_nodes = static_cast<int>(fixed_nodes);
      f.p_min = fixed_lo / fixed_nodes;
      f.p_max = std::max(f.p_min, fixed_hi / fixed_nodes);
      in.running.push_back(f);
      groups.emplace_back();
    }
    in.nodes = nodes();
    in.idle_watts = i0;
    in.lower = std::max(0.0, snap.power.lower - off_lo);
    in.upper = snap.power.upper - off_hi;
    in.step_limit = std::max(1L, cfg.power_ilp_steps);
    in.moves_step_limit = in.step_limit;
    in.fewest_moves = true;
    in.debug_write = false;  // no I/O in lib/sched
    return in;
  }

  /// New size of every job in `jobs` from a plan over input()'s variables: a
  /// group's nodes are first kept where they are (each job clamped into its
  /// range), then what the group gains goes to its jobs in start order
  /// (earliest first) and what it loses comes from the latest started first,
  /// each within its range: a group that moves by D nodes moves exactly D.
  std::vector<int> split(const pw::IlpResult& r) const {
    std::vector<int> to(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) to[i] = jobs[i].current;
    for (size_t v = 0; v < groups.size() && v < r.k.size(); ++v) {
      auto g = groups[v];
      if (g.empty()) continue;
      std::stable_sort(g.begin(), g.end(), [&](size_t a, size_t b) {
        auto st = [&](size_t i) { return run[i] >= 0 ? snap.running[run[i]].start_time : snap.now; };
        return st(a) != st(b) ? st(a) < st(b) : jobs[a].id < jobs[b].id;
      });
      long have = 0;
      for (size_t i : g) have += to[i] = std::clamp(jobs[i].current, jobs[i].min_nodes, jobs[i].max_nodes);
      long diff = r.k[v] - have;
      if (diff > 0)
        for (size_t i : g) {
          long add = std::min<long>(diff, jobs[i].max_nodes - to[i]);
          to[i] += static_cast<int>(add);
          diff -= add;
        }
      else
        for (auto it = g.rbegin(); it != g.rend() && diff < 0; ++it) {
          long sub = std::min<long>(-diff, to[*it] - jobs[*it].min_nodes);
          to[*it] -= static_cast<int>(sub);
          diff += sub;
        }
    }
    return to;
  }
};

/// Carry out an ILP plan: shrinks release the job's highest-index nodes,
/// expansions take idle nodes first (then released ones), the candidates (if
/// any, in the ILP's order) start on what they need. Updates `c` to the new
/// sizes.
void apply(Cluster& c, const pw::IlpResult& r, Pool& pool, Decision& d, const std::vector<const WaitingJob*>& cands) {
  const Snapshot& s = c.snap;
  const std::vector<int> size = c.split(r);
  for (size_t i = 0; i < c.jobs.size(); ++i) {
    int to = size[i], from = c.jobs[i].current;
    if (to >= from || c.run[i] < 0) continue;
    std::vector<int> held = s.running[c.run[i]].nodes;
    std::sort(held.begin(), held.end());
    std::vector<int> rel(held.end() - (from - to), held.end());
    pool.extra.insert(pool.extra.end(), rel.begin(), rel.end());
    std::sort(pool.extra.begin(), pool.extra.end());
    d.shrinks.push_back({c.jobs[i].id, std::move(rel)});
    c.idle += from - to;
    c.jobs[i].current = to;
  }
  for (size_t i = 0; i < c.jobs.size(); ++i) {
    int to = size[i], from = c.jobs[i].current;
    if (to <= from || c.run[i] < 0) continue;
    d.expands.push_back({c.jobs[i].id, pool.take(to - from)});
    c.idle -= to - from;
    c.jobs[i].current = to;
  }
  for (size_t x = 0; x < cands.size() && x < r.m.size(); ++x) {
    if (r.m[x] <= 0) continue;
    const WaitingJob* cand = cands[x];
    d.starts.push_back({cand->id, pool.take(r.m[x])});
    c.idle -= r.m[x];
    pw::IlpJob j;
    j.id = cand->id;
    j.current = j.min_nodes = j.max_nodes = r.m[x];
    std::tie(j.p_min, j.p_max) = per_node(cand->min_power, cand->max_power, s.power);
    c.jobs.push_back(j);
    c.run.push_back(-1);
  }
  for (auto& j : c.jobs) j.min_nodes = j.max_nodes = j.current;  // one resize per job per pass
}

/// Sizes the ILP may start a waiting job with. `exact`: its requested size
/// (rigid: --nodes; moldable/malleable: requested_size(), as the malleable
/// policies start them, [John24 §4.2.3]); else rigid the same, moldable and
/// malleable any admissible size in [min, max] (moldability may keep the
/// corridor, §9.2.4). False when the job cannot start on `nodes` nodes.
bool candidate(const WaitingJob& w, int nodes, bool exact, pw::IlpCandidate& out, const PowerView& pv) {
  // the ILP counts nodes, not which ones: jobs restricted by -w/-x start only
  // in the start phase, which honours the restriction
  if (!w.required.empty() || !w.excluded.empty()) return false;
  out.id = w.id;
  std::tie(out.p_min, out.p_max) = per_node(w.min_power, w.max_power, pv);
  out.constraint = pw::NodeConstraint::none;
  if (w.kind == JobKind::rigid || exact) {
    int k = w.kind == JobKind::rigid ? min_size(w) : requested_size(w);
    if (k == 0 || k > nodes) return false;
    out.min_nodes = out.max_nodes = k;
    return true;
  }
  int lo = smallest_admissible(w.constraint, w.min_nodes, std::min(w.max_nodes, nodes));
  int hi = largest_admissible(w.constraint, w.min_nodes, std::min(w.max_nodes, nodes));
  if (lo == 0 || hi == 0) return false;
  out.min_nodes = lo;
  out.max_nodes = hi;
  out.constraint = ilp_constraint(w.constraint);
  return true;
}

/// Algorithm 4 lines 10-18 with the ILP of Eq. 5.3. First the smallest
/// prefix of `order` (up to cfg.power_max_tries startable jobs) whose jobs
/// all start at their requested sizes ([John24] gave the LP one or two
/// waiting jobs, §9.2.4); then, unless exact_only, each job alone over its
/// whole range (moldability). The first feasible plan is carried out and its
/// jobs started. Returns the indices started (empty: none; `why` then holds
/// the first failure's reason).
std::vector<int> plan_with_candidates(Cluster& c, const std::vector<int>& order, bool exact_only, Pool& pool,
                                      Decision& d, std::string& why) {
  const Snapshot& s = c.snap;
  const int N = c.nodes();
  const int tries = std::max(0, c.cfg.power_max_tries);
  auto solve = [&](const std::vector<int>& idx, const std::vector<pw::IlpCandidate>& cds) -> bool {
    auto in = c.input();
    in.candidates = cds;
    auto r = c.solve(in);
    if (r.status == pw::IlpStatus::optimal || r.status == pw::IlpStatus::feasible) {
      std::vector<const WaitingJob*> w;
      for (int i : idx) w.push_back(&s.waiting[i]);
      apply(c, r, pool, d, w);
      return true;
    }
    if (why.empty()) why = "with waiting job " + std::to_string(s.waiting[idx.back()].id) + ": " + r.reason;
    return false;
  };
  std::vector<int> idx;
  std::vector<pw::IlpCandidate> cds;
  long need = 0;
  for (int i : order) {
    if (static_cast<int>(idx.size()) >= tries) break;
    pw::IlpCandidate cd;
    if (!candidate(s.waiting[i], N, true, cd, s.power)) continue;
    if (need + cd.min_nodes > N) break;
    need += cd.min_nodes;
    idx.push_back(i);
    cds.push_back(cd);
    if (solve(idx, cds)) return idx;
  }
  if (exact_only) return {};
  int n = 0;
  for (int i : order) {
    if (n >= tries) break;
    const WaitingJob& w = s.waiting[i];
    pw::IlpCandidate cd, e;
    if (w.kind == JobKind::rigid || !candidate(w, N, false, cd, s.power)) continue;
    if (candidate(w, N, true, e, s.power) && e.min_nodes == cd.min_nodes && e.max_nodes == cd.max_nodes) continue;
    ++n;
    if (solve({i}, {cd})) return {i};
  }
  return {};
}

/// Start phase with the corridor kept (Algorithm 4 lines 19, 22-25): first
/// fit over the queue in priority order; a job starts at its requested size
/// (need_of(requested): rigid --nodes, malleable requested_size()) when the
/// idle nodes suffice and the modelled draw stays within the corridor (or,
/// when it is outside already, moves towards it without crossing the other
/// bound). Jobs that fit but would break the corridor are held
/// "PowerCorridor", the others "Resources".
void power_starts(Cluster& c, Pool& pool, Decision& d, const std::vector<char>& started) {
  const Snapshot& s = c.snap;
  // the jobs' share of Cluster::draw(), kept up to date as jobs start (one
  // sum per pass, not per waiting job: 5,000 waiting x 2,000 running)
  double jobs_lo = 0, jobs_hi = 0;
  for (auto& j : c.jobs) jobs_lo += j.current * j.p_min, jobs_hi += j.current * j.p_max;
  const double i0 = s.power.idle_watts;
  auto draw = [&](int extra, double pmin, double pmax) {
    return std::pair<double, double>{(c.idle - extra) * i0 + extra * pmin + c.reserved_lo + jobs_lo,
                                     (c.idle - extra) * i0 + extra * pmax + c.reserved_hi + jobs_hi};
  };
  for (size_t i = 0; i < s.waiting.size(); ++i) {
    if (started[i]) continue;
    const WaitingJob& w = s.waiting[i];
    const int want = need_of(w, SizeRule::requested, pool.up);
    if (want == 0 || want > pool.up) { d.holds.emplace_back(w.id, "Resources"); continue; }
    auto [pmin, pmax] = per_node(w.min_power, w.max_power, s.power);
    // §5.2: "a job is launched if the requested number of nodes is available
    // and it satisfies the power corridor constraints"; a smaller start would
    // keep it slow for its whole run (moldability is left to the ILP)
    const int lo = want,
              top = want <= pool.avail_for(w) && want >= static_cast<int>(w.required.size()) ? want : 0;
    int got = 0;
    bool power_blocked = false;
    for (int k = top; k >= lo && k >= 1; --k) {
      if (c.inside(draw(k, pmin, pmax)) || !s.power.known) { got = k; break; }
      power_blocked = true;
    }
    // when the draw is outside already, a start that moves it towards the
    // corridor without crossing the other bound is not refused
    if (!got && s.power.known) {
      auto now = draw(0, 0, 0);
      for (int k = top; k >= lo && k >= 1 && !got; --k) {
        auto dd = draw(k, pmin, pmax);
        bool better_low = now.first < s.power.lower && dd.first > now.first && dd.second <= s.power.upper + kEps;
        bool better_high = now.second > s.power.upper && dd.second < now.second && dd.first >= s.power.lower - kEps;
        if (better_low || better_high) got = k;
      }
    }
    if (!got) {
      d.holds.emplace_back(w.id, power_blocked ? "PowerCorridor" : "Resources");
      continue;
    }
    d.starts.push_back({w.id, w.required.empty() && w.excluded.empty() ? pool.take(got) : pool.take_for(w, got)});
    c.idle -= got;
    jobs_lo += got * pmin;
    jobs_hi += got * pmax;
    pw::IlpJob j;
    j.id = w.id;
    j.current = j.min_nodes = j.max_nodes = got;
    j.p_min = pmin;
    j.p_max = pmax;
    c.jobs.push_back(j);
    c.run.push_back(-1);
  }
}

/// Algorithm 4 line 23: the idle nodes left are shared out among resizable
/// running jobs, one admissible step at a time round-robin (earliest start
/// first), each step only while the modelled maximum stays within the upper
/// bound (and the minimum above the lower one) and the expansion is worth its
/// pause (PolicyConfig::grow_cost).
void power_grow(Cluster& c, Pool& pool, Decision& d) {
  const Snapshot& s = c.snap;
  std::vector<size_t> order;
  for (size_t i = 0; i < c.jobs.size(); ++i)
    if (c.run[i] >= 0 && c.jobs[i].max_nodes > c.jobs[i].current) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& ra = s.running[c.run[a]];
    const auto& rb = s.running[c.run[b]];
    return ra.start_time != rb.start_time ? ra.start_time < rb.start_time : ra.id < rb.id;
  });
  std::vector<int> target(c.jobs.size());
  for (size_t i = 0; i < c.jobs.size(); ++i) target[i] = c.jobs[i].current;
  int avail = c.idle;
  double lo, hi;
  std::tie(lo, hi) = c.draw();
  const double i0 = s.power.idle_watts;
  for (bool moved = true; moved && avail > 0;) {
    moved = false;
    for (size_t i : order) {
      const RunningJob& r = s.running[c.run[i]];
      int to = smallest_admissible(r.constraint, target[i] + 1, std::min(r.max_nodes, target[i] + avail));
      if (to == 0) continue;
      int add = to - target[i];
      double nlo = lo + add * (c.jobs[i].p_min - i0), nhi = hi + add * (c.jobs[i].p_max - i0);
      if (s.power.known && !(nhi <= s.power.upper + kEps && nlo >= s.power.lower - kEps)) continue;
      lo = nlo, hi = nhi;
      target[i] = to;
      avail -= add;
      moved = true;
      if (avail <= 0) break;
    }
  }
  for (size_t i : order) {
    int from = c.jobs[i].current;
    if (target[i] <= from) continue;
    if (!worth_growing(s.running[c.run[i]], from, target[i], s.now, c.cfg)) continue;
    d.expands.push_back({c.jobs[i].id, pool.take(target[i] - from)});
    c.idle -= target[i] - from;
    c.jobs[i].current = c.jobs[i].min_nodes = c.jobs[i].max_nodes = target[i];
  }
}

std::string broken_words(const Cluster& c, std::pair<double, double> dr) {
  const auto& pv = c.snap.power;
  std::string w = "power corridor [" + watts(pv.lower) + ", " + watts(pv.upper) + "] broken: draw " +
                  watts(dr.first) + " - " + watts(dr.second);
  if (dr.second > pv.upper) w += " (above the upper bound)";
  else w += " (below the lower bound)";
  return w;
}

void hold_rest(const Snapshot& s, Decision& d, const std::vector<char>& started, const char* why) {
  for (size_t i = 0; i < s.waiting.size(); ++i)
    if (!started[i]) d.holds.emplace_back(s.waiting[i].id, why);
}

/// Algorithm 4 lines 6-18, the correction of a broken corridor: the first
/// waiting job (in priority order; malleable ones first when
/// cfg.power_favour_malleable) for which the ILP of Eq. 5.3 finds a plan is
/// started with it; failing that, the running jobs alone are re-planned.
/// Marks the jobs it starts in `started`; returns whether a plan was applied,
/// and in `why` the solver's reasons when none was.
bool correct_corridor(Cluster& c, const Snapshot& snap, const PolicyConfig& cfg, Pool& pool, Decision& d,
                      std::vector<char>& started, std::string& why) {
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(snap.waiting.size()); ++i) order.push_back(i);
  if (cfg.power_favour_malleable)
    std::stable_partition(order.begin(), order.end(),
                          [&](int i) { return snap.waiting[i].kind == JobKind::malleable; });
  auto got = plan_with_candidates(c, order, false, pool, d, why);
  for (int i : got) started[i] = 1;
  if (!got.empty()) return true;
  if (!c.resizable_any()) return false;
  auto r = c.solve(c.input());
  if (r.status == pw::IlpStatus::optimal || r.status == pw::IlpStatus::feasible) {
    apply(c, r, pool, d, {});
    return true;
  }
  why = (why.empty() ? "" : why + "; ") + "with the running jobs alone: " + r.reason;
  return false;
}

}  // namespace

Decision decide_power(const Snapshot& snap, const PolicyConfig& cfg) {
  Decision d;
  Pool pool(snap);
  const PowerView& pv = snap.power;
  bool adapting = snap.adapting;
  for (const auto& r : snap.running) adapting = adapting || r.adapting;
  const int W = static_cast<int>(snap.waiting.size());
  std::vector<char> started(W, 0);

  if (pv.known && cfg.power_mode == PowerMode::reactive) {
    // Reactive (PowerMode): only a measured violation is acted on, with the
    // correction of Algorithm 4 lines 6-18; jobs then start as with backfill
    // and are never held ahead of a violation.
    Cluster c(snap, cfg, pool.avail(), !adapting);
    auto dr = c.measure();
    if (!c.inside(dr)) {
      if (adapting) {
        d.notes.push_back(broken_words(c, dr) + " (measured); waiting for a pending resize before re-planning");
      } else {
        std::string why;
        bool fixed = correct_corridor(c, snap, cfg, pool, d, started, why);
        if (!fixed)
          d.notes.push_back(broken_words(c, dr) + " (measured); the current allocation is kept" +
                            (why.empty() ? "" : ": " + why));
      }
    }
    // the rest start as with backfill on what is left, never held for power
    Snapshot rest = snap;
    rest.waiting.clear();
    for (int i = 0; i < W; ++i)
      if (!started[i]) rest.waiting.push_back(snap.waiting[i]);
    start_phase(rest, cfg, Queue::backfill, SizeRule::requested, pool, d);
    return d;
  }

  if (!pv.known || cfg.power_mode == PowerMode::runtime) {
    // Scenario 2 (and no corridor): start as the static backfill does,
    // malleable jobs at their --nodes; never held for power.
    start_phase(snap, cfg, Queue::backfill, SizeRule::requested, pool, d);
    if (!pv.known || adapting) return d;
    Cluster c(snap, cfg, pool.avail(), true);
    for (auto& st : d.starts) {  // this pass's starts hold nodes too (not resizable yet)
      const WaitingJob* w = nullptr;
      for (auto& x : snap.waiting)
        if (x.id == st.job) w = &x;
      pw::IlpJob j;
      j.id = st.job;
      j.current = j.min_nodes = j.max_nodes = static_cast<int>(st.nodes.size());
      std::tie(j.p_min, j.p_max) = per_node(w->min_power, w->max_power, pv);
      c.jobs.push_back(j);
      c.run.push_back(-1);
    }
    auto dr = c.measure();
    if (c.inside(dr) || !c.resizable_any()) {
      if (!c.inside(dr)) d.notes.push_back(broken_words(c, dr) + "; no running job can be resized now");
      return d;
    }
    auto r = c.solve(c.input());
    if (r.status == pw::IlpStatus::optimal || r.status == pw::IlpStatus::feasible)
      apply(c, r, pool, d, {});
    else
      d.notes.push_back(broken_words(c, dr) + "; the current allocation is kept: " + r.reason);
    return d;
  }

  // Algorithm 4 (scenario 3).
  Cluster c(snap, cfg, pool.avail(), !adapting);
  auto dr = c.measure();
  if (!c.inside(dr)) {
    if (adapting) {  // line 4: no decision while an adaptation is pending
      d.notes.push_back(broken_words(c, dr) + "; waiting for a pending resize before re-planning");
      hold_rest(snap, d, started, "PowerCorridor");
      return d;
    }
    // lines 6-18: the first waiting job (in priority order; malleable ones
    // first when favoured) for which the ILP finds a plan is started with it
    std::string why;
    bool fixed = correct_corridor(c, snap, cfg, pool, d, started, why);
    if (!fixed) {
      d.notes.push_back(broken_words(c, dr) + "; the current allocation is kept" + (why.empty() ? "" : ": " + why));
      // line 19: a start that brings the draw back towards the corridor
      power_starts(c, pool, d, started);
      return d;
    }
    // say why the orders were given (the daemon logs each new note)
    d.notes.push_back(broken_words(c, dr) + "; resizing running jobs to bring the draw back inside");
    // line 19: more jobs that keep the corridor, on the nodes the plan left idle
    power_starts(c, pool, d, started);
    return d;
  }
  // lines 21-25: corridor kept: start what keeps it, then share the idle nodes
  power_starts(c, pool, d, started);
  bool held = false;
  for (auto& h : d.holds) held = held || h.second == "PowerCorridor" || h.second == "Resources";
  if (!adapting && held && c.resizable_any()) {
    // a job held for want of nodes: the ILP may shrink (and grow) running
    // jobs within the corridor to start it at its requested size, the
    // highest priority first (as Algorithm 4 lines 10-15 do for a broken
    // corridor; the malleable policies' PWMA rule, §4.2.1)
    for (auto& st : d.starts)
      for (int i = 0; i < W; ++i)
        if (snap.waiting[i].id == st.job) started[i] = 1;
    std::vector<int> order;
    for (int i = 0; i < W; ++i) {
      if (started[i]) continue;
      int need = need_of(snap.waiting[i], SizeRule::requested, pool.up);
      if (need > 0 && need <= pool.up && need > c.idle) order.push_back(i);
    }
    if (cfg.power_favour_malleable)
      std::stable_partition(order.begin(), order.end(),
                            [&](int i) { return snap.waiting[i].kind == JobKind::malleable; });
    std::string why;
    auto got = plan_with_candidates(c, order, true, pool, d, why);
    if (!got.empty()) {
      for (int i : got) std::erase_if(d.holds, [&](const auto& h) { return h.first == snap.waiting[i].id; });
      return d;
    }
  }
  if (!adapting && c.idle > 0 && (!held || cfg.grow_when_held)) power_grow(c, pool, d);
  return d;
}

}  // namespace dynres::sched::detail

namespace dynres::sched {

std::optional<PowerMode> parse_power_mode(const std::string& s) {
  if (s == "aware") return PowerMode::aware;
  if (s == "runtime") return PowerMode::runtime;
  if (s == "proactive") return PowerMode::proactive;
  if (s == "reactive") return PowerMode::reactive;
  return std::nullopt;
}

const char* to_string(PowerMode m) {
  switch (m) {
    case PowerMode::aware: return "aware";
    case PowerMode::runtime: return "runtime";
    case PowerMode::proactive: return "proactive";
    case PowerMode::reactive: return "reactive";
  }
  return "aware";
}

}  // namespace dynres::sched
