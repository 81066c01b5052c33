// The sbatch option table: every option of Slurm 22.05's sbatch known,
// getopt_long parsing (prefixes, bundles, optional values), Slurm's rules for
// time limits, memory, GPUs and tasks versus nodes, warnings.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "dynres/jobspec.hpp"

using namespace dynres;
using Catch::Matchers::Contains;

namespace {

JobSpec spec(const std::vector<std::pair<std::string, std::string>>& opts) {
  JobSpec s;
  for (auto& [k, v] : opts) apply_option(s, k, v);
  return s;
}

// a cluster of 4 nodes of 2 CPUs, 1000 MB and `gpus` GPUs each
JobRecord resolve(const std::vector<std::pair<std::string, std::string>>& opts, int gpus = 0,
                  std::vector<std::string>* warnings = nullptr) {
  return resolve_job(spec(opts), 4, "#!/bin/sh\n", "job.sh", "/w", 2, 1000, gpus, warnings);
}

}  // namespace

TEST_CASE("sbatch options: every option of Slurm 22.05's sbatch is in the table", "[options]") {
  // the sbatch entries of src/common/slurm_opt.c at slurm-22-05-8-1
  for (const char* n :
       {"--account", "--acctg-freq", "--array", "--batch", "--begin", "--bb", "--bbf", "--cluster-constraint", "--chdir",
        "--cluster", "--clusters", "--comment", "--container", "--context", "--contiguous", "--constraint", "--core-spec",
        "--cores-per-socket", "--cpu-freq", "--cpus-per-gpu", "--cpus-per-task", "--deadline", "--delay-boot",
        "--dependency", "--distribution", "--error", "--exclude", "--exclusive", "--export", "--export-file",
        "--extra-node-info", "--get-user-env", "--gid", "--gpu-bind", "--gpu-freq", "--gpus", "--gpus-per-node",
        "--gpus-per-socket", "--gpus-per-task", "--gres", "--gres-flags", "--help", "--hint", "--hold", "--ignore-pbs",
        "--input", "--job-name", "--kill-on-invalid-dep", "--licenses", "--mail-type", "--mail-user", "--mcs-label",
        "--mem", "--mem-bind", "--mem-per-cpu", "--mem-per-gpu", "--mincpus", "--network", "--nice", "--no-kill",
        "--no-requeue", "--nodefile", "--nodelist", "--nodes", "--ntasks", "--ntasks-per-core", "--ntasks-per-gpu",
        "--ntasks-per-node", "--ntasks-per-socket", "--ntasks-per-tres", "--open-mode", "--output", "--overcommit",
        "--oversubscribe", "--parsable", "--partition", "--power", "--prefer", "--priority", "--profile", "--propagate",
        "--qos", "--quiet", "--reboot", "--requeue", "--reservation", "--signal", "--sockets-per-node", "--spread-job",
        "--switches", "--tasks-per-node", "--test-only", "--thread-spec", "--threads-per-core", "--time", "--time-min",
        "--tmp", "--uid", "--use-min-nodes", "--verbose", "--version", "--usage", "--wait", "--wait-all-nodes", "--wckey",
        "--wrap"}) {
    INFO(n);
    CHECK(find_job_option(n).names.back().rfind("--", 0) == 0);
  }
  for (const char* s : {"-A", "-a", "-b", "-D", "-M", "-C", "-S", "-c", "-d", "-m", "-e", "-x", "-B", "-G", "-h", "-H",
                        "-i", "-J", "-L", "-k", "-F", "-w", "-N", "-n", "-o", "-O", "-s", "-p", "-q", "-Q", "-t", "-v",
                        "-V", "-W"}) {
    INFO(s);
    CHECK_NOTHROW(find_job_option(s));
  }
}

TEST_CASE("sbatch options: unique prefixes as getopt_long, ambiguous ones name the candidates", "[options]") {
  CHECK(find_job_option("--job-nam").names.back() == "--job-name");
  CHECK(find_job_option("--tasks").names.back() == "--ntasks-per-node");
  CHECK(find_job_option("--mem").names.back() == "--mem");  // exact beats the longer --mem-per-cpu
  CHECK(find_job_option("--export").names.back() == "--export");
  REQUIRE_THROWS_WITH(find_job_option("--cpus"),
                      Contains("option '--cpus' is ambiguous; possibilities: '--cpus-per-gpu' '--cpus-per-task'"));
  REQUIRE_THROWS_WITH(find_job_option("--bogus"), Contains("unrecognized option '--bogus'"));
  REQUIRE_THROWS_WITH(find_job_option("-Z"), Contains("'-Z'"));
  // in a directive: the error names the line and the option, and -C takes its value
  REQUIRE_THROWS_WITH(parse_directives("#!/bin/sh\n#SBATCH --cpus=2\n"), Contains("line 2") && Contains("ambiguous"));
  JobSpec s;
  REQUIRE_THROWS_WITH(apply_directives(s, parse_directives("#SBATCH -C avx2\n")),
                      Contains("line 1") && Contains("--constraint: Invalid feature specification"));
}

TEST_CASE("sbatch options: command-line words as getopt_long", "[options]") {
  std::vector<std::string> rest;
  auto o = parse_job_args({"-N4", "-n", "8", "--time=5", "--exclusive", "--exclusive=user", "-HQ", "--job-nam", "x",
                           "--home", "/h", "--json", "-k"},
                          {{"--home", true}, {"--json", false}}, rest);
  std::vector<std::pair<std::string, std::string>> want = {
      {"--nodes", "4"},      {"--ntasks", "8"},    {"--time", "5"},  {"--exclusive", ""}, {"--exclusive", "user"},
      {"--hold", ""},        {"--quiet", ""},      {"--job-name", "x"}, {"--no-kill", ""}};
  CHECK(o == want);
  CHECK(rest == std::vector<std::string>{"--home", "/h", "--json"});
  REQUIRE_THROWS_WITH(parse_job_args({"--hold=1"}, {}, rest), Contains("'--hold' doesn't allow an argument"));
  REQUIRE_THROWS_WITH(parse_job_args({"--time"}, {}, rest), Contains("'--time' requires an argument"));
  REQUIRE_THROWS_WITH(parse_job_args({"-w", "n1", ":", "-w", "n2"}, {}, rest), Contains("heterogeneous"));
  REQUIRE_THROWS_WITH(parse_job_args({"-X"}, {}, rest), Contains("'-X'"));
}

TEST_CASE("sbatch options: time limits as Slurm's time_str2mins, with a bound", "[options]") {
  CHECK(parse_sbatch_time("-t", "1-") == 86400);
  CHECK(parse_sbatch_time("-t", "00-24:00") == 86400);
  CHECK(parse_sbatch_time("-t", "48:00:00") == 48 * 3600);
  CHECK(parse_sbatch_time("-t", "00:00:59") == 60);  // seconds round up to whole minutes
  CHECK(parse_sbatch_time("-t", "1:01") == 120);
  CHECK(parse_sbatch_time("-t", "0") == -1);  // no limit, as Slurm
  CHECK(parse_sbatch_time("-t", "36500-0") == 36500LL * 86400);
  CHECK(spec({{"--time-exact", "0:02"}}).time_limit.value_or(0) == 2);  // dynres's own: to the second
  CHECK(spec({{"--time-exact", "1-"}}).time_limit.value_or(0) == 86400);
  REQUIRE_THROWS_WITH(spec({{"--time-exact", "99999999999"}}), Contains("--time-exact") && Contains("36500 days"));
  // past the bound: one clear message whatever the size of the number
  for (const char* t : {"36500-00:01", "999999999-00", "99999999999", "99999999999999999999999"})
    REQUIRE_THROWS_WITH(parse_sbatch_time("--time", t), Contains("--time") && Contains("longer than 36500 days"));
}

TEST_CASE("sbatch options: memory sizes as Slurm's str_to_mbytes", "[options]") {
  CHECK(parse_mem_mb("--mem", "100") == 100);
  CHECK(parse_mem_mb("--mem", "2G") == 2048);
  CHECK(parse_mem_mb("--mem", "2gb") == 2048);
  CHECK(parse_mem_mb("--mem", "1T") == 1024 * 1024);
  CHECK(parse_mem_mb("--mem", "200000K") == 196);  // K rounds up
  CHECK(parse_mem_mb("--mem", "0") == 0);
  for (const char* bad : {"", "x", "1X", "1.5G", "-1", "1GBB"})
    REQUIRE_THROWS_WITH(parse_mem_mb("--mem", bad), Contains("--mem: invalid memory size"));
  REQUIRE_THROWS_WITH(parse_mem_mb("--mem", "99999999999999999999"), Contains("more than 1 EB"));
  REQUIRE_THROWS_WITH(parse_mem_mb("--mem", "2000000000T"), Contains("more than 1 EB"));
}

TEST_CASE("sbatch options: bad counts name the option and the value", "[options]") {
  REQUIRE_THROWS_WITH(spec({{"-N", "-3"}}), Contains("--nodes: invalid node count '-3'"));
  REQUIRE_THROWS_WITH(spec({{"-N", "1-"}}), Contains("--nodes: invalid node range '1-'"));
  REQUIRE_THROWS_WITH(spec({{"-N", "99999999999999"}}), Contains("'99999999999999' (at most 9999999)"));
  REQUIRE_THROWS_WITH(spec({{"--array", "-1"}}), Contains("--array: missing number") && Contains("'-1'"));
  REQUIRE_THROWS_WITH(spec({{"--min-power", "1e300"}}), Contains("more than 1000000 W"));
}

TEST_CASE("sbatch options: warned options add one line naming them; refused ones name Slurm's reason", "[options]") {
  auto s = spec({{"--qos", "normal"}, {"--mail-type", "END"}, {"-A", "x"}, {"-p", "debug"}});
  REQUIRE(s.warnings.size() == 4);
  CHECK_THAT(s.warnings[0], Contains("--qos: dynres has no QOS"));
  CHECK_THAT(s.warnings[3], Contains("--partition"));
  REQUIRE_THROWS_WITH(spec({{"-L", "matlab"}}), Contains("--licenses: Invalid license specification"));
  REQUIRE_THROWS_WITH(spec({{"--reservation", "x"}}), Contains("--reservation: Requested reservation is invalid"));
  REQUIRE_THROWS_WITH(spec({{"--tmp", "1G"}}), Contains("--tmp"));
  CHECK_NOTHROW(spec({{"--tmp", "0"}}));
  CHECK_NOTHROW(spec({{"--uid", std::to_string(::getuid())}}));  // the submitter itself
  REQUIRE_THROWS_WITH(spec({{"--uid", std::to_string(::getuid() + 1)}}), Contains("--uid: a job runs as its submitter"));
  CHECK(spec({{"-W", ""}}).wait);
  CHECK(spec({{"--exclusive", ""}}).exclusive);
}

TEST_CASE("resolve: memory as Slurm checks it against the nodes", "[resolve]") {
  CHECK(resolve({{"--mem", "500"}}).mem_per_node == 500);
  CHECK(resolve({}).mem_per_node == -1);
  CHECK(resolve({{"--mem", "0"}}).mem_per_node == 0);
  CHECK(resolve({{"--mem", "1000"}}).mem_per_node == 1000);  // all of a node
  REQUIRE_THROWS_WITH(resolve({{"--mem", "1001"}}), Contains("--mem (1001 MB)"));
  REQUIRE_THROWS_WITH(resolve({{"--mem", "2G"}}), Contains("--mem (2048 MB)") && Contains("(1000 MB)") &&
                                                      Contains("Memory specification can not be satisfied"));
  // per CPU: Slurm refuses more than a node has for one CPU, not x --cpus-per-task
  CHECK(resolve({{"--mem-per-cpu", "600"}, {"-c", "2"}}).mem_per_cpu == 600);
  REQUIRE_THROWS_WITH(resolve({{"--mem-per-cpu", "1001"}}), Contains("--mem-per-cpu (1001 MB)"));
  REQUIRE_THROWS_WITH(resolve({{"--mem", "1"}, {"--mem-per-cpu", "1"}}), Contains("mutually exclusive"));
  // unknown node memory: recorded, not checked
  CHECK(resolve_job(spec({{"--mem", "1T"}}), 4, "", "j", "/w", 2, 0, 0).mem_per_node == 1024 * 1024);
}

TEST_CASE("resolve: GPUs need nodes that declare them", "[resolve]") {
  REQUIRE_THROWS_WITH(resolve({{"--gres", "gpu:1"}}), Contains("Invalid generic resource (gres) specification"));
  REQUIRE_THROWS_WITH(resolve({{"-G", "1"}}), Contains("--gpus: Invalid generic resource"));
  REQUIRE_THROWS_WITH(spec({{"--gres", "mic:1"}}), Contains("--gres") && Contains("mic:1"));
  CHECK(resolve({{"--gres", "gpu:2"}}, 2).gpus_per_node == 2);
  CHECK(resolve({{"--gres", "gpu:tesla:1"}}, 2).gpus_per_node == 1);
  auto g = resolve({{"-G", "3"}}, 2);  // as few nodes as hold 3 GPUs
  CHECK(g.req_nodes == 2);
  CHECK(g.gpus_per_node == 2);
  CHECK(resolve({{"--gpus-per-task", "1"}, {"-n", "2"}, {"-N", "1"}}, 2).gpus_per_node == 2);
  REQUIRE_THROWS_WITH(resolve({{"--gpus-per-node", "3"}}, 2), Contains("GPUs per node (3) are more than a node has (2)"));
  CHECK(resolve({{"--mem-per-gpu", "400"}, {"--gres", "gpu:2"}}, 2).mem_per_node == 800);
}

TEST_CASE("resolve: tasks versus nodes by Slurm's rules", "[resolve]") {
  std::vector<std::string> w;
  auto j = resolve({{"--ntasks", "1"}, {"--nodes", "2"}}, 0, &w);
  CHECK(j.req_nodes == 1);
  REQUIRE(w.size() == 1);
  CHECK(w[0] == "can't run 1 processes on 2 nodes, setting nnodes to 1");
  auto r = resolve({{"-N", "1-4"}, {"-n", "5"}});  // 2 CPUs a node: 3 to 4 nodes
  CHECK(r.kind == "moldable");
  CHECK(r.min_nodes == 3);
  CHECK(r.max_nodes == 4);
  CHECK(r.ntasks == 5);
  auto q = resolve({{"-N", "2-4"}, {"-n", "3"}});  // at most one node per task
  CHECK(q.min_nodes == 2);
  CHECK(q.max_nodes == 3);
  REQUIRE_THROWS_WITH(resolve({{"-N", "1-2"}, {"-n", "5"}}), Contains("does not fit on at most 2 nodes"));
  CHECK(resolve({{"-O", ""}, {"-n", "4"}, {"-N", "1"}}).req_nodes == 1);  // overcommit: tasks beyond the CPUs
  REQUIRE_THROWS_WITH(resolve({{"--mincpus", "3"}}), Contains("--mincpus (3)"));
  std::vector<std::string> we;
  resolve({{"--exclusive", ""}}, 0, &we);
  REQUIRE(we.size() == 1);
  CHECK_THAT(we[0], Contains("nodes are always exclusive"));
}

TEST_CASE("resolve: Slurm's default output names", "[resolve]") {
  CHECK(resolve({}).stdout_path == "/w/slurm-%j.out");
  CHECK(resolve({}).stderr_path == "/w/slurm-%j.out");
  CHECK(resolve({{"--array", "0-3"}}).stdout_path == "/w/slurm-%A_%a.out");
}
