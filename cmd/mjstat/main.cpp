// mjstat — queue, job details, history and workload metrics (mjstat(1)).
#include <CLI/CLI.hpp>
#include <iostream>

#include "dynres/jobspec.hpp"
#include "dynres/metrics.hpp"
#include "dynres/paths.hpp"
#include "dynres/proto.hpp"
#include "dynres/views.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Show the dynres queue (like squeue), one job in detail, finished jobs, or workload metrics.",
               "mjstat"};
  std::string home, format = dynres::default_format(), gantt;
  int64_t job = 0;
  bool json = false, history = false, metrics = false, summary = false;
  double tau = 10, time_scale = 1;
  app.add_option("--home", home, "cluster directory (default: $DYNRES_HOME)");
  app.add_option("-j,--job", job, "show this job in detail");
  app.add_flag("--history", history, "include finished jobs");
  app.add_flag("--metrics", metrics, "workload metrics: makespan, utilisation, wait, response, bounded slowdown");
  app.add_option("--tau", tau, "bounded-slowdown threshold in seconds")->check(CLI::PositiveNumber);
  app.add_option("--time-scale", time_scale,
                 "metrics of a time-scaled run: report times divided by this factor (e.g. 0.02)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--summary", summary, "one line: jobs done, running, pending");
  app.add_option("--gantt", gantt, "write a Gantt chart of all allocations to this PNG file (gnuplot)");
  app.add_option("-o,--format", format, "columns, comma separated: jobid,name,state,nodes,time,timelimit,nodelist,"
                                        "reason,kind,minnodes,maxnodes,constraint,submit,start,end,exitcode,wait");
  app.add_flag("--json", json, "print JSON");
  CLI11_PARSE(app, argc, argv);
  try {
    home = dynres::cluster_home(home);
    dynres::State st(dynres::state_path(home));
    double now = dynres::now_seconds();
    if (job) {
      auto j = st.job(job);
      if (!j) {
        std::cerr << "mjstat: error: invalid job id " << job << "\n";
        return 1;
      }
      std::cout << (json ? dynres::job_to_json(*j).dump(2) + "\n" : dynres::render_detail(*j, now));
      return 0;
    }
    if (!gantt.empty()) {
      std::vector<std::string> order;
      for (auto& n : st.nodes()) order.push_back(n.name);
      dynres::write_gantt_png(gantt, st.allocations(), order, "dynres Gantt chart: " + home);
      std::cerr << "mjstat: wrote " << gantt << "\n";
      if (!metrics && !summary) return 0;
    }
    if (metrics) {
      auto jobs = st.jobs();
      auto allocs = st.allocations();
      if (time_scale != 1) dynres::rescale_times(jobs, allocs, 1 / time_scale);
      auto m = dynres::compute_metrics(jobs, allocs, static_cast<int>(st.nodes().size()), tau,
                                       dynres::resize_events(st));
      std::cout << (json ? dynres::to_json(m).dump(2) + "\n"
                         : dynres::render_metrics(m, static_cast<int>(st.nodes().size())));
      return 0;
    }
    if (summary) {
      auto all = st.jobs();
      if (json) {
        nlohmann::json o = {{"jobs", all.size()}};
        std::map<std::string, int> c;
        for (auto& j : all) c[j.state]++;
        o["by_state"] = c;
        auto ping = dynres::proto::request(dynres::sched_socket(home), {{"op", "ping"}}, 500);
        o["scheduler"] = ping ? *ping : nlohmann::json(nullptr);
        std::cout << o.dump() << "\n";
      } else {
        std::cout << dynres::render_summary(all) << "\n";
      }
      return 0;
    }
    auto jobs = history ? st.jobs() : st.jobs({dynres::kRunning, dynres::kPending});
    if (json) {
      nlohmann::json arr = nlohmann::json::array();
      for (auto& j : jobs) arr.push_back(dynres::job_to_json(j));
      std::cout << nlohmann::json{{"jobs", arr}}.dump(2) << "\n";
    } else {
      std::cout << dynres::render_table(jobs, format, now);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mjstat: error: " << e.what() << "\n";
    return 1;
  }
}
