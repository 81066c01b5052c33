// Latency of one scheduling pass (decide) on a large seeded snapshot:
// 10,000 nodes, 2,000 running (half of them malleable and accepting orders)
// and 5,000 waiting jobs by default. Prints the median and p90 per policy and
// the ratio of the median to its target (5 ms for the rigid passes, 1 ms for
// the malleable ones); a same-run baseline (copying the snapshot once) is
// printed for scale; then the power policy in each mode with the corridor
// kept and broken.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "dynres/sched.hpp"

using namespace dynres::sched;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kTargetMs = 5.0, kMalleableTargetMs = 1.0;

Snapshot make_snapshot(int n_nodes, int n_running, int n_waiting, uint64_t seed) {
  std::mt19937_64 g(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); };
  auto chance = [&](int pct) { return uni(1, 100) <= pct; };

  Snapshot s;
  s.now = 1e6;
  s.nodes.resize(n_nodes);
  for (int i = 0; i < n_nodes; ++i) {
    s.nodes[i].name = "n" + std::to_string(i);
    s.nodes[i].up = !chance(1);
  }
  // Running jobs: disjoint node sets covering about 90 % of the nodes.
  std::vector<int> perm(n_nodes);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), g);
  const int avg = std::max(1, n_nodes * 9 / 10 / std::max(1, n_running));
  size_t p = 0;
  for (int r = 0; r < n_running && p < perm.size(); ++r) {
    int k = std::min<int>(uni(1, 2 * avg - 1), static_cast<int>(perm.size() - p));
    RunningJob job;
    job.id = r + 1;
    job.nodes.assign(perm.begin() + p, perm.begin() + p + k);
    std::sort(job.nodes.begin(), job.nodes.end());
    p += k;
    for (int x : job.nodes) s.nodes[x].job = job.id;
    job.min_nodes = job.max_nodes = job.req_nodes = k;
    if (r % 2 == 0) {  // half malleable, accepting orders, with an MTCT
      job.kind = JobKind::malleable;
      job.accepting = true;
      job.min_nodes = std::max(1, k / 2);
      job.max_nodes = std::min(n_nodes, 2 * k);
      job.mtct = uni(0, 300) / 100.0;
    }
    job.start_time = s.now - uni(0, 7200);
    job.time_limit = chance(10) ? -1 : uni(600, 86400);
    s.running.push_back(std::move(job));
  }
  // Waiting jobs: mixed rigid/moldable/malleable, sizes 1-256 (log-uniform).
  for (int w = 0; w < n_waiting; ++w) {
    WaitingJob j;
    j.id = 1000000 + w;
    int kind = uni(0, 9);
    j.kind = kind < 5 ? JobKind::rigid : kind < 9 ? JobKind::moldable : JobKind::malleable;
    j.constraint = chance(60) ? Constraint::none : static_cast<Constraint>(uni(1, 5));
    int size = static_cast<int>(std::exp2(std::uniform_real_distribution<double>(0, 8)(g)));
    if (j.kind == JobKind::rigid) {
      j.req_nodes = j.min_nodes = j.max_nodes =
          std::max(1, largest_admissible(j.constraint, 1, std::min(size, 256)));
    } else {
      j.min_nodes = j.req_nodes = std::max(1, size / 2);
      j.max_nodes = std::min(256, size * 2);
    }
    j.time_limit = chance(5) ? -1 : uni(60, 86400);
    j.submit_time = s.now - (n_waiting - w);
    s.waiting.push_back(j);
  }
  return s;
}

struct Stats {
  double median, p90;
};

template <class F>
Stats measure(int reps, F&& f) {
  for (int i = 0; i < 5; ++i) f();  // warm-up
  std::vector<double> ms(reps);
  for (auto& m : ms) {
    auto t0 = Clock::now();
    f();
    m = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 9 / 10)]};
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 10000, running = 2000, waiting = 5000, reps = 51;
  CLI::App app{"Latency of one dynres::sched::decide pass per policy"};
  app.add_option("--nodes", nodes, "nodes in the snapshot")->check(CLI::PositiveNumber);
  app.add_option("--running", running, "running jobs")->check(CLI::NonNegativeNumber);
  app.add_option("--waiting", waiting, "waiting jobs")->check(CLI::NonNegativeNumber);
  app.add_option("--reps", reps, "timed passes per policy (after 5 warm-up passes)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const Snapshot snap = make_snapshot(nodes, running, waiting, 42);
  int idle = 0;
  for (const auto& n : snap.nodes) idle += n.up && n.job == 0;
  std::printf("snapshot: %zu nodes (%d idle+up), %zu running, %zu waiting; %d reps\n",
              snap.nodes.size(), idle, snap.running.size(), snap.waiting.size(), reps);

  size_t sink = 0;
  Stats copy = measure(reps, [&] { Snapshot c = snap; sink += c.nodes.size(); });
  std::printf("baseline: snapshot copy median %.3f ms p90 %.3f ms\n", copy.median, copy.p90);

  for (Policy p : {Policy::easy, Policy::backfill, Policy::fcfs, Policy::perf, Policy::fpsma, Policy::minagree,
                   Policy::egs}) {
    PolicyConfig cfg;
    cfg.policy = p;
    Decision d;
    Stats st = measure(reps, [&] { d = decide(snap, cfg); sink += d.starts.size(); });
    const double target = is_malleable_policy(p) ? kMalleableTargetMs : kTargetMs;
    std::printf("%s: median %.3f ms p90 %.3f ms (target %.0f ms, ratio %.3f; %zu starts, %zu expands, "
                "%zu shrinks, %.2fx snapshot copy)\n",
                to_string(p).c_str(), st.median, st.p90, target, st.median / target, d.starts.size(),
                d.expands.size(), d.shrinks.size(), st.median / copy.median);
  }
  // The power policy ([John24 Alg. 4] with the ILP of Eq. 5.3): every
  // job 100-300 W per node, idle nodes 71 W. Corridor kept (the start phase
  // and the growth of idle nodes) and broken (10 % above the upper bound:
  // the ILP over the 1,000 malleable running jobs, bounded by problem size:
  // scheduler.power.ilp_jobs variables, ilp_steps / pass_steps lp_solve
  // steps; target 20 ms median, the dissertation's solver time) in
  // each mode (reactive: the measured draw = the model; proactive: a
  // forecast 1 % above it).
  {
    Snapshot ps = snap;
    std::mt19937_64 g(7);
    double draw = 0;
    int busy = 0;
    for (auto& r : ps.running) {
      r.min_power = r.max_power = 100 + static_cast<double>(g() % 201);
      draw += r.nodes.size() * r.min_power;
      busy += static_cast<int>(r.nodes.size());
    }
    for (auto& w : ps.waiting) w.min_power = w.max_power = 100 + static_cast<double>(g() % 201);
    int up = 0;
    for (const auto& n : ps.nodes) up += n.up;
    draw += (up - busy) * 71.0;
    ps.power.known = true;
    ps.power.idle_watts = 71;
    ps.power.node_max_watts = 300;
    for (bool broken : {false, true}) {
      ps.power.lower = 0;
      ps.power.upper = broken ? draw / 1.1 : draw * 1.5;
      for (PowerMode m : {PowerMode::aware, PowerMode::runtime, PowerMode::reactive, PowerMode::proactive}) {
        PolicyConfig cfg;
        cfg.policy = Policy::power;
        cfg.power_mode = m;
        ps.power.draw_min = ps.power.draw_max = m == PowerMode::reactive ? draw : m == PowerMode::proactive ? draw * 1.01 : -1;
        Decision d;
        Stats st = measure(reps, [&] { d = decide(ps, cfg); sink += d.starts.size(); });
        std::printf("power/%s, corridor %s: median %.3f ms p90 %.3f ms (target 20 ms, ratio %.3f; %zu starts, "
                    "%zu expands, %zu shrinks)\n",
                    to_string(m), broken ? "broken" : "kept", st.median, st.p90, st.median / 20.0, d.starts.size(),
                    d.expands.size(), d.shrinks.size());
      }
    }
  }
  return sink == 0 ? 0 : 0;
}
