// Node states DRAIN and DOWN in the pure policies: on seeded random snapshots
// where some nodes are drained and some down (held or idle), no policy ever
// starts or expands a job on a node that is not up; and react_to_nodes()
// shrinks malleable jobs away from lost/drained nodes or reports failures,
// with the invariants of node_health.hpp. Plus hand-worked cases.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "dynres/node_health.hpp"
#include "dynres/sched.hpp"

using namespace dynres::sched;

namespace {

enum class NS { up, drain, down };

Snapshot random_states(uint64_t seed) {
  std::mt19937_64 g(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); };
  auto chance = [&](int pct) { return uni(1, 100) <= pct; };
  Snapshot s;
  s.now = 20000;
  const int n = uni(3, 40);
  for (int i = 0; i < n; ++i) {
    NS st = chance(12) ? NS::drain : chance(12) ? NS::down : NS::up;
    Node nd{"n" + std::to_string(i), st == NS::up, 0};
    nd.lost = st == NS::down;
    s.nodes.push_back(nd);
  }
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::shuffle(idx.begin(), idx.end(), g);
  int64_t id = 1;
  for (size_t p = 0; p < idx.size() && chance(80);) {
    int k = uni(1, std::min<int>(10, static_cast<int>(idx.size() - p)));
    RunningJob r;
    r.id = id++;
    r.nodes.assign(idx.begin() + p, idx.begin() + p + k);
    p += k;
    for (int x : r.nodes) s.nodes[x].job = r.id;
    r.kind = chance(60) ? JobKind::malleable : static_cast<JobKind>(uni(0, 1));
    r.min_nodes = r.max_nodes = r.req_nodes = k;
    if (r.kind == JobKind::malleable) {
      r.min_nodes = uni(1, k);
      r.max_nodes = k + uni(0, n);
      r.constraint = chance(70) ? Constraint::none : static_cast<Constraint>(uni(0, 5));
      r.accepting = chance(85);
      r.adapting = chance(10);
    }
    r.start_time = s.now - uni(0, 5000);
    r.time_limit = chance(15) ? -1 : uni(600, 9000);
    s.running.push_back(std::move(r));
  }
  for (int w = uni(0, 10); w > 0; --w) {
    WaitingJob j;
    j.id = 1000 + id++;
    j.kind = static_cast<JobKind>(uni(0, 2));
    j.min_nodes = uni(1, n / 2 + 1);
    j.max_nodes = j.kind == JobKind::rigid ? j.min_nodes : j.min_nodes + uni(0, n);
    j.req_nodes = j.min_nodes;
    j.time_limit = uni(10, 8000);
    j.submit_time = s.now - 100 + id;
    s.waiting.push_back(j);
  }
  return s;
}

}  // namespace

TEST_CASE("node states: no policy starts or expands a job on a drained or down node") {
  const Policy all[] = {Policy::fcfs, Policy::backfill, Policy::easy, Policy::fpsma,
                        Policy::egs,  Policy::minagree, Policy::perf};
  int starts = 0, expands = 0, not_up = 0;
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    const Snapshot s = random_states(seed);
    for (auto& nd : s.nodes) not_up += !nd.up;
    for (Policy p : all) {
      INFO("seed " << seed << " policy " << to_string(p));
      PolicyConfig cfg;
      cfg.policy = p;
      const Decision d = decide(s, cfg);
      std::set<int> released;
      for (auto& sh : d.shrinks) released.insert(sh.nodes.begin(), sh.nodes.end());
      for (auto& st : d.starts)
        for (int x : st.nodes) {
          REQUIRE(s.nodes.at(x).up);
          REQUIRE((s.nodes[x].job == 0 || released.count(x)));
          ++starts;
        }
      for (auto& e : d.expands)
        for (int x : e.nodes) {
          REQUIRE(s.nodes.at(x).up);
          REQUIRE((s.nodes[x].job == 0 || released.count(x)));
          ++expands;
        }
    }
  }
  CHECK(starts > 1000);  // the property was exercised, not vacuous
  CHECK(expands > 100);
  CHECK(not_up > 1000);
}

TEST_CASE("node states: react_to_nodes keeps its invariants on random snapshots") {
  int shrunk = 0, failed = 0, evacuated = 0, waited = 0, restarted = 0, replaced = 0;
  for (uint64_t seed = 1; seed <= 3000; ++seed) {
    Snapshot s = random_states(7000 + seed);
    // some malleable jobs that do not accept orders lost their listener
    for (auto& r : s.running)
      r.restartable = r.kind == JobKind::malleable && !r.accepting && (seed + static_cast<uint64_t>(r.id)) % 2 == 0;
    INFO("seed " << 7000 + seed);
    const NodeReaction a = react_to_nodes(s);
    const NodeReaction b = react_to_nodes(s);  // purity
    REQUIRE(a.shrinks.size() == b.shrinks.size());
    REQUIRE(a.failures.size() == b.failures.size());
    REQUIRE(a.restarts.size() == b.restarts.size());
    REQUIRE(a.replacements == b.replacements);
    REQUIRE(a.replacements.size() == a.restarts.size());
    std::set<int> given;  // replacements: idle, up, each to one job
    for (size_t k = 0; k < a.restarts.size(); ++k)
      for (int x : a.replacements[k]) {
        REQUIRE(x >= 0);
        REQUIRE(x < static_cast<int>(s.nodes.size()));
        REQUIRE(s.nodes[x].up);
        REQUIRE(s.nodes[x].job == 0);
        REQUIRE(given.insert(x).second);
        ++replaced;
      }
    std::map<int64_t, int> seen;
    for (auto& sh : a.shrinks) REQUIRE(++seen[sh.job] == 1);
    for (auto& sh : a.restarts) REQUIRE(++seen[sh.job] == 1);
    for (auto& f : a.failures) REQUIRE(++seen[f.job] == 1);
    std::map<int64_t, const Resize*> shrink;
    for (auto& sh : a.shrinks) shrink[sh.job] = &sh;
    std::map<int64_t, const Resize*> restart;
    for (auto& sh : a.restarts) restart[sh.job] = &sh;
    std::map<int64_t, const NodeFailure*> fail;
    for (auto& f : a.failures) fail[f.job] = &f;
    for (auto& r : s.running) {
      std::set<int> lost, drained, mine(r.nodes.begin(), r.nodes.end());
      for (int x : r.nodes)
        if (!s.nodes[x].up) (s.nodes[x].lost ? lost : drained).insert(x);
      const int first = *std::min_element(r.nodes.begin(), r.nodes.end());
      if (lost.empty() && drained.empty()) {
        REQUIRE(!seen.count(r.id));  // healthy jobs are never touched
        continue;
      }
      if (shrink.count(r.id) || restart.count(r.id)) {
        const bool re = restart.count(r.id) > 0;
        const Resize& sh = re ? *restart[r.id] : *shrink[r.id];
        REQUIRE(r.kind == JobKind::malleable);
        if (re) {  // only a job whose listener is gone, only for a lost node
          REQUIRE(r.restartable);
          REQUIRE(!r.accepting);
          REQUIRE(!lost.empty());
          ++restarted;
        } else {
          REQUIRE(r.accepting);
          REQUIRE(!r.adapting);
        }
        std::set<int> away(sh.nodes.begin(), sh.nodes.end());
        REQUIRE(away.size() == sh.nodes.size());
        REQUIRE(std::is_sorted(sh.nodes.begin(), sh.nodes.end()));
        for (int x : sh.nodes) REQUIRE(mine.count(x));
        for (int x : lost) REQUIRE(away.count(x));     // every lost node given back
        for (int x : drained) REQUIRE(away.count(x));  // and every drained one
        REQUIRE(!away.count(first));
        const int to = static_cast<int>(r.nodes.size() - sh.nodes.size());
        REQUIRE(to >= std::max(1, r.min_nodes));
        REQUIRE(admissible(r.constraint, to));
        if (re) {  // with its replacements: never above its size now nor (unless already) its maximum
          const size_t k = static_cast<size_t>(std::find_if(a.restarts.begin(), a.restarts.end(),
                                                            [&](auto& x) { return x.job == r.id; }) - a.restarts.begin());
          const int with = to + static_cast<int>(a.replacements[k].size());
          REQUIRE(with <= static_cast<int>(r.nodes.size()));
          if (with > to) {
            REQUIRE(with <= std::max(r.max_nodes, to));
            REQUIRE(admissible(r.constraint, with));
          }
        }
        if (!re) ++(lost.empty() ? evacuated : shrunk);
      } else if (fail.count(r.id)) {
        REQUIRE(!lost.empty());
        REQUIRE(std::set<int>(fail[r.id]->lost.begin(), fail[r.id]->lost.end()) == lost);
        // a failure only when no shrink was possible
        const int left = static_cast<int>(r.nodes.size() - lost.size() - drained.size());
        const bool could = r.kind == JobKind::malleable && (r.accepting || r.adapting || r.restartable) && !lost.count(first) &&
                           !drained.count(first) &&
                           largest_admissible(r.constraint, std::max(1, r.min_nodes), left) > 0;
        REQUIRE(!could);
        ++failed;
      } else {
        // left alone: only drained nodes it cannot evacuate, or an order outstanding
        if (!lost.empty()) {
          REQUIRE(r.adapting);
          REQUIRE(!r.restartable);  // a restartable job never waits for an order it cannot commit
          ++waited;
        }
      }
    }
  }
  CHECK(shrunk > 50);
  CHECK(failed > 50);
  CHECK(evacuated > 50);
  CHECK(waited > 5);
  CHECK(restarted > 20);
  CHECK(replaced > 5);
}

namespace {
Snapshot hand(std::vector<NS> states) {
  Snapshot s;
  for (size_t i = 0; i < states.size(); ++i) {
    Node nd{"n" + std::to_string(i + 1), states[i] == NS::up, 0};
    nd.lost = states[i] == NS::down;
    s.nodes.push_back(nd);
  }
  return s;
}
RunningJob job(int64_t id, JobKind k, std::vector<int> nodes, int min_nodes, Snapshot& s) {
  RunningJob r;
  r.id = id;
  r.kind = k;
  r.nodes = nodes;
  r.min_nodes = min_nodes;
  r.max_nodes = 16;
  r.accepting = k == JobKind::malleable;
  for (int x : nodes) s.nodes[x].job = id;
  return r;
}
}  // namespace

TEST_CASE("react_to_nodes: hand-worked cases") {
  SECTION("malleable job loses a non-first node: shrunk away from it") {
    auto s = hand({NS::up, NS::down, NS::up, NS::up});
    s.running.push_back(job(1, JobKind::malleable, {0, 1, 2, 3}, 1, s));
    auto r = react_to_nodes(s);
    REQUIRE(r.failures.empty());
    REQUIRE(r.shrinks.size() == 1);
    CHECK(r.shrinks[0].nodes == std::vector<int>{1});
  }
  SECTION("registered job whose listener died with the node: restarted away from it") {
    auto s = hand({NS::up, NS::up, NS::down, NS::up});
    s.running.push_back(job(1, JobKind::malleable, {0, 1, 2, 3}, 1, s));
    s.running[0].accepting = false;
    s.running[0].restartable = true;
    s.running[0].adapting = true;  // an order sent before the listener died does not hold it back
    auto r = react_to_nodes(s);
    REQUIRE(r.failures.empty());
    REQUIRE(r.shrinks.empty());
    REQUIRE(r.restarts.size() == 1);
    CHECK(r.restarts[0].nodes == std::vector<int>{2});
    CHECK(r.replacements == std::vector<std::vector<int>>{{}});  // no idle node: on N-1
    s.running[0].restartable = false;  // never registered: a failure
    s.running[0].adapting = false;
    r = react_to_nodes(s);
    REQUIRE(r.restarts.empty());
    REQUIRE(r.failures.size() == 1);
  }
  SECTION("a restarted job takes an idle node in the lost one's place, once") {
    auto s = hand({NS::up, NS::down, NS::up, NS::up, NS::up, NS::up});
    s.running.push_back(job(1, JobKind::malleable, {0, 1, 2}, 1, s));
    s.running.push_back(job(2, JobKind::malleable, {3, 4}, 1, s));
    s.nodes[4].up = false, s.nodes[4].lost = true;
    for (auto& r : s.running) r.accepting = false, r.restartable = true;
    auto r = react_to_nodes(s);
    REQUIRE(r.restarts.size() == 2);
    CHECK(r.restarts[0].nodes == std::vector<int>{1});
    CHECK(r.restarts[1].nodes == std::vector<int>{4});
    REQUIRE(r.replacements.size() == 2);
    CHECK(r.replacements[0] == std::vector<int>{5});  // the one idle node, to the first job
    CHECK(r.replacements[1].empty());
    s.running[0].max_nodes = 2;  // at its maximum without the lost node: no replacement
    r = react_to_nodes(s);
    CHECK(r.replacements[0].empty());
    CHECK(r.replacements[1] == std::vector<int>{5});
    s.running[0].max_nodes = 16;
    s.running[0].constraint = Constraint::even;  // 2 -> 3 would not be admissible
    r = react_to_nodes(s);
    CHECK(r.replacements[0].empty());
  }
  SECTION("malleable job loses its first node: failure") {
    auto s = hand({NS::down, NS::up, NS::up});
    s.running.push_back(job(1, JobKind::malleable, {0, 1, 2}, 1, s));
    auto r = react_to_nodes(s);
    REQUIRE(r.shrinks.empty());
    REQUIRE(r.failures.size() == 1);
    CHECK(r.failures[0].lost == std::vector<int>{0});
  }
  SECTION("malleable job at its minimum: failure (requeue)") {
    auto s = hand({NS::up, NS::up, NS::down});
    s.running.push_back(job(1, JobKind::malleable, {0, 1, 2}, 3, s));
    auto r = react_to_nodes(s);
    REQUIRE(r.shrinks.empty());
    REQUIRE(r.failures.size() == 1);
  }
  SECTION("rigid job on a lost node: failure; on a drained node: left alone") {
    auto s = hand({NS::up, NS::down, NS::drain, NS::up});
    s.running.push_back(job(1, JobKind::rigid, {0, 1}, 2, s));
    s.running.push_back(job(2, JobKind::rigid, {2, 3}, 2, s));
    auto r = react_to_nodes(s);
    REQUIRE(r.shrinks.empty());
    REQUIRE(r.failures.size() == 1);
    CHECK(r.failures[0].job == 1);
  }
  SECTION("drain by evacuation: the drained node is the one given back") {
    auto s = hand({NS::up, NS::up, NS::drain, NS::up});
    s.running.push_back(job(1, JobKind::malleable, {0, 1, 2, 3}, 2, s));
    auto r = react_to_nodes(s);
    REQUIRE(r.shrinks.size() == 1);
    CHECK(r.shrinks[0].nodes == std::vector<int>{2});
  }
  SECTION("an even constraint gives back one healthy node more, never the first") {
    auto s = hand({NS::up, NS::up, NS::down, NS::up});
    s.running.push_back(job(1, JobKind::malleable, {0, 1, 2, 3}, 1, s));
    s.running[0].constraint = Constraint::even;
    auto r = react_to_nodes(s);
    REQUIRE(r.shrinks.size() == 1);
    CHECK(r.shrinks[0].nodes == std::vector<int>{2, 3});
  }
  SECTION("an order outstanding: left for a later pass; two jobs on lost nodes both handled") {
    auto s = hand({NS::up, NS::down, NS::up, NS::down});
    s.running.push_back(job(1, JobKind::malleable, {0, 1}, 1, s));
    s.running.push_back(job(2, JobKind::malleable, {2, 3}, 1, s));
    s.running[0].adapting = true;
    auto r = react_to_nodes(s);
    REQUIRE(r.failures.empty());
    REQUIRE(r.shrinks.size() == 1);
    CHECK(r.shrinks[0].job == 2);
  }
  SECTION("an order outstanding while the job does not accept another: still waits, no failure") {
    auto s = hand({NS::up, NS::down, NS::up});
    s.running.push_back(job(1, JobKind::malleable, {0, 1, 2}, 1, s));
    s.running[0].adapting = true;
    s.running[0].accepting = false;
    auto r = react_to_nodes(s);
    CHECK(r.failures.empty());
    CHECK(r.shrinks.empty());
  }
  SECTION("a malleable job that never registered is treated as rigid") {
    auto s = hand({NS::up, NS::down});
    s.running.push_back(job(1, JobKind::malleable, {0, 1}, 1, s));
    s.running[0].accepting = false;
    auto r = react_to_nodes(s);
    REQUIRE(r.failures.size() == 1);
  }
}
