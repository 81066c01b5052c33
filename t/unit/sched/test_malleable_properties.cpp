// Property checks of the malleable policies on seeded random snapshots with
// malleable running jobs: the invariants every Decision must keep, whatever
// the policy (sched.hpp, decide(): "Common rules").
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "dynres/sched.hpp"

using namespace dynres::sched;

namespace {

constexpr Policy kMalleable[] = {Policy::fpsma, Policy::egs, Policy::minagree, Policy::perf};

Snapshot random_malleable(uint64_t seed) {
  std::mt19937_64 g(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); };
  auto chance = [&](int pct) { return uni(1, 100) <= pct; };
  auto constraint = [&] { return chance(50) ? Constraint::none : static_cast<Constraint>(uni(0, 5)); };
  Snapshot s;
  s.now = 50000;
  s.adapting = chance(5);
  const int n = uni(4, 48);
  for (int i = 0; i < n; ++i) s.nodes.push_back({"n" + std::to_string(i), !chance(5), 0});
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::shuffle(idx.begin(), idx.end(), g);
  int64_t id = 1;
  for (size_t p = 0; p < idx.size() && chance(85);) {
    int k = uni(1, std::min<int>(12, static_cast<int>(idx.size() - p)));
    RunningJob r;
    r.id = id++;
    r.nodes.assign(idx.begin() + p, idx.begin() + p + k);
    p += k;
    for (int x : r.nodes) s.nodes[x].job = r.id;
    r.kind = chance(70) ? JobKind::malleable : static_cast<JobKind>(uni(0, 1));
    r.constraint = r.kind == JobKind::malleable ? constraint() : Constraint::none;
    r.min_nodes = r.max_nodes = r.req_nodes = k;
    if (r.kind == JobKind::malleable) {
      r.min_nodes = uni(1, k);
      r.max_nodes = k + uni(0, n);
      r.accepting = chance(90);
      r.adapting = chance(3);
      if (chance(30)) r.last_resize = s.now - uni(0, 120);
      if (chance(60)) r.mtct = uni(0, 300) / 100.0;
      if (chance(50)) r.predicted_end = s.now + uni(0, 4000);
    }
    r.start_time = s.now - uni(0, 5000);
    r.time_limit = chance(15) ? -1 : uni(60, 9000);
    s.running.push_back(std::move(r));
  }
  for (int w = uni(0, 12); w > 0; --w) {
    WaitingJob j;
    j.id = 1000 + id++;
    j.kind = static_cast<JobKind>(uni(0, 2));
    j.constraint = constraint();
    if (j.kind == JobKind::rigid) {
      j.req_nodes = j.min_nodes = j.max_nodes = std::max(1, largest_admissible(j.constraint, 1, uni(1, n)));
    } else {
      j.min_nodes = uni(1, n / 2 + 1);
      j.max_nodes = j.min_nodes + uni(0, n);
      j.req_nodes = uni(j.min_nodes, j.max_nodes);
    }
    j.time_limit = chance(10) ? -1 : uni(10, 8000);
    j.submit_time = s.now - 1000 + id;
    s.waiting.push_back(j);
  }
  return s;
}

bool resizable(const RunningJob& r, const Snapshot& s, const PolicyConfig& c) {
  if (r.kind != JobKind::malleable || !r.accepting || r.adapting || s.adapting) return false;
  double end = r.predicted_end >= 0 ? r.predicted_end : r.time_limit < 0 ? 1e300 : r.start_time + r.time_limit;
  if (end - s.now <= c.min_remaining) return false;
  if (r.last_resize >= 0 && s.now - r.last_resize < c.min_resize_interval) return false;
  for (int x : r.nodes)
    if (!s.nodes[x].up) return false;
  return true;
}

}  // namespace

TEST_CASE("random snapshots: a caller's idle index gives the same decision as the scan") {
  const Policy all[] = {Policy::fcfs, Policy::backfill, Policy::easy, Policy::fpsma, Policy::egs, Policy::minagree,
                        Policy::perf};
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    Snapshot s = random_malleable(seed / 2);
    if (seed % 2)  // every node up: the index also stands for the running jobs' nodes (Snapshot::idle_known)
      for (auto& n : s.nodes) n.up = true;
    Snapshot k = s;
    k.idle_known = true;
    for (int i = 0; i < static_cast<int>(s.nodes.size()); ++i) {
      k.up_count += s.nodes[i].up;
      if (s.nodes[i].up && s.nodes[i].job == 0) k.idle.push_back(i);
    }
    for (Policy p : all) {
      INFO("seed " << seed << " " << to_string(p));
      PolicyConfig c;
      c.policy = p;
      Decision a = decide(s, c), b = decide(k, c);
      REQUIRE(a.starts.size() == b.starts.size());
      for (size_t i = 0; i < a.starts.size(); ++i) {
        CHECK(a.starts[i].job == b.starts[i].job);
        CHECK(a.starts[i].nodes == b.starts[i].nodes);
      }
      REQUIRE(a.expands.size() == b.expands.size());
      for (size_t i = 0; i < a.expands.size(); ++i) CHECK(a.expands[i].nodes == b.expands[i].nodes);
      REQUIRE(a.shrinks.size() == b.shrinks.size());
      for (size_t i = 0; i < a.shrinks.size(); ++i) CHECK(a.shrinks[i].nodes == b.shrinks[i].nodes);
      CHECK(a.holds == b.holds);
    }
  }
}

TEST_CASE("random snapshots: invariants of every malleable policy") {
  int shrinks = 0, expands = 0, shrink_starts = 0;
  for (uint64_t seed = 1; seed <= 1500; ++seed) {
    const Snapshot s = random_malleable(seed);
    int free0 = 0;
    for (const auto& n : s.nodes) free0 += n.up && n.job == 0;
    bool any_adapting = s.adapting;
    for (const auto& r : s.running) any_adapting = any_adapting || r.adapting;
    std::map<int64_t, const RunningJob*> run;
    for (const auto& r : s.running) run[r.id] = &r;
    std::map<int64_t, const WaitingJob*> wait;
    for (const auto& w : s.waiting) wait[w.id] = &w;

    for (Policy p : kMalleable) {
      for (int variant = 0; variant < 2; ++variant) {
        PolicyConfig cfg;
        cfg.policy = p;
        if (variant) cfg.step = Step::greedy, cfg.management = Management::prma, cfg.grow_when_held = false;
        INFO("seed " << seed << " policy " << to_string(p) << " variant " << variant);
        const Decision d = decide(s, cfg);
        const Decision again = decide(s, cfg);  // purity
        REQUIRE(d.starts.size() == again.starts.size());
        REQUIRE(d.holds == again.holds);
        REQUIRE(d.shrinks.size() == again.shrinks.size());
        REQUIRE(d.expands.size() == again.expands.size());

        std::set<int> released, used;
        std::set<int64_t> resized;
        for (const auto& sh : d.shrinks) {
          REQUIRE(run.count(sh.job));
          const RunningJob& r = *run[sh.job];
          REQUIRE(resizable(r, s, cfg));
          REQUIRE(resized.insert(sh.job).second);
          REQUIRE(!sh.nodes.empty());
          for (int x : sh.nodes) {
            REQUIRE(std::count(r.nodes.begin(), r.nodes.end(), x) == 1);
            REQUIRE(released.insert(x).second);
          }
          int to = static_cast<int>(r.nodes.size() - sh.nodes.size());
          REQUIRE(to >= r.min_nodes);
          REQUIRE(admissible(r.constraint, to));
        }
        auto usable = [&](int x) {
          return x >= 0 && x < static_cast<int>(s.nodes.size()) && s.nodes[x].up &&
                 (s.nodes[x].job == 0 || released.count(x));
        };
        for (const auto& ex : d.expands) {
          REQUIRE(run.count(ex.job));
          const RunningJob& r = *run[ex.job];
          REQUIRE(resizable(r, s, cfg));
          REQUIRE(resized.insert(ex.job).second);  // never shrunk and grown in one pass
          REQUIRE(!ex.nodes.empty());
          for (int x : ex.nodes) REQUIRE((usable(x) && used.insert(x).second));
          int to = static_cast<int>(r.nodes.size() + ex.nodes.size());
          REQUIRE(to <= r.max_nodes);
          REQUIRE(admissible(r.constraint, to));
        }
        int started_nodes = 0;
        std::set<int64_t> started;
        for (const auto& st : d.starts) {
          REQUIRE(wait.count(st.job));
          REQUIRE(started.insert(st.job).second);
          const WaitingJob& j = *wait[st.job];
          const int k = static_cast<int>(st.nodes.size());
          for (int x : st.nodes) REQUIRE((usable(x) && used.insert(x).second));
          REQUIRE(admissible(j.constraint, k));
          if (j.kind == JobKind::rigid) REQUIRE(k == j.req_nodes);
          else REQUIRE((k >= j.min_nodes && k <= j.max_nodes));
          started_nodes += k;
        }
        std::set<int64_t> held;
        for (const auto& [id, why] : d.holds) {
          REQUIRE(wait.count(id));
          REQUIRE(held.insert(id).second);
        }
        for (const auto& w : s.waiting) REQUIRE(started.count(w.id) + held.count(w.id) == 1);
        if (any_adapting) REQUIRE((d.shrinks.empty() && d.expands.empty()));
        if (!d.shrinks.empty()) {
          // a shrink only ever serves a start that idle nodes alone could not
          REQUIRE(started_nodes > free0);
          REQUIRE((cfg.management == Management::pwma || p == Policy::minagree || p == Policy::perf));
        }
        shrinks += !d.shrinks.empty();
        expands += !d.expands.empty();
        shrink_starts += !d.shrinks.empty() && !d.starts.empty();
      }
    }
  }
  // the generator must exercise what is checked
  CHECK(shrinks > 200);
  CHECK(expands > 1000);
  CHECK(shrink_starts == shrinks);
}
