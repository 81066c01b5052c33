// Workloads of the evaluations ([John24 §9.1] ESP with malleable jobs;
// [Finnerty24 Table 2] job batches) as simulator jobs.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

#include "dynres/sim.hpp"
#include "dynres/workload.hpp"

namespace dynres::sim {

namespace {
/// Uniform double in [0, 1) from a 64-bit Mersenne Twister (platform-independent).
double unit(std::mt19937_64& g) { return static_cast<double>(g() >> 11) / 9007199254740992.0; }

/// A four-phase MTCT profile around serial fraction s (factor 0.5 .. 2 each).
std::vector<Phase> profile(double s, std::mt19937_64& g) {
  std::vector<Phase> p;
  for (int i = 1; i <= 4; ++i) p.push_back({i / 4.0, std::min(0.9, s * std::pow(2.0, 2 * unit(g) - 1))});
  return p;
}
}  // namespace

bool submitted_before(const SimJob& a, const SimJob& b) {
  return a.submit != b.submit ? a.submit < b.submit : a.id < b.id;
}

void keep_first(std::vector<SimJob>& jobs, size_t n) {
  if (n == 0 || n >= jobs.size()) return;
  std::stable_sort(jobs.begin(), jobs.end(), submitted_before);
  jobs.resize(n);
}

std::vector<SimJob> esp_jobs(int nodes, double malleable_fraction, uint64_t seed, double scale) {
  workload::EspOptions o;
  o.nodes = nodes;
  o.seed = seed;
  o.scale = scale;
  auto esp = workload::esp_workload(o);  // submission order of the live benchmark
  std::mt19937_64 g(seed ^ 0x6d616c6c6561626cULL);  // own stream: the order stays the live one
  std::vector<SimJob> out;
  for (auto& e : esp) {
    SimJob j;
    j.id = e.seq + 1;
    j.name = e.name;
    j.submit = e.submit_offset;
    j.req_nodes = j.min_nodes = j.max_nodes = j.limit_nodes = e.nodes;
    j.constraint = e.constraint;
    j.runtime = e.runtime;
    j.serial = 0.005 * std::pow(20.0, unit(g));  // log-uniform in [0.005, 0.1]
    j.phases = profile(j.serial, g);
    bool m = unit(g) < malleable_fraction && e.type != 'Z';
    if (m) {
      int hi = std::min(o.moldable_max, nodes);
      j.kind = sched::JobKind::malleable;
      j.min_nodes = sched::smallest_admissible(e.constraint, 1, hi);
      j.max_nodes = std::max(e.nodes, sched::largest_admissible(e.constraint, 1, hi));
      j.min_nodes = std::min(j.min_nodes, e.nodes);
    }
    j.limit_nodes = j.min_nodes;
    double f0 = time_factor(Model::amdahl, j.serial, j.req_nodes), f1 = time_factor(Model::amdahl, j.serial, j.min_nodes);
    j.time_limit = std::ceil(o.limit_factor * j.runtime * f1 / f0);
    out.push_back(std::move(j));
  }
  return out;
}

const std::vector<BatchRow>& batch_table() {
  // [Finnerty24 Table 2]; work: relative one-node work (UTS and BC x4 per level,
  // N-Queens 17 -> 18 x7, Pi by samples); serial: Amdahl fraction per program.
  static const std::vector<BatchRow> t = {
      {"UTS d=18", 2, 1.5, 1, 4, 1, 0.02},      {"UTS d=18", 4, 0.5, 1, 4, 1, 0.02},
      {"UTS d=19", 2, 1.5, 1, 8, 4, 0.02},      {"UTS d=19", 4, 1, 1, 8, 4, 0.02},
      {"UTS d=19", 8, 1, 1, 8, 4, 0.02},        {"UTS d=20", 8, 1, 8, 16, 16, 0.02},
      {"UTS d=20", 16, 0.5, 8, 16, 16, 0.02},   {"N-Queens N=17", 2, 1.5, 1, 4, 2, 0.01},
      {"N-Queens N=17", 4, 1, 1, 4, 2, 0.01},   {"N-Queens N=18", 8, 1, 8, 16, 14, 0.01},
      {"N-Queens N=18", 16, 0.5, 8, 16, 14, 0.01}, {"BC N=2^17", 2, 1.5, 1, 4, 1, 0.03},
      {"BC N=2^17", 4, 1, 1, 4, 1, 0.03},       {"BC N=2^18", 2, 1.5, 1, 8, 4, 0.03},
      {"BC N=2^18", 4, 1, 1, 8, 4, 0.03},       {"BC N=2^18", 8, 0.5, 1, 8, 4, 0.03},
      {"BC N=2^19", 8, 1, 8, 16, 16, 0.03},     {"BC N=2^19", 16, 0.5, 8, 16, 16, 0.03},
      {"Pi 8e10", 2, 1.5, 1, 4, 1, 0.005},      {"Pi 8e10", 4, 1, 1, 4, 1, 0.005},
      {"Pi 6e11", 4, 1.5, 4, 16, 7.5, 0.005},   {"Pi 6e11", 8, 1, 4, 16, 7.5, 0.005},
      {"Pi 6e11", 16, 0.5, 4, 16, 7.5, 0.005},  {"Pi 1.2e12", 8, 1, 8, 16, 15, 0.005},
      {"Pi 1.2e12", 16, 0.5, 8, 16, 15, 0.005},
  };
  return t;
}

double batch_work_unit() {
  // E[node-seconds of a job at its rigid size] = 8 node-hours / 25 jobs
  double p = 0, ns = 0;
  for (auto& r : batch_table()) {
    p += r.probability;
    ns += r.probability * r.rigid_nodes * r.work * time_factor(Model::amdahl, r.serial, r.rigid_nodes);
  }
  return 8 * 3600.0 / 25 / (ns / p);
}

std::vector<SimJob> batch_jobs(uint64_t seed, double malleable_fraction) {
  const auto& t = batch_table();
  std::mt19937_64 g(seed);
  std::vector<double> w;
  for (auto& r : t) w.push_back(r.probability);
  std::discrete_distribution<size_t> pick(w.begin(), w.end());
  const double unit_s = batch_work_unit();
  std::vector<SimJob> out;
  std::vector<double> submit(25, 0.0);
  for (int i = 5; i < 25; ++i) submit[i] = std::floor(600 * unit(g) * 1000) / 1000;  // ms resolution
  std::sort(submit.begin(), submit.end());
  for (int i = 0; i < 25; ++i) {
    const BatchRow& r = t[pick(g)];
    SimJob j;
    j.id = i + 1;
    j.name = r.program + " n=" + std::to_string(r.rigid_nodes);
    j.submit = submit[i];
    j.req_nodes = j.min_nodes = j.max_nodes = j.limit_nodes = r.rigid_nodes;
    j.serial = r.serial;
    j.runtime = r.work * unit_s * time_factor(Model::amdahl, r.serial, r.rigid_nodes);
    out.push_back(std::move(j));
  }
  std::vector<int> order(25);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), g);  // the nested malleable subsets
  const int k = static_cast<int>(std::lround(25 * std::clamp(malleable_fraction, 0.0, 1.0)));
  for (int i = 0; i < k; ++i) {
    SimJob& j = out[order[i]];
    const BatchRow* row = nullptr;
    for (auto& r : t)
      if (j.name == r.program + " n=" + std::to_string(r.rigid_nodes)) row = &r;
    j.kind = sched::JobKind::malleable;
    j.min_nodes = row->lo;
    j.max_nodes = row->hi;
    j.limit_nodes = row->lo;
  }
  // Every job's estimate is the one its [Finnerty24] job script states
  // (ElasticJobScheduler scripts/apgas-jobs/*.sh: #REQUIRED_TIME 800000 ms
  // for all programs, sizes and classes): what EASY's reservation sees.
  for (auto& j : out) j.time_limit = kBatchRequiredTime;
  return out;
}

}  // namespace dynres::sim

// ---- power workloads [John24 §9.2] -----------------------------------------
namespace dynres::sim {

bool is_power_workload(const std::string& n) {
  return n == "power-mix" || n == "power-upper" || n == "power-lower" || n == "power-dynamic";
}

int power_default_nodes(const std::string& n) {
  if (n == "power-mix") return 14;        // §9.2.4
  if (n == "power-dynamic") return 16;    // §9.2.1-9.2.3: 16 nodes
  return 32;                              // §9.2.2: App 2 grows to 24 nodes
}

double power_default_idle_watts(const std::string& n) {
  // §9.2.4 counts idle nodes at 71 W; the runtime experiments of §9.2.2/9.2.3
  // measured the applications' nodes only (their corridors are below what
  // 16-32 idle nodes would draw)
  return n == "power-mix" ? 71 : 0;
}

std::vector<CorridorChange> power_default_corridor(const std::string& n) {
  if (n == "power-mix") return {{0, 1700, 2500}, {480, 1000, 1700}, {720, 2500, 3500}};
  if (n == "power-upper") return {{0, 3000, 4000}};
  if (n == "power-lower") return {{0, 1500, 2500}};
  if (n == "power-dynamic") return {{0, 100, 600}, {240, 700, 1200}, {480, 1300, 1900}, {720, 100, 600}};
  throw std::invalid_argument("unknown power workload '" + n + "'");
}

std::vector<SimJob> power_jobs(const std::string& n, double malleable_fraction, uint64_t seed) {
  auto app = [](int64_t id, const std::string& name, double submit, int nodes, int lo, int hi, double watts,
                double serial, double runtime) {
    SimJob j;
    j.id = id;
    j.name = name;
    j.submit = submit;
    j.kind = sched::JobKind::malleable;
    j.req_nodes = nodes;
    j.min_nodes = lo;
    j.max_nodes = hi;
    j.serial = serial;
    j.runtime = runtime;
    j.min_power = j.max_power = watts;
    j.limit_nodes = lo;
    double f = time_factor(Model::amdahl, serial, lo) / time_factor(Model::amdahl, serial, nodes);
    j.time_limit = std::ceil(1.2 * runtime * f);
    return j;
  };
  std::vector<SimJob> out;
  if (n == "power-upper") {
    out.push_back(app(1, "App 1", 0, 12, 1, 24, 400, 0.05, 1800));
    out.push_back(app(2, "App 2", 0, 2, 1, 24, 110, 0.005, 1800));
  } else if (n == "power-lower") {
    out.push_back(app(1, "App 1", 0, 4, 1, 16, 260, 0.05, 1800));
    out.push_back(app(2, "App 2", 0, 4, 1, 16, 100, 0.005, 1800));
  } else if (n == "power-dynamic") {
    out.push_back(app(1, "Pi", 0, 1, 1, 16, 125, 0.005, 9000));
  } else if (n == "power-mix") {
    // §9.2.4: 20 jobs, equally Pi (170 W/node) and heat (250 W/node), one
    // every 2 s, --nodes 1-4, min 1, max 14
    std::mt19937_64 g(seed);
    for (int i = 0; i < 20; ++i) {
      bool pi = i % 2 == 0;
      int nodes = 1 + static_cast<int>(unit(g) * 4);
      double runtime = std::round(180 + 180 * unit(g));  // s at --nodes
      out.push_back(app(i + 1, pi ? "pi" : "heat", 2.0 * i, nodes, 1, 14, pi ? 170 : 250, pi ? 0.01 : 0.05, runtime));
    }
  } else {
    throw std::invalid_argument("unknown power workload '" + n + "'");
  }
  // the share that stays malleable: the first round(k f) in a seeded order
  std::vector<size_t> order(out.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 g(seed ^ 0x706f776572ULL);
  std::shuffle(order.begin(), order.end(), g);
  const size_t k = static_cast<size_t>(std::lround(out.size() * std::clamp(malleable_fraction, 0.0, 1.0)));
  for (size_t i = k; i < order.size(); ++i) {
    SimJob& j = out[order[i]];
    j.kind = sched::JobKind::rigid;
    j.min_nodes = j.max_nodes = j.limit_nodes = j.req_nodes;
    j.time_limit = std::ceil(1.2 * j.runtime);
  }
  return out;
}

}  // namespace dynres::sim
