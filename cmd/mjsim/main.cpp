// mjsim — discrete-event simulator of a dynres cluster (mjsim(1)): runs a
// workload (ESP, seed 002 batches, SWF trace) through the same policies and
// metrics as mjsched/mjstat, in simulated time.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "dynres/config.hpp"
#include "dynres/sim.hpp"
#include "dynres/views.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Simulate a dynres cluster: replay a workload through a scheduling policy in simulated time and "
               "print the workload metrics.",
               "mjsim"};
  std::string workload, policy, config, csv, gantt, model = "amdahl";
  int nodes = 0, ppn = 1;
  double fraction = 0, scale = 1;
  size_t first = 0;
  uint64_t seed = 1;
  bool json = false, quiet = false, progress = false;
  dynres::sim::SimOptions o;
  app.add_option("-w,--workload", workload, "esp | batches | an SWF trace file")->required();
  app.add_option("-p,--policy", policy,
                 "fcfs|backfill|easy|fpsma|egs|minagree|perf (default: --config's scheduler.policy, else easy)");
  app.add_option("-N,--nodes", nodes, "cluster size (default: esp 34, batches 32, SWF: the trace's MaxNodes)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("-m,--malleable-fraction", fraction, "share of malleable jobs (esp, batches)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", seed, "seed: ESP order and job choice; the batch number for batches")->capture_default_str();
  app.add_option("--time-scale", scale, "esp: multiply runtimes, the submission interval, the resize costs and the "
                                       "malleable policies' time parameters (as share/dynres/esp --scale and "
                                       "vcluster-boot --time-scale do; results are then in scaled seconds)")
      ->check(CLI::Range(1e-6, 1e6));
  app.add_option("--jobs", first, "simulate only the first N jobs in submission order");
  app.add_option("--procs-per-node", ppn, "SWF: processors per node")->check(CLI::Range(1, 1000000));
  app.add_option("--config", config, "dynres.yaml with scheduler.malleable parameters (dynres.yaml(5))");
  app.add_option("--model", model, "runtime model of resized jobs: amdahl|downey")->capture_default_str();
  app.add_option("--downey-sigma", o.downey_sigma, "variance of Downey's model")->check(CLI::Range(0.0, 100.0));
  auto* gc = app.add_option("--grow-cost", o.grow_cost,
                            "seconds without progress per expand; also the policy's expected cost "
                            "(scheduler.malleable.grow_cost)")
                  ->check(CLI::Range(0.0, 1e6))
                  ->capture_default_str();
  app.add_option("--shrink-cost", o.shrink_cost, "seconds without progress per shrink")->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--tick", o.tick, "also run a pass every this many seconds, >= 0.1 (0: on events only)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--tau", o.tau, "bounded-slowdown threshold, seconds")->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  app.add_option("--csv", csv, "write one line per job to this CSV file");
  app.add_option("--gantt", gantt, "write a Gantt chart (PNG, gnuplot) to this file");
  app.add_flag("--json", json, "print the metrics as JSON");
  app.add_flag("--progress", progress, "show progress on stderr (default when stderr is a terminal)");
  app.add_flag("-q,--quiet", quiet, "no progress");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!config.empty()) {
      if (::access(config.c_str(), R_OK) != 0) throw std::runtime_error("--config: cannot read " + config);
      o.policy = dynres::load_config(config).policy;
    }
    if (gc->count() > 0) o.policy.grow_cost = o.grow_cost;
    if (o.tick > 0 && o.tick < 0.1) throw std::runtime_error("--tick must be 0 or at least 0.1 seconds");
    if (policy.empty()) policy = dynres::sched::to_string(o.policy.policy);
    auto p = dynres::sched::parse_policy(policy);
    if (!p) throw std::runtime_error("--policy: unknown policy '" + policy + "' (fcfs|backfill|easy|fpsma|egs|minagree|perf)");
    o.policy.policy = *p;
    if (model != "amdahl" && model != "downey") throw std::runtime_error("--model must be amdahl or downey");
    o.model = model == "amdahl" ? dynres::sim::Model::amdahl : dynres::sim::Model::downey;

    std::vector<dynres::sim::SimJob> jobs;
    std::string note;
    if (workload == "esp") {
      o.nodes = nodes ? nodes : 34;
      jobs = dynres::sim::esp_jobs(o.nodes, fraction, seed, scale);
      if (scale != 1) {  // the scaled clock: resize pauses and the malleable policies' guards too,
                         // as vcluster-boot --time-scale writes them for the live run
        o.grow_cost *= scale;
        o.shrink_cost *= scale;
        o.policy.grow_cost *= scale;
        o.policy.min_remaining *= scale;
        o.policy.min_resize_interval *= scale;
      }
    } else if (workload == "batches") {
      o.nodes = nodes ? nodes : 32;
      jobs = dynres::sim::batch_jobs(seed, fraction);
    } else {
      if (fraction > 0) throw std::runtime_error("--malleable-fraction applies to esp and batches, not to SWF traces");
      auto tr = dynres::sim::read_swf(workload, ppn, nodes);
      o.nodes = nodes ? nodes : tr.max_nodes;
      if (o.nodes < 1) throw std::runtime_error(workload + ": no MaxNodes/MaxProcs header; pass --nodes");
      jobs = std::move(tr.jobs);
      note = "dropped: " + std::to_string(tr.dropped_too_large) + " larger than the machine, " +
             std::to_string(tr.dropped_invalid) + " without run time or size";
    }
    if (scale != 1 && workload != "esp") throw std::runtime_error("--time-scale applies to the esp workload only");
    dynres::sim::keep_first(jobs, first);
    o.keep_nodelists = !gantt.empty();
    if ((progress || ::isatty(2)) && !quiet)
      o.progress = [](size_t done, size_t total, double now) {
        std::fprintf(stderr, "\rmjsim: %zu/%zu jobs done, t = %.0f s   ", done, total, now);
        if (done == total) std::fprintf(stderr, "\n");
      };
    auto r = dynres::sim::simulate(std::move(jobs), o);
    if (!csv.empty()) dynres::sim::write_jobs_csv(csv, r);
    if (!gantt.empty()) {
      std::vector<std::string> order;
      for (int i = 1; i <= o.nodes; ++i) order.push_back("n" + std::to_string(i));
      dynres::write_gantt_png(gantt, r.allocs, order, "mjsim " + policy + ": " + workload);
    }
    if (json) {
      auto j = dynres::sim::to_json(r);
      j["policy"] = policy;
      j["workload"] = workload;
      j["nodes"] = o.nodes;
      j["malleable_fraction"] = fraction;
      j["seed"] = seed;
      if (!note.empty()) j["note"] = note;
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << "policy                    " << policy << "\n" << dynres::render_metrics(r.metrics, o.nodes);
      std::printf("node-seconds held         %.0f\nmakespan lower bound      %.1f s\nscheduling passes         %zu\n",
                  r.work, r.lower_bound, r.passes);
      if (r.never_started) std::printf("never started             %zu\n", r.never_started);
      if (!note.empty()) std::cout << note << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mjsim: error: " << e.what() << "\n";
    return 1;
  }
}
