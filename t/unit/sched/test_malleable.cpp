// The malleable policies on hand-made snapshots: the dissertation's worked examples
// [John24 §4.2.2.1, §4.2.3], job management modes, guards.
#include <catch2/catch.hpp>

#include <map>
#include <numeric>

#include "dynres/sched.hpp"
#include "snapshots.hpp"

using namespace dynres::sched;
using V = std::vector<int>;

namespace {

constexpr double kNow = 10000;

Snapshot cluster(int n) { return test::cluster(n, kNow); }
using test::range;

/// A running malleable job that accepts orders, far from its end.
RunningJob& mall(Snapshot& s, int64_t id, V nodes, int lo, int hi, Constraint c = Constraint::none,
                 double start = kNow - 1000, double mtct = -1) {
  return test::malleable(s, id, std::move(nodes), lo, hi, c, start, mtct);
}

void rigid_running(Snapshot& s, int64_t id, V nodes, double end) {
  for (int n : nodes) s.nodes[n].job = id;
  RunningJob r;
  r.id = id;
  r.min_nodes = r.max_nodes = r.req_nodes = static_cast<int>(nodes.size());
  r.nodes = std::move(nodes);
  r.start_time = kNow - 10;
  r.time_limit = end - r.start_time;
  s.running.push_back(std::move(r));
}

WaitingJob rigid(int64_t id, int n, double limit = 600) {
  WaitingJob j;
  j.id = id;
  j.req_nodes = j.min_nodes = j.max_nodes = n;
  j.time_limit = limit;
  j.submit_time = kNow - 100 + id;
  return j;
}

PolicyConfig config(Policy p) {
  PolicyConfig c;
  c.policy = p;
  return c;
}

std::map<int64_t, int> sizes(const Decision& d, const Snapshot& s) {  // job -> new size
  std::map<int64_t, int> m;
  for (const auto& r : s.running) m[r.id] = static_cast<int>(r.nodes.size());
  for (const auto& e : d.expands) m[e.job] += static_cast<int>(e.nodes.size());
  for (const auto& e : d.shrinks) m[e.job] -= static_cast<int>(e.nodes.size());
  for (const auto& st : d.starts) m[st.job] = static_cast<int>(st.nodes.size());
  return m;
}

bool started(const Decision& d, int64_t id) {
  for (const auto& s : d.starts)
    if (s.job == id) return true;
  return false;
}

}  // namespace

TEST_CASE("fpsma grow: one admissible step per pass ([John24 §4.2.2.1]: even, 2 nodes, 8 idle -> 4)") {
  Snapshot s = cluster(10);
  mall(s, 1, range(0, 2), 2, 10, Constraint::even);
  auto d = decide(s, config(Policy::fpsma));
  REQUIRE(d.expands.size() == 1);
  CHECK(d.expands[0].job == 1);
  CHECK(d.expands[0].nodes == V{2, 3});
  CHECK(d.shrinks.empty());
  PolicyConfig g = config(Policy::fpsma);
  g.step = Step::greedy;  // the dynres.yaml option: as far as the idle nodes allow
  CHECK(sizes(decide(s, g), s)[1] == 10);
}

TEST_CASE("fpsma grow: earliest start first, each takes its step while nodes last") {
  Snapshot s = cluster(8);
  mall(s, 1, {0}, 1, 8, Constraint::none, kNow - 500);
  mall(s, 2, {1}, 1, 8, Constraint::pof2, kNow - 900);  // started first
  mall(s, 3, {2, 3}, 1, 8, Constraint::even, kNow - 100);
  // 4 idle: job 2 (pof2 1->2) takes 1, job 1 (1->2) takes 1, job 3 (even 2->4) takes 2
  auto m = sizes(decide(s, config(Policy::fpsma)), s);
  CHECK(m[2] == 2);
  CHECK(m[1] == 2);
  CHECK(m[3] == 4);
}

TEST_CASE("fpsma shrink: one admissible step per job ([John24 §4.2.2.1]: odd, 9 nodes -> 7)") {
  Snapshot s = cluster(9);
  mall(s, 1, range(0, 9), 1, 9, Constraint::odd);
  s.waiting.push_back(rigid(5, 2));
  auto d = decide(s, config(Policy::fpsma));
  REQUIRE(d.shrinks.size() == 1);
  CHECK(d.shrinks[0].nodes == V{7, 8});  // the job's highest-index nodes
  REQUIRE(d.starts.size() == 1);
  CHECK(d.starts[0].job == 5);
  CHECK(d.starts[0].nodes == V{7, 8});
  CHECK(d.holds.empty());
}

TEST_CASE("fpsma shrink: no shrink at all unless the waiting job's whole need is gathered") {
  Snapshot s = cluster(9);
  mall(s, 1, range(0, 9), 1, 9, Constraint::odd);  // one step gives 2
  s.waiting.push_back(rigid(5, 3));
  auto d = decide(s, config(Policy::fpsma));
  CHECK(d.shrinks.empty());
  CHECK(d.starts.empty());
  REQUIRE(d.holds.size() == 1);
  CHECK(d.holds[0] == std::pair<int64_t, std::string>{5, "Resources"});
  // latest start first: two jobs of 4 (even), the later one gives its step first
  Snapshot t = cluster(8);
  mall(t, 1, range(0, 4), 2, 4, Constraint::even, kNow - 900);
  mall(t, 2, range(4, 8), 2, 4, Constraint::even, kNow - 100);
  t.waiting.push_back(rigid(5, 2));
  auto e = decide(t, config(Policy::fpsma));
  REQUIRE(e.shrinks.size() == 1);
  CHECK(e.shrinks[0].job == 2);
  CHECK(started(e, 5));
}

TEST_CASE("perf shrink takes what the waiting job needs ([John24 §4.2.3]: even, 10 nodes, 8 needed -> 2)") {
  Snapshot s = cluster(10);
  mall(s, 1, range(0, 10), 2, 10, Constraint::even, kNow - 1000, 0.5);
  s.waiting.push_back(rigid(5, 8));
  auto d = decide(s, config(Policy::perf));
  CHECK(sizes(d, s)[1] == 2);
  REQUIRE(d.starts.size() == 1);
  CHECK(d.starts[0].nodes == range(2, 10));
  // 7 needed: the next admissible size down that frees at least 7 is still 2
  s.waiting[0] = rigid(5, 7);
  CHECK(sizes(decide(s, config(Policy::perf)), s)[1] == 2);
}

TEST_CASE("perf: shrink in decreasing MTCT order, grow in increasing order, threshold never grown") {
  PolicyConfig pc = config(Policy::perf);
  pc.mtct_threshold = 1.0;
  Snapshot s = cluster(12);
  mall(s, 1, range(0, 4), 1, 8, Constraint::none, kNow - 900, 0.2);
  mall(s, 2, range(4, 8), 1, 8, Constraint::none, kNow - 800, 0.8);
  mall(s, 3, range(8, 12), 1, 8, Constraint::none, kNow - 700, 0.4);
  s.waiting.push_back(rigid(9, 3));
  auto d = decide(s, config(Policy::perf));
  auto m = sizes(d, s);
  CHECK(m[2] == 1);  // highest MTCT gives the 3 nodes
  CHECK(m[1] == 4);
  CHECK(m[3] == 4);
  CHECK(started(d, 9));

  Snapshot g = cluster(12);
  mall(g, 1, range(0, 2), 1, 6, Constraint::none, kNow - 900, 0.6);
  mall(g, 2, range(2, 4), 1, 6, Constraint::none, kNow - 800, 0.1);
  mall(g, 3, range(4, 6), 1, 6, Constraint::none, kNow - 700, 2.5);  // above the threshold
  auto e = decide(g, pc);
  auto n = sizes(e, g);
  CHECK(n[2] == 6);  // lowest MTCT first, as far as it can
  CHECK(n[1] == 3);  // capped where its MTCT would reach 1.0: 2 * 1.0 / 0.6 = 3.3 nodes
  CHECK(n[3] == 2);  // above the threshold: never grown

  // above the threshold: gives down to its minimum when a job needs nodes
  Snapshot h = cluster(8);
  mall(h, 1, range(0, 6), 1, 8, Constraint::none, kNow - 900, 3.0);
  mall(h, 2, range(6, 8), 1, 8, Constraint::none, kNow - 800, 0.1);
  h.waiting.push_back(rigid(9, 1));
  auto f = decide(h, pc);
  auto o = sizes(f, h);
  CHECK(o[1] == 1);
  CHECK(started(f, 9));
  CHECK(o[2] == 6);  // the 4 nodes left over go to the low-MTCT job
}

TEST_CASE("perf grows a job at most to the size where its MTCT would reach the threshold") {
  Snapshot s = cluster(32);
  mall(s, 1, range(0, 2), 1, 32, Constraint::none, kNow - 900, 0.5);  // 2 nodes, MTCT 0.5
  PolicyConfig pc = config(Policy::perf);
  pc.mtct_threshold = 2.0;  // 2 * 2 / 0.5 = 8 nodes
  CHECK(sizes(decide(s, pc), s)[1] == 8);
  pc.mtct_threshold = 0.75;  // 3 nodes
  CHECK(sizes(decide(s, pc), s)[1] == 3);
  pc.mtct_threshold = 100;  // only the idle nodes limit it
  CHECK(sizes(decide(s, pc), s)[1] == 32);
}

TEST_CASE("perf starts malleable jobs at --nodes, in priority order") {
  Snapshot s = cluster(16);
  WaitingJob w;
  w.id = 4;
  w.kind = JobKind::malleable;
  w.req_nodes = 6;
  w.min_nodes = 2;
  w.max_nodes = 16;
  w.time_limit = 600;
  s.waiting.push_back(w);
  PolicyConfig pc = config(Policy::perf);
  pc.grow_at_start = false;  // the start phase alone
  auto d = decide(s, pc);
  REQUIRE(d.starts.size() == 1);
  CHECK(d.starts[0].nodes.size() == 6);
  auto e = decide(s, config(Policy::easy));  // the moldable extension takes all 16
  CHECK(e.starts[0].nodes.size() == 16);
}

TEST_CASE("grow_at_start: a job started by the pass gets its growth in the start, not as an expansion") {
  // 16 idle nodes, one malleable job 2..16 waiting (--nodes 6), limit 600 s:
  // the growth phase would give it the other nodes right after its start
  Snapshot s = cluster(16);
  WaitingJob w;
  w.id = 4;
  w.kind = JobKind::malleable;
  w.req_nodes = 6;
  w.min_nodes = 2;
  w.max_nodes = 16;
  w.time_limit = 600;
  s.waiting.push_back(w);
  for (Policy p : {Policy::minagree, Policy::egs}) {
    INFO(to_string(p));
    auto d = decide(s, config(p));
    REQUIRE(d.starts.size() == 1);
    CHECK(d.starts[0].nodes == range(0, 16));  // one start at the final size
    CHECK(d.expands.empty());
    PolicyConfig off = config(p);
    off.grow_at_start = false;
    CHECK(decide(s, off).starts[0].nodes.size() < 16);
  }
  // perf grows by measured MTCT, which a job it starts has not reported:
  // it starts at --nodes
  CHECK(decide(s, config(Policy::perf)).starts[0].nodes.size() == 6);
  // no pause to pay: a start is widened even when an expansion would not
  // be worth grow_cost (20 s x (1 - 2/16) = 17.5 s > 14.55 s, but
  // 16 s x (1 - 2/16) = 14 s < 14.55 s)
  s.waiting[0].time_limit = 16;
  CHECK(decide(s, config(Policy::minagree)).starts[0].nodes.size() == 16);
  s.waiting[0].time_limit = 600;
  // fpsma moves one admissible step per pass, a fresh job too: 6 -> 7
  CHECK(decide(s, config(Policy::fpsma)).starts[0].nodes.size() == 7);

  // a running malleable job 1 (nodes 0-3, 1..16) and the waiting one: the
  // idle nodes are shared by the policy's growth order (minagree: fewest
  // nodes first, one step at a time), the running one by an expansion
  Snapshot t = cluster(16);
  mall(t, 1, range(0, 4), 1, 16);
  t.waiting.push_back(w);
  w.id = 5;
  w.kind = JobKind::rigid;  // a rigid job is never widened
  w.req_nodes = w.min_nodes = w.max_nodes = 2;
  t.waiting.push_back(w);
  auto d = decide(t, config(Policy::minagree));
  auto n = sizes(d, t);
  CHECK(n[5] == 2);
  CHECK(n[1] + n[4] + n[5] == 16);
  CHECK(n[4] >= n[1] - 1);  // water-filling: the started job ends level with job 1
  CHECK(n[4] <= n[1] + 1);
  REQUIRE(d.expands.size() == 1);
  CHECK(d.expands[0].job == 1);
  for (auto& st : d.starts)
    for (int x : st.nodes) CHECK(t.nodes[x].job == 0);  // only idle nodes

  // while job 1 is adapting no resize is decided, but the start is still
  // widened (a start's size is no resize decision)
  t.running[0].adapting = true;
  auto a = decide(t, config(Policy::minagree));
  CHECK(a.expands.empty());
  CHECK(a.shrinks.empty());
  CHECK(sizes(a, t)[4] == 10);  // 12 idle, 2 for the rigid job
  // a job restricted by -w keeps the start phase's nodes
  t.waiting[0].required = {15};
  CHECK(sizes(decide(t, config(Policy::minagree)), t)[4] == 2);  // its minimum
}

TEST_CASE("job management: prma never shrinks, pwma shrinks for the waiting job") {
  Snapshot s = cluster(8);
  mall(s, 1, range(0, 6), 1, 8);
  s.waiting.push_back(rigid(5, 4));
  for (Policy p : {Policy::fpsma, Policy::egs}) {
    INFO(to_string(p));
    PolicyConfig c = config(p);
    c.management = Management::prma;
    auto d = decide(s, c);
    CHECK(d.shrinks.empty());
    CHECK(d.starts.empty());
    CHECK(sizes(d, s)[1] == (p == Policy::fpsma ? 7 : 8));  // idle nodes go to the running job
    c.management = Management::pwma;
    c.step = Step::greedy;
    auto e = decide(s, c);
    CHECK(started(e, 5));
    CHECK(sizes(e, s)[1] == 4);
  }
}

TEST_CASE("pwma: grow_when_held decides whether a held job's idle nodes are given away") {
  Snapshot s = cluster(8);
  mall(s, 1, range(0, 4), 4, 8);  // at its minimum: cannot give
  s.waiting.push_back(rigid(5, 6));
  PolicyConfig c = config(Policy::fpsma);
  CHECK(sizes(decide(s, c), s)[1] == 5);  // one step
  c.grow_when_held = false;
  auto d = decide(s, c);
  CHECK(d.expands.empty());
  CHECK(d.shrinks.empty());
}

TEST_CASE("egs: idle nodes split equally, remainder by start time; the need taken equally") {
  Snapshot s = cluster(12);
  mall(s, 1, range(0, 2), 1, 12, Constraint::none, kNow - 100);
  mall(s, 2, range(2, 4), 1, 12, Constraint::none, kNow - 900);  // earliest
  mall(s, 3, range(4, 6), 1, 12, Constraint::none, kNow - 500);
  mall(s, 4, range(6, 8), 1, 12, Constraint::even, kNow - 50);
  // 4 idle over 4 jobs: 1 each; the even job cannot take 1, so its node goes
  // to the earliest-started job that can use it
  auto m = sizes(decide(s, config(Policy::egs)), s);
  CHECK(m[2] == 4);
  CHECK(m[3] == 3);
  CHECK(m[1] == 3);
  CHECK(m[4] == 2);

  Snapshot t = cluster(12);
  mall(t, 1, range(0, 6), 1, 12, Constraint::none, kNow - 900);
  mall(t, 2, range(6, 12), 1, 12, Constraint::none, kNow - 100);
  t.waiting.push_back(rigid(7, 5));
  auto d = decide(t, config(Policy::egs));
  auto n = sizes(d, t);
  CHECK(n[2] == 3);  // 5 needed: ceil(5/2) = 3 from the later-started job first,
  CHECK(n[1] == 4);  // the remaining 2 from the earlier one
  CHECK(started(d, 7));
}

TEST_CASE("minagree: EASY start at the minimum, shrink the largest, grow the smallest") {
  Snapshot s = cluster(16);
  WaitingJob w;
  w.id = 4;
  w.kind = JobKind::malleable;
  w.req_nodes = 6;
  w.min_nodes = 3;
  w.max_nodes = 16;
  w.time_limit = 600;
  s.waiting.push_back(w);
  PolicyConfig ma = config(Policy::minagree);
  ma.grow_at_start = false;  // the start phase alone
  auto d = decide(s, ma);
  REQUIRE(d.starts.size() == 1);
  CHECK(d.starts[0].nodes.size() == 3);  // no running job to grow yet

  Snapshot t = cluster(12);
  mall(t, 1, range(0, 7), 1, 12, Constraint::none, kNow - 900);
  mall(t, 2, range(7, 10), 1, 12, Constraint::none, kNow - 800);
  mall(t, 3, range(10, 12), 1, 12, Constraint::none, kNow - 700);
  t.waiting.push_back(rigid(9, 5));
  auto e = decide(t, config(Policy::minagree));
  auto m = sizes(e, t);
  CHECK(started(e, 9));
  CHECK(m[1] == 3);  // 7 -> 3: always the largest gives the next node
  CHECK(m[2] == 2);  // 3 -> 2 once job 1 is down to 3 (ties: the later start gives)
  CHECK(m[3] == 2);

  Snapshot g = cluster(12);
  mall(g, 1, range(0, 5), 1, 12, Constraint::none, kNow - 900);
  mall(g, 2, range(5, 6), 1, 12, Constraint::none, kNow - 800);
  mall(g, 3, range(6, 8), 1, 12, Constraint::none, kNow - 700);
  auto f = decide(g, config(Policy::minagree));  // 4 idle: water-filling from the smallest
  auto n = sizes(f, g);
  CHECK(n[2] == 4);  // 1 -> 2 -> 3 (tie with job 3: earlier start) -> 4
  CHECK(n[3] == 3);
  CHECK(n[1] == 5);
}

TEST_CASE("guards: near the end, recently resized, not accepting, adapting, rigid") {
  auto base = [] {
    Snapshot s = cluster(8);
    mall(s, 1, range(0, 2), 1, 8);
    return s;
  };
  for (Policy p : {Policy::fpsma, Policy::egs, Policy::minagree, Policy::perf}) {
    INFO(to_string(p));
    CHECK(sizes(decide(base(), config(p)), base())[1] > 2);  // grows when nothing prevents it
    Snapshot a = base();
    a.running[0].predicted_end = kNow + 60;  // Algorithm 2: remaining must exceed 60 s
    CHECK(decide(a, config(p)).expands.empty());
    a.running[0].predicted_end = kNow + 61;
    CHECK_FALSE(decide(a, config(p)).expands.empty());
    Snapshot b = base();
    b.running[0].last_resize = kNow - 10;  // interval 30 s
    CHECK(decide(b, config(p)).expands.empty());
    b.running[0].last_resize = kNow - 30;
    CHECK_FALSE(decide(b, config(p)).expands.empty());
    Snapshot c = base();
    c.running[0].accepting = false;  // not registered / deregistered
    CHECK(decide(c, config(p)).expands.empty());
    Snapshot e = base();
    e.adapting = true;  // Algorithm 3 IS_ADAPTING
    CHECK(decide(e, config(p)).expands.empty());
    Snapshot f = base();
    mall(f, 2, {7}, 1, 8).adapting = true;
    CHECK(decide(f, config(p)).expands.empty());
    Snapshot r = base();
    r.running[0].kind = JobKind::moldable;
    CHECK(decide(r, config(p)).expands.empty());
    Snapshot dn = base();
    dn.nodes[1].up = false;  // a job on a lost node is left alone
    CHECK(decide(dn, config(p)).expands.empty());
  }
}

TEST_CASE("adapting: jobs still start, only resizes wait") {
  Snapshot s = cluster(8);
  mall(s, 1, range(0, 4), 1, 8).adapting = true;
  s.waiting.push_back(rigid(5, 2));
  s.waiting.push_back(rigid(6, 4));
  auto d = decide(s, config(Policy::perf));
  CHECK(started(d, 5));
  CHECK_FALSE(started(d, 6));
  CHECK(d.shrinks.empty());
  CHECK(d.expands.empty());
}

TEST_CASE("a started head keeps queue order among the starts and loses its hold") {
  Snapshot s = cluster(10);
  rigid_running(s, 1, range(0, 2), kNow + 10000);
  mall(s, 2, range(2, 10), 1, 10);
  s.waiting.push_back(rigid(7, 4));
  s.waiting.push_back(rigid(8, 2));
  auto d = decide(s, config(Policy::perf));
  REQUIRE(d.starts.size() == 2);
  CHECK(d.starts[0].job == 7);
  CHECK(d.starts[1].job == 8);
  CHECK(d.holds.empty());
  CHECK(sizes(d, s)[2] == 2);
}
