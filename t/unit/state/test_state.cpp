// The shared state file: migrations and the job transactions.
#include <sqlite3.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "../testutil.hpp"
#include <atomic>
#include <filesystem>
#include <thread>

#include "dynres/db.hpp"
#include "dynres/state.hpp"

using namespace dynres;
using Catch::Matchers::Contains;

namespace {

struct TempDir : dynres::test::TempDir {
  TempDir() : dynres::test::TempDir("state") {}
  std::string db() const { return file("state.db"); }
};

int64_t count(State& st, const std::string& sql) {
  Stmt s(st.db(), sql);
  REQUIRE(s.step());
  return s.i64(0);
}

// Everything in the state file as text, to prove a refused change left it alone.
std::string dump(State& st) {
  std::string out;
  for (const char* t : {"nodes", "jobs", "allocations", "events", "sqlite_sequence"}) {
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(st.db().handle(), (std::string("SELECT * FROM ") + t + " ORDER BY 1").c_str(), -1, &s,
                               nullptr) == SQLITE_OK);
    while (sqlite3_step(s) == SQLITE_ROW) {
      out += t;
      for (int c = 0; c < sqlite3_column_count(s); ++c) {
        auto v = sqlite3_column_text(s, c);
        out += "|" + (v ? std::string(reinterpret_cast<const char*>(v)) : std::string("NULL"));
      }
      out += "\n";
    }
    sqlite3_finalize(s);
  }
  return out;
}

JobRecord make_job(const std::string& name, int nodes = 1, double submit = 100) {
  JobRecord j;
  j.name = name;
  j.uid = 1000;
  j.req_nodes = j.min_nodes = j.max_nodes = nodes;
  j.script = "#!/bin/sh\ntrue\n";
  j.workdir = "/w";
  j.stdout_path = "/w/mj-%j.out";
  j.stderr_path = "/w/mj-%j.out";
  j.submit_time = submit;
  return j;
}

State& four_nodes(State& st) {
  st.register_nodes({{"n1", "h1"}, {"n2", "h2"}, {"n3", "h3"}, {"n4", "h4"}});
  return st;
}

std::vector<int64_t> node_ids(State& st, std::initializer_list<const char*> names) {
  std::vector<int64_t> out;
  for (auto n : names)
    for (auto& r : st.nodes())
      if (r.name == n) out.push_back(r.id);
  REQUIRE(out.size() == names.size());
  return out;
}

}  // namespace

TEST_CASE("db: opening a missing file without create names the path", "[db]") {
  TempDir d;
  REQUIRE_THROWS_AS(Db(d.db()), DbError);
  REQUIRE_THROWS_WITH(Db(d.db()), Contains(d.db()));
  REQUIRE_THROWS_WITH(State(d.db()), Contains("no state file"));
  CHECK(!std::filesystem::exists(d.db()));
}

TEST_CASE("db: the file is in WAL mode with foreign keys on", "[db]") {
  TempDir d;
  State st(d.db(), true);
  Stmt jm(st.db(), "PRAGMA journal_mode");
  REQUIRE(jm.step());
  CHECK(jm.text(0) == "wal");
  Stmt fk(st.db(), "PRAGMA foreign_keys");
  REQUIRE(fk.step());
  CHECK(fk.i64(0) == 1);
}

TEST_CASE("db: migrations are idempotent", "[db]") {
  TempDir d;
  int core = 0;
  {
    State st(d.db(), true);
    core = st.db().schema_version("core");
    CHECK(core >= 1);
  }
  {
    State again(d.db());  // opening again migrates nothing
    CHECK(again.db().schema_version("core") == core);
    CHECK(count(again, "SELECT COUNT(*) FROM schema_migrations") == 2);  // modules core and nodes
  }
  Db db(d.db());
  std::vector<std::string> m = {"CREATE TABLE t1(x INTEGER)", "ALTER TABLE t1 ADD COLUMN y INTEGER"};
  CHECK(db.schema_version("extra") == 0);
  db.migrate("extra", {m[0]});
  CHECK(db.schema_version("extra") == 1);
  db.migrate("extra", m);  // applies only the second
  CHECK(db.schema_version("extra") == 2);
  REQUIRE_NOTHROW(db.migrate("extra", m));  // nothing left: no "duplicate column" error
  REQUIRE_NOTHROW(db.migrate("extra", {m[0]}));  // an older build: fast path, nothing done
  CHECK(db.schema_version("extra") == 2);
  CHECK(db.schema_version("core") == core);  // modules are independent

  SECTION("a failing migration leaves the version and the schema unchanged") {
    std::vector<std::string> bad = {m[0], m[1], "CREATE TABLE t2(a); THIS IS NOT SQL"};
    REQUIRE_THROWS_AS(db.migrate("extra", bad), DbError);
    CHECK(db.schema_version("extra") == 2);
    Stmt s(db, "SELECT COUNT(*) FROM sqlite_master WHERE name='t2'");
    REQUIRE(s.step());
    CHECK(s.i64(0) == 0);
  }
}

TEST_CASE("db: concurrent first opens migrate once", "[db]") {
  TempDir d;
  { Db create(d.db(), true); }
  std::vector<std::thread> ts;
  std::atomic<int> errors{0};
  for (int i = 0; i < 6; ++i)
    ts.emplace_back([&] {
      try {
        State st(d.db());
      } catch (...) {
        ++errors;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(errors == 0);
  State st(d.db());
  CHECK(st.db().schema_version("core") >= 1);
  CHECK(count(st, "SELECT COUNT(*) FROM schema_migrations WHERE module='core'") == 1);
}

TEST_CASE("db: write_tx rolls back on an exception", "[db]") {
  TempDir d;
  State st(d.db(), true);
  four_nodes(st);
  REQUIRE_THROWS_AS(st.db().write_tx([&] {
    st.db().exec("UPDATE nodes SET state='down'");
    throw std::runtime_error("abort");
  }),
                    std::runtime_error);
  CHECK(count(st, "SELECT COUNT(*) FROM nodes WHERE state='up'") == 4);
  REQUIRE_THROWS_WITH(st.db().exec("SELECT * FROM no_such_table"), Contains("no_such_table"));
}

TEST_CASE("db: transactions nest as savepoints (group commit)", "[db]") {
  // mjsched records the submissions that arrive together in one transaction,
  // each inside its own write_tx: a refused one is undone alone, the others
  // become visible to other connections only with the group's COMMIT.
  TempDir d;
  State st(d.db(), true);
  State other(d.db());
  int64_t a = 0, c = 0;
  st.db().write_tx([&] {
    CHECK(st.db().in_transaction());
    a = st.submit(make_job("a"));
    REQUIRE_THROWS_AS(st.db().write_tx([&] {
      st.submit(make_job("b"));
      throw std::runtime_error("refused");
    }),
                      std::runtime_error);
    CHECK(st.db().in_transaction());  // the group goes on
    c = st.submit(make_job("c"));
    CHECK(count(other, "SELECT COUNT(*) FROM jobs") == 0);  // nothing visible before the COMMIT
  });
  CHECK_FALSE(st.db().in_transaction());
  CHECK(count(other, "SELECT COUNT(*) FROM jobs") == 2);
  CHECK(other.job(a)->name == "a");
  CHECK(other.job(c)->name == "c");
  CHECK(count(other, "SELECT COUNT(*) FROM jobs WHERE name='b'") == 0);
  CHECK(count(other, "SELECT COUNT(*) FROM events WHERE kind='submit'") == 2);
  // an exception that leaves the group rolls all of it back
  REQUIRE_THROWS(st.db().write_tx([&] {
    st.submit(make_job("d"));
    throw std::runtime_error("group lost");
  }));
  CHECK(count(other, "SELECT COUNT(*) FROM jobs") == 2);
}

TEST_CASE("nodes: register is idempotent and keeps node state", "[state]") {
  TempDir d;
  State st(d.db(), true);
  four_nodes(st);
  st.db().exec("UPDATE nodes SET state='down' WHERE name='n4'");
  st.register_nodes({{"n1", "other"}, {"n4", "h4"}});
  auto ns = st.nodes();
  REQUIRE(ns.size() == 4);
  CHECK(ns[0].name == "n1");
  CHECK(ns[0].host == "other");
  CHECK(ns[3].state == "down");
  CHECK(ns[0].job_id == 0);
  CHECK(st.usable_node_count() == 3);
}

TEST_CASE("submit: a PENDING job and its submit event", "[state]") {
  TempDir d;
  State st(d.db(), true);
  four_nodes(st);
  auto id = st.submit(make_job("a", 2, 123.5));
  auto j = st.job(id);
  REQUIRE(j);
  CHECK(j->state == kPending);
  CHECK(j->name == "a");
  CHECK(j->req_nodes == 2);
  CHECK(j->submit_time == Approx(123.5));
  CHECK(!j->start_time);
  CHECK(!j->end_time);
  CHECK(j->num_nodes == 0);
  CHECK(j->stdout_path == "/w/mj-" + std::to_string(id) + ".out");
  CHECK(count(st, "SELECT COUNT(*) FROM events WHERE kind='submit' AND job_id=" + std::to_string(id)) == 1);
  CHECK(!st.job(id + 100));

  auto id2 = st.submit(make_job("b", 1, 50));
  CHECK(id2 > id);
  auto all = st.jobs();
  REQUIRE(all.size() == 2);
  CHECK(all[0].id == id2);  // ordered by submit time
  CHECK(st.jobs({kRunning}).empty());
  CHECK(st.jobs({kPending, kRunning}).size() == 2);
}

TEST_CASE("submit: an invalid job is refused and leaves nothing behind", "[state]") {
  TempDir d;
  State st(d.db(), true);
  four_nodes(st);
  auto j = make_job("bad");
  j.min_nodes = 3;
  j.max_nodes = 2;  // CHECK(min_nodes <= max_nodes)
  REQUIRE_THROWS_AS(st.submit(j), DbError);
  CHECK(count(st, "SELECT COUNT(*) FROM jobs") == 0);
  CHECK(count(st, "SELECT COUNT(*) FROM events") == 0);
}

TEST_CASE("start_job: takes idle nodes, opens an allocation, records the start", "[state]") {
  TempDir d;
  State st(d.db(), true);
  four_nodes(st);
  auto id = st.submit(make_job("a", 2));
  REQUIRE(st.start_job(id, node_ids(st, {"n1", "n2"}), 4242, 200));
  auto j = st.job(id);
  CHECK(j->state == kRunning);
  CHECK(j->start_time.value_or(0) == Approx(200));
  CHECK(j->num_nodes == 2);
  CHECK(j->nodelist == "n[1-2]");
  CHECK(j->supervisor_pid.value_or(0) == 4242);
  CHECK(j->reason == "None");
  auto ns = st.nodes();
  CHECK(ns[0].job_id == id);
  CHECK(ns[1].job_id == id);
  CHECK(ns[2].job_id == 0);
  auto al = st.allocations();
  REQUIRE(al.size() == 1);
  CHECK(al[0].job_id == id);
  CHECK(al[0].nodelist == "n[1-2]");
  CHECK(al[0].num_nodes == 2);
  CHECK(!al[0].end_time);
  CHECK(count(st, "SELECT COUNT(*) FROM events WHERE kind='start' AND job_id=" + std::to_string(id)) == 1);

  // a second start of the same job is refused
  CHECK_FALSE(st.start_job(id, node_ids(st, {"n3"}), 1, 201));
  CHECK(count(st, "SELECT COUNT(*) FROM allocations") == 1);
}

TEST_CASE("start_job: refuses a busy or down node and changes nothing", "[state]") {
  TempDir d;
  State st(d.db(), true);
  four_nodes(st);
  auto a = st.submit(make_job("a", 1));
  auto b = st.submit(make_job("b", 2));
  REQUIRE(st.start_job(a, node_ids(st, {"n2"}), 11, 200));
  std::string before = dump(st);

  SECTION("busy node: n3 idle, n2 taken — n3 must not stay taken") {
    CHECK_FALSE(st.start_job(b, node_ids(st, {"n3", "n2"}), 12, 201));
  }
  SECTION("busy node listed first") {
    CHECK_FALSE(st.start_job(b, node_ids(st, {"n2", "n3"}), 12, 201));
  }
  SECTION("down node") {
    st.db().exec("UPDATE nodes SET state='down' WHERE name='n4'");
    before = dump(st);
    CHECK_FALSE(st.start_job(b, node_ids(st, {"n3", "n4"}), 12, 201));
  }
  SECTION("drained node") {
    st.db().exec("UPDATE nodes SET state='drain' WHERE name='n4'");
    before = dump(st);
    CHECK_FALSE(st.start_job(b, node_ids(st, {"n4", "n3"}), 12, 201));
  }
  SECTION("unknown node id") {
    CHECK_FALSE(st.start_job(b, {9999}, 12, 201));
  }
  SECTION("unknown job") {
    CHECK_FALSE(st.start_job(b + 50, node_ids(st, {"n3"}), 12, 201));
  }
  CHECK(dump(st) == before);
  CHECK(st.job(b)->state == kPending);
  CHECK(st.nodes()[2].job_id == 0);
}

TEST_CASE("finish_job: frees the nodes and closes the allocation", "[state]") {
  TempDir d;
  State st(d.db(), true);
  four_nodes(st);
  auto a = st.submit(make_job("a", 3));
  REQUIRE(st.start_job(a, node_ids(st, {"n1", "n2", "n4"}), 11, 200));
  REQUIRE(st.finish_job(a, kFailed, 3, "NonZeroExitCode", 260));
  auto j = st.job(a);
  CHECK(j->state == kFailed);
  CHECK(j->exit_code.value_or(-99) == 3);
  CHECK(j->reason == "NonZeroExitCode");
  CHECK(j->end_time.value_or(0) == Approx(260));
  CHECK(j->nodelist == "n[1-2,4]");  // kept for history
  for (auto& n : st.nodes()) CHECK(n.job_id == 0);
  auto al = st.allocations();
  REQUIRE(al.size() == 1);
  CHECK(al[0].end_time.value_or(0) == Approx(260));
  CHECK(count(st, "SELECT COUNT(*) FROM events WHERE kind='end' AND job_id=" + std::to_string(a)) == 1);

  // recorded once only
  std::string before = dump(st);
  CHECK_FALSE(st.finish_job(a, kCompleted, 0, "None", 300));
  CHECK(dump(st) == before);

  // the freed nodes can be taken again; allocations of a node stay disjoint
  auto b = st.submit(make_job("b", 4));
  REQUIRE(st.start_job(b, node_ids(st, {"n1", "n2", "n3", "n4"}), 12, 261));
  REQUIRE(st.finish_job(b, kCompleted, 0, "None", 270));
  al = st.allocations();
  REQUIRE(al.size() == 2);
  CHECK(al[0].end_time.value_or(1e9) <= al[1].start_time);
}

TEST_CASE("finish_job: a pending job cannot be finished", "[state]") {
  TempDir d;
  State st(d.db(), true);
  four_nodes(st);
  auto a = st.submit(make_job("a"));
  std::string before = dump(st);
  CHECK_FALSE(st.finish_job(a, kCompleted, 0, "None", 300));
  CHECK(dump(st) == before);
}

TEST_CASE("cancel_pending: only for PENDING jobs", "[state]") {
  TempDir d;
  State st(d.db(), true);
  four_nodes(st);
  auto a = st.submit(make_job("a"));
  auto b = st.submit(make_job("b"));
  REQUIRE(st.cancel_pending(a, 150));
  auto j = st.job(a);
  CHECK(j->state == kCancelled);
  CHECK(j->end_time.value_or(0) == Approx(150));
  CHECK(!j->start_time);
  CHECK(count(st, "SELECT COUNT(*) FROM events WHERE kind='cancel' AND job_id=" + std::to_string(a)) == 1);
  CHECK_FALSE(st.cancel_pending(a, 151));  // already cancelled

  REQUIRE(st.start_job(b, node_ids(st, {"n1"}), 7, 160));
  std::string before = dump(st);
  CHECK_FALSE(st.cancel_pending(b, 161));  // running
  CHECK_FALSE(st.cancel_pending(b + 100, 161));  // unknown
  CHECK(dump(st) == before);
  CHECK(st.job(b)->state == kRunning);

  st.request_cancel(b);
  CHECK(st.job(b)->cancel_requested);
}

TEST_CASE("set_reason and final states", "[state]") {
  TempDir d;
  State st(d.db(), true);
  auto a = st.submit(make_job("a"));
  st.set_reason(a, "Resources");
  CHECK(st.job(a)->reason == "Resources");
  for (auto s : {kCompleted, kFailed, kCancelled, kTimeout, kNodeFail}) CHECK(is_final_state(s));
  for (auto s : {kPending, kRunning, "", "completed"}) CHECK_FALSE(is_final_state(s));
}
