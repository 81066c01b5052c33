// Workload metrics on small hand-computed workloads, and the mjstat views.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "dynres/metrics.hpp"
#include "dynres/views.hpp"
#include "testutil.hpp"

using namespace dynres;
using Catch::Matchers::Contains;

namespace {

JobRecord job(int64_t id, const std::string& state, double submit, std::optional<double> start,
              std::optional<double> end, int nodes) {
  JobRecord j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  j.state = state;
  j.submit_time = submit;
  j.start_time = start;
  j.end_time = end;
  j.req_nodes = j.min_nodes = j.max_nodes = nodes;
  j.num_nodes = start ? nodes : 0;
  j.nodelist = start ? "n[1-" + std::to_string(nodes) + "]" : "";
  return j;
}

AllocationRecord alloc(const JobRecord& j) {
  return {j.id, j.nodelist, j.num_nodes, *j.start_time, j.end_time};
}

}  // namespace

// 4 nodes, tau = 10 s:
//   job  submit start  end  nodes  wait  response  run  bsld
//   1      0      0    100    2      0     100     100   max(1, 100/100)      = 1
//   2      0    100    150    4    100     150      50   150/50               = 3
//   3     10     10     15    1      0       5       5   max(1, 5/max(5,10))  = 1
//   4     20    150    200    2    130     180      50   180/50               = 3.6  (FAILED)
//   5      5      -      -    1    (pending: counts in jobs and by_state only)
// makespan = 200 - 0 = 200; node-seconds = 2*100 + 4*50 + 1*5 + 2*50 = 505;
// utilisation = 505 / (4 * 200) = 0.63125; wait = 230/4 = 57.5;
// response = 435/4 = 108.75; bounded slowdown = 8.6/4 = 2.15
TEST_CASE("metrics: four finished jobs and a pending one", "[metrics]") {
  std::vector<JobRecord> jobs = {job(1, kCompleted, 0, 0, 100, 2), job(2, kCompleted, 0, 100, 150, 4),
                                 job(3, kCompleted, 10, 10, 15, 1), job(4, kFailed, 20, 150, 200, 2),
                                 job(5, kPending, 5, std::nullopt, std::nullopt, 1)};
  std::vector<AllocationRecord> al;
  for (auto& j : jobs)
    if (j.start_time) al.push_back(alloc(j));
  auto m = compute_metrics(jobs, al, 4, 10);
  CHECK(m.jobs == 5);
  CHECK(m.finished == 4);
  CHECK(m.makespan == Approx(200));
  CHECK(m.utilisation == Approx(0.63125));
  CHECK(m.avg_wait == Approx(57.5));
  CHECK(m.avg_response == Approx(108.75));
  CHECK(m.avg_bounded_slowdown == Approx(2.15));
  CHECK(m.tau == 10);
  CHECK(m.by_state.at(kCompleted) == 3);
  CHECK(m.by_state.at(kFailed) == 1);
  CHECK(m.by_state.at(kPending) == 1);

  auto o = to_json(m);
  CHECK(o["makespan_s"].get<double>() == Approx(200));
  CHECK(o["utilisation"].get<double>() == Approx(0.63125));
  CHECK(o["avg_wait_s"].get<double>() == Approx(57.5));
  CHECK(o["avg_response_s"].get<double>() == Approx(108.75));
  CHECK(o["avg_bounded_slowdown"].get<double>() == Approx(2.15));
  CHECK(o["bsld_tau_s"].get<double>() == Approx(10));
  CHECK(o["by_state"]["COMPLETED"] == 3);

  auto text = render_metrics(m, 4);
  CHECK_THAT(text, Contains("200.0 s") && Contains("63.1 %") && Contains("57.5 s") && Contains("108.8 s") &&
                       Contains("2.15") && Contains("COMPLETED=3"));
}

// tau changes only the bounded slowdown: with tau = 100, job 2's run (50 s)
// is raised to 100: 150/100 = 1.5; job 4: 180/100 = 1.8; others 1.
TEST_CASE("metrics: tau bounds short runs", "[metrics]") {
  std::vector<JobRecord> jobs = {job(1, kCompleted, 0, 0, 100, 2), job(2, kCompleted, 0, 100, 150, 4),
                                 job(3, kCompleted, 10, 10, 15, 1), job(4, kFailed, 20, 150, 200, 2)};
  std::vector<AllocationRecord> al;
  for (auto& j : jobs) al.push_back(alloc(j));
  auto m = compute_metrics(jobs, al, 4, 100);
  CHECK(m.avg_bounded_slowdown == Approx((1 + 1.5 + 1 + 1.8) / 4));
  CHECK(m.avg_wait == Approx(57.5));
}

// A running job (no end) counts neither in wait nor in response (one
// population for wait, response and slowdown: the finished jobs); its open
// allocation counts up to the last end. A job cancelled while pending has an
// end time but never started: it is not "finished".
//   1: submit 0, start 0, end 40, 2 nodes      wait 0, resp 40, bsld 1
//   2: submit 0, start 10, running, 1 node     wait 10
//   3: submit 5, cancelled at 20 (never ran)
// makespan = 40; node-seconds = 2*40 + 1*(40-10) = 110; util = 110/(2*40)
TEST_CASE("metrics: running and cancelled-pending jobs", "[metrics]") {
  std::vector<JobRecord> jobs = {job(1, kCompleted, 0, 0, 40, 2), job(2, kRunning, 0, 10, std::nullopt, 1),
                                 job(3, kCancelled, 5, std::nullopt, 20, 1)};
  std::vector<AllocationRecord> al = {alloc(jobs[0]), alloc(jobs[1])};
  auto m = compute_metrics(jobs, al, 2, 10);
  CHECK(m.jobs == 3);
  CHECK(m.finished == 1);
  CHECK(m.makespan == Approx(40));
  CHECK(m.avg_wait == Approx(0));  // job 1 only: the running job 2 (wait 10) is not finished
  CHECK(m.avg_response == Approx(40));
  CHECK(m.avg_bounded_slowdown == Approx(1));
  CHECK(m.utilisation == Approx(110.0 / 80.0));
}

// Allocations are clipped to [first submit, last finished end]: a closed
// allocation of a job still running (a resize closed it after the last end)
// counts only up to the last end, one opened before the first submission
// only from it. A requeued job is PENDING again with its earlier attempt's
// start and end: it is not finished.
//   1: submit 0, start 0, end 40, 2 nodes (the only finished job)
//   2: running; allocation [-10, 50] closed by a resize, [50, -] open, 1 node
//   3: PENDING (requeued), earlier attempt 5..15
// node-seconds = 2*40 + 1*(40 - 0) = 120; util = 120 / (2 * 40)
TEST_CASE("metrics: allocations clipped to the makespan; requeued jobs are not finished", "[metrics]") {
  std::vector<JobRecord> jobs = {job(1, kCompleted, 0, 0, 40, 2), job(2, kRunning, 0, 0, std::nullopt, 1),
                                 job(3, kPending, 0, 5, 15, 1)};
  std::vector<AllocationRecord> al = {alloc(jobs[0]), {2, "n3", 1, -10, 50.0}, {2, "n3", 1, 50, std::nullopt}};
  auto m = compute_metrics(jobs, al, 2, 10);
  CHECK(m.finished == 1);
  CHECK(m.makespan == Approx(40));
  CHECK(m.avg_wait == Approx(0));
  CHECK(m.avg_response == Approx(40));
  CHECK(m.utilisation == Approx(120.0 / 80.0));
}

TEST_CASE("metrics: rescaling times keeps the origin", "[metrics]") {
  std::vector<JobRecord> jobs = {job(1, kCompleted, 100, 110, 130, 1)};
  std::vector<AllocationRecord> al = {alloc(jobs[0])};
  rescale_times(jobs, al, 0.5);
  CHECK(jobs[0].submit_time == Approx(100));
  CHECK(*jobs[0].start_time == Approx(105));
  CHECK(*jobs[0].end_time == Approx(115));
  CHECK(al[0].start_time == Approx(105));
  CHECK(*al[0].end_time == Approx(115));
}

TEST_CASE("metrics: resize events read from a state file", "[metrics]") {
  test::TempDir dir("metrics");
  State st((dir.path / "state.db").string(), true);
  st.event(10, 1, "expand", "from=2 to=4 order=1 duration=0.5s nodes=n[1-4]");
  st.event(20, 1, "shrink", "from=4 to=3 order=2 duration=0.2s nodes=n[1-3]");
  st.event(30, 2, "shrink", "garbled");             // not a resize record: skipped
  st.event(40, 2, "submit", "from=1 to=2");         // another kind: skipped
  auto r = resize_events(st);
  REQUIRE(r.size() == 2);
  CHECK((r[0].expand && r[0].from == 2 && r[0].to == 4 && r[0].job_id == 1));
  CHECK((!r[1].expand && r[1].from == 4 && r[1].to == 3));
  auto m = compute_metrics({}, {}, 4, 10, r);
  CHECK(m.expands == 1);
  CHECK(m.shrinks == 1);
  CHECK(m.resized_jobs == 1);
}

TEST_CASE("metrics: nothing finished gives zeros", "[metrics]") {
  auto empty = compute_metrics({}, {}, 4);
  CHECK(empty.jobs == 0);
  CHECK(empty.finished == 0);
  CHECK(empty.makespan == 0);
  CHECK(empty.utilisation == 0);
  std::vector<JobRecord> jobs = {job(1, kPending, 0, std::nullopt, std::nullopt, 1),
                                 job(2, kRunning, 0, 3, std::nullopt, 1)};
  auto m = compute_metrics(jobs, {alloc(jobs[1])}, 4);
  CHECK(m.jobs == 2);
  CHECK(m.finished == 0);
  CHECK(m.makespan == 0);
  CHECK(m.avg_wait == 0);
  CHECK(m.avg_response == 0);
  CHECK(m.avg_bounded_slowdown == 0);
  CHECK(m.by_state.at(kRunning) == 1);
}

TEST_CASE("views: queue table, detail, summary", "[views]") {
  auto a = job(12, kRunning, 1000, 1010, std::nullopt, 2);
  a.time_limit = 3600;
  auto b = job(13, kPending, 1001, std::nullopt, std::nullopt, 3);
  b.reason = "Resources";
  auto t = render_table({a, b}, default_format(), 1070);
  CHECK_THAT(t, Contains("JOBID") && Contains("NODELIST(REASON)"));
  CHECK_THAT(t, Contains("RUNNING") && Contains("1:00") && Contains("1:00:00") && Contains("n[1-2]"));
  CHECK_THAT(t, Contains("(Resources)"));
  REQUIRE_THROWS_WITH(render_table({a}, "jobid,bogus", 0), Contains("bogus"));
  REQUIRE_THROWS_WITH(render_table({a}, "", 0), Contains("--format"));
  CHECK_THAT(render_table({a}, "JobId,State", 0), Contains("12") && Contains("RUNNING"));

  auto d = render_detail(a, 1070);
  CHECK_THAT(d, Contains("JobId=12") && Contains("JobState=RUNNING") && Contains("NodeList=n[1-2]"));
  auto c = job(14, kCompleted, 0, 1, 2, 1);
  auto f = job(15, kFailed, 0, 1, 2, 1);
  CHECK(render_summary({a, b, c, f}) == "4 jobs: 2 done, 1 running, 1 pending (COMPLETED=1 FAILED=1)");
  CHECK(render_summary({}) == "0 jobs: 0 done, 0 running, 0 pending");
}

// Paths and titles reach gnuplot quoted: a quote in the output directory or
// the title neither breaks the chart nor runs gnuplot commands of its own.
TEST_CASE("gantt: quotes in paths and titles are escaped", "[metrics][gantt]") {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;  // gnuplot-nox is in setup's PKGS
  char tmpl[] = "/tmp/dynres-gantt-test-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  std::string base = tmpl, dir = base + "/it's \"here\"";
  REQUIRE(std::system(("mkdir -p '" + base + "/it'\\''s \"here\"'").c_str()) == 0);
  std::string pwned = base + "/pwned";
  std::string title = "x'; system('touch " + pwned + "'); set title 'y\nz";
  std::vector<AllocationRecord> al = {{1, "n[1-2]", 2, 100, 150}, {2, "n3", 1, 120, 130}};
  std::string png = dir + "/g'c.png";
  REQUIRE_NOTHROW(write_gantt_png(png, al, {"n1", "n2", "n3"}, title));
  struct stat sb;
  CHECK(::stat(png.c_str(), &sb) == 0);
  CHECK(::stat(pwned.c_str(), &sb) != 0);
  CHECK(gnuplot_quote("a'b\nc") == "'a''b c'");
  std::system(("rm -rf '" + base + "'").c_str());
}
