// iCheck-aware scheduling on hand-made snapshots: Alg. 10 (favour icheck),
// Alg. 11 (favour applications) [John24 §7.3.2.2], and the controller's
// proactive scaler (Alg. 8) and removal choice (Alg. 9).
#include <catch2/catch.hpp>

#include "dynres/icheck_scaler.hpp"
#include "dynres/sched.hpp"
#include "snapshots.hpp"

using namespace dynres::sched;
using V = std::vector<int>;

namespace {

constexpr double kNow = 10000;
constexpr double GiB = 1024.0 * 1024 * 1024;

/// n nodes; the ones in `ic` belong to iCheck (each 10 GiB, `free` GiB free).
Snapshot with_icheck(int n, V ic, double free_gib = 1, int min_nodes = 1, int max_nodes = 4) {
  Snapshot s = test::cluster(n, kNow);
  s.icheck.present = true;
  s.icheck.min_nodes = min_nodes;
  s.icheck.max_nodes = max_nodes;
  for (int i : ic) {
    s.nodes[i].job = kIcheckJob;
    s.icheck.nodes.push_back({i, 10 * GiB, free_gib * GiB, 2});
  }
  return s;
}

RunningJob& mall(Snapshot& s, int64_t id, V nodes, int lo, double mtct, double start = kNow - 1000) {
  return test::malleable(s, id, std::move(nodes), lo, 64, Constraint::none, start, mtct);
}

WaitingJob rigid(int64_t id, int n) {
  WaitingJob j;
  j.id = id;
  j.req_nodes = j.min_nodes = j.max_nodes = n;
  j.time_limit = 600;
  j.submit_time = kNow - 100 + id;
  return j;
}

void request(Snapshot& s, int n, Urgency u) {
  s.icheck.request_nodes = n;
  s.icheck.request_urgency = u;
}

PolicyConfig cfg_of(IcheckFavour f, Policy p = Policy::perf) {
  PolicyConfig c;
  c.policy = p;
  c.icheck_favour = f;
  c.grow_cost = 0;
  return c;
}

}  // namespace

TEST_CASE("icheck favour: parse and print") {
  CHECK(parse_icheck_favour("icheck") == IcheckFavour::icheck);
  CHECK(parse_icheck_favour("applications") == IcheckFavour::applications);
  CHECK_FALSE(parse_icheck_favour("apps"));
  CHECK_FALSE(parse_icheck_favour("ICHECK"));
  CHECK(std::string(to_string(IcheckFavour::applications)) == "applications");
}

TEST_CASE("no iCheck view: no grants, reclaims or iCheck shrinks") {
  Snapshot s = test::cluster(4, kNow);
  request(s, 2, Urgency::high);  // present is false: ignored
  Decision d = decide(s, cfg_of(IcheckFavour::icheck, Policy::easy));
  CHECK(d.icheck_grants.empty());
  CHECK(d.icheck_reclaims.empty());
  CHECK(d.icheck_request_left == 0);
}

TEST_CASE("Alg. 10: HIGH request takes idle nodes before a waiting job") {
  Snapshot s = with_icheck(6, {0});
  s.nodes[1].job = 7;  // a rigid job
  s.running.push_back({});
  s.running.back().id = 7;
  s.running.back().nodes = {1};
  s.waiting.push_back(rigid(20, 3));  // 4 idle: would fit
  request(s, 2, Urgency::high);
  Decision d = decide(s, cfg_of(IcheckFavour::icheck, Policy::easy));
  CHECK(d.icheck_grants == V{2, 3});
  CHECK(d.icheck_request_left == 0);
  CHECK(d.starts.empty());  // 2 left for a 3-node job
  REQUIRE(d.holds.size() == 1);
  CHECK(d.holds[0].first == 20);
}

TEST_CASE("Alg. 10: HIGH short of idle nodes shrinks the lowest-MTCT job") {
  Snapshot s = with_icheck(9, {0});
  mall(s, 1, {1, 2, 3, 4}, 1, 0.5);
  mall(s, 2, {5, 6, 7}, 1, 0.1);  // lowest MTCT: shrunk
  request(s, 2, Urgency::high);   // node 8 idle: one from there, one by shrinking
  Decision d = decide(s, cfg_of(IcheckFavour::icheck));
  CHECK(d.icheck_grants == V{8});
  REQUIRE(d.shrinks.size() == 1);
  CHECK(d.shrinks[0].job == 2);
  CHECK(d.shrinks[0].nodes == V{7});
  CHECK(d.shrinks[0].for_icheck);
  CHECK(d.expands.empty());          // nothing else resized in the pass
  CHECK(d.icheck_request_left == 1);  // granted once node 7 is released
}

TEST_CASE("Alg. 10: a job near its end, or without MTCT, is shrunk last or never") {
  Snapshot s = with_icheck(8, {0});
  auto& ending = mall(s, 1, {1, 2, 3}, 1, 0.01);
  ending.predicted_end = kNow + 10;  // within min_remaining: never shrunk
  mall(s, 2, {4, 5}, 1, -1);         // unknown MTCT: after any known one
  mall(s, 3, {6, 7}, 1, 3.0);
  request(s, 1, Urgency::high);
  Decision d = decide(s, cfg_of(IcheckFavour::icheck));
  CHECK(d.icheck_grants.empty());
  REQUIRE(d.shrinks.size() == 1);
  CHECK(d.shrinks[0].job == 3);
  CHECK(d.shrinks[0].nodes == V{7});
}

TEST_CASE("Alg. 10: shrinks take several jobs, each down to its minimum") {
  Snapshot s = with_icheck(8, {0});
  mall(s, 1, {1, 2, 3}, 2, 0.1);  // may give 1
  mall(s, 2, {4, 5, 6, 7}, 2, 0.2);  // may give 2
  request(s, 3, Urgency::high);
  Decision d = decide(s, cfg_of(IcheckFavour::icheck));
  REQUIRE(d.shrinks.size() == 2);
  CHECK(d.shrinks[0].job == 1);
  CHECK(d.shrinks[0].nodes == V{3});
  CHECK(d.shrinks[1].job == 2);
  CHECK(d.shrinks[1].nodes == V{6, 7});
  CHECK(d.icheck_request_left == 3);
}

TEST_CASE("Alg. 10: no shrink while a job adapts; the request stays pending") {
  Snapshot s = with_icheck(6, {0});
  mall(s, 1, {1, 2, 3}, 1, 0.1);
  mall(s, 2, {4, 5}, 1, 0.2).adapting = true;
  request(s, 1, Urgency::high);
  Decision d = decide(s, cfg_of(IcheckFavour::icheck));
  CHECK(d.shrinks.empty());
  CHECK(d.icheck_request_left == 1);
}

TEST_CASE("Alg. 10: LOW request gets only what the pass leaves idle") {
  Snapshot s = with_icheck(6, {0});
  mall(s, 1, {1, 2}, 1, 0.1);
  s.waiting.push_back(rigid(20, 2));
  request(s, 3, Urgency::low);
  PolicyConfig c = cfg_of(IcheckFavour::icheck, Policy::easy);
  Decision d = decide(s, c);
  REQUIRE(d.starts.size() == 1);
  CHECK(d.starts[0].nodes == V{3, 4});
  CHECK(d.icheck_grants == V{5});
  CHECK(d.shrinks.empty());
  CHECK(d.icheck_request_left == 0);
}

TEST_CASE("iCheck never grows past max_nodes, and waits while an exchange is in flight") {
  Snapshot s = with_icheck(8, {0, 1}, 1, 1, 3);
  request(s, 4, Urgency::high);
  Decision d = decide(s, cfg_of(IcheckFavour::icheck, Policy::easy));
  CHECK(d.icheck_grants == V{2});
  s.icheck.in_flight = 1;
  d = decide(s, cfg_of(IcheckFavour::icheck, Policy::easy));
  CHECK(d.icheck_grants.empty());
  CHECK(d.icheck_request_left == 4);
  d = decide(s, cfg_of(IcheckFavour::applications, Policy::easy));
  CHECK(d.icheck_grants.empty());
  CHECK(d.icheck_reclaims.empty());
}

TEST_CASE("Alg. 11: LOW is dropped, HIGH gets the idle nodes after the jobs") {
  Snapshot s = with_icheck(6, {0});
  s.waiting.push_back(rigid(20, 3));
  request(s, 1, Urgency::low);
  PolicyConfig c = cfg_of(IcheckFavour::applications, Policy::easy);
  Decision d = decide(s, c);
  CHECK(d.icheck_grants.empty());
  CHECK(d.icheck_request_left == 0);
  REQUIRE(d.notes.size() == 1);
  CHECK(d.notes[0].find("LOW") != std::string::npos);

  request(s, 3, Urgency::high);  // 5 idle, the job takes 3: 2 granted, 1 dropped
  d = decide(s, c);
  REQUIRE(d.starts.size() == 1);
  CHECK(d.starts[0].nodes == V{1, 2, 3});
  CHECK(d.icheck_grants == V{4, 5});
  CHECK(d.icheck_request_left == 0);
  CHECK(d.shrinks.empty());
}

TEST_CASE("Alg. 11: HIGH never shrinks a job") {
  Snapshot s = with_icheck(4, {0});
  mall(s, 1, {1, 2, 3}, 1, 0.1);
  request(s, 1, Urgency::high);
  Decision d = decide(s, cfg_of(IcheckFavour::applications));
  CHECK(d.shrinks.empty());
  CHECK(d.icheck_grants.empty());
}

TEST_CASE("Alg. 11: mostly free iCheck nodes are reclaimed for the waiting head") {
  Snapshot s = with_icheck(6, {0, 1, 2}, 9.5);  // 95 % free: candidates
  s.icheck.nodes[1].avail_mem = 9.9 * GiB;      // most free: first
  s.icheck.nodes[0].avail_mem = 5 * GiB;        // 50 % free: kept
  s.nodes[3].job = 9;
  s.running.push_back({});
  s.running.back().id = 9;
  s.running.back().nodes = {3};
  s.waiting.push_back(rigid(20, 4));  // 2 idle (4, 5): needs 2 more
  PolicyConfig c = cfg_of(IcheckFavour::applications, Policy::easy);
  Decision d = decide(s, c);
  CHECK(d.starts.empty());
  CHECK(d.icheck_reclaims == V{1, 2});
  CHECK(d.icheck_reclaim_job == 20);

  SECTION("a node whose give-back the controller refused waits out its back-off") {
    s.icheck.nodes[0].avail_mem = 9.5 * GiB;  // 3 candidates, need 2
    s.icheck.fixed_nodes = 1;
    s.icheck.nodes[1].reclaim_wait = true;  // the favourite is backing off: the next two
    d = decide(s, c);
    CHECK(d.icheck_reclaims == V{0, 2});
    s.icheck.nodes[0].reclaim_wait = true;  // too few left: none, and no job named
    d = decide(s, c);
    CHECK(d.icheck_reclaims.empty());
    CHECK(d.icheck_reclaim_job == 0);
  }
  SECTION("not when the job would still not fit") {
    s.waiting[0] = rigid(20, 5);  // 2 idle + 2 candidates < 5
    d = decide(s, c);
    CHECK(d.icheck_reclaims.empty());
  }
  SECTION("not a node with less than 90 % free memory") {
    s.icheck.fixed_nodes = 1;     // all 3 lent nodes could go
    s.waiting[0] = rigid(20, 5);  // 2 idle + 3 needed, but node 0 is 50 % free
    d = decide(s, c);
    CHECK(d.icheck_reclaims.empty());
    s.icheck.nodes[0].avail_mem = 9.1 * GiB;
    d = decide(s, c);
    CHECK(d.icheck_reclaims == V{0, 1, 2});
  }
  SECTION("not below one node, nor below min_nodes") {
    s.icheck.nodes[0].avail_mem = 9.5 * GiB;  // 3 candidates, need 2
    s.icheck.min_nodes = 2;                    // but only 1 spare
    d = decide(s, c);
    CHECK(d.icheck_reclaims.empty());
  }
  SECTION("not while a HIGH request is pending") {
    request(s, 1, Urgency::high);
    d = decide(s, c);
    CHECK(d.icheck_reclaims.empty());
  }
  SECTION("favour icheck: the same reclaim while no request is pending and iCheck keeps headroom") {
    s.icheck.total_mem = 40 * GiB;  // a 10 GiB boot node beside the three lent ones
    s.icheck.used_mem = 5 * GiB;    // 20 GiB kept after the reclaim: at most half used
    d = decide(s, cfg_of(IcheckFavour::icheck, Policy::easy));
    CHECK(d.icheck_reclaims == V{1, 2});
    s.icheck.used_mem = 10.5 * GiB;  // more than half of what stays: iCheck still needs them
    d = decide(s, cfg_of(IcheckFavour::icheck, Policy::easy));
    CHECK(d.icheck_reclaims.empty());
    s.icheck.used_mem = 5 * GiB;
    request(s, 1, Urgency::low);  // a LOW request: iCheck still wants nodes
    d = decide(s, cfg_of(IcheckFavour::icheck, Policy::easy));
    CHECK(d.icheck_reclaims.empty());
  }
  SECTION("ties: fewer agents first") {
    s.icheck.nodes[1].avail_mem = 9.5 * GiB;
    s.icheck.nodes[2].agents = 0;
    s.waiting[0] = rigid(20, 3);  // one more
    d = decide(s, c);
    CHECK(d.icheck_reclaims == V{2});
  }
}

TEST_CASE("iCheck's nodes are never started on or grown into") {
  Snapshot s = with_icheck(4, {0, 1});
  mall(s, 1, {2}, 1, 0.1);
  s.waiting.push_back(rigid(20, 1));
  Decision d = decide(s, cfg_of(IcheckFavour::icheck));
  for (const auto& st : d.starts)
    for (int n : st.nodes) CHECK(n > 1);
  for (const auto& e : d.expands)
    for (int n : e.nodes) CHECK(n > 1);
}

// ---- the controller's scalers ---------------------------------------------
using namespace dynres::sched::icheck;

namespace {
ScalerNode sn(std::string name, double used_gib, double rate = 0, int agents = 0) {
  ScalerNode n;
  n.name = std::move(name);
  n.total_mem = 10 * GiB;
  n.avail_mem = (10 - used_gib) * GiB;
  n.depletion_rate = rate;
  n.agents = agents;
  return n;
}
ScalerConfig scfg(int max_nodes = 3) {
  ScalerConfig c;
  c.depletion_rate = 1e6;  // 1 MB/s
  c.max_nodes = max_nodes;
  return c;
}
}  // namespace

TEST_CASE("Alg. 8: a full, filling node with no room elsewhere asks HIGH") {
  std::vector<ScalerNode> v{sn("a", 9.5, 5e6), sn("b", 5)};  // b: 5 GiB free < 10 GiB
  ScalerResult r = proactive_scaler(v, scfg(), {});
  CHECK(r.action == ScalerAction::request_high);
  CHECK(r.nodes == 1);
  CHECK(r.flagged == std::vector<std::string>{"a"});
}

TEST_CASE("Alg. 8: room on the other nodes makes it LOW") {
  std::vector<ScalerNode> v{sn("a", 9.5, 5e6), sn("b", 0), sn("c", 0)};  // 20 GiB free >= 10
  CHECK(proactive_scaler(v, scfg(4), {}).action == ScalerAction::request_low);
}

TEST_CASE("Alg. 8: below the upper threshold, or depleting slowly: no request") {
  std::vector<ScalerNode> v{sn("a", 8.5, 5e6)};  // flagged (> 80 %) but not > 90 %
  CHECK(proactive_scaler(v, scfg(), {}).action == ScalerAction::none);
  v = {sn("a", 9.5, 1e5)};  // > 90 % but depleting slower than 1 MB/s
  CHECK(proactive_scaler(v, scfg(), {}).action == ScalerAction::none);
  v = {sn("a", 9.5, 5e6)};
  CHECK(proactive_scaler(v, scfg(), {}).action == ScalerAction::request_high);
}

TEST_CASE("Alg. 8: a flagged node that does not trigger costs its total (line 19)") {
  // b is flagged (85 %) without triggering: its total is taken off the free
  // sum of c (15 GiB... here 10 GiB free) before a is judged
  std::vector<ScalerNode> v{sn("b", 8.5), sn("a", 9.5, 5e6), sn("c", 0)};
  CHECK(proactive_scaler(v, scfg(4), {}).action == ScalerAction::request_high);
  std::vector<ScalerNode> w{sn("a", 9.5, 5e6), sn("b", 8.5), sn("c", 0)};
  CHECK(proactive_scaler(w, scfg(4), {}).action == ScalerAction::request_low);
}

TEST_CASE("Alg. 8: no request at max_nodes; down nodes ignored") {
  std::vector<ScalerNode> v{sn("a", 9.5, 5e6), sn("b", 5)};
  ScalerResult r = proactive_scaler(v, scfg(2), {});
  CHECK(r.action == ScalerAction::none);
  CHECK(r.flagged == std::vector<std::string>{"a"});
  v[1].up = false;  // one up node of max 2: room again
  CHECK(proactive_scaler(v, scfg(2), {}).action == ScalerAction::request_high);
}

TEST_CASE("Alg. 8: bandwidth pass queries, then asks LOW once idle nodes are reported") {
  ScalerConfig c = scfg();
  c.bw_threshold = 100e6;  // 100 MB/s
  c.cp_threshold = 6;      // per minute
  std::vector<ScalerNode> v{sn("a", 1), sn("b", 1)};
  v[0].bandwidth = 50e6;
  v[0].cp_frequency = 10;
  v[1].bandwidth = 500e6;
  v[1].cp_frequency = 10;
  ScalerResult r = proactive_scaler(v, c, {});
  CHECK(r.action == ScalerAction::query);
  CHECK(r.flagged == std::vector<std::string>{"a"});
  CHECK(r.state.pending_query);
  ScalerState st = r.state;
  r = proactive_scaler(v, c, st);  // no answer yet: asks again
  CHECK(r.action == ScalerAction::query);
  st.idle_nodes = 0;
  CHECK(proactive_scaler(v, c, st).action == ScalerAction::query);
  st.idle_nodes = 2;
  r = proactive_scaler(v, c, st);
  CHECK(r.action == ScalerAction::request_low);
  CHECK_FALSE(r.state.pending_query);
  v[0].cp_frequency = 5;  // not frequent enough: nothing flagged
  CHECK(proactive_scaler(v, c, {}).action == ScalerAction::none);
  c.bw_threshold = 0;  // pass disabled
  v[0].cp_frequency = 10;
  CHECK(proactive_scaler(v, c, {}).action == ScalerAction::none);
}

TEST_CASE("Alg. 9: removal picks most free memory, then fewest agents, keeps min_nodes") {
  std::vector<ScalerNode> v{sn("a", 5, 0, 1), sn("b", 1, 0, 3), sn("c", 1, 0, 1), sn("d", 0, 0, 9)};
  v[3].up = false;
  CHECK(removal_candidates(v, 1, 1) == std::vector<std::string>{"c"});
  CHECK(removal_candidates(v, 2, 1) == std::vector<std::string>{"c", "b"});
  CHECK(removal_candidates(v, 5, 1) == std::vector<std::string>{"c", "b"});  // one stays
  CHECK(removal_candidates(v, 5, 2) == std::vector<std::string>{"c"});
  CHECK(removal_candidates(v, -1, 1).empty());
}

TEST_CASE("Alg. 8 scale-down: a borrowed node without agents goes back after release_after") {
  // boot node "a" (not lent), borrowed "b" with no agent
  std::vector<ScalerNode> v{sn("a", 2, 0, 2), sn("b", 0, 0, 0)};
  const std::vector<std::string> lent{"b"};
  ReleaseConfig c;
  c.after = 10;
  ReleaseResult r = idle_release(v, lent, c, 100, {});
  CHECK(r.node.empty());  // idle from now on
  CHECK(r.state.idle_since.at("b") == 100);
  r = idle_release(v, lent, c, 109.9, r.state);
  CHECK(r.node.empty());
  r = idle_release(v, lent, c, 110, r.state);
  CHECK(r.node == "b");
  CHECK(r.state.idle_since.count("b") == 0);
  c.after = 0;  // disabled
  CHECK(idle_release(v, lent, c, 1000, {{{"b", 0}}, {{"b", 0}}}).node.empty());
  // boot nodes never go back, however idle
  c.after = 10;
  std::vector<ScalerNode> boot{sn("a", 0, 0, 0), sn("x", 0, 0, 0)};
  CHECK(idle_release(boot, {}, c, 1000, {{{"a", 0}, {"x", 0}}, {{"a", 0}, {"x", 0}}}).node.empty());
}

TEST_CASE("Alg. 8 scale-down: busy nodes start over; low memory use counts as idle") {
  std::vector<ScalerNode> v{sn("a", 2, 0, 2), sn("b", 5, 0, 1)};
  const std::vector<std::string> lent{"b"};
  ReleaseConfig c;
  c.after = 10;
  ReleaseResult r = idle_release(v, lent, c, 100, {{{"b", 50}}, {{"b", 1}}});
  CHECK(r.node.empty());  // 50 % used, an agent: not idle, forgotten
  CHECK(r.state.idle_since.count("b") == 0);
  v[1] = sn("b", 0.5, 0, 1);  // 5 % used, below 10 %: idle though it holds an agent
  r = idle_release(v, lent, c, 100, {{{"b", 80}}, {{"b", 1}}});
  CHECK(r.node == "b");
  v[1] = sn("b", 1.5, 0, 1);  // 15 %: not below
  CHECK(idle_release(v, lent, c, 100, {{{"b", 80}}, {{"b", 1}}}).node.empty());
  // idle without agents, then an application places one (nothing committed
  // yet, 0 % used): the wait starts over
  v[1] = sn("b", 0, 0, 0);
  r = idle_release(v, lent, c, 100, {});
  v[1] = sn("b", 0, 0, 1);
  r = idle_release(v, lent, c, 109, r.state);
  CHECK(r.node.empty());
  CHECK(r.state.idle_since.at("b") == 109);
  CHECK(idle_release(v, lent, c, 118, r.state).node.empty());
  CHECK(idle_release(v, lent, c, 119, r.state).node == "b");
}

TEST_CASE("Alg. 8 scale-down: keeps min_nodes, never makes the scaler ask again, one per pass") {
  ReleaseConfig c;
  c.after = 1;
  const ReleaseState old{{{"b", 0}, {"c", 0}}, {{"b", 0}, {"c", 0}}};
  // boot node a holds 7.5 GiB of 10: without b, 7.5 of 10 stays under 80 %
  std::vector<ScalerNode> v{sn("a", 7.5, 0, 4), sn("b", 0, 0, 0)};
  CHECK(idle_release(v, {"b"}, c, 5, old).node == "b");
  v[0] = sn("a", 8.5, 0, 4);  // 8.5 of the 10 that stay: above 80 %, the scaler would ask again
  CHECK(idle_release(v, {"b"}, c, 5, old).node.empty());
  c.min_nodes = 2;  // at the floor
  v[0] = sn("a", 1, 0, 1);
  CHECK(idle_release(v, {"b"}, c, 5, old).node.empty());
  c.min_nodes = 1;
  v[1].up = false;  // a down node is no candidate
  CHECK(idle_release(v, {"b"}, c, 5, old).node.empty());
  // two due: the one with most free memory first, then fewest agents, one per pass
  std::vector<ScalerNode> w{sn("a", 1, 0, 1), sn("b", 0.5, 0, 2), sn("c", 0.5, 0, 1)};
  ReleaseResult r = idle_release(w, {"b", "c"}, c, 5, {{{"b", 0}, {"c", 0}}, {{"b", 2}, {"c", 1}}});
  CHECK(r.node == "c");
  CHECK(r.state.idle_since.count("b") == 1);
}

TEST_CASE("iCheck's boot nodes count for max_nodes and the floor") {
  Snapshot s = with_icheck(6, {0}, 9.5, 1, 3);
  s.icheck.fixed_nodes = 1;  // 1 boot node + node 0 = 2 of 3
  request(s, 3, Urgency::high);
  Decision d = decide(s, cfg_of(IcheckFavour::icheck, Policy::easy));
  CHECK(d.icheck_grants == V{1});
  request(s, 0, Urgency::high);
  s.waiting.push_back(rigid(20, 6));  // 5 idle + node 0: reclaimable above the boot node
  d = decide(s, cfg_of(IcheckFavour::applications, Policy::easy));
  CHECK(d.icheck_reclaims == V{0});
  s.icheck.fixed_nodes = 0;  // node 0 is the only one: kept
  d = decide(s, cfg_of(IcheckFavour::applications, Policy::easy));
  CHECK(d.icheck_reclaims.empty());
}
