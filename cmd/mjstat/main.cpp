// mjstat — queue, job details, history and workload metrics (mjstat(1)).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <ctime>
#include <iostream>
#include <set>
#include <thread>

#include "dynres/config.hpp"
#include "dynres/jobsel.hpp"
#include "dynres/jobspec.hpp"
#include "dynres/metrics.hpp"
#include "dynres/paths.hpp"
#include "dynres/proto.hpp"
#include "dynres/resize_store.hpp"
#include "dynres/schedd.hpp"
#include "dynres/slow_events.hpp"
#include "dynres/views.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Show the dynres queue (like squeue), one job in detail, finished jobs, or workload metrics.",
               "mjstat"};
  app.set_help_flag("--help", "print this help and exit");
  std::string home, format, gantt, jobs_opt, users, states;
  bool json = false, history = false, metrics = false, summary = false, me = false, noheader = false,
       long_fmt = false, start = false;
  double tau = 10, time_scale = 1, iterate = 0;
  app.add_option("--home", home, "cluster directory (default: $DYNRES_HOME)");
  app.add_option("-j,--jobs", jobs_opt, "job ids, comma separated; a single id shows that job in detail");
  app.add_option("-u,--user", users, "only jobs of these users (names or uids, comma separated)");
  app.add_flag("--me", me, "only my jobs (same as -u $USER)");
  app.add_option("-t,--states", states,
                 "only jobs in these states, comma separated: PD,R,CD,F,CA,TO,NF or long names, or all");
  app.add_flag("--history", history, "include finished jobs");
  app.add_flag("-h,--noheader", noheader, "no header line");
  app.add_flag("-l,--long", long_fmt, "more columns: jobid,name,user,state,time,timelimit,nodes,nodelist");
  app.add_flag("--start", start, "pending jobs with their expected start time (the policy replayed on time limits)");
  app.add_option("-i,--iterate", iterate, "repeat the queue every SECONDS seconds (live view)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--metrics", metrics, "workload metrics: makespan, utilisation, wait, response, bounded slowdown");
  app.add_option("--tau", tau, "bounded-slowdown threshold in seconds")->check(CLI::PositiveNumber);
  app.add_option("--time-scale", time_scale,
                 "metrics of a time-scaled run: report times divided by this factor (e.g. 0.02)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--summary", summary, "one line: jobs done, running, pending");
  app.add_option("--gantt", gantt, "write a Gantt chart of all allocations to this PNG file (gnuplot)");
  app.add_option("-o,--format", format,
                 "columns, comma separated (jobid,name,user,state,st,nodes,time,timelimit,nodelist,reason,kind,"
                 "minnodes,maxnodes,constraint,submit,start,end,exitcode,wait), or squeue % codes "
                 "(%i %j %u %T %t %M %l %D %R %N %r %V %S %e, e.g. \"%.8i %10j %T\")");
  app.add_flag("--json", json, "print JSON");
  bool nodes_view = false;
  app.add_flag("-N,--nodes", nodes_view,
               "the nodes, like sinfo -N -l: state (idle, allocated, draining, drained, down), CPUs, job, reason");
  CLI11_PARSE(app, argc, argv);
  try {
    home = dynres::cluster_home(home);
    dynres::State st(dynres::state_path(home));
    double now = dynres::now_seconds();
    if (nodes_view) {
      for (;;) {
        auto nodes = st.nodes();
        auto ic = dynres::icheck_nodes_view(st);  // nodes the checkpoint service holds
        std::cout << (json ? dynres::nodes_to_json(nodes, ic).dump(2) + "\n" : dynres::render_nodes(nodes, !noheader, ic));
        if (iterate <= 0) return 0;
        std::cout << "\n" << std::flush;
        std::this_thread::sleep_for(std::chrono::duration<double>(iterate));
      }
    }
    dynres::JobFilter filter;
    std::vector<int64_t> ids;
    if (!jobs_opt.empty()) ids = dynres::resolve_job_refs(st, jobs_opt);
    if (ids.size() == 1 && jobs_opt.find_first_of(",_") == std::string::npos && users.empty() && !me &&
        states.empty() && !start) {  // one job in detail
      auto j = st.job(ids[0]);
      if (!j) {
        std::cerr << "mjstat: error: invalid job id " << ids[0] << "\n";
        return 1;
      }
      if (json) {
        auto o = dynres::job_to_json(*j);
        o["malleable"] = dynres::resize::detail_json(st, j->id);  // protocol phase, MTCT, orders
        std::cout << o.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      } else {
        std::cout << dynres::render_detail(*j, now) << dynres::resize::render_detail(st, j->id);
      }
      return 0;
    }
    filter.ids.insert(ids.begin(), ids.end());
    if (!users.empty())
      for (auto u : dynres::parse_user_list(users)) filter.uids.insert(u);
    if (me) filter.uids.insert(static_cast<int64_t>(::getuid()));
    if (!states.empty())
      for (auto& s : dynres::parse_state_list(states)) filter.states.insert(s);
    if (start) filter.states = {dynres::kPending};
    if (!gantt.empty()) {
      std::vector<std::string> order;
      for (auto& n : st.nodes()) order.push_back(n.name);
      auto allocs = st.allocations();
      auto lent = dynres::icheck_allocations(st, dynres::now_seconds());  // iCheck's own colour
      allocs.insert(allocs.end(), lent.begin(), lent.end());
      dynres::write_gantt_png(gantt, allocs, order, "dynres Gantt chart: " + home);
      std::cerr << "mjstat: wrote " << gantt << "\n";
      if (!metrics && !summary) return 0;
    }
    if (metrics) {
      auto jobs = st.jobs();
      auto allocs = st.allocations();
      if (time_scale != 1) dynres::rescale_times(jobs, allocs, 1 / time_scale);
      auto m = dynres::compute_metrics(jobs, allocs, static_cast<int>(st.nodes().size()), tau,
                                       dynres::resize_events(st));
      std::cout << (json ? dynres::to_json(m).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"
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
        std::cout << o.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      } else {
        std::cout << dynres::render_summary(all) << "\n";
      }
      return 0;
    }
    if (format.empty())
      format = start ? "jobid,name,user,st,start,nodes,nodelist" : long_fmt ? dynres::long_format() : dynres::default_format();
    dynres::render_table({}, format, now);  // reject a bad --format before any output
    for (;;) {
      now = dynres::now_seconds();
      auto jobs = dynres::select_jobs(st, filter, history);
      if (history) {  // a requeued job's failed attempts, each a row of its own (sacct --duplicates)
        std::map<int64_t, std::vector<dynres::JobRecord>> extra;
        for (auto& a : st.attempts()) {
          auto j = st.job(a.job_id);
          if (!j) continue;
          j->state = a.state, j->start_time = a.start_time, j->end_time = a.end_time;
          j->num_nodes = a.num_nodes, j->nodelist = a.nodelist, j->reason = a.reason, j->exit_code.reset();
          if (filter.matches(*j)) extra[a.job_id].push_back(*j);
        }
        if (!extra.empty()) {
          std::vector<dynres::JobRecord> all;
          for (auto& j : jobs) {
            if (extra.count(j.id)) all.insert(all.end(), extra[j.id].begin(), extra[j.id].end()), extra.erase(j.id);
            all.push_back(j);
          }
          for (auto& [id, v] : extra) all.insert(all.end(), v.begin(), v.end());
          jobs.swap(all);
        }
      }
      if (start) {  // expected start times, shown in the start column
        auto cfg = dynres::load_config(dynres::config_path(home));
        std::vector<int64_t> node_ids;
        auto exp = dynres::schedd::expected_starts(dynres::schedd::build_snapshot(st, now, node_ids), cfg.policy);
        for (auto& j : jobs) {
          auto it = exp.find(j.id);
          if (it != exp.end()) j.start_time = it->second;
        }
      }
      if (json) {
        nlohmann::json arr = nlohmann::json::array();
        for (auto& j : jobs) {
          auto o = dynres::job_to_json(j);
          if (start) o["expected_start_time"] = j.start_time ? nlohmann::json(*j.start_time) : nlohmann::json(nullptr);
          arr.push_back(o);
        }
        nlohmann::json o{{"jobs", arr}};
        if (history) {
          // slow nodes found and jobs migrated off them (mjsched(8) SLOW NODES)
          std::set<int64_t> shown;
          for (auto& j : jobs) shown.insert(j.id);
          o["migrations"] = dynres::migration_events_json(dynres::migration_events(st, shown));
          // the checkpoint service's requests, grants and reclaims
          o["icheck_events"] = nlohmann::json::array();
          for (auto& e : dynres::icheck_events(st))
            o["icheck_events"].push_back({{"time", e.time}, {"kind", e.kind}, {"detail", e.detail}});
        }
        std::cout << o.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      } else {
        if (iterate > 0) {
          time_t t = static_cast<time_t>(now);
          char b[64];
          std::strftime(b, sizeof b, "%a %b %d %H:%M:%S %Y", std::localtime(&t));
          std::cout << b << "\n";
        }
        std::cout << dynres::render_table(jobs, format, now, !noheader);
        if (history) {
          std::set<int64_t> shown;
          for (auto& j : jobs) shown.insert(j.id);
          std::cout << dynres::render_migration_events(dynres::migration_events(st, shown));
        }
        if (history && !noheader) {  // after the jobs: iCheck's requests, grants and reclaims
          auto ev = dynres::icheck_events(st);
          if (!ev.empty()) std::cout << "\n" << dynres::render_icheck_events(ev);
        }
      }
      if (iterate <= 0) return 0;
      std::cout << std::flush;
      std::this_thread::sleep_for(std::chrono::duration<double>(iterate));
      std::cout << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "mjstat: error: " << e.what() << "\n";
    return 1;
  }
}
