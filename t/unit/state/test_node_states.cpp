// Node states and the end of a job that lost a node (real state file):
// update_nodes' transitions and refusals, and finish_job after
// mark_node_fail: requeued (attempt kept, nodes freed, PENDING again) or
// NODE_FAIL (--no-requeue); a cancel wins.
#include <catch2/catch.hpp>

#include "../testutil.hpp"
#include "dynres/state.hpp"

using namespace dynres;
using Catch::Matchers::Contains;

namespace {
struct Dir : dynres::test::TempDir {
  Dir() : dynres::test::TempDir("nodestates") {}
};
JobRecord job2(bool requeue) {
  JobRecord j;
  j.name = "j";
  j.uid = 1000;
  j.req_nodes = j.min_nodes = j.max_nodes = 2;
  j.script = "#!/bin/sh\ntrue\n";
  j.workdir = "/w";
  j.stdout_path = j.stderr_path = "/w/o";
  j.submit_time = 10;
  j.requeue = requeue;
  return j;
}
std::string state_of(State& st, const std::string& node) {
  for (auto& n : st.nodes())
    if (n.name == node) return n.state;
  return "?";
}
std::vector<int64_t> ids(State& st) {
  std::vector<int64_t> out;
  for (auto& n : st.nodes()) out.push_back(n.id);
  return out;
}
}  // namespace

TEST_CASE("update_nodes: drain, down, resume and their refusals", "[nodes]") {
  Dir d;
  State st(d.file("state.db"), true);
  st.register_nodes({{"n1", "h"}, {"n2", "h"}, {"n3", "h"}});
  auto r = st.update_nodes({"n1", "n2"}, "drain", "disk", 0, 50);
  REQUIRE(r.size() == 2);
  CHECK(r[0].from == "up");
  CHECK(r[0].to == "drain");
  CHECK(state_of(st, "n1") == "drain");
  auto n1 = st.nodes()[0];
  CHECK(n1.reason == "disk");
  CHECK(n1.reason_time == 50);
  CHECK(n1.reason_uid == 0);
  // refusals change nothing, not even the valid names before the bad one
  CHECK_THROWS_WITH(st.update_nodes({"n3", "n9"}, "down", "x", 0, 60), Contains("no node named 'n9'"));
  CHECK(state_of(st, "n3") == "up");
  CHECK_THROWS_WITH(st.update_nodes({"n3"}, "down", "", 0, 60), Contains("needs a reason"));
  CHECK_THROWS_WITH(st.update_nodes({"n3"}, "resume", "", 0, 60), Contains("neither drained nor down"));
  CHECK_THROWS_WITH(st.update_nodes({"n3"}, "idle", "x", 0, 60), Contains("invalid node state"));
  st.update_nodes({"n3"}, "down", "psu", 0, 70);
  CHECK_THROWS_WITH(st.update_nodes({"n3"}, "drain", "x", 0, 80), Contains("n3 is down"));
  st.update_nodes({"n1", "n3"}, "resume", "", 0, 90);
  CHECK(state_of(st, "n1") == "up");
  CHECK(state_of(st, "n3") == "up");
  CHECK(st.nodes()[0].reason.empty());
  CHECK(st.nodes()[0].reason_uid == std::nullopt);
}

TEST_CASE("finish_job after a node failure: requeue, NODE_FAIL, cancel wins", "[nodes]") {
  Dir d;
  State st(d.file("state.db"), true);
  st.register_nodes({{"n1", "h"}, {"n2", "h"}});
  SECTION("requeued") {
    auto id = st.submit(job2(true));
    REQUIRE(st.start_job(id, ids(st), 4242, 20));
    CHECK(st.mark_node_fail(id, "n2", 25));
    CHECK_FALSE(st.mark_node_fail(id, "n1", 26));  // marked once
    REQUIRE(st.finish_job(id, kCancelled, 143, "Cancelled", 30));  // what the stopped step reports
    auto j = *st.job(id);
    CHECK(j.state == kPending);
    CHECK(j.restarts == 1);
    CHECK(j.node_fail.empty());
    CHECK_FALSE(j.start_time);
    CHECK_FALSE(j.supervisor_pid);
    CHECK(j.nodelist.empty());
    for (auto& n : st.nodes()) CHECK(n.job_id == 0);
    auto a = st.attempts();
    REQUIRE(a.size() == 1);
    CHECK(a[0].state == kNodeFail);
    CHECK(a[0].nodelist == "n[1-2]");
    CHECK(a[0].start_time == 20);
    CHECK(a[0].end_time == 30);
    CHECK(a[0].reason == "NodeFail n2");
    for (auto& al : st.allocations()) CHECK(al.end_time == 30);
    // it can start again
    CHECK(st.start_job(id, ids(st), 4343, 40));
  }
  SECTION("--no-requeue: NODE_FAIL") {
    auto id = st.submit(job2(false));
    REQUIRE(st.start_job(id, ids(st), 4242, 20));
    st.mark_node_fail(id, "n1", 25);
    REQUIRE(st.finish_job(id, kFailed, std::nullopt, "supervisor lost", 30));
    auto j = *st.job(id);
    CHECK(j.state == kNodeFail);
    CHECK(j.reason == "NodeFail n1");
    CHECK(j.end_time == 30);
    CHECK(st.attempts().empty());
  }
  SECTION("a cancel requested meanwhile wins") {
    auto id = st.submit(job2(true));
    REQUIRE(st.start_job(id, ids(st), 4242, 20));
    st.mark_node_fail(id, "n2", 25);
    st.request_cancel(id);
    REQUIRE(st.finish_job(id, kCancelled, std::nullopt, "Cancelled", 30));
    CHECK(st.job(id)->state == kCancelled);
    CHECK(st.attempts().empty());
  }
  SECTION("no node failure: the reported end") {
    auto id = st.submit(job2(true));
    REQUIRE(st.start_job(id, ids(st), 4242, 20));
    REQUIRE(st.finish_job(id, kCompleted, 0, "None", 30));
    CHECK(st.job(id)->state == kCompleted);
  }
}
