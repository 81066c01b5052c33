// The live scheduler service (lib/schedd) on a real state file: the
// snapshot is one consistent read, and reconciling lost supervisors does not
// stall the pass.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <set>

#include "dynres/paths.hpp"
#include "dynres/schedd.hpp"
#include "testutil.hpp"

using namespace dynres;

namespace {

int64_t submit_one(State& st, int nodes) {
  JobRecord j;
  j.name = "t";
  j.uid = static_cast<int64_t>(::getuid());
  j.req_nodes = j.min_nodes = j.max_nodes = nodes;
  j.time_limit = 600;
  j.script = "#!/bin/sh\ntrue\n";
  j.workdir = j.stdout_path = j.stderr_path = "/tmp";
  j.submit_time = now_seconds();
  return st.submit(j);
}

// A pid that certainly belongs to no live process (a reaped child's).
int64_t dead_pid() {
  pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  ::waitpid(p, nullptr, 0);
  return p;
}

struct EndBetweenReads {
  State* other = nullptr;
  int64_t job = 0;
  bool fired = false;
};

// Called by SQLite as each statement of the snapshot's connection starts:
// when the jobs are about to be read, another connection records the end of
// the running job (as its supervisor would, at the worst moment).
int on_statement(unsigned, void* ctx, void*, void* x) {
  auto* e = static_cast<EndBetweenReads*>(ctx);
  const char* sql = static_cast<const char*>(x);
  if (!e->fired && sql && std::strstr(sql, "FROM jobs")) {
    e->fired = true;
    REQUIRE(e->other->finish_job(e->job, kCompleted, 0, "None", now_seconds()));
  }
  return 0;
}

}  // namespace

// Defect: nodes and jobs were read in two autocommit statements; a job end
// committed between them left nodes held by a job missing from the running
// set (EASY then computed no reservation for the queue head).
TEST_CASE("schedd: the snapshot is one read transaction", "[schedd]") {
  test::TempDir dir("schedd");
  State st(state_path(dir.path.string()), true);
  st.register_nodes({{"n1", "localhost"}, {"n2", "localhost"}, {"n3", "localhost"}});
  auto nodes = st.nodes();
  int64_t a = submit_one(st, 2);
  REQUIRE(st.start_job(a, {nodes[0].id, nodes[1].id}, 4242, now_seconds()));
  submit_one(st, 3);  // a waiting job, as in the EASY case

  State other(state_path(dir.path.string()));
  EndBetweenReads e{&other, a};
  sqlite3_trace_v2(st.db().handle(), SQLITE_TRACE_STMT, on_statement, &e);
  std::vector<int64_t> ids;
  auto s = schedd::build_snapshot(st, now_seconds(), ids);
  sqlite3_trace_v2(st.db().handle(), 0, nullptr, nullptr);
  REQUIRE(e.fired);  // the end really was committed between the two reads

  std::set<int64_t> running;
  for (auto& r : s.running) running.insert(r.id);
  for (auto& n : s.nodes) {
    INFO("node " << n.name << " held by job " << n.job);
    if (n.job) CHECK(running.count(n.job) == 1);
  }
  for (auto& r : s.running) CHECK(r.nodes.size() == 2);
  // The next snapshot sees the end: nodes free, nothing running.
  auto s2 = schedd::build_snapshot(st, now_seconds(), ids);
  CHECK(s2.running.empty());
  for (auto& n : s2.nodes) CHECK(n.job == 0);
}

// Defect: each lost supervisor cost a 200 ms sleep inside the pass, and the
// end time recorded was the pass's start, taken before the sleeps.
TEST_CASE("schedd: lost supervisors are confirmed together, end time after the pause", "[schedd]") {
  test::TempDir dir("schedd");
  const int n = 6;
  {
    State st(state_path(dir.path.string()), true);
    std::vector<std::pair<std::string, std::string>> nh;
    for (int i = 1; i <= n; ++i) nh.push_back({"n" + std::to_string(i), "localhost"});
    st.register_nodes(nh);
    auto nodes = st.nodes();
    for (int i = 0; i < n; ++i) {
      int64_t id = submit_one(st, 1);
      REQUIRE(st.start_job(id, {nodes[i].id}, dead_pid(), now_seconds()));
    }
  }
  schedd::Daemon d;
  d.home = dir.path.string();
  double t0 = now_seconds();
  d.pass();
  double took = now_seconds() - t0;
  CHECK(took < 0.8);  // one 200 ms confirmation pause, not one per job (6 x 200 ms before)
  State st(state_path(dir.path.string()));
  auto jobs = st.jobs();
  REQUIRE(jobs.size() == static_cast<size_t>(n));
  for (auto& j : jobs) {
    CHECK(j.state == kFailed);
    CHECK(j.reason == "supervisor lost");
    REQUIRE(j.end_time);
    CHECK(*j.end_time >= t0 + 0.19);  // taken after the confirmation pause
  }
  for (auto& nd : st.nodes()) CHECK(nd.job_id == 0);
}
