// The simulator: runtime models, hand-computed runs with resizes, workload
// readers (SWF, ESP, [Finnerty24] batches), determinism and bad input.
#include <zlib.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "../testutil.hpp"
#include "dynres/sim.hpp"
#include "dynres/workload.hpp"

using namespace dynres;
using namespace dynres::sim;
using Catch::Matchers::Contains;

namespace {

SimJob job(int64_t id, double submit, int nodes, double runtime, sched::JobKind k = sched::JobKind::rigid,
           int lo = 0, int hi = 0) {
  SimJob j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  j.submit = submit;
  j.kind = k;
  j.req_nodes = j.limit_nodes = nodes;
  j.min_nodes = lo ? lo : nodes;
  j.max_nodes = hi ? hi : nodes;
  j.runtime = runtime;
  j.serial = 0;  // perfect scaling: time at n = runtime * req / n
  return j;
}

const JobRecord& rec(const SimResult& r, int64_t id) {
  for (auto& j : r.jobs)
    if (j.id == id) return j;
  FAIL("no job " << id);
  return r.jobs.front();
}

}  // namespace

TEST_CASE("runtime models: Amdahl and Downey") {
  CHECK(time_factor(Model::amdahl, 0.1, 1) == 1.0);
  CHECK(time_factor(Model::amdahl, 0.1, 10) == Approx(0.1 + 0.9 / 10));
  CHECK(time_factor(Model::amdahl, 0, 8) == Approx(0.125));
  for (double sigma : {0.0, 0.5, 1.0, 2.0}) {
    INFO("sigma " << sigma);
    CHECK(time_factor(Model::downey, 0.05, 1, sigma) == 1.0);
    double prev = 1;
    for (int n = 2; n <= 200; ++n) {  // non-increasing, bounded by A = 1/s = 20
      double f = time_factor(Model::downey, 0.05, n, sigma);
      CHECK(f <= prev + 1e-12);
      CHECK(f >= 1.0 / 20 - 1e-12);
      prev = f;
    }
    CHECK(time_factor(Model::downey, 0.05, 200, sigma) == Approx(1.0 / 20));
  }
  // sigma = 0 is linear speedup up to A
  CHECK(time_factor(Model::downey, 0.05, 10, 0.0) == Approx(0.1));
  // Every branch of Downey's S(n; A, sigma) against values computed by hand
  // (s = 0.05, so A = 20). Low variance, sigma = 0.5:
  //   n <= A:          S = A n / (A + sigma (n - 1) / 2)        n = 10: 200 / 22.25
  //   A < n <= 2A - 1: S = A n / (sigma (A - 1/2) + n (1 - sigma/2))  n = 30: 600 / 32.25
  //   n > 2A - 1:      S = A                                    n = 40
  CHECK(time_factor(Model::downey, 0.05, 10, 0.5) == Approx(22.25 / 200));
  CHECK(time_factor(Model::downey, 0.05, 30, 0.5) == Approx(32.25 / 600));
  CHECK(time_factor(Model::downey, 0.05, 40, 0.5) == Approx(1.0 / 20));
  // High variance, sigma = 2:
  //   n <= A + A sigma - sigma = 58: S = n A (sigma + 1) / (sigma (n + A - 1) + A)
  //     n = 10: 600 / 78;  n = 40: 2400 / 138;  n = 58: 3480 / 174 = A (continuous)
  //   n > 58: S = A
  CHECK(time_factor(Model::downey, 0.05, 10, 2.0) == Approx(78.0 / 600));
  CHECK(time_factor(Model::downey, 0.05, 40, 2.0) == Approx(138.0 / 2400));
  CHECK(time_factor(Model::downey, 0.05, 58, 2.0) == Approx(1.0 / 20));
  CHECK(time_factor(Model::downey, 0.05, 100, 2.0) == Approx(1.0 / 20));
  // Amdahl at s = 0.25, n = 3: 0.25 + 0.75 / 3 = 0.5
  CHECK(time_factor(Model::amdahl, 0.25, 3) == Approx(0.5));
  // MTCT mapping: s n / (1 - s), and back: s = r / (n + r)
  CHECK(mtct_of(0.2, 4) == Approx(1.0));
  double r = mtct_of(0.03, 17);
  CHECK(r / (17 + r) == Approx(0.03));
  CHECK(mtct_of(0.03, 34) == Approx(2 * mtct_of(0.03, 17)));
}

TEST_CASE("rigid jobs end at start + runtime exactly; ends come before arrivals") {
  SimOptions o;
  o.nodes = 4;
  o.policy.policy = sched::Policy::fcfs;
  // job 2 arrives at t = 100.5 exactly when job 1 ends: the end is handled
  // first, so job 2 starts at once
  auto r = simulate({job(1, 0.25, 4, 100.25), job(2, 100.5, 4, 7), job(3, 0, 1, 50)}, o);
  CHECK(*rec(r, 3).start_time == 0);
  CHECK(*rec(r, 3).end_time == 50);
  CHECK(*rec(r, 1).start_time == 50);   // fcfs: 1 waits for 3
  CHECK(*rec(r, 1).end_time == 150.25);
  CHECK(*rec(r, 2).start_time == 150.25);
  CHECK(*rec(r, 2).end_time == 157.25);
  CHECK(r.metrics.makespan == Approx(157.25));
  CHECK(r.metrics.finished == 3);
  CHECK(r.work == Approx(4 * 100.25 + 4 * 7 + 50));
  CHECK(r.metrics.expands + r.metrics.shrinks == 0);
}

TEST_CASE("a grow pays its pause and speeds the job up by the model") {
  SimOptions o;
  o.nodes = 4;
  o.policy.policy = sched::Policy::fpsma;
  o.policy.step = sched::Step::greedy;
  o.policy.grow_at_start = false;  // a start at 2, then an expansion
  o.grow_cost = 10;
  // runtime 100 s at 2 nodes; grown to 4 at t = 0 (the follow-up pass), then
  // paused 10 s, then 100 req-seconds at twice the speed: ends at 60
  auto r = simulate({job(1, 0, 2, 100, sched::JobKind::malleable, 1, 4)}, o);
  CHECK(*rec(r, 1).end_time == Approx(60));
  CHECK(rec(r, 1).num_nodes == 4);
  REQUIRE(r.resizes.size() == 1);
  CHECK(r.resizes[0].expand);
  CHECK(r.resizes[0].from == 2);
  CHECK(r.resizes[0].to == 4);
  CHECK(r.metrics.expands == 1);
  CHECK(r.metrics.resized_jobs == 1);
  CHECK(r.allocs.size() == 2);  // one allocation per size
  CHECK(r.work == Approx(4 * 60));
  o.policy.grow_at_start = true;  // fpsma widens the start: 4 nodes, no pause
  auto w = simulate({job(1, 0, 2, 100, sched::JobKind::malleable, 1, 4)}, o);
  CHECK(*rec(w, 1).end_time == Approx(50));
  CHECK(w.resizes.empty());
  o.policy.policy = sched::Policy::easy;  // moldable extension: starts at 4, no pause
  CHECK(*rec(simulate({job(1, 0, 2, 100, sched::JobKind::malleable, 1, 4)}, o), 1).end_time == Approx(50));
}

TEST_CASE("overlap resize model: the job computes at its old size during an expand's pause") {
  SimOptions o;
  o.nodes = 4;
  o.policy.policy = sched::Policy::fpsma;
  o.policy.step = sched::Step::greedy;
  o.policy.grow_at_start = false;  // a start at 2, then an expansion
  o.grow_cost = 10;
  o.resize_model = ResizeModel::overlap;
  // runtime 100 s at 2 nodes, grown to 4 at t = 0: 10 s at 2 nodes do 10
  // req-seconds, the other 90 at 4 nodes take 45 s: ends at 55 (stall: 60)
  auto r = simulate({job(1, 0, 2, 100, sched::JobKind::malleable, 1, 4)}, o);
  CHECK(*rec(r, 1).end_time == Approx(55));
  CHECK(r.metrics.expands == 1);
  // a job that ends inside the pause ends there, at its old speed: 8 s at
  // 2 nodes (grown at t = 0 with a 30 s pause)
  o.grow_cost = 30;
  o.policy.grow_cost = 0;  // the policy grows it anyway
  auto e = simulate({job(1, 0, 2, 8, sched::JobKind::malleable, 1, 4)}, o);
  CHECK(*rec(e, 1).end_time == Approx(8));
  // a shrink still stalls the job (same as stall)
  o.grow_cost = 10;
  o.shrink_cost = 5;
  o.policy.grow_cost = 10;
  o.policy.policy = sched::Policy::perf;
  auto s = simulate({job(1, 0, 4, 100, sched::JobKind::malleable, 1, 4), job(2, 20, 2, 50)}, o);
  // t=20: shrink 4 -> 2, stalled to 25; t=70: 57.5 left, grow to 4: 10 s at
  // 2 nodes do 5 req-seconds, the other 52.5 at 4 nodes take 52.5 s: ends at
  // 132.5 (stall: 137.5)
  CHECK(*rec(s, 1).end_time == Approx(132.5));
}

TEST_CASE("perf shrinks a malleable job to start a waiting one and grows it back") {
  SimOptions o;
  o.nodes = 4;
  o.policy.policy = sched::Policy::perf;
  o.grow_cost = 10;
  o.shrink_cost = 5;
  auto r = simulate({job(1, 0, 4, 100, sched::JobKind::malleable, 1, 4), job(2, 20, 2, 50)}, o);
  // t=20: job 1 (80 req-s left) shrinks 4 -> 2, job 2 starts; pause to 25.
  // t=70: job 2 ends; job 1 has done (70-25)/2 = 22.5 more, 57.5 left; grows
  // back to 4, pause to 80, ends at 80 + 57.5 = 137.5.
  CHECK(*rec(r, 2).start_time == Approx(20));
  CHECK(*rec(r, 2).end_time == Approx(70));
  CHECK(*rec(r, 1).end_time == Approx(137.5));
  REQUIRE(r.resizes.size() == 2);
  CHECK_FALSE(r.resizes[0].expand);
  CHECK(r.resizes[0].time == Approx(20));
  CHECK(r.resizes[1].expand);
  CHECK(r.resizes[1].time == Approx(70));
  CHECK(r.metrics.shrinks == 1);
  CHECK(r.metrics.expands == 1);
}

TEST_CASE("phases: runtime at --nodes is the job's runtime whatever the profile") {
  SimOptions o;
  o.nodes = 8;
  o.policy.policy = sched::Policy::easy;
  SimJob j = job(1, 0, 4, 300);
  j.serial = 0.05;
  j.phases = {{0.25, 0.01}, {0.5, 0.2}, {0.75, 0.05}, {1.0, 0.1}};
  auto r = simulate({j}, o);
  CHECK(*rec(r, 1).end_time == Approx(300));
}

TEST_CASE("simulate is deterministic and refuses bad input") {
  SimOptions o;
  o.nodes = 34;
  o.policy.policy = sched::Policy::perf;
  auto jobs = esp_jobs(34, 0.5, 3);
  auto a = simulate(jobs, o), b = simulate(jobs, o);
  CHECK(a.metrics.makespan == b.metrics.makespan);
  CHECK(a.metrics.avg_wait == b.metrics.avg_wait);
  CHECK(a.resizes.size() == b.resizes.size());
  CHECK(a.metrics.finished == 230);

  CHECK_THROWS_WITH(simulate({job(1, 0, 1, 1), job(1, 5, 1, 1)}, o), Contains("duplicate job id 1"));
  CHECK_THROWS_WITH(simulate({job(1, -1, 1, 1)}, o), Contains("negative"));
  SimJob bad = job(2, 0, 3, 10);
  bad.constraint = sched::Constraint::even;
  CHECK_THROWS_WITH(simulate({bad}, o), Contains("no admissible size"));
  o.nodes = 0;
  CHECK_THROWS_AS(simulate({job(1, 0, 1, 1)}, o), std::invalid_argument);
  o.nodes = 4;  // a job larger than the machine never starts and is counted
  auto big = simulate({job(1, 0, 8, 10), job(2, 0, 1, 10)}, o);
  CHECK(big.never_started == 1);
  CHECK(big.metrics.finished == 1);
}

TEST_CASE("SWF reader: fields, estimates, dropped jobs, line numbers") {
  dynres::test::TempDir d("sim");
  auto p = d.write("t.swf",
                   "; Version: 2\n"
                   "; MaxNodes: 16\n"
                   "; MaxProcs: 64\n"
                   "1 0 -1 100 4 -1 -1 4 200 -1 1 -1 -1 -1 0 -1 -1 -1\n"   // requested 200 > run 100
                   "2 10 -1 300 -1 -1 -1 8 100 -1 1 -1 -1 -1 0 -1 -1 -1\n"  // ran past its request: 300
                   "3 20 -1 50 2 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n"    // no request: run time
                   "4 30 -1 50 99 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n"   // larger than the machine
                   "5 40 -1 -1 2 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n"    // no run time
                   "\n");
  auto t = read_swf(p);
  CHECK(t.max_nodes == 16);
  REQUIRE(t.jobs.size() == 3);
  CHECK(t.jobs[0].req_nodes == 4);
  CHECK(t.jobs[0].time_limit == 200);
  CHECK(t.jobs[1].req_nodes == 8);  // requested processors when none allocated
  CHECK(t.jobs[1].time_limit == 300);
  CHECK(t.jobs[2].time_limit == 50);
  CHECK(t.dropped_too_large == 1);
  CHECK(t.dropped_invalid == 1);
  auto q = read_swf(p, 4);  // 4 processors per node
  CHECK(q.jobs[0].req_nodes == 1);
  CHECK(q.jobs[1].req_nodes == 2);
  CHECK(q.dropped_too_large == 1);  // 99 processors = 25 nodes, more than MaxNodes 16
  auto bad = d.write("bad.swf", "; c\n1 0 -1 10 1 -1 -1 1 10\n2 x -1 10 1 -1 -1 1 10\n");
  CHECK_THROWS_WITH(read_swf(bad), Contains("bad.swf:3: field 2 is not a number"));
  auto short_line = d.write("short.swf", "1 0 -1 10\n");
  CHECK_THROWS_WITH(read_swf(short_line), Contains("short.swf:1: expected 18 fields"));
  CHECK_THROWS_WITH(read_swf(d.file("missing.swf")), Contains("cannot read"));
  auto long_line = d.write("long.swf", "1 0 -1 10 1 -1 -1 1 10" + std::string(5000, ' ') + "\n");
  CHECK_THROWS_WITH(read_swf(long_line), Contains("long.swf:1: line longer than 4096 bytes"));
}

namespace {
/// Write `text` gzip-compressed to `path` with zlib (what the Archive's .swf.gz are).
void write_gz(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb9");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size())) == static_cast<int>(text.size()));
  REQUIRE(gzclose(f) == Z_OK);
}
}  // namespace

TEST_CASE("SWF reader: gzip-compressed traces read like plain ones; damage is named") {
  dynres::test::TempDir d("sim");
  std::string text =
      "; MaxNodes: 16\n"
      "1 0 -1 100 4 -1 -1 4 200 -1 1 -1 -1 -1 0 -1 -1 -1\n"
      "2 10 -1 300 -1 -1 -1 8 100 -1 1 -1 -1 -1 0 -1 -1 -1\n"
      "3 20 -1 50 2 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1";  // no final newline
  auto plain = read_swf(d.write("t.swf", text));
  write_gz(d.file("t.swf.gz"), text);
  auto gz = read_swf(d.file("t.swf.gz"));
  CHECK(gz.max_nodes == 16);
  REQUIRE(gz.jobs.size() == 3);
  REQUIRE(plain.jobs.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(gz.jobs[i].id == plain.jobs[i].id);
    CHECK(gz.jobs[i].req_nodes == plain.jobs[i].req_nodes);
    CHECK(gz.jobs[i].runtime == plain.jobs[i].runtime);
    CHECK(gz.jobs[i].time_limit == plain.jobs[i].time_limit);
  }
  CHECK(gz.jobs[2].runtime == 50);  // the last line without a newline is read
  write_gz(d.file("bad.swf.gz"), "; c\n1 0 -1 10 1 -1 -1 1 10\n2 x -1 10 1 -1 -1 1 10\n");
  CHECK_THROWS_WITH(read_swf(d.file("bad.swf.gz")), Contains("bad.swf.gz:3: field 2 is not a number"));
  write_gz(d.file("long.swf.gz"), "1 0 -1 10 1 -1 -1 1 10" + std::string(5000, ' ') + "\n");
  CHECK_THROWS_WITH(read_swf(d.file("long.swf.gz")), Contains("long.swf.gz:1: line longer than 4096 bytes"));
  // A truncated download: the gzip stream ends early.
  std::string big;
  for (int i = 1; i <= 2000; ++i) big += std::to_string(i) + " " + std::to_string(i) + " -1 10 1 -1 -1 1 10\n";
  write_gz(d.file("full.swf.gz"), big);
  {
    FILE* in = std::fopen(d.file("full.swf.gz").c_str(), "rb");
    REQUIRE(in != nullptr);
    std::string bytes(1 << 20, '\0');
    bytes.resize(std::fread(bytes.data(), 1, bytes.size(), in));
    std::fclose(in);
    REQUIRE(bytes.size() > 100);
    d.write("cut.swf.gz", bytes.substr(0, bytes.size() / 2));
  }
  CHECK(read_swf(d.file("full.swf.gz")).jobs.size() == 2000);
  CHECK_THROWS_WITH(read_swf(d.file("cut.swf.gz")), Contains("cut.swf.gz: not a valid gzip file"));
  CHECK_THROWS_WITH(read_swf(d.file("missing.swf.gz")), Contains("missing.swf.gz: cannot read the trace"));
}

TEST_CASE("keep_first: the first jobs in submission order") {
  std::vector<SimJob> js{job(3, 5, 1, 1), job(1, 5, 1, 1), job(2, 0, 1, 1)};
  keep_first(js, 2);  // submission order: submit time, then id
  REQUIRE(js.size() == 2);
  CHECK(js[0].id == 2);
  CHECK(js[1].id == 1);
}

TEST_CASE("ESP for the simulator: the live order, malleable ranges of [John24 §9.1]") {
  auto live = workload::esp_workload({});
  auto rigid = esp_jobs(34, 0, 1);
  REQUIRE(rigid.size() == 230);
  for (size_t i = 0; i < rigid.size(); ++i) {
    CHECK(rigid[i].name == live[i].name);
    CHECK(rigid[i].submit == live[i].submit_offset);
    CHECK(rigid[i].req_nodes == live[i].nodes);
    CHECK(rigid[i].runtime == live[i].runtime);
    CHECK(rigid[i].kind == sched::JobKind::rigid);
    CHECK((rigid[i].serial >= 0.005 && rigid[i].serial <= 0.1));
  }
  auto all = esp_jobs(34, 1, 1);
  std::map<char, std::pair<int, int>> range;
  for (auto& j : all) {
    char type = j.name[4];
    if (type == 'Z') {
      CHECK(j.kind == sched::JobKind::rigid);
      continue;
    }
    CHECK(j.kind == sched::JobKind::malleable);
    range[type] = {j.min_nodes, j.max_nodes};
  }
  CHECK(range['A'] == std::pair{1, 32});
  CHECK(range['B'] == std::pair{1, 32});  // pof2
  CHECK(range['D'] == std::pair{2, 32});  // even
  CHECK(range['H'] == std::pair{1, 31});  // odd
  int half = 0;
  for (auto& j : esp_jobs(34, 0.5, 1)) half += j.kind == sched::JobKind::malleable;
  CHECK((half > 90 && half < 140));
}

TEST_CASE("Batches of [Finnerty24]: 25 jobs, arrivals, nested malleable subsets, 8 node-hours on average") {
  double node_hours = 0;
  const int kBatches = 400;
  for (uint64_t seed = 1; seed <= kBatches; ++seed) {
    auto b = batch_jobs(seed, 0);
    REQUIRE(b.size() == 25);
    for (int i = 0; i < 5; ++i) CHECK(b[i].submit == 0);
    for (auto& j : b) {
      CHECK((j.submit >= 0 && j.submit < 600));
      node_hours += j.runtime * j.req_nodes / 3600;
    }
  }
  CHECK(node_hours / kBatches == Approx(8).epsilon(0.03));
  // every estimate is Finnerty et al.'s job scripts' #REQUIRED_TIME (800 s), rigid
  // or malleable, whatever the runtime
  for (double f : {0.0, 1.0})
    for (auto& j : batch_jobs(3, f)) CHECK(j.time_limit == 800);
  std::set<int64_t> prev;
  for (int k = 0; k <= 5; ++k) {
    auto b = batch_jobs(7, k * 0.2);
    std::set<int64_t> m;
    for (auto& j : b) {
      if (j.kind != sched::JobKind::malleable) continue;
      m.insert(j.id);
      CHECK(j.min_nodes <= j.req_nodes);
      CHECK(j.max_nodes >= j.req_nodes);
    }
    CHECK(m.size() == static_cast<size_t>(5 * k));
    CHECK(std::includes(m.begin(), m.end(), prev.begin(), prev.end()));
    prev = m;
    auto rigid = batch_jobs(7, 0);  // the same jobs, only the kind differs
    for (size_t i = 0; i < b.size(); ++i) CHECK(b[i].runtime == rigid[i].runtime);
  }
}

TEST_CASE("ESP workload: fractions outside [0, 1] are refused naming the option", "[workload]") {
  // a probability above 1 would silently make every job moldable
  for (double f : {-0.1, 1.5}) {
    workload::EspOptions o;
    o.moldable_fraction = f;
    CHECK_THROWS_WITH(workload::esp_workload(o), Catch::Contains("--moldable-fraction"));
    o.moldable_fraction = 0;
    o.serial_fraction = f;
    CHECK_THROWS_WITH(workload::esp_workload(o), Catch::Contains("--serial-fraction"));
  }
  workload::EspOptions ok;
  ok.moldable_fraction = 1;
  ok.serial_fraction = 1;
  CHECK_FALSE(workload::esp_workload(ok).empty());
}

TEST_CASE("SWF shares: which jobs, ranges, serial fractions, estimates; 0 % leaves the jobs untouched") {
  std::vector<SimJob> base;
  for (int i = 1; i <= 200; ++i) {
    SimJob j = job(i, 10.0 * i, 1 + i % 40, 100 + 7 * i);
    j.time_limit = 2 * j.runtime;
    base.push_back(j);
  }
  ShareOptions so;
  so.nodes = 64;
  so.seed = 3;
  auto zero = base;
  auto c0 = apply_shares(zero, so);
  CHECK(c0.malleable == 0);
  CHECK(c0.moldable == 0);
  for (size_t i = 0; i < base.size(); ++i) {
    CHECK(zero[i].kind == sched::JobKind::rigid);
    CHECK(zero[i].min_nodes == base[i].min_nodes);
    CHECK(zero[i].max_nodes == base[i].max_nodes);
    CHECK(zero[i].time_limit == base[i].time_limit);
    CHECK(zero[i].serial == base[i].serial);
  }
  // nested: the 25 % malleable jobs are among the 50 % ones, with the same range and serial fraction
  auto quarter = base, half = base;
  so.malleable = 0.25;
  CHECK(apply_shares(quarter, so).malleable == 50);
  so.malleable = 0.5;
  so.moldable = 0.25;
  auto ch = apply_shares(half, so);
  CHECK(ch.malleable == 100);
  CHECK(ch.moldable == 50);
  int mall = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    const SimJob& q = quarter[i];
    const SimJob& h = half[i];
    if (q.kind == sched::JobKind::malleable) {
      ++mall;
      CHECK(h.kind == sched::JobKind::malleable);
      CHECK(h.serial == q.serial);
      CHECK(h.min_nodes == q.min_nodes);
    }
    if (h.kind == sched::JobKind::rigid) {
      CHECK(h.time_limit == base[i].time_limit);
      continue;
    }
    const int size = base[i].req_nodes;
    CHECK(h.req_nodes == size);
    CHECK(h.runtime == base[i].runtime);  // anchored at the recorded size
    CHECK(h.min_nodes == std::max(1, (size + 1) / 2));
    CHECK(h.max_nodes == std::min(2 * size, 64));
    CHECK(h.serial >= 0.005);
    CHECK(h.serial <= 0.1);
    CHECK(h.limit_nodes == h.min_nodes);
    // the estimate at the smallest size, scaled by Amdahl: at the recorded size it is the recorded one
    double f0 = time_factor(Model::amdahl, h.serial, size), f1 = time_factor(Model::amdahl, h.serial, h.min_nodes);
    CHECK(h.time_limit == std::ceil(base[i].time_limit * f1 / f0));
  }
  CHECK(mall == 50);
  // another seed, other jobs
  auto other = base;
  so.seed = 4;
  apply_shares(other, so);
  int differ = 0;
  for (size_t i = 0; i < base.size(); ++i) differ += other[i].kind != half[i].kind;
  CHECK(differ > 0);
  // ranges and serial fractions from their options
  ShareOptions r;
  r.nodes = 64;
  r.malleable = 1;
  parse_share_range("0.25:4", r);
  parse_serial_fraction("0.02", r);
  auto all = base;
  apply_shares(all, r);
  for (size_t i = 0; i < base.size(); ++i) {
    const int size = base[i].req_nodes;
    CHECK(all[i].min_nodes == std::max(1, static_cast<int>(std::ceil(size * 0.25))));
    CHECK(all[i].max_nodes == std::min(4 * size, 64));
    CHECK(all[i].serial == 0.02);
  }
  ShareOptions bad;
  CHECK_THROWS_WITH(parse_share_range("2:4", bad), Contains("LO must lie in (0, 1]"));
  CHECK_THROWS_WITH(parse_share_range("half", bad), Contains("expected LO:HI"));
  CHECK_THROWS_WITH(parse_serial_fraction("0.2:0.1", bad), Contains("--serial-fraction"));
  CHECK_THROWS_WITH(parse_serial_fraction("1", bad), Contains("--serial-fraction"));
  bad.malleable = 0.7;
  bad.moldable = 0.4;
  auto v = base;
  CHECK_THROWS_WITH(apply_shares(v, bad), Contains("must not exceed 1"));
}

TEST_CASE("SWF shares: a malleable job at its recorded size runs its recorded time; 0 % reproduces the rigid run") {
  // one job alone on a machine of its size: the range is [ceil(8/2), 8], so it starts
  // (and, nothing else running, stays) at 8 nodes, the recorded size
  std::vector<SimJob> one{job(1, 5, 8, 1234.5678)};
  one[0].time_limit = 2000;
  ShareOptions so;
  so.nodes = 8;
  so.malleable = 1;
  so.serial_lo = so.serial_hi = 0.3;
  apply_shares(one, so);
  REQUIRE(one[0].kind == sched::JobKind::malleable);
  for (auto p : {sched::Policy::easy, sched::Policy::minagree, sched::Policy::perf}) {
    SimOptions o;
    o.nodes = 8;
    o.policy.policy = p;
    auto r = simulate(one, o);
    CHECK(rec(r, 1).end_time == 5 + 1234.5678);  // exactly: no rounding on the way
  }
  // 0 %: the same metrics, bit for bit, as the jobs never touched
  std::vector<SimJob> base;
  for (int i = 1; i <= 300; ++i) {
    SimJob j = job(i, 13.0 * i, 1 + (i * 7) % 32, 50 + (i * 37) % 900);
    j.serial = 0.05;
    j.time_limit = j.runtime * 1.5;
    base.push_back(j);
  }
  auto zero = base;
  ShareOptions z;
  z.nodes = 32;
  apply_shares(zero, z);
  for (auto p : {sched::Policy::fcfs, sched::Policy::easy, sched::Policy::minagree}) {
    SimOptions o;
    o.nodes = 32;
    o.policy.policy = p;
    auto a = simulate(base, o), b = simulate(zero, o);
    CHECK(a.metrics.makespan == b.metrics.makespan);
    CHECK(a.metrics.avg_wait == b.metrics.avg_wait);
    CHECK(a.metrics.avg_bounded_slowdown == b.metrics.avg_bounded_slowdown);
    CHECK(to_json(a).dump() == to_json(b).dump());
  }
}
