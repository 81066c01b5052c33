// mjworkload — print benchmark workloads (ESP of [John24 Table 9.1]) as TSV
// or JSON, for share/dynres/esp and the simulator.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "dynres/sim.hpp"
#include "dynres/workload.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Generate benchmark workloads for dynres.", "mjworkload"};
  app.require_subcommand(1);
  auto* esp = app.add_subcommand("esp", "ESP benchmark [John24 Table 9.1]: 230 jobs, 14 types");
  dynres::workload::EspOptions o;
  bool json = false;
  esp->add_option("--nodes", o.nodes, "system size N")->check(CLI::PositiveNumber);
  esp->add_option("--seed", o.seed, "seed of the submission order");
  esp->add_option("--scale", o.scale, "time-scale factor for runtimes, limits and the 30 s interval")
      ->check(CLI::PositiveNumber);
  esp->add_option("--interval", o.interval, "seconds between submissions before scaling");
  esp->add_option("--moldable-fraction", o.moldable_fraction, "probability that a job is moldable")
      ->check(CLI::Range(0.0, 1.0));
  esp->add_option("--serial-fraction", o.serial_fraction, "Amdahl serial fraction of the emulated application")
      ->check(CLI::Range(0.0, 1.0));
  esp->add_option("--limit-factor", o.limit_factor, "time limit = factor x runtime at the smallest size")
      ->check(CLI::Range(1.0, 100.0));
  double malleable_fraction = 0;
  esp->add_option("--malleable-fraction", malleable_fraction,
                  "probability that a job (not Z) is malleable, chosen as mjsim does (same seed, same jobs)")
      ->check(CLI::Range(0.0, 1.0));
  esp->add_flag("--json", json, "JSON instead of TSV");
  CLI11_PARSE(app, argc, argv);
  try {
    auto jobs = dynres::workload::esp_workload(o);
    // malleable jobs, their ranges and time limits exactly as mjsim's ESP
    // workload (lib/sim esp_jobs: same seed, own random stream)
    std::vector<bool> malleable(jobs.size(), false);
    if (malleable_fraction > 0) {
      auto sim = dynres::sim::esp_jobs(o.nodes, malleable_fraction, o.seed, o.scale);
      for (auto& sj : sim) {
        size_t k = static_cast<size_t>(sj.id - 1);  // id = seq + 1
        if (k >= jobs.size() || sj.kind != dynres::sched::JobKind::malleable) continue;
        malleable[k] = true;
        jobs[k].moldable = false;
        jobs[k].min_nodes = sj.min_nodes;
        jobs[k].max_nodes = sj.max_nodes;
        jobs[k].time_limit = static_cast<int64_t>(sj.time_limit);
      }
    }
    if (json) {
      nlohmann::json a = nlohmann::json::array();
      for (auto& j : jobs)
        a.push_back({{"seq", j.seq}, {"name", j.name}, {"type", std::string(1, j.type)},
                     {"submit_offset_s", j.submit_offset}, {"nodes", j.nodes}, {"min_nodes", j.min_nodes},
                     {"max_nodes", j.max_nodes}, {"moldable", j.moldable}, {"malleable", bool(malleable[a.size()])},
                     {"constraint", dynres::sched::to_string(j.constraint)}, {"runtime_s", j.runtime},
                     {"time_limit_s", j.time_limit}});
      std::cout << nlohmann::json{{"workload", "esp"}, {"nodes", o.nodes}, {"scale", o.scale}, {"seed", o.seed},
                                  {"serial_fraction", o.serial_fraction}, {"jobs", a}}
                       .dump(1)
                << "\n";
    } else {
      std::cout << "#seq\tname\ttype\tsubmit_offset_s\tnodes\tmin_nodes\tmax_nodes\tmoldable\tconstraint\truntime_s"
                   "\ttime_limit_s\tmalleable\n";
      for (size_t k = 0; k < jobs.size(); ++k) {
        auto& j = jobs[k];
        std::cout << j.seq << '\t' << j.name << '\t' << j.type << '\t' << j.submit_offset << '\t' << j.nodes << '\t'
                  << j.min_nodes << '\t' << j.max_nodes << '\t' << (j.moldable ? 1 : 0) << '\t'
                  << dynres::sched::to_string(j.constraint) << '\t' << j.runtime << '\t' << j.time_limit << '\t'
                  << (malleable[k] ? 1 : 0) << '\n';
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mjworkload: error: " << e.what() << "\n";
    return 1;
  }
}
