// mjcontrol — hold, release, show and resize jobs, like scontrol (mjcontrol(1)).
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <map>

#include "dynres/hostlist.hpp"
#include "dynres/jobsel.hpp"
#include "dynres/jobspec.hpp"
#include "dynres/paths.hpp"
#include "dynres/proto.hpp"
#include "dynres/views.hpp"
#include "dynres/requests.hpp"
#include "dynres/resize_store.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Hold, release or show dynres jobs (like scontrol).", "mjcontrol"};
  std::string home, hold_ids, release_ids, show_what, show_id;
  bool json = false;
  app.add_option("--home", home, "cluster directory (default: $DYNRES_HOME)");
  app.add_flag("--json", json, "show: print JSON");
  auto* hold = app.add_subcommand("hold", "hold pending jobs: they are not scheduled until released");
  hold->add_option("job_ids", hold_ids, "job ids, comma separated")->required();
  auto* release = app.add_subcommand("release", "release held jobs");
  release->add_option("job_ids", release_ids, "job ids, comma separated")->required();
  std::string upd_what, upd_nodes;
  std::vector<std::string> upd_settings;
  auto* update = app.add_subcommand(
      "update", "change nodes: update node NODELIST|ALL cpus=N | state=down|drain|resume [reason=\"...\"]");
  update->add_option("entity", upd_what, "what to change: node")->required()->check(CLI::IsMember({"node", "nodes"}));
  update->add_option("nodelist", upd_nodes, "nodes, e.g. n[1-4], or ALL")->required();
  update->add_option("settings", upd_settings,
                     "cpus=N (CPUs per node) or state=down|drain|resume with reason=TEXT (needed for down and drain)")
      ->required();
  auto* show = app.add_subcommand("show", "show jobs in detail: show job [ID]");
  show->add_option("entity", show_what, "what to show: job")->required()->check(CLI::IsMember({"job", "jobs"}));
  show->add_option("job_id", show_id, "job id (default: every pending or running job)");
  int64_t rs_job = 0;
  int rs_nodes = 0;
  double rs_wait = -1;
  auto* rsz = app.add_subcommand("resize", "order a running malleable job to N nodes: resize JOBID N [--wait S]");
  rsz->add_option("job_id", rs_job, "the job (running, registered as malleable)")->required()->check(CLI::PositiveNumber);
  rsz->add_option("nodes", rs_nodes, "its new node count")->required()->check(CLI::Range(1, 1000000));
  bool rs_count = false;
  rsz->add_flag("--job-chooses", rs_count, "a shrink names only the count; the job chooses which nodes (preShrink)");
  rsz->add_option("--wait", rs_wait, "wait up to S seconds for the job to commit or the order to be rolled back")
      ->check(CLI::Range(0.0, 86400.0));
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  try {
    home = dynres::cluster_home(home);
    std::map<std::string, std::string> set;  // update node: Slurm's keys and states are case-insensitive
    if (update->parsed()) {
      for (auto& kv : upd_settings) {
        auto eq = kv.find('=');
        std::string key = kv.substr(0, eq);
        for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (eq == std::string::npos ||
            (key != "cpus" && key != "state" && key != "reason" && key != "realmemory" && key != "gres"))
          throw std::invalid_argument("update node: unknown setting '" + kv +
                                      "' (cpus=N, state=down|drain|resume, reason=TEXT, realmemory=MB, gres=gpu:N)");
        if (set.count(key)) throw std::invalid_argument("update node: " + key + "= given twice");
        set[key] = kv.substr(eq + 1);
      }
      if (set.count("state")) {
        if (set.count("cpus")) throw std::invalid_argument("update node: cpus= and state= go in separate commands");
        std::string state = set["state"];
        for (auto& c : state) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (state != "down" && state != "drain" && state != "resume")
          throw std::invalid_argument("update node: invalid state '" + set["state"] + "' (down, drain or resume)");
        if (state != "resume" && set["reason"].empty())
          throw std::invalid_argument("update node: state=" + state + " needs a reason (reason=\"...\")");
        // the daemon checks who asks (SO_PEERCRED) and changes the state file
        auto r = dynres::proto::request(dynres::sched_socket(home),
                                        {{"op", "update_node"}, {"nodes", upd_nodes}, {"state", state},
                                         {"reason", set["reason"]}},
                                        5000);
        if (!r) throw std::runtime_error("update node: mjsched does not answer on " + dynres::sched_socket(home));
        if (r->contains("error")) throw std::runtime_error((*r)["error"].get<std::string>());
        for (auto& n : (*r)["nodes"])
          std::cout << "mjcontrol: node " << n["name"].get<std::string>() << ": " << n["from"].get<std::string>()
                    << " -> " << n["to"].get<std::string>() << "\n";
        return 0;
      }
    }
    if (rsz->parsed()) {
      dynres::State st(dynres::state_path(home));
      uint64_t id = dynres::resize::request_resize(home, rs_job, rs_nodes, rs_count);
      auto o = dynres::resize::order(st, id);
      std::cout << "mjcontrol: job " << rs_job << ": " << (o ? dynres::resize::to_string(o->order.kind) : "resize")
                << " order " << id << " sent (" << (o ? o->from : 0) << " -> " << rs_nodes << " nodes)\n";
      if (rs_wait < 0) return 0;
      auto done = dynres::resize::wait_settled(st, id, rs_wait);
      if (!done) {
        std::cout << "mjcontrol: job " << rs_job << ": order " << id << " still outstanding after " << rs_wait << " s\n";
        return 2;
      }
      if (done->state == "committed") {
        std::printf("mjcontrol: job %lld: order %llu committed after %.3f s\n", (long long)rs_job,
                    (unsigned long long)id, done->settled - done->order.sent);
        return 0;
      }
      std::cout << "mjcontrol: job " << rs_job << ": order " << id << " rolled back: " << done->reason << "\n";
      return 1;
    }
    if (update->parsed()) {
      if (set.count("reason")) throw std::invalid_argument("update node: reason= goes with state=");
      if (set.count("realmemory") || set.count("gres")) {  // as slurm.conf's RealMemory (MB) and Gres=gpu:N
        if (set.size() > 1) throw std::invalid_argument("update node: realmemory= and gres= go in separate commands");
        const std::string key = set.begin()->first, val = set.begin()->second;
        std::string num = val;
        if (key == "gres") {
          if (val.rfind("gpu:", 0) != 0 && val != "none")
            throw std::invalid_argument("update node: invalid gres '" + val + "' (gpu:N or none)");
          num = val == "none" ? "0" : val.substr(4);
        }
        if (num.empty() || num.size() > 12 || num.find_first_not_of("0123456789") != std::string::npos)
          throw std::invalid_argument("update node: invalid " + key + " '" + val + "' (a whole number >= 0)");
        std::vector<std::string> names;
        if (upd_nodes != "ALL" && upd_nodes != "all") names = dynres::expand_hostlist(upd_nodes);
        // owner-or-root is checked by mjsched (dynres/requests.hpp)
        return dynres::schedd::print_reply(
            "mjcontrol", dynres::schedd::call_scheduler(home, {{"op", "node_resource"},
                                                              {"nodes", names},
                                                              {"resource", key == "gres" ? "gpus" : "mem_mb"},
                                                              {"value", std::stoll(num)}}));
      }
      std::string val = set["cpus"];
      if (val.empty() || val.size() > 6 || val.find_first_not_of("0123456789") != std::string::npos || std::stoi(val) < 1)
        throw std::invalid_argument("update node: invalid CPU count '" + val + "' (a whole number >= 1)");
      std::vector<std::string> names;
      if (upd_nodes != "ALL" && upd_nodes != "all") names = dynres::expand_hostlist(upd_nodes);
      // owner-or-root is checked by mjsched (dynres/requests.hpp)
      return dynres::schedd::print_reply(
          "mjcontrol", dynres::schedd::call_scheduler(home, {{"op", "node_cpus"}, {"nodes", names}, {"cpus", std::stoi(val)}}));
    }
    if (show->parsed()) {
      dynres::State st(dynres::state_path(home));
      std::vector<dynres::JobRecord> jobs;
      if (!show_id.empty()) {
        for (auto id : dynres::parse_id_list(show_id)) {
          auto j = st.job(id);
          if (!j) throw std::invalid_argument("invalid job id " + std::to_string(id));
          jobs.push_back(*j);
        }
      } else {
        jobs = dynres::select_jobs(st, {});
      }
      double now = dynres::now_seconds();
      for (auto& j : jobs) std::cout << (json ? dynres::job_to_json(j).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n" : dynres::render_detail(j, now) + "\n");
      return 0;
    }
    const bool h = hold->parsed();
    // all or nothing, checked by mjsched as the kernel says we are
    return dynres::schedd::print_reply(
        "mjcontrol", dynres::schedd::call_scheduler(home, {{"op", h ? "hold" : "release"}, {"ids", h ? hold_ids : release_ids}}));
  } catch (const std::exception& e) {
    std::cerr << "mjcontrol: error: " << e.what() << "\n";
    return 1;
  }
}
