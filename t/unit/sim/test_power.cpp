// mjsim's power model: the draw series, violations and watt-seconds worked
// out by hand; the corridor file reader; the power workloads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

#include "../testutil.hpp"
#include "dynres/sim.hpp"

using namespace dynres;
using namespace dynres::sim;
using Catch::Matchers::Contains;

namespace {
SimJob rigid(int64_t id, double submit, int nodes, double runtime, double watts) {
  SimJob j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  j.submit = submit;
  j.req_nodes = j.min_nodes = j.max_nodes = j.limit_nodes = nodes;
  j.runtime = runtime;
  j.serial = 0;
  j.min_power = j.max_power = watts;
  return j;
}
}  // namespace

TEST_CASE("power: draw, violations and watt-seconds of a rigid run (easy)") {
  // 4 nodes at 10 W idle. Job 1: 2 nodes x 200 W over [0, 100); job 2: 1 node
  // x 100 W over [50, 150). Draw: [0,50) 400 + 20 = 420, [50,100) 400 + 100 +
  // 10 = 510, [100,150) 100 + 30 = 130, then 40 (idle, the series ends).
  // Corridor [300, 450] from 0, [0, 1000] from 120.
  SimOptions o;
  o.nodes = 4;
  o.policy.policy = sched::Policy::easy;
  o.idle_watts = 10;
  o.corridor = {{0, 300, 450}, {120, 0, 1000}};
  auto r = simulate({rigid(1, 0, 2, 100, 200), rigid(2, 50, 1, 100, 100)}, o);
  REQUIRE(r.power_tracked);
  // above: (510 - 450) x 50 = 3000; below: (300 - 130) x 20 = 3400
  CHECK(r.above_ws == Approx(3000));
  CHECK(r.below_ws == Approx(3400));
  CHECK(r.violations == 2);  // above over [50,100), below over [100,120)
  CHECK(r.max_draw == Approx(510));
  CHECK(r.min_draw == Approx(130));
  REQUIRE(!r.power.empty());
  CHECK(r.power.back().t == Approx(150));
  CHECK(r.power.back().draw == Approx(40));
  CHECK(r.power_jobs.size() == r.power.size());
  CHECK(r.power_jobs.front().empty());  // t = 0 before the first pass: nothing runs
  CHECK(std::find(r.power_jobs.begin(), r.power_jobs.end(), "1:2 2:1") != r.power_jobs.end());
  // upper 400: [0,50) 420 and [50,100) 510 are one episode above, then below
  o.corridor = {{0, 300, 400}, {120, 0, 1000}};
  r = simulate({rigid(1, 0, 2, 100, 200), rigid(2, 50, 1, 100, 100)}, o);
  CHECK(r.violations == 2);
  CHECK(r.above_ws == Approx(20 * 50 + 110 * 50));
}

TEST_CASE("power: without a corridor nothing is tracked and the run is unchanged") {
  SimOptions o;
  o.nodes = 4;
  o.policy.policy = sched::Policy::easy;
  auto a = simulate({rigid(1, 0, 2, 100, 200), rigid(2, 50, 1, 100, 100)}, o);
  CHECK_FALSE(a.power_tracked);
  CHECK(a.power.empty());
  CHECK(to_json(a).count("power") == 0);
  o.corridor = {{0, 0, 1e9}};
  auto b = simulate({rigid(1, 0, 2, 100, 200), rigid(2, 50, 1, 100, 100)}, o);
  CHECK(b.metrics.makespan == Approx(a.metrics.makespan));
  CHECK(b.violations == 0);
  CHECK(to_json(b)["power"]["violations"] == 0);
}

TEST_CASE("power: the power policy corrects the §9.2.3 corridor changes at once") {
  SimOptions o;
  o.nodes = power_default_nodes("power-dynamic");
  o.idle_watts = power_default_idle_watts("power-dynamic");
  o.corridor = power_default_corridor("power-dynamic");
  o.policy.policy = sched::Policy::power;
  o.policy.power_mode = dynres::sched::PowerMode::runtime;
  auto r = simulate(power_jobs("power-dynamic", 1, 1), o);
  CHECK(r.violations == 0);
  CHECK(r.breaks >= 3);  // each raise of the lower bound, corrected by the pass of that instant
  CHECK(r.resizes.size() >= 3);
}

TEST_CASE("power: corridor files") {
  test::TempDir d("simpower");
  auto f = d.write("c.txt", "# t lower upper\n0 100 600\n\n4m 700 1200 # four minutes\n1h 0 5\n");
  auto c = read_corridor(f);
  REQUIRE(c.size() == 3);
  CHECK(c[1].t == Approx(240));
  CHECK(c[1].upper == Approx(1200));
  CHECK(c[2].t == Approx(3600));
  for (auto [text, msg] : std::vector<std::pair<const char*, const char*>>{
           {"0 600 100\n", "c.txt:1: LOWER must be below UPPER"},
           {"0 1 2\n0 1 2\n", "c.txt:2: times must increase"},
           {"-1 1 2\n", "TIME must be >= 0"},
           {"0 -1 2\n", "LOWER must be >= 0"},
           {"0 1 2 3\n", "expected TIME LOWER UPPER"},
           {"0 1 inf\n", "UPPER 'inf' is not a number"},
           {"0 1 2x\n", "UPPER '2x' is not a number"},
           {"\n# only\n", "no corridor change"}}) {
    INFO(text);
    auto p = d.write("c.txt", text);
    REQUIRE_THROWS_WITH(read_corridor(p), Contains(msg));
  }
  REQUIRE_THROWS_WITH(read_corridor(d.path.string() + "/missing"), Contains("cannot read"));
  REQUIRE_THROWS_WITH(power_jobs("power-none", 1, 1), Contains("unknown power workload"));
}

TEST_CASE("power: mjsim passes the mode's draw to the policy (reactive, proactive)") {
  // 4 nodes at 10 W idle, corridor [0, 450] W. Job 1 (1 node x 100 W) runs;
  // job 2 (2 nodes x 200 W) would make 100 + 400 + 10 = 510 W: aware and
  // proactive (the model; the forecast of the steady draw agrees) hold it
  // until job 1 ends, reactive starts it at once (never held ahead of a
  // violation) and then sees the measured break (positive duration: job 2
  // is rigid, nothing can be resized).
  SimOptions o;
  o.nodes = 4;
  o.idle_watts = 10;
  o.corridor = {{0, 0, 450}};
  o.policy.policy = sched::Policy::power;
  std::vector<SimJob> jobs{rigid(1, 0, 1, 100, 100), rigid(2, 50, 2, 100, 200)};
  auto start_of = [](const SimResult& r, int64_t id) {
    for (auto& j : r.jobs)
      if (j.id == id) return j.start_time.value_or(-1);
    return -1.0;
  };
  o.policy.power_mode = dynres::sched::PowerMode::aware;
  auto aware = simulate(jobs, o);
  CHECK(start_of(aware, 2) == Approx(100));
  CHECK(aware.violations == 0);
  o.policy.power_mode = dynres::sched::PowerMode::proactive;
  auto pro = simulate(jobs, o);
  CHECK(start_of(pro, 2) == Approx(100));
  o.policy.power_mode = dynres::sched::PowerMode::reactive;
  auto re = simulate(jobs, o);
  CHECK(start_of(re, 2) == Approx(50));
  CHECK(re.violations == 1);
  CHECK(re.above_ws == Approx((510 - 450) * 50.0));  // then 420 W: inside
}
