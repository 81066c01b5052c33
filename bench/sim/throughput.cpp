// mjsim throughput: a synthetic 100,000-job SWF workload on 10,000 nodes
// (written to a file and read back with the SWF reader), simulated with easy
// (all rigid) and with perf and minagree (every other job malleable; fpsma's
// one-step growth makes it orders of magnitude slower at this scale).
// Same-run baseline: a plain replay that starts every job at its submit time
// and computes the same metrics. Prints the median of --reps runs, jobs/s,
// and the ratio to the replay. Targets: easy under 3 s, perf
// with 50 % malleable jobs under 15 s.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "dynres/sim.hpp"

using namespace dynres;
using Clock = std::chrono::steady_clock;

namespace {

/// Synthetic trace: sizes log-uniform 1..1024, run times log-uniform
/// 30 s..6 h, requested time 1-3x the run time, Poisson arrivals at an
/// offered load of `load` of the machine.
void write_trace(const std::string& path, int jobs, int nodes, double load, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::pair<int, double>> js;
  double work = 0;
  for (int i = 0; i < jobs; ++i) {
    int n = std::min(nodes, static_cast<int>(std::exp2(u(g) * 10)));
    double t = std::round(30 * std::pow(720.0, u(g)));
    js.push_back({n, t});
    work += n * t;
  }
  const double mean_gap = work / jobs / (load * nodes);
  std::ofstream o(path);
  o << "; synthetic trace for bench_sim_throughput\n; MaxNodes: " << nodes << "\n";
  double t = 0;
  for (int i = 0; i < jobs; ++i) {
    t += std::round(-mean_gap * std::log(1 - u(g)));
    double req = std::round(js[i].second * (1 + 2 * u(g)));
    o << i + 1 << ' ' << static_cast<long long>(t) << " -1 " << js[i].second << ' ' << js[i].first
      << " -1 -1 " << js[i].first << ' ' << req << " -1 1 -1 -1 -1 0 -1 -1 -1\n";
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Plain replay: every job starts at its submit time on enough nodes.
double replay(const std::vector<sim::SimJob>& jobs, int nodes) {
  auto t0 = Clock::now();
  std::vector<JobRecord> rec;
  std::vector<AllocationRecord> al;
  rec.reserve(jobs.size());
  al.reserve(jobs.size());
  for (auto& j : jobs) {
    JobRecord r;
    r.id = j.id;
    r.name = j.name;
    r.state = kCompleted;
    r.submit_time = j.submit;
    r.start_time = j.submit;
    r.end_time = j.submit + j.runtime;
    r.num_nodes = j.req_nodes;
    rec.push_back(std::move(r));
    al.push_back({j.id, "", j.req_nodes, j.submit, j.submit + j.runtime});
  }
  auto m = compute_metrics(rec, al, nodes);
  volatile double sink = m.makespan;
  (void)sink;
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 100000, nodes = 10000, reps = 3;
  double load = 0.9;
  CLI::App app{"Throughput of mjsim's simulator on a large synthetic SWF workload"};
  app.add_option("--jobs", jobs, "jobs in the synthetic trace")->check(CLI::PositiveNumber);
  app.add_option("--nodes", nodes, "machine size")->check(CLI::PositiveNumber);
  app.add_option("--load", load, "offered load (fraction of the machine)")->check(CLI::Range(0.1, 2.0));
  app.add_option("--reps", reps, "runs per configuration (median reported)")->check(CLI::PositiveNumber);
  std::string only;
  app.add_option("--only", only, "run only this policy (easy, perf or minagree; profiling)");
  CLI11_PARSE(app, argc, argv);

  auto path = (std::filesystem::temp_directory_path() / ("dynres-bench-sim-" + std::to_string(::getpid()) + ".swf")).string();
  write_trace(path, jobs, nodes, load, 7);
  auto t0 = Clock::now();
  auto tr = sim::read_swf(path, 1, nodes);
  double read_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::filesystem::remove(path);
  std::printf("workload: %zu jobs on %d nodes, offered load %.2f; SWF read in %.3f s\n", tr.jobs.size(), nodes, load,
              read_s);

  std::vector<double> base;
  for (int i = 0; i < reps; ++i) base.push_back(replay(tr.jobs, nodes));
  const double b = median(base);
  std::printf("baseline: plain replay (start at submit) median %.4f s, %.0f jobs/s\n", b, tr.jobs.size() / b);

  auto malleable = tr.jobs;
  for (size_t i = 0; i < malleable.size(); i += 2) {
    auto& j = malleable[i];
    j.kind = sched::JobKind::malleable;
    j.min_nodes = std::max(1, j.req_nodes / 2);
    j.max_nodes = std::min(nodes, j.req_nodes * 2);
    j.serial = 0.02;
  }
  struct Case {
    const char* name;
    sched::Policy p;
    const std::vector<sim::SimJob>* w;
    double target;
  };
  for (const Case& c : {Case{"easy (rigid)", sched::Policy::easy, &tr.jobs, 3.0},
                        Case{"perf (50 % malleable)", sched::Policy::perf, &malleable, 15.0},
                        Case{"minagree (50 % malleable)", sched::Policy::minagree, &malleable, 3.0}}) {
    if (!only.empty() && sched::to_string(c.p) != only) continue;
    sim::SimOptions o;
    o.nodes = nodes;
    o.policy.policy = c.p;
    std::vector<double> ts, cpu;
    sim::SimResult r;
    for (int i = 0; i < reps; ++i) {
      auto s0 = Clock::now();
      const std::clock_t c0 = std::clock();
      r = sim::simulate(*c.w, o);
      cpu.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
      ts.push_back(std::chrono::duration<double>(Clock::now() - s0).count());
    }
    double m = median(ts);
    std::printf("%s: CPU time median %.3f s (what a quiet core would take; wall below)\n", c.name, median(cpu));
    std::printf("%s: median %.3f s (target %.0f s, ratio %.3f), %.0f jobs/s, %.1fx the replay; %zu passes, "
                "%d expands, %d shrinks, makespan %.0f s, utilisation %.3f\n",
                c.name, m, c.target, m / c.target, r.jobs.size() / m, m / b, r.passes, r.metrics.expands,
                r.metrics.shrinks, r.metrics.makespan, r.metrics.utilisation);
  }
  return 0;
}
