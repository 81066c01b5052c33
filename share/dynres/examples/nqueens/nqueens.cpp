// nqueens — count the solutions of the N-queens problem, an in-place
// malleable task-parallel application (Finnerty et al.'s APGAS NQueens
// benchmark, without Java). Tasks are the valid placements of the queens in
// the first D rows (the prefixes, in lexicographic order); a task's value is
// the number of solutions extending its prefix (bitmask backtracking), the
// result their sum. See ../taskbag/taskbag.hpp for the coordinator/worker
// runtime, the resize protocol and the output lines.
//
//   nqueens [-n N] [--prefix-depth D] [--workers W] [--task-sleep-ms MS] [--commit-delay-ms MS] [-v]
//
// Output: "nqueens n=N depth=D tasks=T solutions=S" and the taskbag lines.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "taskbag.hpp"

namespace {

struct Board {
  int n = 0, depth = 0;
  std::vector<uint8_t> prefixes;  // depth columns per task

  void init(int n_, int depth_) {
    if (n_ < 4 || n_ > 20) throw std::invalid_argument("N must be in 4..20");
    if (depth_ < 1 || depth_ > 4 || depth_ >= n_) throw std::invalid_argument("the prefix depth must be in 1..4 and < N");
    n = n_;
    depth = depth_;
    prefixes.clear();
    std::vector<uint8_t> cur;
    enumerate(0, 0, 0, 0, cur);
  }
  uint32_t all() const { return (1u << n) - 1; }
  // every valid placement of the first `depth` rows, lexicographic
  void enumerate(int row, uint32_t cols, uint32_t ld, uint32_t rd, std::vector<uint8_t>& cur) {
    if (row == depth) {
      prefixes.insert(prefixes.end(), cur.begin(), cur.end());
      return;
    }
    for (int c = 0; c < n; ++c) {
      uint32_t bit = 1u << c;
      if ((cols | ld | rd) & bit) continue;
      cur.push_back(static_cast<uint8_t>(c));
      enumerate(row + 1, cols | bit, ((ld | bit) << 1) & all(), (rd | bit) >> 1, cur);
      cur.pop_back();
    }
  }
  uint64_t ntasks() const { return depth ? prefixes.size() / depth : 0; }
  uint64_t solve(uint32_t cols, uint32_t ld, uint32_t rd) const {
    if (cols == all()) return 1;
    uint64_t r = 0;
    uint32_t avail = all() & ~(cols | ld | rd);
    while (avail) {
      uint32_t bit = avail & (0u - avail);
      avail ^= bit;
      r += solve(cols | bit, ((ld | bit) << 1) & all(), (rd | bit) >> 1);
    }
    return r;
  }
  uint64_t task(uint64_t k) const {
    uint32_t cols = 0, ld = 0, rd = 0;
    for (int i = 0; i < depth; ++i) {
      uint32_t bit = 1u << prefixes[k * depth + i];
      cols |= bit;
      ld = ((ld | bit) << 1) & all();
      rd = (rd | bit) >> 1;
    }
    return solve(cols, ld, rd);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Board b;
  taskbag::App app;
  app.name = "nqueens";
  app.setup = [&](const std::vector<uint64_t>& p) {
    if (p.size() != 2 || p[0] > 20 || p[1] > 4) throw std::invalid_argument("bad nqueens parameters");
    b.init(static_cast<int>(p[0]), static_cast<int>(p[1]));
  };
  app.num_tasks = [&] { return b.ntasks(); };
  app.compute = [&](uint64_t k) { return b.task(k); };
  if (taskbag::is_worker(argc, argv)) return taskbag::worker_main(argc, argv, app);

  int n = 14, depth = 3;
  taskbag::Options opt;
  CLI::App cli{"nqueens: count N-queens solutions, in-place malleable ([Finnerty24] APGAS model)"};
  cli.add_option("-n,--size", n, "board size N (4..20)")->check(CLI::Range(4, 20));
  cli.add_option("--prefix-depth", depth, "queens placed per task prefix (1..4, < N)")->check(CLI::Range(1, 4));
  cli.add_option("--workers", opt.workers, "worker processes when run outside a dynres job (1..256)")
      ->check(CLI::Range(1, 256));
  cli.add_option("--task-sleep-ms", opt.task_sleep_ms, "extra sleep per task on the workers, ms (tests)")
      ->check(CLI::Range(0.0, 60000.0));
  cli.add_option("--commit-delay-ms", opt.commit_delay_ms, "commit a resize no earlier than MS after the order (tests)")
      ->check(CLI::Range(0.0, 3600000.0));
  cli.add_flag("-v,--verbose", opt.verbose, "log workers and adaptation steps to stderr");
  CLI11_PARSE(cli, argc, argv);
  try {
    b.init(n, depth);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nqueens: %s\n", e.what());
    return 2;
  }
  app.ntasks = b.ntasks();
  app.params = {static_cast<uint64_t>(n), static_cast<uint64_t>(depth)};
  app.print = [&](uint64_t sum, const taskbag::Stats&) {
    std::printf("nqueens n=%d depth=%d tasks=%llu solutions=%llu\n", n, depth,
                static_cast<unsigned long long>(app.ntasks), static_cast<unsigned long long>(sum));
  };
  return taskbag::coordinator_main(app, opt);
}
