// The resize protocol's records in a real state file (resize_store.hpp): a
// commit changes nodes, job, allocation, order and events in one
// transaction, or nothing at all.
#include <catch2/catch.hpp>

#include "../testutil.hpp"
#include "dynres/db.hpp"
#include "dynres/resize_store.hpp"
#include "dynres/state.hpp"

using namespace dynres;
using namespace dynres::resize;

namespace {

struct Cluster : dynres::test::TempDir {
  State st;
  Cluster() : dynres::test::TempDir("resize"), st(file("state.db"), true) {
    migrate(st);
    st.register_nodes({{"n1", "n1"}, {"n2", "n2"}, {"n3", "n3"}, {"n4", "n4"}});
  }
  int64_t node_id(const std::string& name) {
    for (auto& n : st.nodes())
      if (n.name == name) return n.id;
    FAIL("no node " << name);
    return 0;
  }
  /// Submit and start a job on the named nodes, with its protocol record.
  int64_t start(const std::vector<std::string>& nodes, const std::string& secret = "s3cr3t") {
    JobRecord j;
    j.name = "m";
    j.uid = 1000;
    j.kind = "malleable";
    j.req_nodes = static_cast<int>(nodes.size());
    j.min_nodes = 1;
    j.max_nodes = 4;
    j.script = "#!/bin/sh\ntrue\n";
    j.workdir = j.stdout_path = j.stderr_path = "/w";
    j.submit_time = 1;
    int64_t id = st.submit(j);
    std::vector<int64_t> ids;
    for (auto& n : nodes) ids.push_back(node_id(n));
    REQUIRE(st.start_job(id, ids, 1, 10, [&] { admit(st, id, secret); }));
    return id;
  }
  int64_t count(const std::string& sql) {
    Stmt s(st.db(), sql);
    REQUIRE(s.step());
    return s.i64(0);
  }
  std::string digest() {  // everything a failed commit must leave untouched
    std::string out;
    for (auto& n : st.nodes()) out += n.name + ":" + std::to_string(n.job_id) + " ";
    for (auto& j : st.jobs()) out += j.nodelist + "/" + std::to_string(j.num_nodes) + " ";
    out += std::to_string(count("SELECT COUNT(*) FROM allocations")) + " " +
           std::to_string(count("SELECT COUNT(*) FROM events")) + " " +
           std::to_string(count("SELECT COUNT(*) FROM resize_orders WHERE state='committed'"));
    return out;
  }
};

Order make_order(uint64_t id, int64_t job, Kind k, std::vector<std::string> nodes, double sent = 20) {
  Order o;
  o.id = id;
  o.job = job;
  o.kind = k;
  o.nodes = std::move(nodes);
  o.sent = sent;
  o.deadline = sent + 30;
  return o;
}

}  // namespace

TEST_CASE("a committed expand takes the nodes, reopens the allocation and logs from/to/duration", "[store]") {
  Cluster c;
  int64_t j = c.start({"n1", "n2"});
  auto o = make_order(1, j, Kind::expand, {"n3", "n4"});
  record_order(c.st, o, 2, 4);
  REQUIRE(outstanding(c.st).size() == 1);
  REQUIRE(commit(c.st, {o, {}, 1.5}, 21.5));
  auto job = c.st.job(j);
  CHECK(job->num_nodes == 4);
  CHECK(job->nodelist == "n[1-4]");
  CHECK(c.count("SELECT COUNT(*) FROM allocations WHERE job_id=" + std::to_string(j)) == 2);
  CHECK(c.count("SELECT COUNT(*) FROM allocations WHERE end_time IS NULL") == 1);
  Stmt e(c.st.db(), "SELECT detail FROM events WHERE kind='expand'");
  REQUIRE(e.step());
  CHECK(e.text(0) == "from=2 to=4 order=1 duration=1.500s nodes=n[1-4]");
  CHECK(order(c.st, 1)->state == "committed");
  CHECK(outstanding(c.st).empty());
  CHECK(job_info(c.st, j)->last_resize == Approx(21.5));
}

TEST_CASE("a commit whose added node was taken meanwhile changes nothing", "[store]") {
  Cluster c;
  int64_t j = c.start({"n1"});
  auto o = make_order(1, j, Kind::expand, {"n2", "n3"});
  record_order(c.st, o, 1, 3);
  c.start({"n3"});  // another job got n3 (the reservation was bypassed)
  auto before = c.digest();
  CHECK_FALSE(commit(c.st, {o, {}, 1}, 21));
  CHECK(c.digest() == before);
  CHECK(c.st.job(j)->num_nodes == 1);
  CHECK(order(c.st, 1)->state == "sent");
}

TEST_CASE("a shrink frees exactly the released nodes; a node the job does not hold aborts it", "[store]") {
  Cluster c;
  int64_t j = c.start({"n1", "n2", "n3"});
  auto bad = make_order(1, j, Kind::shrink, {"n4"});
  record_order(c.st, bad, 3, 2);
  auto before = c.digest();
  CHECK_FALSE(commit(c.st, {bad, {"n4"}, 1}, 21));
  CHECK(c.digest() == before);
  record_rollback(c.st, 1, "test", 22);
  auto o = make_order(2, j, Kind::shrink, {"n3"});
  record_order(c.st, o, 3, 2);
  REQUIRE(commit(c.st, {o, {"n3"}, 1}, 23));
  CHECK(c.st.job(j)->nodelist == "n[1-2]");
  for (auto& n : c.st.nodes()) CHECK((n.job_id == 0) == (n.name == "n3" || n.name == "n4"));
}

TEST_CASE("a commit for a job that is no longer running changes nothing", "[store]") {
  // the job ended (or was cancelled) between the order and its commit: an
  // expand must not hand it nodes that nothing would ever free, a shrink must
  // not reopen an allocation for it
  for (const char* final_state : {"COMPLETED", "CANCELLED"}) {
    INFO(final_state);
    Cluster c;
    int64_t j = c.start({"n1", "n2"});
    auto ex = make_order(1, j, Kind::expand, {"n3"});
    record_order(c.st, ex, 2, 3);
    REQUIRE(c.st.finish_job(j, final_state, 0, "", 30));
    auto before = c.digest();
    CHECK_FALSE(commit(c.st, {ex, {}, 1}, 31));
    CHECK(c.digest() == before);
    for (auto& n : c.st.nodes()) CHECK(n.job_id == 0);  // the end freed n1, n2; n3 never taken
    CHECK(c.count("SELECT COUNT(*) FROM allocations WHERE end_time IS NULL") == 0);
  }
  Cluster c;
  int64_t j = c.start({"n1", "n2"});
  auto sh = make_order(1, j, Kind::shrink, {"n2"});
  record_order(c.st, sh, 2, 1);
  REQUIRE(c.st.finish_job(j, "COMPLETED", 0, "", 30));
  auto before = c.digest();
  CHECK_FALSE(commit(c.st, {sh, {"n2"}, 1}, 31));
  CHECK(c.digest() == before);
  CHECK(c.count("SELECT COUNT(*) FROM allocations WHERE end_time IS NULL") == 0);
}

TEST_CASE("rollback settles an order once; a settled order is never committed", "[store]") {
  Cluster c;
  int64_t j = c.start({"n1"});
  auto o = make_order(1, j, Kind::expand, {"n2"});
  record_order(c.st, o, 1, 2);
  record_rollback(c.st, 1, "not committed within its deadline", 52);
  record_rollback(c.st, 1, "again", 53);  // no-op
  auto r = order(c.st, 1);
  CHECK(r->state == "rolled_back");
  CHECK(r->reason == "not committed within its deadline");
  CHECK(c.count("SELECT COUNT(*) FROM events WHERE kind='resize_rollback'") == 1);
  CHECK_FALSE(commit(c.st, {o, {}, 1}, 54));
  CHECK(c.st.job(j)->num_nodes == 1);
}

TEST_CASE("orders of a job that ended are not outstanding", "[store]") {
  Cluster c;
  int64_t j = c.start({"n1"});
  record_order(c.st, make_order(1, j, Kind::expand, {"n2"}), 1, 2);
  REQUIRE(outstanding(c.st).size() == 1);
  REQUIRE(c.st.finish_job(j, kCompleted, 0, "None", 30));
  CHECK(outstanding(c.st).empty());
  CHECK(running_infos(c.st).empty());
}

TEST_CASE("a restart order is relaunched once, and the count is kept", "[store]") {
  Cluster c;
  int64_t j = c.start({"n1"});
  auto o = make_order(1, j, Kind::expand, {"n2"});
  record_order(c.st, o, 1, 2);
  CHECK_FALSE(pending_relaunch(c.st, j));
  o.deadline = 700;
  record_begin(c.st, o, true, 21);
  auto p = pending_relaunch(c.st, j);
  REQUIRE(p);
  CHECK(p->order.id == 1);
  CHECK(p->order.deadline == Approx(700));
  mark_relaunched(c.st, 1);
  mark_relaunched(c.st, 1);  // once only
  CHECK_FALSE(pending_relaunch(c.st, j));
  CHECK(job_info(c.st, j)->restart_count == 1);
}

TEST_CASE("a relaunched restart order is not rolled back behind the supervisor's back", "[store]") {
  Cluster c;
  int64_t j = c.start({"n1"});
  auto o = make_order(1, j, Kind::expand, {"n2"});
  record_order(c.st, o, 1, 2);
  record_begin(c.st, o, true, 21);
  // the supervisor takes it: read and marked in one go, once
  auto t = take_relaunch(c.st, j);
  REQUIRE(t);
  CHECK(t->order.id == 1);
  CHECK_FALSE(take_relaunch(c.st, j));
  auto rec = order(c.st, 1);
  REQUIRE(rec);
  CHECK(rec->relaunched);
  CHECK(relaunched_on_new_nodes(*rec));
  // the scheduler's timeout or restart leaves it outstanding ...
  CHECK_FALSE(record_rollback(c.st, 1, "not committed within its deadline", 30, true));
  CHECK(order(c.st, 1)->state == "begun");
  // ... while a rollback that does not care (the job ended) still happens
  CHECK(record_rollback(c.st, 1, "the job ended", 31));
  CHECK(order(c.st, 1)->state == "rolled_back");
  CHECK_FALSE(record_rollback(c.st, 1, "again", 32));

  // a shrink by count is relaunched on the old node list: rolled back as usual
  auto s = make_order(2, j, Kind::shrink, {});
  s.count = 1;
  record_order(c.st, s, 2, 1);
  record_begin(c.st, s, true, 40);
  REQUIRE(take_relaunch(c.st, j));
  CHECK_FALSE(relaunched_on_new_nodes(*order(c.st, 2)));
  CHECK(record_rollback(c.st, 2, "not committed within its deadline", 41, true));
}

TEST_CASE("secrets are 32 hex digits and differ", "[store]") {
  auto a = new_secret(), b = new_secret();
  CHECK(a.size() == 32);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a != b);
}
