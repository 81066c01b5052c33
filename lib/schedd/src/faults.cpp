// mjsched's reaction to node states (node_watch.hpp): lost nodes set DOWN,
// malleable jobs shrunk away from DOWN or DRAIN nodes (in place, or run
// again on the remaining nodes from their last checkpoint when the failure
// took their listener), other jobs on DOWN nodes ended as node failures
// (requeue or NODE_FAIL, as Slurm).
#include <signal.h>
#include <sys/socket.h>

#include <cstdio>
#include <ctime>

#include "dynres/hostlist.hpp"
#include "dynres/launch.hpp"
#include "dynres/node_health.hpp"
#include "dynres/paths.hpp"
#include "dynres/schedd.hpp"
#include "expand_after.hpp"
#include "node_watch.hpp"
#include "resize_server.hpp"

namespace dynres::schedd {

void daemon_log(const std::string& msg) {
  char ts[32];
  time_t t = time(nullptr);
  strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", localtime(&t));
  std::fprintf(stderr, "%s mjsched: %s\n", ts, msg.c_str());
  std::fflush(stderr);
}

NodeWatch& Daemon::node_watch() {
  if (!nodes_) nodes_ = std::make_unique<NodeWatch>(cfg.node_timeout, now_seconds(), daemon_log);
  return *nodes_;
}

void Daemon::react_to_nodes() {
  State& st = state();
  double now = now_seconds();
  node_watch().sweep(st, now);
  bool any = false;
  for (auto& n : st.nodes()) any = any || (n.state != "up" && n.job_id);
  if (!any) return;
  std::vector<int64_t> node_ids;
  auto snap = build_snapshot(st, now, node_ids);
  resizer().annotate(snap, now);
  expand_after().annotate(snap);  // nodes kept for a swap or a replacement are not idle
  auto r = sched::react_to_nodes(snap);
  auto fail = [&](int64_t job, const std::vector<int>& lost) {
    std::vector<std::string> names;
    for (int i : lost) names.push_back(snap.nodes.at(i).name);
    std::string nl = compress_hostlist(names);
    if (!st.mark_node_fail(job, nl, now)) return;
    auto j = st.job(job);
    daemon_log("job " + std::to_string(job) + ": lost node(s) " + nl + ": " +
         (j && j->requeue ? "stopped, to be requeued" : "stopped, to end NODE_FAIL"));
    if (j && launch::supervisor_alive(j->supervisor_pid.value_or(0), job))
      ::kill(static_cast<pid_t>(*j->supervisor_pid), SIGTERM);  // the supervisor stops the step; its end is the node failure
  };
  for (auto& s : r.shrinks) {
    std::vector<std::string> names;
    bool lost = false;
    for (int i : s.nodes) names.push_back(snap.nodes.at(i).name), lost = lost || snap.nodes.at(i).lost;
    std::string why;
    if (auto id = resizer().shrink_away(st, s.job, names, now, &why)) {
      daemon_log("job " + std::to_string(s.job) + ": shrink away from " + (lost ? "lost" : "drained") + " node(s) " +
           compress_hostlist(names) + " (order " + std::to_string(*id) + ")");
      shrink_why_.erase(s.job);
      continue;
    }
    if (lost) {  // the job cannot be told: it is a failure like any other
      std::vector<int> gone;
      for (int i : s.nodes)
        if (snap.nodes.at(i).lost) gone.push_back(i);
      daemon_log("job " + std::to_string(s.job) + ": cannot shrink away from a lost node: " + why);
      fail(s.job, gone);
    } else if (shrink_why_[s.job] != why) {  // a drain waits; logged once per reason
      daemon_log("job " + std::to_string(s.job) + ": drain: shrink not ordered: " + why);
      shrink_why_[s.job] = why;
    }
  }
  for (size_t k = 0; k < r.restarts.size(); ++k) {
    const auto& s = r.restarts[k];
    std::vector<std::string> names;
    std::vector<int> gone;
    for (int i : s.nodes) {
      names.push_back(snap.nodes.at(i).name);
      if (snap.nodes.at(i).lost) gone.push_back(i);
    }
    std::string why;
    bool fresh = false;
    auto id = resizer().restart_away(st, s.job, names, now, &fresh, &why);
    if (!id) {
      daemon_log("job " + std::to_string(s.job) + ": cannot restart away from a lost node: " + why);
      fail(s.job, gone);
      continue;
    }
    if (!fresh) continue;  // restarting already
    daemon_log("job " + std::to_string(s.job) + ": lost node(s), its listener gone: runs again without " +
               compress_hostlist(names) + " from its last checkpoint (restart order " + std::to_string(*id) + ")");
    // idle nodes in the lost ones' place: once the restart committed, the
    // job is expanded onto them and keeps its size (one expand per node)
    const auto& repl = r.replacements.at(k);
    if (!repl.empty()) {
      std::vector<std::string> with_names;
      for (int i : repl) with_names.push_back(snap.nodes.at(i).name);
      const std::string with = compress_hostlist(with_names), from = compress_hostlist(names);
      expand_after().add(st, s.job, {*id, with_names, "replace", from});
      daemon_log("job " + std::to_string(s.job) + ": " + with + " kept to take the place of " + from + " after order " +
                 std::to_string(*id));
      st.event(now, s.job, "replace", "lost=" + from + " with=" + with + " order=" + std::to_string(*id));
    }
    // the supervisor stops what is left of this run (MPI ranks on the other
    // nodes may wait forever for the lost ones) and runs the script again
    auto j = st.job(s.job);
    if (j && launch::supervisor_alive(j->supervisor_pid.value_or(0), s.job))
      ::kill(static_cast<pid_t>(*j->supervisor_pid), SIGUSR1);
  }
  for (auto& f : r.failures) fail(f.job, f.lost);
}

bool Daemon::serve_node_request(int c, const std::string& op, const proto::json& m, bool& wake, bool* handled) {
  *handled = op == "node_hello" || op == "update_node";
  if (!*handled) return false;
  ucred cr{};
  socklen_t len = sizeof cr;
  if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
    proto::send_frame(c, {{"error", "cannot identify the peer"}});
    return false;
  }
  wake = true;
  if (op == "node_hello") {
    node_watch().adopt(state(), c, m, cr.uid, cr.pid, cfg.node_heartbeat, now_seconds());
    return true;  // kept, or closed by adopt
  }
  auto reply = update_node_request(state(), cr.uid, m, now_seconds());
  if (reply.contains("nodes"))
    for (auto& n : reply["nodes"])
      daemon_log("node " + n["name"].get<std::string>() + ": " + n["from"].get<std::string>() + " -> " +
           n["to"].get<std::string>() + " (by uid " + std::to_string(cr.uid) + ")");
  proto::send_frame(c, reply);
  return false;
}

}  // namespace dynres::schedd
