// Hand-made snapshots with concrete decisions for fcfs, backfill and easy.
#include <catch2/catch.hpp>

#include <map>
#include <numeric>

#include "dynres/sched.hpp"
#include "snapshots.hpp"

using namespace dynres::sched;
using V = std::vector<int>;

namespace {

constexpr double kNow = 1000;

Snapshot cluster(int n) { return test::cluster(n, kNow); }
using test::range;

void run(Snapshot& s, int64_t id, V nodes, double start, double limit) {
  for (int n : nodes) s.nodes[n].job = id;
  RunningJob r;
  r.id = id;
  r.min_nodes = r.max_nodes = static_cast<int>(nodes.size());
  r.nodes = std::move(nodes);
  r.start_time = start;
  r.time_limit = limit;
  s.running.push_back(std::move(r));
}

WaitingJob rigid(int64_t id, int n, double limit = 600, Constraint c = Constraint::none) {
  WaitingJob j;
  j.id = id;
  j.req_nodes = j.min_nodes = j.max_nodes = n;
  j.constraint = c;
  j.time_limit = limit;
  return j;
}

WaitingJob moldable(int64_t id, int lo, int hi, Constraint c = Constraint::none,
                    double limit = 600, JobKind k = JobKind::moldable) {
  WaitingJob j;
  j.id = id;
  j.kind = k;
  j.req_nodes = j.min_nodes = lo;
  j.max_nodes = hi;
  j.constraint = c;
  j.time_limit = limit;
  return j;
}

std::map<int64_t, V> starts(const Decision& d) {
  std::map<int64_t, V> m;
  for (const auto& s : d.starts) m[s.job] = s.nodes;
  return m;
}

std::map<int64_t, std::string> holds(const Decision& d) {
  std::map<int64_t, std::string> m;
  for (const auto& [id, why] : d.holds) m[id] = why;
  return m;
}

Decision decide_with(const Snapshot& s, Policy p, double dflt = 3600) {
  PolicyConfig c;
  c.policy = p;
  c.default_time_limit = dflt;
  return decide(s, c);
}

}  // namespace

TEST_CASE("fcfs starts in order and blocks behind a head that does not fit") {
  auto s = cluster(8);
  run(s, 1, range(0, 4), kNow - 10, 100);
  s.waiting = {rigid(10, 2), rigid(11, 4), rigid(12, 1)};
  auto d = decide_with(s, Policy::fcfs);
  CHECK(starts(d) == std::map<int64_t, V>{{10, {4, 5}}});
  CHECK(holds(d) == std::map<int64_t, std::string>{{11, "Resources"}, {12, "Priority"}});
  CHECK(d.expands.empty());
  CHECK(d.shrinks.empty());
}

TEST_CASE("backfill fills the gap with later small jobs") {
  auto s = cluster(8);
  run(s, 1, range(0, 4), kNow - 10, 100);
  s.waiting = {rigid(10, 2), rigid(11, 4), rigid(12, 1), rigid(13, 2), rigid(14, 1)};
  auto d = decide_with(s, Policy::backfill);
  CHECK(starts(d) == std::map<int64_t, V>{{10, {4, 5}}, {12, {6}}, {14, {7}}});
  CHECK(holds(d) == std::map<int64_t, std::string>{{11, "Resources"}, {13, "Resources"}});
}

TEST_CASE("easy backfilling around the head's reservation") {
  // 10 nodes: job 1 on 0-3 ends at now+100, job 2 on 4-7 at now+500; 8, 9 idle.
  // Head 20 needs 5: at now+100 six nodes are free -> shadow now+100, extra 1.
  auto s = cluster(10);
  run(s, 1, range(0, 4), kNow - 50, 150);
  run(s, 2, range(4, 8), kNow - 100, 600);
  const auto head = rigid(20, 5, 1000);

  SECTION("a short later job that ends before the shadow time starts") {
    s.waiting = {head, rigid(21, 2, 50)};
    auto d = decide_with(s, Policy::easy);
    CHECK(starts(d) == std::map<int64_t, V>{{21, {8, 9}}});
    CHECK(holds(d) == std::map<int64_t, std::string>{{20, "Resources"}});
  }
  SECTION("ending exactly at the shadow time is allowed") {
    s.waiting = {head, rigid(21, 2, 100)};
    CHECK(starts(decide_with(s, Policy::easy)).count(21) == 1);
  }
  SECTION("a later job that would delay the head is refused") {
    s.waiting = {head, rigid(21, 2, 101)};
    auto d = decide_with(s, Policy::easy);
    CHECK(d.starts.empty());
    CHECK(holds(d) == std::map<int64_t, std::string>{{20, "Resources"}, {21, "Priority"}});
    // plain backfill would have started it
    CHECK(starts(decide_with(s, Policy::backfill)).count(21) == 1);
  }
  SECTION("a long job uses only the extra node") {
    s.waiting = {head, rigid(21, 2, 5000), rigid(22, 1, 5000), rigid(23, 1, 5000)};
    auto d = decide_with(s, Policy::easy);
    CHECK(starts(d) == std::map<int64_t, V>{{22, {8}}});
    CHECK(holds(d) == std::map<int64_t, std::string>{
                          {20, "Resources"}, {21, "Priority"}, {23, "Priority"}});
  }
  SECTION("an unlimited later job never ends before the shadow: extra only") {
    s.waiting = {head, rigid(21, 1, -1), rigid(22, 1, -1)};
    auto d = decide_with(s, Policy::easy);
    CHECK(starts(d) == std::map<int64_t, V>{{21, {8}}});
  }
  SECTION("a long moldable job shrinks to the extra nodes") {
    s.waiting = {head, moldable(21, 1, 2, Constraint::none, 5000)};
    CHECK(starts(decide_with(s, Policy::easy)) == std::map<int64_t, V>{{21, {8}}});
  }
  SECTION("a short moldable job takes all it can") {
    s.waiting = {head, moldable(21, 1, 4, Constraint::none, 60)};
    CHECK(starts(decide_with(s, Policy::easy)) == std::map<int64_t, V>{{21, {8, 9}}});
  }
  SECTION("jobs started earlier in the pass release at now + limit") {
    // 30 takes node 8 until now+50; head 31 needs 6: 1 + 1 (at +50) + 4 (at
    // +100) -> shadow now+100, extra 0.
    s.waiting = {rigid(30, 1, 50), rigid(31, 6, 1000), rigid(32, 1, 100), rigid(33, 1, 101)};
    auto d = decide_with(s, Policy::easy);
    CHECK(starts(d) == std::map<int64_t, V>{{30, {8}}, {32, {9}}});
    s.waiting = {rigid(30, 1, 50), rigid(31, 6, 1000), rigid(33, 1, 101)};
    CHECK(starts(decide_with(s, Policy::easy)) == std::map<int64_t, V>{{30, {8}}});
  }
  SECTION("a moldable head reserves its smallest admissible size") {
    // smallest even in [5, 8] is 6: 2 + 4 at now+100 -> shadow now+100, extra 0
    s.waiting = {moldable(20, 5, 8, Constraint::even, 1000), rigid(21, 1, 5000)};
    auto d = decide_with(s, Policy::easy);
    CHECK(d.starts.empty());
    s.waiting = {moldable(20, 5, 8, Constraint::none, 1000), rigid(21, 1, 5000)};
    CHECK(starts(decide_with(s, Policy::easy)) == std::map<int64_t, V>{{21, {8}}});
  }
}

TEST_CASE("easy: overdue and unlimited running jobs") {
  auto s = cluster(10);
  SECTION("an end already in the past counts as now") {
    run(s, 1, range(0, 4), 0, 10);  // should have ended at t=10
    run(s, 2, range(4, 8), kNow, 500);
    // head needs 5: 2 + 4 at now -> shadow now, extra 1
    s.waiting = {rigid(20, 5), rigid(21, 1, 10), rigid(22, 1, 5000), rigid(23, 1, 0)};
    auto d = decide_with(s, Policy::easy);
    CHECK(starts(d) == std::map<int64_t, V>{{21, {8}}, {23, {9}}});
  }
  SECTION("unlimited running jobs end at start + default_time_limit") {
    run(s, 1, range(0, 4), kNow - 3000, -1);  // ends now+600 with the default 3600
    run(s, 2, range(4, 8), kNow, 500);
    // head needs 9: 2 + 4 (+500) + 4 (+600) -> shadow now+600, extra 1
    s.waiting = {rigid(20, 9), rigid(21, 2, 600)};
    CHECK(starts(decide_with(s, Policy::easy)).count(21) == 1);
    s.waiting = {rigid(20, 9), rigid(21, 2, 601)};
    CHECK(decide_with(s, Policy::easy).starts.empty());
    // a larger default pushes the shadow out
    s.waiting = {rigid(20, 9), rigid(21, 2, 601)};
    CHECK(starts(decide_with(s, Policy::easy, 7200)).count(21) == 1);
  }
}

TEST_CASE("jobs that can never fit do not block the queue") {
  auto s = cluster(10);
  s.nodes[3].up = false;
  s.nodes[6].up = false;  // 8 up nodes
  run(s, 1, range(0, 3), kNow, 100);
  const std::vector<WaitingJob> q = {rigid(20, 9), rigid(21, 3, 1e6), rigid(22, 2, 1e6, Constraint::odd),
                                     moldable(23, 5, 7, Constraint::pof2), rigid(24, 2, 1e6)};
  for (Policy p : {Policy::fcfs, Policy::backfill, Policy::easy}) {
    s.waiting = q;
    auto d = decide_with(s, p);
    INFO(to_string(p));
    CHECK(starts(d) == std::map<int64_t, V>{{21, {4, 5, 7}}, {24, {8, 9}}});
    auto h = holds(d);
    CHECK(h[20] == "Resources");
    CHECK(h[22] == "Resources");
    CHECK(h[23] == "Resources");
  }
}

TEST_CASE("easy: a head unreachable by known ends gets no reservation") {
  auto s = cluster(6);
  for (int n : range(0, 3)) s.nodes[n].job = 99;  // held by a job not in `running`
  run(s, 1, range(3, 5), kNow, 100);
  // 20 needs 4 but only 1 + 2 nodes ever come back: skipped; 21 becomes the
  // head (needs 3, shadow now+100, extra 0) and 22 must end by then.
  s.waiting = {rigid(20, 4), rigid(21, 3), rigid(22, 1, 200), rigid(23, 1, 100)};
  auto d = decide_with(s, Policy::easy);
  CHECK(starts(d) == std::map<int64_t, V>{{23, {5}}});
  CHECK(holds(d) == std::map<int64_t, std::string>{
                        {20, "Resources"}, {21, "Resources"}, {22, "Priority"}});
}

TEST_CASE("moldable jobs get the largest admissible size that fits") {
  auto s = cluster(40);
  run(s, 1, range(0, 10), kNow, 100);  // 30 idle: 10..39
  s.waiting = {moldable(20, 2, 16, Constraint::pof2), moldable(21, 1, 100, Constraint::cube),
               moldable(22, 1, 8, Constraint::square, 600, JobKind::malleable),
               moldable(23, 3, 5, Constraint::even)};
  for (Policy p : {Policy::fcfs, Policy::backfill, Policy::easy}) {
    INFO(to_string(p));
    auto d = decide_with(s, p);
    // 16 (pof2 <= 30), then 8 (cube <= 14), then 4 (square <= 6), 2 left
    CHECK(starts(d) == std::map<int64_t, V>{
                           {20, range(10, 26)}, {21, range(26, 34)}, {22, range(34, 38)}});
    CHECK(holds(d).at(23) == "Resources");
  }
}

TEST_CASE("down nodes and busy nodes are never used") {
  auto s = cluster(8);
  s.nodes[0].up = false;
  s.nodes[2].up = false;
  s.nodes[5].job = 7;  // busy, whatever `running` says
  s.waiting = {rigid(20, 3), rigid(21, 2)};
  for (Policy p : {Policy::fcfs, Policy::backfill, Policy::easy}) {
    auto d = decide_with(s, p);
    CHECK(starts(d) == std::map<int64_t, V>{{20, {1, 3, 4}}, {21, {6, 7}}});
  }
  s.waiting = {rigid(20, 6)};  // 6 up nodes but one is busy
  CHECK(holds(decide_with(s, Policy::fcfs)).at(20) == "Resources");
}

TEST_CASE("empty snapshot gives an empty decision") {
  Snapshot s;
  for (Policy p : {Policy::fcfs, Policy::backfill, Policy::easy}) {
    auto d = decide_with(s, p);
    CHECK(d.starts.empty());
    CHECK(d.holds.empty());
  }
  s.waiting = {rigid(1, 1)};
  CHECK(holds(decide_with(s, Policy::easy)).at(1) == "Resources");
}

// ---- sbatch -w / -x: node restrictions in the start phase ---------------------

TEST_CASE("-w: a job starts only when every required node is idle, and gets them", "[policies][restrict]") {
  for (Policy p : {Policy::fcfs, Policy::backfill, Policy::easy}) {
    Snapshot s = cluster(4);
    run(s, 9, {2}, kNow - 10, 600);  // node 2 busy
    auto w = rigid(1, 2);
    w.required = {2};
    s.waiting.push_back(w);
    auto d = decide(s, {p});
    CHECK(d.starts.empty());  // two idle nodes, but not node 2
    s.running.clear();
    s.nodes[2].job = 0;
    d = decide(s, {p});
    REQUIRE(d.starts.size() == 1);
    CHECK(d.starts[0].nodes == V{0, 2});  // node 2 and the lowest allowed idle node
  }
}

TEST_CASE("-x: excluded nodes are never given, other jobs still get them", "[policies][restrict]") {
  Snapshot s = cluster(4);
  auto x = rigid(1, 2);
  x.excluded = {0, 1};
  s.waiting.push_back(x);
  s.waiting.push_back(rigid(2, 2));
  auto d = decide(s, {Policy::easy});
  REQUIRE(d.starts.size() == 2);
  CHECK(d.starts[0].job == 1);
  CHECK(d.starts[0].nodes == V{2, 3});
  CHECK(d.starts[1].nodes == V{0, 1});
  // too few allowed nodes: held, and under fcfs it blocks the queue
  Snapshot t = cluster(4);
  auto big = rigid(1, 3);
  big.excluded = {3, 2};
  t.waiting.push_back(big);
  t.waiting.push_back(rigid(2, 1));
  d = decide(t, {Policy::fcfs});
  CHECK(d.starts.empty());
  d = decide(t, {Policy::backfill});
  REQUIRE(d.starts.size() == 1);
  CHECK(d.starts[0].job == 2);
}

TEST_CASE("-w with a moldable job: at least the required nodes, more when they fit", "[policies][restrict]") {
  Snapshot s = cluster(6);
  auto m = moldable(1, 1, 4);
  m.required = {5};
  m.excluded = {0};
  s.waiting.push_back(m);
  auto d = decide(s, {Policy::easy});
  REQUIRE(d.starts.size() == 1);
  CHECK(d.starts[0].nodes == V{1, 2, 3, 5});
}
