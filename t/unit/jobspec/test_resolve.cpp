// resolve_job: validation against the cluster and the kind of job; %j/%x
// expansion when the job is recorded.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "../testutil.hpp"
#include <cstdlib>
#include <filesystem>

#include "dynres/jobspec.hpp"

using namespace dynres;
using Catch::Matchers::Contains;

namespace {

JobRecord resolve(const std::vector<std::pair<std::string, std::string>>& opts, int cluster = 4,
                  const std::string& script = "#!/bin/sh\ntrue\n") {
  JobSpec s;
  apply_directives(s, parse_directives(script));
  for (auto& [k, v] : opts) apply_option(s, k, v);
  return resolve_job(s, cluster, script, "job.sh", "/home/u/work");
}

struct TempDir : dynres::test::TempDir {
  TempDir() : dynres::test::TempDir("jobspec") {}
};

}  // namespace

TEST_CASE("resolve: defaults make a rigid one-node job", "[resolve]") {
  auto j = resolve({});
  CHECK(j.kind == "rigid");
  CHECK(j.req_nodes == 1);
  CHECK(j.min_nodes == 1);
  CHECK(j.max_nodes == 1);
  CHECK(j.constraint == "none");
  CHECK(j.time_limit == -1);
  CHECK(j.name == "job.sh");
  CHECK(j.state == kPending);
  CHECK(j.workdir == "/home/u/work");
  CHECK(j.stdout_path == "/home/u/work/slurm-%j.out");
  CHECK(j.stderr_path == j.stdout_path);
  CHECK(!j.min_power);
  CHECK(!j.max_power);
  CHECK(j.uid == static_cast<int64_t>(::getuid()));
  CHECK(j.script == "#!/bin/sh\ntrue\n");
}

TEST_CASE("resolve: kinds", "[resolve]") {
  SECTION("-N n is rigid") {
    auto j = resolve({{"-N", "3"}});
    CHECK(j.kind == "rigid");
    CHECK(j.req_nodes == 3);
    CHECK(j.min_nodes == 3);
    CHECK(j.max_nodes == 3);
  }
  SECTION("-N a-b is moldable, requesting the maximum") {
    auto j = resolve({{"-N", "2-4"}});
    CHECK(j.kind == "moldable");
    CHECK(j.min_nodes == 2);
    CHECK(j.max_nodes == 4);
    CHECK(j.req_nodes == 4);
  }
  SECTION("--min-nodes alone: the maximum is the cluster size") {
    auto j = resolve({{"--min-nodes", "2"}}, 8);
    CHECK(j.kind == "moldable");
    CHECK(j.min_nodes == 2);
    CHECK(j.max_nodes == 8);
  }
  SECTION("--max-nodes alone: the minimum is 1") {
    auto j = resolve({{"--max-nodes", "3"}});
    CHECK(j.kind == "moldable");
    CHECK(j.min_nodes == 1);
    CHECK(j.max_nodes == 3);
  }
  SECTION("a range with --nodes inside it") {
    auto j = resolve({{"--min-nodes", "1"}, {"--max-nodes", "4"}, {"--nodes", "2"}});
    CHECK(j.kind == "moldable");
    CHECK(j.req_nodes == 2);
  }
  SECTION("a range larger than the cluster is clipped to it") {
    auto j = resolve({{"-N", "2-16"}}, 4);
    CHECK(j.kind == "moldable");
    CHECK(j.min_nodes == 2);
    CHECK(j.max_nodes == 4);
    CHECK(j.req_nodes == 4);
  }
  SECTION("--rigid without a range stays rigid") {
    auto j = resolve({{"-N", "2"}, {"--rigid", ""}});
    CHECK(j.kind == "rigid");
    CHECK(j.req_nodes == 2);
  }
  SECTION("a constraint is kept in canonical form") {
    auto j = resolve({{"-N", "1-4"}, {"--node-constraints", "pof2"}});
    CHECK(j.constraint == "pof2");
    CHECK(j.kind == "moldable");
  }
}

TEST_CASE("resolve: every validation error names the option", "[resolve]") {
  SECTION("min > max") {
    REQUIRE_THROWS_AS(resolve({{"--min-nodes", "3"}, {"--max-nodes", "2"}}), SpecError);
    REQUIRE_THROWS_WITH(resolve({{"--min-nodes", "3"}, {"--max-nodes", "2"}}),
                        Contains("--min-nodes") && Contains("--max-nodes") && Contains("greater"));
    REQUIRE_THROWS_WITH(resolve({{"-N", "4-2"}}), Contains("--min-nodes"));
  }
  SECTION("--nodes outside [min, max]") {
    REQUIRE_THROWS_WITH(resolve({{"--min-nodes", "2"}, {"--max-nodes", "3"}, {"-N", "4"}}),
                        Contains("--nodes") && Contains("outside"));
    REQUIRE_THROWS_WITH(resolve({{"--min-nodes", "2"}, {"--max-nodes", "3"}, {"-N", "1"}}),
                        Contains("--nodes") && Contains("outside"));
  }
  SECTION("more nodes than the cluster has") {
    REQUIRE_THROWS_WITH(resolve({{"-N", "5"}}, 4), Contains("--nodes") && Contains("cluster has (4)"));
    REQUIRE_THROWS_WITH(resolve({{"--min-nodes", "5"}, {"--max-nodes", "6"}}, 4),
                        Contains("--min-nodes") && Contains("cluster"));
  }
  SECTION("a cluster without usable nodes") {
    REQUIRE_THROWS_WITH(resolve({}, 0), Contains("no usable nodes"));
  }
  SECTION("a constraint with no admissible size") {
    REQUIRE_THROWS_WITH(resolve({{"--min-nodes", "3"}, {"--max-nodes", "3"}, {"--node-constraint", "even"}}),
                        Contains("--node-constraint") && Contains("[3, 3]"));
    REQUIRE_THROWS_WITH(resolve({{"-N", "3"}, {"--node-constraint", "pof2"}}), Contains("--node-constraint"));
    REQUIRE_THROWS_WITH(resolve({{"-N", "2-7"}, {"--node-constraint", "cube"}}, 8), Contains("--node-constraint"));
    // after clipping to the cluster: [3, 4] holds no cube
    REQUIRE_THROWS_WITH(resolve({{"-N", "3-27"}, {"--node-constraint", "cube"}}, 4), Contains("--node-constraint"));
    REQUIRE_NOTHROW(resolve({{"-N", "2-3"}, {"--node-constraint", "even"}}));
  }
  SECTION("--rigid with a range") {
    REQUIRE_THROWS_WITH(resolve({{"-N", "2-4"}, {"--rigid", ""}}), Contains("--rigid"));
    REQUIRE_THROWS_WITH(resolve({{"--rigid", ""}, {"--max-nodes", "3"}}), Contains("--rigid"));
  }
  SECTION("negative and non-numeric power") {
    REQUIRE_THROWS_WITH(resolve({{"--min-power", "-5"}}), Contains("--min-power"));
    REQUIRE_THROWS_WITH(resolve({{"--max-power", "-0.5"}}), Contains("--max-power"));
    REQUIRE_THROWS_WITH(resolve({{"--max-power", "abc"}}), Contains("--max-power") && Contains("abc"));
    REQUIRE_THROWS_WITH(resolve({{"--min-power", ""}}), Contains("--min-power"));
  }
  SECTION("min power > max power") {
    REQUIRE_THROWS_WITH(resolve({{"--min-power", "200"}, {"--max-power", "100"}}),
                        Contains("--min-power") && Contains("--max-power"));
    auto j = resolve({{"--min-power", "100"}, {"--max-power", "100"}});
    CHECK(j.min_power.value_or(0) == Approx(100));
    CHECK(j.max_power.value_or(0) == Approx(100));
  }
  SECTION("malformed time") {
    for (const char* t : {"1:x9", "abc", "", "1:2:3:4", "-5", "1-2-5", "5:-1", "1.5", "36501-0", "99999999999"})
      REQUIRE_THROWS_WITH(resolve({{"-t", t}}), Contains("--time"));
  }
  SECTION("the same errors from directives carry the line") {
    REQUIRE_THROWS_WITH(resolve({}, 4, "#!/bin/sh\n#SBATCH -t 1:9x\ntrue\n"), Contains("line 2") && Contains("--time"));
  }
}

TEST_CASE("resolve: command-line options override directives", "[resolve]") {
  std::string script = "#!/bin/sh\n#SBATCH -J fromscript\n#SBATCH -t 10\n#SBATCH -N 1\n#MJ --max-power 90\ntrue\n";
  auto j = resolve({{"--job-name", "fromcli"}, {"--time", "0:30"}, {"--nodes", "2"}}, 4, script);
  CHECK(j.name == "fromcli");
  CHECK(j.time_limit == 60);  // 0:30 rounds up to a minute, as Slurm's time_str2mins
  CHECK(j.req_nodes == 2);
  CHECK(j.max_power.value_or(0) == Approx(90));
}

TEST_CASE("resolve: paths are made absolute against the work directory", "[resolve]") {
  auto j = resolve({{"-D", "sub"}, {"-o", "o-%j.txt"}, {"-e", "/abs/e-%x.txt"}});
  CHECK(j.workdir == "/home/u/work/sub");
  CHECK(j.stdout_path == "/home/u/work/sub/o-%j.txt");
  CHECK(j.stderr_path == "/abs/e-%x.txt");
  auto k = resolve({{"-D", "/data"}});
  CHECK(k.workdir == "/data");
  CHECK(k.stdout_path == "/data/slurm-%j.out");
}

TEST_CASE("resolve: job name", "[resolve]") {
  CHECK(resolve({{"-J", "x"}}).name == "x");
  REQUIRE_THROWS_WITH(resolve({{"-J", std::string(201, 'a')}}), Contains("--job-name"));
}

TEST_CASE("submit: %j and %x are expanded when the job is recorded", "[resolve][state]") {
  TempDir d;
  State st((d.path / "state.db").string(), true);
  st.register_nodes({{"n1", "n1"}, {"n2", "n2"}});
  auto j = resolve({{"-J", "sim"}, {"-o", "out-%j-%x.txt"}, {"-e", "err-%j-%%.txt"}}, st.usable_node_count());
  j.submit_time = 100;
  CHECK(j.stdout_path == "/home/u/work/out-%j-%x.txt");  // not yet: the id is not known
  auto id = st.submit(j);
  auto r = st.job(id);
  REQUIRE(r);
  CHECK(r->stdout_path == "/home/u/work/out-" + std::to_string(id) + "-sim.txt");
  CHECK(r->stderr_path == "/home/u/work/err-" + std::to_string(id) + "-%.txt");
  auto id2 = st.submit(j);
  CHECK(id2 == id + 1);
  CHECK(st.job(id2)->stdout_path == "/home/u/work/out-" + std::to_string(id2) + "-sim.txt");
  // default output: slurm-%j.out, stderr with it
  auto k = resolve({}, 2);
  auto id3 = st.submit(k);
  CHECK(st.job(id3)->stdout_path == "/home/u/work/slurm-" + std::to_string(id3) + ".out");
  CHECK(st.job(id3)->stderr_path == st.job(id3)->stdout_path);
}

TEST_CASE("submit_job: bad input writes nothing", "[submit]") {
  TempDir d;
  std::string home = d.path.string();
  {
    State st(home + "/state.db", true);
    st.register_nodes({{"n1", "n1"}, {"n2", "n2"}});
  }
  auto script = d.path / "job.sh";
  {
    FILE* f = std::fopen(script.c_str(), "w");
    std::fputs("#!/bin/sh\n#SBATCH -J good\ntrue\n", f);
    std::fclose(f);
  }
  SubmitRequest ok{home, script.string(), {{"--nodes", "2"}}, home};
  auto j = submit_job(ok);  // nobody listens on the socket: the job just waits
  CHECK(j.id == 1);
  CHECK(j.name == "good");
  CHECK(j.state == kPending);
  CHECK(j.req_nodes == 2);

  SubmitRequest too_big{home, script.string(), {{"--nodes", "3"}}, home};
  REQUIRE_THROWS_WITH(submit_job(too_big), Contains("--nodes"));
  SubmitRequest missing{home, (d.path / "nope.sh").string(), {}, home};
  REQUIRE_THROWS_WITH(submit_job(missing), Contains("cannot read job script") && Contains("nope.sh"));
  SubmitRequest dir{home, d.path.string(), {}, home};
  REQUIRE_THROWS_WITH(submit_job(dir), Contains("cannot read job script"));
  State st(home + "/state.db");
  CHECK(st.jobs().size() == 1);
  Stmt ev(st.db(), "SELECT COUNT(*) FROM events");
  REQUIRE(ev.step());
  CHECK(ev.i64(0) == 1);
}

TEST_CASE("job_to_json", "[submit]") {
  auto j = resolve({{"-J", "x"}, {"-t", "2"}, {"--max-power", "10"}});
  j.id = 7;
  auto o = job_to_json(j);
  CHECK(o["job_id"] == 7);
  CHECK(o["name"] == "x");
  CHECK(o["state"] == "PENDING");
  CHECK(o["time_limit_s"] == 120);
  CHECK(o["start_time"].is_null());
  CHECK(o["min_power_w"].is_null());
  CHECK(o["max_power_w"] == 10.0);
}

// sbatch tasks: the node count follows from -n and the nodes' CPUs.
TEST_CASE("resolve: tasks and CPUs per node", "[resolve][tasks]") {
  auto with = [](std::vector<std::pair<std::string, std::string>> opts, int cpus, int cluster = 8) {
    JobSpec s;
    for (auto& [k, v] : opts) apply_option(s, k, v);
    return resolve_job(s, cluster, "#!/bin/sh\n", "x", "/tmp", cpus);
  };
  auto a = with({{"-n", "64"}}, 16);
  CHECK(a.kind == "rigid");
  CHECK(a.req_nodes == 4);
  CHECK(a.ntasks == 64);
  CHECK(with({{"-n", "65"}}, 16).req_nodes == 5);
  CHECK(with({{"-n", "8"}, {"-c", "4"}}, 16).req_nodes == 2);
  CHECK(with({{"--ntasks-per-node", "2"}, {"-n", "6"}}, 16).req_nodes == 3);
  auto b = with({{"--ntasks-per-node", "4"}, {"-N", "2"}}, 16);
  CHECK(b.ntasks == 8);
  CHECK(b.ntasks_per_node == 4);
  CHECK(with({{"-N", "3"}}, 16).ntasks == 0);  // one task per node
  REQUIRE_THROWS_WITH(with({{"-c", "17"}}, 16), Contains("--cpus-per-task") && Contains("16"));
  REQUIRE_THROWS_WITH(with({{"-n", "33"}, {"-N", "2"}}, 16), Contains("does not fit"));
  CHECK(with({{"-n", "1"}, {"-N", "2"}}, 16).req_nodes == 1);  // Slurm: "setting nnodes to 1"
  REQUIRE_THROWS_WITH(with({{"-n", "40"}, {"-N", "1-2"}}, 16), Contains("does not fit on at most 2 nodes"));
  REQUIRE_THROWS_WITH(with({{"-n", "200"}}, 16), Contains("needs 13 nodes"));
  REQUIRE_THROWS_WITH(with({{"--ntasks-per-node", "9"}, {"-c", "2"}}, 16), Contains("--ntasks-per-node (9)"));
}
