// Job-step supervision (lib/launch) with real processes and a real state
// file: a step's process group is killed only while it is still that step's
// group, and a cancel that reaches a supervisor right after its exec never
// kills the supervisor itself.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "dynres/launch.hpp"
#include "dynres/paths.hpp"
#include "dynres/state.hpp"
#include "testutil.hpp"

using namespace dynres;

namespace {

// A child in its own process group that sleeps until killed.
pid_t group_leader() {
  pid_t p = ::fork();
  if (p == 0) {
    ::setpgid(0, 0);
    for (;;) ::pause();
  }
  ::setpgid(p, p);
  return p;
}

bool alive(pid_t p) {
  std::ifstream f("/proc/" + std::to_string(p) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto rp = s.rfind(')');
  return rp != std::string::npos && rp + 2 < s.size() && s[rp + 2] != 'Z';
}

void reap(pid_t p) {
  ::kill(p, SIGKILL);
  ::waitpid(p, nullptr, 0);
}

int64_t running_job(State& st, int node_index, int64_t supervisor) {
  JobRecord j;
  j.name = "t";
  j.uid = static_cast<int64_t>(::getuid());
  j.script = "#!/bin/sh\ntrue\n";
  j.workdir = j.stdout_path = j.stderr_path = "/tmp";
  j.submit_time = now_seconds();
  int64_t id = st.submit(j);
  REQUIRE(st.start_job(id, {st.nodes().at(node_index).id}, supervisor, now_seconds()));
  return id;
}

int64_t dead_pid() {
  pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  ::waitpid(p, nullptr, 0);
  return p;
}

}  // namespace

TEST_CASE("launch: kill_step checks the group's identity", "[launch]") {
  pid_t g = group_leader();
  auto start = launch::process_start_time(g);
  REQUIRE(start);
  // a reused group id (same pid, another start time) is left alone
  CHECK_FALSE(launch::kill_step(g, *start + 1));
  CHECK_FALSE(launch::kill_step(g, std::nullopt));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(alive(g));
  // the recorded leader is killed
  CHECK(launch::kill_step(g, *start));
  int status = 0;
  REQUIRE(::waitpid(g, &status, 0) == g);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK_FALSE(launch::kill_step(std::nullopt, std::nullopt));
  CHECK_FALSE(launch::process_start_time(dead_pid()));
}

// Cancelling a job whose supervisor is gone kills the recorded step group,
// but not an unrelated group that now has the same id.
TEST_CASE("launch: cancel of an orphaned step spares a reused group id", "[launch]") {
  test::TempDir dir("launch");
  std::string home = dir.path.string();
  State st(state_path(home), true);
  st.register_nodes({{"n1", "localhost"}, {"n2", "localhost"}});

  pid_t unrelated = group_leader();
  auto ustart = launch::process_start_time(unrelated);
  REQUIRE(ustart);
  int64_t a = running_job(st, 0, dead_pid());
  REQUIRE(st.set_step_pgid(a, unrelated, *ustart - 1));  // recorded step had this id, but another start time
  CHECK(launch::cancel_job(st, home, a, static_cast<int64_t>(::getuid())) ==
        launch::CancelResult::signalled_running);
  CHECK(st.job(a)->state == kCancelled);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(alive(unrelated));

  int64_t b = running_job(st, 1, dead_pid());
  REQUIRE(st.set_step_pgid(b, unrelated, *ustart));  // this time it is the step's own group
  CHECK(launch::cancel_job(st, home, b, static_cast<int64_t>(::getuid())) ==
        launch::CancelResult::signalled_running);
  CHECK(st.job(b)->state == kCancelled);
  int status = 0;
  REQUIRE(::waitpid(unrelated, &status, 0) == unrelated);
  CHECK(WIFSIGNALED(status));
  reap(unrelated);
}

// Defect: the supervisor was exec'd with SIGTERM unblocked and blocked it
// only in run_step; a cancel arriving in between killed it (the job then
// ended FAILED "supervisor lost" instead of CANCELLED).
TEST_CASE("launch: SIGTERM right after the supervisor's exec does not kill it", "[launch]") {
  const char* build = std::getenv("DYNRES_BUILD");
  if (!build) FAIL("DYNRES_BUILD is not set (ctest sets it)");
  std::string stepd = std::string(build) + "/bin/mjstepd";
  REQUIRE(::access(stepd.c_str(), X_OK) == 0);
  test::TempDir dir("launch");
  { State st(state_path(dir.path.string()), true); }
  for (int round = 0; round < 5; ++round) {
    launch::StepConfig cfg{dir.path.string(), 999 + round, "local", 1.0};
    auto sp = launch::spawn_supervisor(stepd, cfg);
    ::kill(sp.pid, SIGTERM);  // mjstepd has just been exec'd: before main() runs
    launch::release(sp);      // job 999 does not exist: the supervisor finds it is not its job, exits 0
    int status = 0;
    REQUIRE(::waitpid(sp.pid, &status, 0) == sp.pid);
    INFO("round " << round);
    CHECK_FALSE(WIFSIGNALED(status));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}
