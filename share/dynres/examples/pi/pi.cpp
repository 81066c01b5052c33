// pi — Monte Carlo estimate of pi, an in-place malleable task-parallel
// application. Task k draws --chunk-samples points in the unit
// square from its own SplitMix64 stream, seeded by mix(seed, k) alone, and
// counts those inside the quarter circle; the estimate is 4 * hits / samples.
// Hit counts are integers, so the estimate is bit-identical whatever the
// number of workers, the order of completion and the resizes. See
// ../taskbag/taskbag.hpp for the runtime, the resize protocol and the output.
//
//   pi [--chunks C] [--chunk-samples S] [--seed X] [--workers W] [--task-sleep-ms MS]
//      [--commit-delay-ms MS] [-v]
//
// Output: "pi chunks=C chunk_samples=S seed=X hits=H estimate=3.14..." and the taskbag lines.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

#include "taskbag.hpp"

namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// Points of chunk k inside the quarter circle x^2 + y^2 < 1; x, y are
/// 53-bit fractions in [0, 1) of consecutive outputs of the chunk's stream.
uint64_t chunk_hits(uint64_t seed, uint64_t k, uint64_t samples) {
  uint64_t s = seed;
  s ^= splitmix64(s) + k;  // the chunk's state depends on (seed, k) only
  uint64_t state = splitmix64(s);
  uint64_t hits = 0;
  const double inv = 1.0 / 9007199254740992.0;
  for (uint64_t i = 0; i < samples; ++i) {
    double x = static_cast<double>(splitmix64(state) >> 11) * inv;
    double y = static_cast<double>(splitmix64(state) >> 11) * inv;
    hits += (x * x + y * y < 1.0) ? 1 : 0;
  }
  return hits;
}

constexpr uint64_t kMaxChunks = 100000000, kMaxChunkSamples = 1000000000;

}  // namespace

int main(int argc, char** argv) {
  uint64_t chunks = 2000, samples = 100000, seed = 1;
  taskbag::App app;
  app.name = "pi";
  app.setup = [&](const std::vector<uint64_t>& p) {
    if (p.size() != 3 || p[0] < 1 || p[0] > kMaxChunks || p[1] < 1 || p[1] > kMaxChunkSamples)
      throw std::invalid_argument("bad pi parameters");
    chunks = p[0];
    samples = p[1];
    seed = p[2];
  };
  app.num_tasks = [&] { return chunks; };
  app.compute = [&](uint64_t k) { return chunk_hits(seed, k, samples); };
  if (taskbag::is_worker(argc, argv)) return taskbag::worker_main(argc, argv, app);

  taskbag::Options opt;
  CLI::App cli{"pi: Monte Carlo estimate of pi, in-place malleable"};
  cli.add_option("--chunks", chunks, "tasks (1..1e8)")->check(CLI::Range(uint64_t{1}, kMaxChunks));
  cli.add_option("--chunk-samples", samples, "points per task (1..1e9)")->check(CLI::Range(uint64_t{1}, kMaxChunkSamples));
  cli.add_option("--seed", seed, "seed of the per-chunk streams");
  cli.add_option("--workers", opt.workers, "worker processes when run outside a dynres job (1..256)")
      ->check(CLI::Range(1, 256));
  cli.add_option("--task-sleep-ms", opt.task_sleep_ms, "extra sleep per task on the workers, ms (tests)")
      ->check(CLI::Range(0.0, 60000.0));
  cli.add_option("--commit-delay-ms", opt.commit_delay_ms, "commit a resize no earlier than MS after the order (tests)")
      ->check(CLI::Range(0.0, 3600000.0));
  cli.add_flag("-v,--verbose", opt.verbose, "log workers and adaptation steps to stderr");
  CLI11_PARSE(cli, argc, argv);
  if (chunks > UINT64_MAX / samples) {
    std::fprintf(stderr, "pi: chunks x chunk-samples overflows\n");
    return 2;
  }
  app.ntasks = chunks;
  app.params = {chunks, samples, seed};
  app.print = [&](uint64_t hits, const taskbag::Stats&) {
    double total = static_cast<double>(chunks) * static_cast<double>(samples);
    std::printf("pi chunks=%llu chunk_samples=%llu seed=%llu hits=%llu estimate=%.12f\n",
                static_cast<unsigned long long>(chunks), static_cast<unsigned long long>(samples),
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(hits), 4.0 * hits / total);
  };
  return taskbag::coordinator_main(app, opt);
}
