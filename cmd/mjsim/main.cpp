// mjsim — discrete-event simulator of a dynres cluster (mjsim(1)): runs a
// workload (ESP, [Finnerty24] batches, SWF trace) through the same policies and
// metrics as mjsched/mjstat, in simulated time.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
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
  std::string corridor, power_csv, power_plot, power_mode, resize_model;
  int nodes = 0, ppn = 1;
  double fraction = 0, scale = 1;
  size_t first = 0;
  uint64_t seed = 1;
  bool json = false, quiet = false, progress = false, notes = false;
  dynres::sim::SimOptions o;
  app.add_option("-w,--workload", workload,
                 "esp | batches | power-mix | power-upper | power-lower | power-dynamic | an SWF trace file (.swf, or gzip-compressed .swf.gz)")
      ->required();
  app.add_option("-p,--policy", policy,
                 "fcfs|backfill|easy|fpsma|egs|minagree|perf|power (default: --config's scheduler.policy, else easy)");
  app.add_option("--corridor", corridor,
                 "power corridor over time: lines 'TIME LOWER UPPER' (s, W, W); tracks the modelled draw "
                 "(default for the power-* workloads: the corridor of [John24 §9.2])");
  auto* iw = app.add_option("--idle-watts", o.idle_watts, "draw of an idle node, W (default 71; power-upper/lower/dynamic 0)")
                 ->check(CLI::Range(0.0, 1e6));
  app.add_option("--node-max-watts", o.node_max_watts, "most a busy node draws, W (a job without hints: midpoint with --idle-watts)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--power-mode", power_mode,
                 "power policy: aware (Algorithm 4 on the modelled draw) | runtime (reconfigure running jobs only, "
                 "never hold) | proactive (Algorithm 4 on the forecast draw) | reactive (act on a measured violation "
                 "only, never hold); default: --config's scheduler.power.mode, else aware");
  app.add_option("--grace", o.grace, "seconds an episode outside the corridor may last without counting as a "
                                     "violation (default 0, as pcorridor show --grace)")
      ->check(CLI::Range(0.0, 1e9));
  bool print_jobs = false;
  app.add_flag("--print-jobs", print_jobs, "print the workload (jobs and corridor, after --time-scale) as TSV and exit "
                                           "(bench/power/live.sh submits these jobs live)");
  app.add_option("--power-csv", power_csv, "write the draw and the corridor over time to this CSV file");
  app.add_option("--power-plot", power_plot, "write the draw against the corridor (PNG, gnuplot) to this file");
  app.add_option("-N,--nodes", nodes, "cluster size (default: esp 34, batches 32, SWF: the trace's MaxNodes)")
      ->check(CLI::Range(1, 1000000));
  auto* mf = app.add_option("-m,--malleable-fraction", fraction,
                            "share of malleable jobs (esp, batches, SWF; power-*: default 1)")
      ->check(CLI::Range(0.0, 1.0));
  double moldable = 0;
  std::string share_range, serial_fraction;
  app.add_option("--moldable-fraction", moldable, "SWF: share of moldable jobs (chosen after the malleable ones)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--malleable-range", share_range,
                 "SWF: LO:HI, factors of the recorded size: a malleable or moldable job ranges over "
                 "[max(1, ceil(LO size)), min(N, floor(HI size))] (default 0.5:2)");
  app.add_option("--serial-fraction", serial_fraction,
                 "SWF: Amdahl serial fraction of the malleable and moldable jobs: S, or LO:HI log-uniform "
                 "(default 0.005:0.1)");
  app.add_option("--seed", seed, "seed: ESP order and job choice; the batch number for batches; SWF: which jobs "
                                 "are malleable/moldable and their serial fractions")->capture_default_str();
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
  app.add_option("--resize-model", resize_model,
                 "stall: a job makes no progress during an expand's pause (John's MPI codes); overlap: it "
                 "goes on at its old size and the new nodes join after the pause (Finnerty et al.'s APGAS programs); "
                 "default: overlap for batches, else stall");
  app.add_option("--shrink-cost", o.shrink_cost, "seconds without progress per shrink")->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--tick", o.tick, "also run a pass every this many seconds, >= 0.1 (0: on events only)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--tau", o.tau, "bounded-slowdown threshold, seconds")->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  app.add_option("--csv", csv, "write one line per job to this CSV file");
  app.add_option("--gantt", gantt, "write a Gantt chart (PNG, gnuplot) to this file");
  app.add_flag("--json", json, "print the metrics as JSON");
  app.add_flag("--notes", notes, "print the policy's notes (why the power policy kept a broken corridor) on stderr");
  app.add_flag("--progress", progress, "show progress on stderr (default when stderr is a terminal)");
  app.add_flag("-q,--quiet", quiet, "no progress");
  // NaN passes CLI::Range (every comparison with it is false): refuse it and +-inf in every number option
  const CLI::Validator finite(
      [](std::string& v) {
        char* end = nullptr;
        double d = std::strtod(v.c_str(), &end);
        return end != v.c_str() && !std::isfinite(d) ? "'" + v + "' is not a finite number" : std::string();
      },
      "FINITE");
  for (const char* name : {"--idle-watts", "--node-max-watts", "--grace", "--malleable-fraction", "--time-scale",
                           "--downey-sigma", "--grow-cost", "--shrink-cost", "--tick", "--tau"})
    app.get_option(name)->check(finite);
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
    if (!p)
      throw std::runtime_error("--policy: unknown policy '" + policy + "' (fcfs|backfill|easy|fpsma|egs|minagree|perf|power)");
    o.policy.policy = *p;
    if (!power_mode.empty()) {
      auto pm = dynres::sched::parse_power_mode(power_mode);
      if (!pm) throw std::runtime_error("--power-mode must be aware, runtime, proactive or reactive");
      o.policy.power_mode = *pm;
    }
    if (model != "amdahl" && model != "downey") throw std::runtime_error("--model must be amdahl or downey");
    if (!resize_model.empty() && resize_model != "stall" && resize_model != "overlap")
      throw std::runtime_error("--resize-model must be stall or overlap");
    const bool overlap = resize_model.empty() ? workload == "batches" : resize_model == "overlap";
    o.resize_model = overlap ? dynres::sim::ResizeModel::overlap : dynres::sim::ResizeModel::stall;
    o.model = model == "amdahl" ? dynres::sim::Model::amdahl : dynres::sim::Model::downey;

    std::vector<dynres::sim::SimJob> jobs;
    std::string note;
    const bool is_swf = workload != "esp" && workload != "batches" && !dynres::sim::is_power_workload(workload);
    if (!is_swf && (moldable > 0 || !share_range.empty() || !serial_fraction.empty()))
      throw std::runtime_error("--moldable-fraction, --malleable-range and --serial-fraction apply to SWF traces only");
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
    } else if (dynres::sim::is_power_workload(workload)) {
      o.nodes = nodes ? nodes : dynres::sim::power_default_nodes(workload);
      if (mf->count() == 0) fraction = 1;
      jobs = dynres::sim::power_jobs(workload, fraction, seed);
      if (corridor.empty()) o.corridor = dynres::sim::power_default_corridor(workload);
      if (iw->count() == 0) o.idle_watts = dynres::sim::power_default_idle_watts(workload);
      if (scale != 1) {  // the scaled clock, as for esp (bench/power/live.sh runs them live at this scale)
        for (auto& j : jobs) {
          j.submit *= scale;
          j.runtime *= scale;
          if (j.time_limit >= 0) j.time_limit = std::ceil(j.time_limit * scale);
        }
        if (corridor.empty())
          for (auto& c : o.corridor) c.t *= scale;
        o.grow_cost *= scale;
        o.shrink_cost *= scale;
        o.policy.grow_cost *= scale;
        o.policy.min_remaining *= scale;
        o.policy.min_resize_interval *= scale;
      }
    } else {
      dynres::sim::ShareOptions so;
      so.malleable = fraction;
      so.moldable = moldable;
      so.seed = seed;
      if (!share_range.empty()) dynres::sim::parse_share_range(share_range, so);
      if (!serial_fraction.empty()) dynres::sim::parse_serial_fraction(serial_fraction, so);
      auto tr = dynres::sim::read_swf(workload, ppn, nodes);
      o.nodes = nodes ? nodes : tr.max_nodes;
      if (o.nodes < 1) throw std::runtime_error(workload + ": no MaxNodes/MaxProcs header; pass --nodes");
      jobs = std::move(tr.jobs);
      dynres::sim::keep_first(jobs, first);  // the shares are of the jobs simulated
      so.nodes = o.nodes;
      auto sc = dynres::sim::apply_shares(jobs, so);
      note = "dropped: " + std::to_string(tr.dropped_too_large) + " larger than the machine, " +
             std::to_string(tr.dropped_invalid) + " without run time or size";
      if (fraction > 0 || moldable > 0)
        note += "; malleable: " + std::to_string(sc.malleable) + ", moldable: " + std::to_string(sc.moldable);
    }
    if (!corridor.empty()) o.corridor = dynres::sim::read_corridor(corridor);
    if ((!power_csv.empty() || !power_plot.empty()) && o.corridor.empty())
      throw std::runtime_error("--power-csv and --power-plot need a corridor (--corridor FILE or a power-* workload)");
    if (scale != 1 && workload != "esp" && !dynres::sim::is_power_workload(workload))
      throw std::runtime_error("--time-scale applies to the esp and power-* workloads only");
    dynres::sim::keep_first(jobs, first);
    if (print_jobs) {  // id name submit kind req min max runtime serial time_limit min_power max_power
      std::printf("# job\tid\tname\tsubmit_s\tkind\tnodes\tmin\tmax\truntime_s\tserial\ttime_limit_s\tmin_W\tmax_W\n");
      for (auto& j : jobs)
        std::printf("job\t%lld\t%s\t%.6g\t%s\t%d\t%d\t%d\t%.6g\t%.6g\t%.0f\t%.6g\t%.6g\n", static_cast<long long>(j.id),
                    j.name.c_str(), j.submit, j.kind == dynres::sched::JobKind::malleable ? "malleable"
                                              : j.kind == dynres::sched::JobKind::moldable ? "moldable" : "rigid",
                    j.req_nodes, j.min_nodes, j.max_nodes, j.runtime, j.serial, j.time_limit, j.min_power, j.max_power);
      std::printf("# corridor\ttime_s\tlower_W\tupper_W\n");
      for (auto& c : o.corridor) std::printf("corridor\t%.6g\t%.6g\t%.6g\n", c.t, c.lower, c.upper);
      std::printf("# nodes\t%d\tidle_watts\t%.6g\n", o.nodes, o.idle_watts);
      return 0;
    }
    o.keep_nodelists = !gantt.empty();
    if (notes) o.on_note = [](double t, const std::string& n) { std::fprintf(stderr, "mjsim: t = %.3f s: %s\n", t, n.c_str()); };
    if ((progress || ::isatty(2)) && !quiet)
      o.progress = [](size_t done, size_t total, double now) {
        std::fprintf(stderr, "\rmjsim: %zu/%zu jobs done, t = %.0f s   ", done, total, now);
        if (done == total) std::fprintf(stderr, "\n");
      };
    auto r = dynres::sim::simulate(std::move(jobs), o);
    if (!csv.empty()) dynres::sim::write_jobs_csv(csv, r);
    if (!power_csv.empty()) dynres::sim::write_power_csv(power_csv, r);
    if (!power_plot.empty())
      dynres::write_power_png(power_plot, r.power,
                              "mjsim " + policy + (policy == "power" ? std::string(" (") + dynres::sched::to_string(o.policy.power_mode) + ")" : std::string()) +
                                  ": " + workload + " — " + std::to_string(r.violations) + " violations");
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
      if (is_swf) j["moldable_fraction"] = moldable;
      j["seed"] = seed;
      if (r.power_tracked && o.policy.policy == dynres::sched::Policy::power)
        j["power"]["mode"] = dynres::sched::to_string(o.policy.power_mode);
      if (r.power_tracked) j["power"]["grace_s"] = o.grace;
      if (!note.empty()) j["note"] = note;
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << "policy                    " << policy << "\n" << dynres::render_metrics(r.metrics, o.nodes);
      std::printf("node-seconds held         %.0f\nmakespan lower bound      %.1f s\nscheduling passes         %zu\n",
                  r.work, r.lower_bound, r.passes);
      if (r.never_started) std::printf("never started             %zu\n", r.never_started);
      if (r.power_tracked)
        std::printf("corridor violations       %d (breaks: %d; episodes within the grace: %d)\n"
                    "above / below corridor    %.0f / %.0f W s\n"
                    "draw while jobs ran       %.0f - %.0f W (modelled)\n",
                    r.violations, r.breaks, r.corrected, r.above_ws, r.below_ws, r.min_draw, r.max_draw);
      if (!note.empty()) std::cout << note << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mjsim: error: " << e.what() << "\n";
    return 1;
  }
}
