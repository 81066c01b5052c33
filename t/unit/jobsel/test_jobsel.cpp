// Selecting jobs as squeue/scancel users do (lib/jobsel) and the squeue %
// format of the queue view, on a real state file.
#include <signal.h>
#include <unistd.h>

#include "dynres/jobsel.hpp"
#include "dynres/paths.hpp"
#include "dynres/views.hpp"
#include "testutil.hpp"

using namespace dynres;
using Catch::Matchers::Contains;

TEST_CASE("jobsel: state lists, ids, users, signals", "[jobsel]") {
  CHECK(parse_state_list("PD,r") == std::vector<std::string>{kPending, kRunning});
  CHECK(parse_state_list("running, CD ,canceled") == std::vector<std::string>{kRunning, kCompleted, kCancelled});
  CHECK(parse_state_list("all").size() == 7);
  CHECK(parse_state_list("TO,NF,F") == std::vector<std::string>{kTimeout, kNodeFail, kFailed});
  CHECK(parse_state_list("R,running") == std::vector<std::string>{kRunning});  // no duplicates
  REQUIRE_THROWS_WITH(parse_state_list("PD,XX"), Contains("'XX'"));
  REQUIRE_THROWS_WITH(parse_state_list(""), Contains("empty"));
  CHECK(compact_state(kTimeout) == "TO");
  CHECK(parse_id_list("3,4, 12") == std::vector<int64_t>{3, 4, 12});
  REQUIRE_THROWS_WITH(parse_id_list("3,-4"), Contains("'-4'"));
  REQUIRE_THROWS_WITH(parse_id_list("0"), Contains("'0'"));
  CHECK(parse_user("root") == 0);
  CHECK(parse_user("4242") == 4242);
  REQUIRE_THROWS_WITH(parse_user("no-such-user-xyz"), Contains("no-such-user-xyz"));
  CHECK(user_name(0) == "root");
  CHECK(parse_signal("TERM") == SIGTERM);
  CHECK(parse_signal("sigusr1") == SIGUSR1);
  CHECK(parse_signal("9") == SIGKILL);
  REQUIRE_THROWS_WITH(parse_signal("BOGUS"), Contains("'BOGUS'"));
  REQUIRE_THROWS_WITH(parse_signal("999"), Contains("'999'"));
}

TEST_CASE("jobsel: array references and filters on a state file", "[jobsel]") {
  test::TempDir dir("jobsel");
  State st(state_path(dir.path.string()), true);
  JobRecord j;
  j.name = "a";
  j.uid = 1000;
  j.script = "#!/bin/sh\n";
  j.workdir = j.stdout_path = j.stderr_path = "/tmp";
  int64_t plain = st.submit(j);
  auto arr = st.submit_array(j, {1, 3, 5}, 2);
  REQUIRE(arr.size() == 3);
  CHECK(st.job(arr[1])->array_job_id.value_or(0) == arr[0]);
  CHECK(st.job(arr[2])->array_task_id.value_or(0) == 5);
  CHECK(st.job(arr[0])->array_max == 2);
  CHECK(display_id(*st.job(arr[1])) == std::to_string(arr[0]) + "_3");
  CHECK(resolve_job_refs(st, std::to_string(plain)) == std::vector<int64_t>{plain});
  CHECK(resolve_job_refs(st, std::to_string(arr[0])) == arr);  // the array's id: every task
  CHECK(resolve_job_refs(st, std::to_string(arr[0]) + "_5") == std::vector<int64_t>{arr[2]});
  CHECK(resolve_job_refs(st, std::to_string(arr[0]) + "_[1-3]," + std::to_string(plain)) ==
        std::vector<int64_t>{arr[0], arr[1], plain});
  REQUIRE_THROWS_WITH(resolve_job_refs(st, std::to_string(arr[0]) + "_2"), Contains("_2"));
  REQUIRE_THROWS_WITH(resolve_job_refs(st, "x_1"), Contains("x_1"));
  // a task range naming no existing task is an invalid job id, as scancel says
  REQUIRE_THROWS_WITH(resolve_job_refs(st, std::to_string(arr[0]) + "_[7-9]"), Contains("_[7-9]"));
  // a range naming some existing tasks selects just those
  CHECK(resolve_job_refs(st, std::to_string(arr[0]) + "_[4-6]") == std::vector<int64_t>{arr[2]});
  REQUIRE_THROWS_WITH(resolve_job_refs(st, std::to_string(arr[0]) + "_[3-1]"), Contains("invalid array task range '3-1'"));
  REQUIRE_THROWS_WITH(resolve_job_refs(st, std::to_string(arr[0]) + "_[1-200000]"), Contains("1-200000"));
  REQUIRE_THROWS_WITH(resolve_job_refs(st, std::to_string(arr[0]) + "_1,"), Contains("empty"));
  JobFilter f;
  f.uids = {1000};
  CHECK(select_jobs(st, f).size() == 4);
  f.uids = {0};
  CHECK(select_jobs(st, f).empty());
  JobFilter byname;
  byname.names = {"b"};
  CHECK(select_jobs(st, byname).empty());
  byname.names = {"a"};
  byname.ids = {plain};
  CHECK(select_jobs(st, byname).size() == 1);  // every criterion must hold
  // squeue % format: widths, alignment, literal text, %% and array ids
  auto t = render_table({*st.job(arr[1])}, "%.8i|%-4j|%t|%A|%a|%%", now_seconds(), false);
  CHECK(t == std::string(8 - display_id(*st.job(arr[1])).size(), ' ') + display_id(*st.job(arr[1])) + "|a   |PD|" +
                 std::to_string(arr[0]) + "|3|%\n");
  REQUIRE_THROWS_WITH(render_table({}, "%Z", 0), Contains("%Z"));
}
