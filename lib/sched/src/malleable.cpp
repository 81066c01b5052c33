// The malleable policies: FPSMA [John24 Alg. 2], equi-grow/shrink
// (§4.2.2.2), minAgree ([Finnerty24] "Malleable-Algorithm") and performance-aware
// scheduling (Algorithm 3). One pure pass over a snapshot; semantics are
// documented at decide() in dynres/sched.hpp.
//
// Shape of a pass: a start phase (FCFS, or EASY for minagree), then while the
// highest-priority held job can be started by shrinking resizable jobs (its
// whole need gathered), shrink and start it; then grow resizable jobs with
// the idle nodes left. Sizes are planned as targets first; nodes are picked
// when a plan is accepted, so an abandoned plan changes nothing.
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <unordered_map>

#include "detail.hpp"
#include "dynres/sched.hpp"

namespace dynres::sched::detail {

double remaining(const RunningJob& r, double now) {
  if (r.predicted_end >= 0) return r.predicted_end - now;
  if (r.time_limit < 0) return std::numeric_limits<double>::infinity();
  return r.start_time + r.time_limit - now;
}

bool resizable(const RunningJob& r, const Snapshot& s, const PolicyConfig& cfg) {
  if (r.kind != JobKind::malleable || !r.accepting || r.adapting) return false;
  if (!(remaining(r, s.now) > cfg.min_remaining)) return false;
  if (r.last_resize >= 0 && s.now - r.last_resize < cfg.min_resize_interval) return false;
  if (s.idle_known && s.up_count == static_cast<int>(s.nodes.size()))
    return !r.nodes.empty();  // every node up, the job's nodes valid and its own (Snapshot::idle_known)
  for (int n : r.nodes)  // a job on a lost node is left to failure handling
    if (n < 0 || n >= static_cast<int>(s.nodes.size()) || !s.nodes[n].up || s.nodes[n].job != r.id) return false;
  return !r.nodes.empty();
}

bool worth_growing(const RunningJob& r, int cur, int to, double now, const PolicyConfig& cfg) {
  if (cfg.grow_cost <= 0) return true;
  double rem = remaining(r, now);
  if (!std::isfinite(rem)) return true;
  return rem * (1.0 - static_cast<double>(cur) / to) > cfg.grow_cost;
}

// Algorithm 3's example: even, 10 nodes, 8 needed -> 2.
int down_by_need(const RunningJob& r, int t, int need) {
  if (int s = largest_admissible(r.constraint, r.min_nodes, t - need)) return s;
  return smallest_admissible(r.constraint, r.min_nodes, t - 1);
}

namespace {


/// A resizable running job during one pass.
struct MJob {
  const RunningJob* r = nullptr;
  int target = 0;              ///< planned size
  int cur = 0;                 ///< size at the start of the pass
  std::vector<int> held;       ///< nodes still held, ascending
  std::vector<int> released;   ///< nodes given up by shrinks of this pass
  bool shrunk = false;
  bool no_grow = false;        ///< growth not worth its pause this pass
  bool fresh = false;          ///< started by this pass: growth widens its start (no resize, no pause)
  size_t start = 0;            ///< fresh: index of its Start in Decision::starts
  int plan = 0;                ///< tentative size while a shrink plan is made
  int floor = 0;               ///< smallest admissible size >= min_nodes (0: none)
  bool can_give() const { return floor > 0 && floor < target; }
};

// ---- admissible steps (constraint, [min, max]) ---------------------------
int step_up(const RunningJob& r, int t, int avail) {  // next admissible size up
  return smallest_admissible(r.constraint, t + 1, static_cast<int>(std::min<int64_t>(r.max_nodes, int64_t{t} + avail)));
}
int greedy_up(const RunningJob& r, int t, int avail) {  // as far as avail allows
  return largest_admissible(r.constraint, t + 1, static_cast<int>(std::min<int64_t>(r.max_nodes, int64_t{t} + avail)));
}
int step_down(const RunningJob& r, int t) {  // next admissible size down
  return largest_admissible(r.constraint, r.min_nodes, t - 1);
}
int lowest(const RunningJob& r, int t) {  // smallest admissible size below t
  return smallest_admissible(r.constraint, r.min_nodes, t - 1);
}


bool earlier(const MJob* a, const MJob* b) {
  if (a->r->start_time != b->r->start_time) return a->r->start_time < b->r->start_time;
  return a->r->id < b->r->id;
}

/// A shrink plan: new targets for some jobs; `gathered` nodes in total.
struct Plan {
  std::vector<std::pair<MJob*, int>> sizes;
  int gathered = 0;
  void set(MJob* j, int from, int to) {
    sizes.emplace_back(j, to);
    gathered += from - to;
  }
};

// FPSMA_SHRINK (Algorithm 2 lines 19-38): `order` is latest start first; one
// admissible step each (or by need with Step::greedy), until the need is
// covered.
Plan plan_fpsma(const std::vector<MJob*>& order, int need, const PolicyConfig& cfg) {
  Plan p;
  for (MJob* j : order) {
    if (p.gathered >= need) break;
    if (!j->can_give()) continue;
    int to = cfg.step == Step::one ? step_down(*j->r, j->target) : down_by_need(*j->r, j->target, need - p.gathered);
    if (to > 0) p.set(j, j->target, to);
  }
  return p;
}

// EQUI_SHRINK (§4.2.2.2): the need is taken equally from the resizable jobs
// (`order`: latest start first); a job that cannot give its share (minimum,
// constraint) gives what it can and the rest is spread over the others in
// the next round.
Plan plan_egs(const std::vector<MJob*>& order, int need) {
  Plan p;
  std::vector<MJob*> c;
  for (MJob* j : order)
    if (j->can_give()) c.push_back(j), j->plan = j->target;
  std::vector<MJob*> touched, next;
  while (p.gathered < need && !c.empty()) {
    int left = need - p.gathered;
    int share = (left + static_cast<int>(c.size()) - 1) / static_cast<int>(c.size());
    next.clear();
    for (MJob* j : c) {
      if (p.gathered >= need) break;
      int give = std::min(share, need - p.gathered);
      int to = largest_admissible(j->r->constraint, j->r->min_nodes, j->plan - give);
      if (to == 0) to = step_down(*j->r, j->plan);
      if (to <= 0) continue;
      if (j->plan == j->target) touched.push_back(j);
      p.gathered += j->plan - to;
      j->plan = to;
      if (lowest(*j->r, to) > 0) next.push_back(j);
    }
    c.swap(next);
  }
  for (MJob* j : touched) p.sizes.emplace_back(j, j->plan);
  return p;
}

// minAgree step 2 [Finnerty24]: the jobs with the most nodes give one
// admissible step at a time until the need is covered. `q` is a max-heap of
// (size, job) over the resizable jobs, kept across the plans of one pass: a
// failed plan ends the shrink phase, so only accepted plans' entries matter.
using SizeHeap = std::vector<std::pair<int, MJob*>>;
bool bigger(const std::pair<int, MJob*>& a, const std::pair<int, MJob*>& b) {
  if (a.first != b.first) return a.first < b.first;  // max-heap on size
  return earlier(a.second, b.second);                 // ties: latest start first
}
Plan plan_minagree(SizeHeap& q, int need) {
  Plan p;
  std::vector<MJob*> touched;
  while (p.gathered < need && !q.empty()) {
    std::pop_heap(q.begin(), q.end(), bigger);
    auto [size, j] = q.back();
    q.pop_back();
    int to = step_down(*j->r, size);
    if (to <= 0) continue;  // cannot give any more
    if (size == j->target) touched.push_back(j);
    p.gathered += size - to;
    j->plan = to;
    q.push_back({to, j});
    std::push_heap(q.begin(), q.end(), bigger);
  }
  for (MJob* j : touched) p.sizes.emplace_back(j, j->plan);
  return p;
}

/// MTCT order key: jobs that reported a ratio first, by ratio; then the rest
/// by start time.
bool mtct_before(const MJob* a, const MJob* b, bool descending) {
  bool ka = a->r->mtct >= 0, kb = b->r->mtct >= 0;
  if (ka != kb) return ka;
  if (ka && a->r->mtct != b->r->mtct) return descending ? a->r->mtct > b->r->mtct : a->r->mtct < b->r->mtct;
  return earlier(a, b);
}

// Algorithm 3 line 17: `order` is decreasing MTCT; each gives what is still
// needed (the next admissible size down), jobs above the threshold down to
// their minimum.
Plan plan_perf(const std::vector<MJob*>& order, int need, const PolicyConfig& cfg) {
  Plan p;
  for (MJob* j : order) {
    if (p.gathered >= need) break;
    if (!j->can_give()) continue;
    int to = j->r->mtct > cfg.mtct_threshold ? lowest(*j->r, j->target)
                                              : down_by_need(*j->r, j->target, need - p.gathered);
    if (to > 0) p.set(j, j->target, to);
  }
  return p;
}

// ---- growth with the idle nodes left --------------------------------------
void grow_once(std::vector<MJob>& jobs, int avail, const PolicyConfig& cfg) {
  std::vector<MJob*> c;
  for (auto& j : jobs)
    if (!j.shrunk && !j.no_grow && j.target < j.r->max_nodes) c.push_back(&j);
  switch (cfg.policy) {
    case Policy::fpsma: {  // FPSMA_GROW (Algorithm 2 lines 1-18): earliest start first
      std::sort(c.begin(), c.end(), earlier);
      for (MJob* j : c) {
        if (avail <= 0) break;
        int to = cfg.step == Step::one ? step_up(*j->r, j->target, avail) : greedy_up(*j->r, j->target, avail);
        if (to > 0) avail -= to - j->target, j->target = to;
      }
      break;
    }
    case Policy::egs: {  // EQUI_GROW: equal shares, remainder by start time
      std::sort(c.begin(), c.end(), earlier);
      std::erase_if(c, [&](MJob* j) { return step_up(*j->r, j->target, avail) == 0; });
      if (c.empty()) break;
      const int k = static_cast<int>(c.size()), share = avail / k, rem = avail % k;
      for (int i = 0; i < k; ++i) {
        MJob* j = c[i];
        int to = largest_admissible(j->r->constraint, j->target + 1,
                                    std::min(j->r->max_nodes, j->target + share + (i < rem)));
        if (to > 0) avail -= to - j->target, j->target = to;
      }
      for (MJob* j : c) {  // what constraints left over, by start time
        if (avail <= 0) break;
        if (int to = greedy_up(*j->r, j->target, avail)) avail -= to - j->target, j->target = to;
      }
      break;
    }
    case Policy::minagree: {  // step 3: fewest nodes first, one step at a time
      auto smaller = [](const std::pair<int, MJob*>& a, const std::pair<int, MJob*>& b) {
        if (a.first != b.first) return a.first > b.first;  // min-heap on size
        return earlier(b.second, a.second);                 // ties: earliest start first
      };
      std::priority_queue<std::pair<int, MJob*>, std::vector<std::pair<int, MJob*>>, decltype(smaller)> q(smaller);
      for (MJob* j : c) q.push({j->target, j});
      while (avail > 0 && !q.empty()) {
        auto [size, j] = q.top();
        q.pop();
        int to = step_up(*j->r, size, avail);
        if (to <= 0) continue;
        avail -= to - size;
        j->target = to;
        q.push({to, j});
      }
      break;
    }
    case Policy::perf: {
      // Algorithm 3 line 24: idle nodes are distributed in increasing MTCT
      // order, one admissible step at a time to the job whose ratio is the
      // lowest at its planned size (the ratio grows about linearly with the
      // node count, sim.hpp mtct_of), never past the threshold. Jobs without
      // a ratio come last, by start time.
      auto ratio = [](const MJob* j) {
        return j->r->mtct < 0 ? std::numeric_limits<double>::max() : j->r->mtct * j->target / j->cur;
      };
      auto worse = [&](const MJob* a, const MJob* b) {
        double ra = ratio(a), rb = ratio(b);
        if (ra != rb) return ra > rb;
        return earlier(b, a);
      };
      std::priority_queue<MJob*, std::vector<MJob*>, decltype(worse)> q(worse);
      for (MJob* j : c)
        if (j->r->mtct <= cfg.mtct_threshold) q.push(j);
      while (avail > 0 && !q.empty()) {
        MJob* j = q.top();
        q.pop();
        int to = step_up(*j->r, j->target, avail);
        if (to <= 0) continue;
        if (j->r->mtct >= 0 && j->r->mtct * to / j->cur > cfg.mtct_threshold) continue;
        avail -= to - j->target;
        j->target = to;
        q.push(j);
      }
      break;
    }
    default:
      break;
  }
}

/// An expansion pays a pause of about grow_cost seconds; with at best linear
/// speedup it saves remaining x (1 - cur/to). Not worth it when that is no
/// more than the pause (predicted remaining from predicted_end / the limit).
bool worth_growing(const MJob& j, double now, const PolicyConfig& cfg) {
  return j.fresh || detail::worth_growing(*j.r, j.cur, j.target, now, cfg);
}

/// The policy's growth, then expansions not worth their pause are dropped
/// and the idle nodes offered to the other jobs once more.
void grow(std::vector<MJob>& jobs, int avail, double now, const PolicyConfig& cfg) {
  for (int round = 0; round < 2; ++round) {
    grow_once(jobs, avail, cfg);
    bool dropped = false;
    for (auto& j : jobs)
      if (!j.shrunk && j.target > j.cur && !worth_growing(j, now, cfg)) j.no_grow = dropped = true;
    if (!dropped) return;
    for (auto& j : jobs)
      if (!j.shrunk) j.target = j.cur;
  }
  grow_once(jobs, avail, cfg);
  for (auto& j : jobs)
    if (!j.shrunk && j.target > j.cur && !worth_growing(j, now, cfg)) j.target = j.cur;
}

}  // namespace

Decision decide_malleable(const Snapshot& snap, const PolicyConfig& cfg) {
  Decision d;
  Pool pool(snap);
  const bool minagree = cfg.policy == Policy::minagree;
  const SizeRule rule = minagree || cfg.start_at_minimum ? SizeRule::minimum : SizeRule::requested;
  int head = start_phase(snap, cfg, minagree || cfg.backfill ? Queue::easy : Queue::fcfs, rule, pool, d);

  bool adapting = snap.adapting;
  for (const auto& r : snap.running) adapting = adapting || r.adapting;
  // Algorithm 3 line 16: no resize decision while one is pending (a start's
  // size is no resize: jobs started now may still be widened, below)
  // perf grows by measured MTCT (Algorithm 3 line 13 asks for the data
  // first): a job it starts has none, so perf never widens a start
  const bool grow_fresh = cfg.grow_at_start && cfg.policy != Policy::perf;
  if (adapting && !grow_fresh) return d;

  std::vector<MJob> jobs;
  for (const auto& r : snap.running) {
    if (adapting || !resizable(r, snap, cfg)) continue;
    MJob j;
    j.r = &r;
    j.cur = j.target = static_cast<int>(r.nodes.size());
    j.floor = smallest_admissible(r.constraint, r.min_nodes, r.max_nodes);
    jobs.push_back(std::move(j));  // `held` is filled when the job first gives nodes
  }
  if (jobs.empty() && (!grow_fresh || d.starts.empty())) return d;

  const bool prma = (cfg.policy == Policy::fpsma || cfg.policy == Policy::egs) && cfg.management == Management::prma;
  const int W = static_cast<int>(snap.waiting.size());
  // queue position of each start so far (starts and waiting are both in
  // queue order), and which waiting jobs have started
  std::vector<int> start_pos;
  std::vector<char> started(W, 0);
  for (int i = 0, k = 0; i < W && k < static_cast<int>(d.starts.size()); ++i)
    if (snap.waiting[i].id == d.starts[k].job) started[i] = 1, start_pos.push_back(i), ++k;

  // The policy's shrink order, fixed for the pass (the keys do not change).
  std::vector<MJob*> order;
  for (auto& j : jobs) order.push_back(&j);
  if (cfg.policy == Policy::perf)
    std::sort(order.begin(), order.end(), [](const MJob* a, const MJob* b) { return mtct_before(a, b, true); });
  else
    std::sort(order.begin(), order.end(), [](const MJob* a, const MJob* b) { return earlier(b, a); });

  SizeHeap heap;  // minagree's largest-first order, kept across the plans
  if (minagree) {
    for (MJob* j : order)
      if (j->can_give()) heap.push_back({j->target, j});
    std::make_heap(heap.begin(), heap.end(), bigger);
  }

  // Shrink to start held jobs in priority order, each only when its whole
  // need is gathered (Algorithm 2 lines 35-37, Algorithm 3 lines 18-21).
  bool held = head >= 0;
  std::vector<int64_t> unheld;  // held jobs started by shrinking
  for (int hi = head; !prma && !adapting && hi >= 0 && hi < W; ++hi) {
    const WaitingJob& h = snap.waiting[hi];
    if (started[hi]) continue;
    const int need = need_of(h, rule, pool.up);
    if (need == 0 || need > pool.up) continue;  // can never start: held "Resources"
    if (!size_of(h, rule, pool.up, pool.avail())) {
      const int missing = need - pool.avail();
      Plan p = cfg.policy == Policy::fpsma ? plan_fpsma(order, missing, cfg)
               : cfg.policy == Policy::egs ? plan_egs(order, missing)
               : minagree                  ? plan_minagree(heap, missing)
                                           : plan_perf(order, missing, cfg);
      if (p.gathered < missing) break;  // no shrink at all for this job
      for (auto& [j, to] : p.sizes) {
        if (!j->shrunk) {
          j->held = j->r->nodes;
          if (!std::is_sorted(j->held.begin(), j->held.end())) std::sort(j->held.begin(), j->held.end());
        }
        for (int k = j->target - to; k > 0; --k) {
          pool.extra.push_back(j->held.back());
          j->released.push_back(j->held.back());
          j->held.pop_back();
        }
        j->target = to;
        j->shrunk = true;
      }
    }
    const int k = size_of(h, rule, pool.up, pool.avail());
    if (k == 0) break;  // cannot happen: the plan covered the need
    Start st{h.id, pool.take(k)};
    auto at = std::upper_bound(start_pos.begin(), start_pos.end(), hi) - start_pos.begin();
    d.starts.insert(d.starts.begin() + at, std::move(st));
    start_pos.insert(start_pos.begin() + at, hi);
    started[hi] = 1;
    unheld.push_back(h.id);
    held = false;
    for (int k2 = hi + 1; k2 < W && !held; ++k2) held = !started[k2];
  }
  if (!unheld.empty()) {
    std::unordered_map<int64_t, bool> gone;
    for (auto id : unheld) gone[id] = true;
    std::erase_if(d.holds, [&](const auto& x) { return gone.count(x.first) > 0; });
  }

  // grow_at_start (not perf): the malleable jobs this pass starts are growth
  // candidates like the running ones; what they get widens their start (one start at
  // the final size instead of a start and an expansion with its pause a
  // moment later). Jobs restricted by -w/-x keep the start phase's nodes.
  std::vector<RunningJob> fresh;
  if (grow_fresh) {
    std::unordered_map<int64_t, const WaitingJob*> waiting_of;
    for (int i = 0; i < W; ++i)
      if (started[i]) waiting_of[snap.waiting[i].id] = &snap.waiting[i];
    fresh.reserve(d.starts.size());
    std::vector<size_t> at;
    for (size_t k = 0; k < d.starts.size(); ++k) {
      auto it = waiting_of.find(d.starts[k].job);
      if (it == waiting_of.end()) continue;
      const WaitingJob& w = *it->second;
      if (w.kind != JobKind::malleable || !w.required.empty() || !w.excluded.empty()) continue;
      RunningJob r;
      r.id = w.id;
      r.kind = w.kind;
      r.nodes = d.starts[k].nodes;
      r.req_nodes = w.req_nodes;
      r.min_nodes = w.min_nodes;
      r.max_nodes = w.max_nodes;
      r.constraint = w.constraint;
      r.start_time = snap.now;
      r.time_limit = w.time_limit;
      fresh.push_back(std::move(r));
      at.push_back(k);
    }
    // (`order` and `heap` point into `jobs` and are dead by now: growing the
    // vector may move its elements)
    for (size_t k = 0; k < fresh.size(); ++k) {
      MJob j;
      j.r = &fresh[k];
      j.cur = j.target = static_cast<int>(fresh[k].nodes.size());
      j.fresh = true;
      j.start = at[k];
      jobs.push_back(std::move(j));
    }
  }

  if (!held || cfg.grow_when_held || prma) grow(jobs, pool.avail(), snap.now, cfg);

  for (auto& j : jobs) {
    if (!j.released.empty()) {
      std::sort(j.released.begin(), j.released.end());
      d.shrinks.push_back({j.r->id, std::move(j.released)});
    } else if (j.target > j.cur && j.fresh) {
      auto& nodes = d.starts[j.start].nodes;
      auto more = pool.take(j.target - j.cur);
      nodes.insert(nodes.end(), more.begin(), more.end());
      std::sort(nodes.begin(), nodes.end());
    } else if (j.target > j.cur) {
      d.expands.push_back({j.r->id, pool.take(j.target - j.cur)});
    }
  }
  return d;
}

}  // namespace dynres::sched::detail
