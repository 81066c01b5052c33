// esp-app — the emulated application of the ESP workload, malleable in place
// (emulated, resized in place), following the very runtime model and MTCT
// profile mjsim simulates (lib/sim: time_factor, mtct_of, the four-phase
// profile of esp_jobs), so live and simulated ESP runs can be compared.
//
//   esp-app RUNTIME REQ_NODES [SERIAL_FRACTION] [options]
//
// Work is counted as mjsim counts it (lib/sim/src/engine.cpp): seconds at
// REQ_NODES; at n nodes in phase p it progresses at 1 / g_p(n) per second,
// g_p(n) = f(s_p, n) / f(s, REQ_NODES), f = sim::time_factor (Amdahl or
// Downey), s the nominal serial fraction, s_p the phase's. The phases' work
// is scaled so that the runtime at REQ_NODES is RUNTIME.
//
// Rigid (without --malleable, outside a job, or mj_init_adapt/mj_register
// refused): it prints the line the former script printed and sleeps the
// model's runtime at MJ_JOB_NUM_NODES, exactly as before.
//
// Malleable (--malleable, inside a job submitted with mjsub --malleable, and
// registered): it tracks the fraction of work done, waits for
// orders with mj_wait_adapt (no busy wait), and on an order pauses for the
// resize cost ([Finnerty24]: 14.55 s grow, 7.41 s shrink, x --scale) without
// progress — as mjsim does — then commits and continues at the new rate.
// Every --report-interval seconds it reports progress (mj_report_progress)
// and the MTCT of its phase at its size (mj_report_perf with
// mpi_s / compute_s = sim::mtct_of(s_p, n)). It deregisters when the work is
// done.
//
// Output: "esp-app: job ID on N node(s) (LIST), requested R, runs Ts";
// malleable also "esp-app: resize expand 2->4 latency_s=0.29 order=7
// at_s=1.0 done=0.25" per resize (at_s: order received, seconds after the
// start; done: fraction of the work done then) and "esp-app: done elapsed_s=E expands=X shrinks=Y".
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dynres/hostlist.hpp"
#include "dynres/sim.hpp"
#include "mj.h"

namespace sim = dynres::sim;

namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

struct Model {
  sim::Model model = sim::Model::amdahl;
  double sigma = 1.0;
  int req = 1;
  double serial = 0.05;
  std::vector<double> phase_end;  // cumulative work (req-seconds)
  std::vector<double> phase_serial;
  double base_f = 1;

  void init(double runtime, const std::vector<sim::Phase>& phases) {
    base_f = sim::time_factor(model, serial, req, sigma);
    phase_end.clear();
    phase_serial.clear();
    if (phases.empty()) {
      phase_end = {runtime};
      phase_serial = {serial};
      return;
    }
    double prev = 0, t_req = 0;  // as lib/sim/src/engine.cpp: runtime at req, phases included, is `runtime`
    for (auto& p : phases) {
      t_req += (p.until - prev) * sim::time_factor(model, p.serial, req, sigma) / base_f;
      prev = p.until;
    }
    double W = t_req > 0 ? runtime / t_req : runtime;
    for (auto& p : phases) {
      phase_end.push_back(p.until * W);
      phase_serial.push_back(p.serial);
    }
    phase_end.back() = W;
  }
  double work() const { return phase_end.back(); }
  /// seconds per unit of work at n nodes in phase p (engine.cpp g())
  double g(int n, size_t p) const {
    if (n == req && phase_end.size() == 1) return 1.0;
    return sim::time_factor(model, phase_serial[p], n, sigma) / base_f;
  }
  double runtime_at(int n) const {
    double t = 0, prev = 0;
    for (size_t p = 0; p < phase_end.size(); ++p) {
      t += (phase_end[p] - prev) * g(n, p);
      prev = phase_end[p];
    }
    return t;
  }
};

/// "U:S,U:S,..." -> phases (until increasing in (0, 1], the last 1; serial in [0, 1)).
std::vector<sim::Phase> parse_phases(const std::string& text) {
  std::vector<sim::Phase> out;
  size_t pos = 0;
  double prev = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t colon = item.find(':');
    if (colon == std::string::npos) throw std::invalid_argument("phase '" + item + "' is not UNTIL:SERIAL");
    char* end = nullptr;
    std::string a = item.substr(0, colon), b = item.substr(colon + 1);
    double u = std::strtod(a.c_str(), &end);
    if (a.empty() || *end) throw std::invalid_argument("phase '" + item + "': UNTIL is not a number");
    double s = std::strtod(b.c_str(), &end);
    if (b.empty() || *end) throw std::invalid_argument("phase '" + item + "': SERIAL is not a number");
    if (!(u > prev && u <= 1)) throw std::invalid_argument("phase '" + item + "': UNTIL must increase within (0, 1]");
    if (!(s >= 0 && s < 1)) throw std::invalid_argument("phase '" + item + "': SERIAL must be in [0, 1)");
    out.push_back({u, s});
    prev = u;
    if (out.size() > 64) throw std::invalid_argument("more than 64 phases");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.empty() || out.back().until != 1) throw std::invalid_argument("the last phase must end at 1");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double runtime = 0, serial = 0.05, scale = 1.0, grow_cost = 14.55, shrink_cost = 7.41, interval = 1.0, sigma = 1.0;
  int req = 1, esp_job = -1, esp_nodes = 34;
  bool malleable_flag = false;
  uint64_t esp_seed = 1;
  std::string model_name = "amdahl", phases_text;
  CLI::App cli{"esp-app: the emulated ESP application, malleable in place (lib/sim's runtime model)"};
  cli.add_option("RUNTIME", runtime, "seconds at REQ_NODES")->required()->check(CLI::Range(0.0, 1e9));
  cli.add_option("REQ_NODES", req, "the size RUNTIME refers to")->required()->check(CLI::Range(1, 1 << 20));
  cli.add_option("SERIAL_FRACTION", serial, "nominal serial fraction (default 0.05)")->check(CLI::Range(0.0, 0.999999));
  cli.add_option("--model", model_name, "speedup model: amdahl or downey")->check(CLI::IsMember({"amdahl", "downey"}));
  cli.add_option("--sigma", sigma, "Downey's variance (default 1)")->check(CLI::Range(0.0, 1e6));
  cli.add_option("--phases", phases_text, "MTCT profile UNTIL:SERIAL,... (fractions of the work; the last UNTIL 1)");
  cli.add_option("--esp-job", esp_job, "take SERIAL_FRACTION and the profile of mjsim's ESP job SEQ (0-based)")
      ->check(CLI::Range(0, 100000));
  cli.add_option("--seed", esp_seed, "with --esp-job: the ESP seed (default 1)");
  cli.add_option("--system-nodes", esp_nodes, "with --esp-job: the ESP system size (default 34)")
      ->check(CLI::Range(1, 1 << 20));
  cli.add_option("--scale", scale, "time scale of the run: the resize costs are multiplied by it (default 1)")
      ->check(CLI::Range(1e-6, 1e6));
  cli.add_option("--grow-cost", grow_cost, "seconds without progress per expand, unscaled (default 14.55, [Finnerty24])")
      ->check(CLI::Range(0.0, 1e6));
  cli.add_option("--shrink-cost", shrink_cost, "seconds without progress per shrink, unscaled (default 7.41, [Finnerty24])")
      ->check(CLI::Range(0.0, 1e6));
  cli.add_flag("--malleable", malleable_flag, "register as malleable (a job submitted with mjsub --malleable)");
  cli.add_option("--report-interval", interval, "seconds between progress/MTCT reports (default 1)")
      ->check(CLI::Range(0.01, 3600.0));
  CLI11_PARSE(cli, argc, argv);

  Model m;
  m.model = model_name == "downey" ? sim::Model::downey : sim::Model::amdahl;
  m.sigma = sigma;
  m.req = req;
  m.serial = serial;
  std::vector<sim::Phase> phases;
  try {
    if (esp_job >= 0) {
      auto jobs = sim::esp_jobs(esp_nodes, 0.0, esp_seed, 1.0);
      auto it = std::find_if(jobs.begin(), jobs.end(), [&](const sim::SimJob& j) { return j.id == esp_job + 1; });
      if (it == jobs.end()) throw std::invalid_argument("--esp-job " + std::to_string(esp_job) + " is not in the workload");
      m.serial = it->serial;
      phases = it->phases;
    }
    if (!phases_text.empty()) phases = parse_phases(phases_text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "esp-app: error: %s\n", e.what());
    return 2;
  }
  m.init(runtime, phases);

  const char* env_n = std::getenv("MJ_JOB_NUM_NODES");
  int n = req;
  if (env_n && *env_n) {
    char* end = nullptr;
    long v = std::strtol(env_n, &end, 10);
    if (*end || v < 1 || v > (1 << 20)) {
      std::fprintf(stderr, "esp-app: error: MJ_JOB_NUM_NODES='%s' is not a node count\n", env_n);
      return 2;
    }
    n = static_cast<int>(v);
  }
  const char* job = std::getenv("MJ_JOB_ID");
  const char* list = std::getenv("MJ_JOB_NODELIST");

  mj_status st{};
  bool malleable = false;
  if (malleable_flag && mj_init_adapt(&st) == MJ_OK) {
    n = std::max(1, st.num_nodes);
    int rc = mj_register();
    malleable = rc == MJ_OK;
    if (!malleable) mj_finalize();
  }
  // the former script's line and, rigid, its exact sleep
  char tbuf[64];
  std::snprintf(tbuf, sizeof tbuf, "%.3f", m.runtime_at(n));
  std::printf("esp-app: job %s on %d node(s) (%s), requested %d, runs %ss\n", job ? job : "?", n, list ? list : "?",
              req, tbuf);
  std::fflush(stdout);
  if (!malleable) {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::strtod(tbuf, nullptr)));
    return 0;
  }

  std::vector<std::string> nodes;
  try {
    nodes = dynres::expand_hostlist(st.nodelist ? st.nodelist : "");
  } catch (const std::exception&) {
  }
  const double t0 = now_s();
  double done = 0, last = t0, last_report = t0;
  size_t phase = 0;
  int expands = 0, shrinks = 0;
  auto report = [&](double t) {
    double dt = t - last_report;
    if (dt <= 0) return;
    double r = sim::mtct_of(m.phase_serial[phase], n);
    mj_report_perf(dt * r / (1 + r), dt / (1 + r));
    mj_report_progress(std::min(1.0, done / m.work()));
    last_report = t;
  };
  const double tol = 1e-9 * std::max(1.0, m.work());
  while (done < m.work() - tol) {
    // time to the end of the phase at the current rate, capped by the next report
    double g = m.g(n, phase);
    double to_phase = std::max(0.0, m.phase_end[phase] - done) * g;
    double t = now_s();
    double wait = std::min(to_phase, std::max(0.0, last_report + interval - t));
    // libmj's mj_wait_adapt returns only at its timeout even when an order
    // arrives earlier (main at a87c351): wait in slices of at most 20 ms
    wait = std::min(wait, 0.02);
    int pending = 0;
    mj_order o{};
    int rc = mj_wait_adapt(wait, &pending, nullptr, &o);
    t = now_s();
    done += (t - last) / g;
    last = t;
    if (done >= m.phase_end[phase] - tol && phase + 1 < m.phase_end.size()) ++phase;
    if (t - last_report >= interval) report(t);
    if (rc != MJ_OK) {  // the scheduler is gone: finish at this size
      std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, m.phase_end[phase] - done) * g));
      continue;
    }
    if (pending != 1) continue;
    const bool grow = o.kind == MJ_ORDER_EXPAND;
    if (!grow && o.kind != MJ_ORDER_SHRINK) continue;
    // the order's node names are libmj's only until the order is settled
    std::vector<std::string> named;
    for (int i = 0; i < o.num_nodes && o.nodes; ++i) named.push_back(o.nodes[i] ? o.nodes[i] : "");
    if (mj_adapt_begin(&o, 0) != MJ_OK) continue;
    // the resize cost: no progress (as mjsim's pause_until)
    double pause_end = t + (grow ? grow_cost : shrink_cost) * scale;
    bool rolled_back = false;
    for (;;) {
      double left = pause_end - now_s();
      if (left <= 0) break;
      int p = 0;
      if (mj_wait_adapt(std::min(left, 0.02), &p, nullptr, nullptr) != MJ_OK) {  // connection lost: sit the pause out
        std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, pause_end - now_s())));
        break;
      }
      if (p == -1) {
        rolled_back = true;
        break;
      }
    }
    std::vector<std::string> released;
    if (!grow && !o.named) {  // the job chooses: the last nodes, never the first
      for (size_t i = nodes.size(); i > 1 && static_cast<int>(released.size()) < o.count; --i)
        released.push_back(nodes[i - 1]);
    }
    std::vector<const char*> rel;
    for (auto& r : released) rel.push_back(r.c_str());
    int c = rolled_back ? MJ_ERR_ROLLED_BACK
                        : mj_adapt_commit(o.id, rel.empty() ? nullptr : rel.data(), static_cast<int>(rel.size()));
    double t1 = now_s();
    last = t1;  // no progress during the pause
    if (c == MJ_OK) {
      int before = n;
      if (grow) {
        nodes.insert(nodes.end(), named.begin(), named.end());
        ++expands;
      } else {
        if (o.named) released = named;
        for (auto& r : released) nodes.erase(std::remove(nodes.begin(), nodes.end(), r), nodes.end());
        ++shrinks;
      }
      n = o.num_nodes_after > 0 ? o.num_nodes_after : std::max(1, grow ? n + o.count : n - o.count);
      std::printf("esp-app: resize %s %d->%d latency_s=%.6f order=%lld at_s=%.6f done=%.6f\n", grow ? "expand" : "shrink",
                  before, n, t1 - t, static_cast<long long>(o.id), t - t0, done / m.work());
      std::fflush(stdout);
    } else {
      std::fprintf(stderr, "esp-app: order %lld not carried out: %s %s\n", static_cast<long long>(o.id), mj_strerror(c),
                   mj_last_error());
    }
  }
  report(now_s());
  mj_report_progress(1.0);
  mj_deregister();
  mj_finalize();
  std::printf("esp-app: done elapsed_s=%.3f expands=%d shrinks=%d\n", now_s() - t0, expands, shrinks);
  return 0;
}
