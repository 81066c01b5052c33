// iCheck controller: node liveness (heartbeats, grace periods), manager relaunch, lost agents.
#include "controller_impl.hpp"

namespace dynres::icheck::ctl {

void Controller::monitor(std::atomic<bool>* stop) {
  double last_dyn = wall();
  // A round that starts more than a heartbeat interval late (the controller
  // got no CPU, or waited that long for mu_) decides no loss: the managers'
  // heartbeats of that time may still wait to be accepted or served. The
  // next round decides, late or not.
  const auto half = std::chrono::milliseconds(int(cfg_.heartbeat_interval * 500));
  auto last_round = std::chrono::steady_clock::now();
  bool skipped = false;
  while (!*stop) {
    std::this_thread::sleep_for(half);
    try {
      std::unique_lock<std::mutex> g(mu_);
      tl_lock_ = &g;  // network calls of retire_superseded() release it
      struct Clear {
        ~Clear() { tl_lock_ = nullptr; }
      } clear;
      const auto now = std::chrono::steady_clock::now();
      const double gap = std::chrono::duration<double>(now - last_round).count();
      last_round = now;
      const bool may_lose = gap <= 1.5 * cfg_.heartbeat_interval || skipped;
      skipped = !may_lose;
      if (!may_lose)
        std::fprintf(stderr, "icheckd controller: monitor ran %.1f s late: no node is judged lost this round\n",
                     gap - 0.5 * cfg_.heartbeat_interval);
      check_epoch();
      check_nodes(may_lose);
      retire_superseded();
      if (wall() - last_dyn > dyn_.read_interval) {  // Listing 6.2 readInterval
        dyn_ = load_dynamic(cfg_.dynamic_file, cfg_.dyn);
        last_dyn = wall();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "icheckd controller: monitor: %s\n", e.what());
    }
  }
}

std::vector<std::string> Controller::nodes_where(const std::string& cond, double t) {
  Stmt q(*db_, "SELECT node FROM icheck_nodes WHERE " + cond);
  q.bind(1, t);
  std::vector<std::string> out;
  while (q.step()) out.push_back(q.text(0));
  return out;
}

void Controller::check_nodes(bool may_lose) {
  const double now = wall(), window = cfg_.heartbeat_interval * cfg_.heartbeat_misses;
  for (auto& n : may_lose ? nodes_where("state = 'up' AND last_heartbeat < ?", now - window)
                          : std::vector<std::string>{}) {
    std::pair<double, int64_t> seen{0, 0};
    {
      std::lock_guard<std::mutex> ag(arrived_mu_);
      if (auto it = arrived_.find(n); it != arrived_.end()) seen = it->second;
    }
    if (seen.first >= now - window) {  // its heartbeat arrived and waits to be served
      Stmt q(*db_, "SELECT epoch FROM icheck_nodes WHERE node = ?");
      q.bind(1, n);
      if (q.step() && q.i64(0) == seen.second) continue;
    }
    node_lost(n, "no heartbeat for " + secs(window));
  }
  std::vector<std::pair<pid_t, int>> done;
  {
    std::lock_guard<std::mutex> g(reaped_->mu);
    done.swap(reaped_->done);
  }
  for (auto& [pid, st] : done) {
    children_.erase(pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;  // a launcher that forked the manager off
    Stmt q(*db_, "SELECT node FROM icheck_nodes WHERE state = 'relaunching' AND relaunch_pid = ?");
    q.bind(1, int64_t(pid));
    if (!q.step()) continue;  // not (or no longer) the attempt in flight
    std::string n = q.text(0);
    q.reset();
    relaunch_failed(n, "the launch command (pid " + std::to_string(pid) + ") ended with " + describe_status(st));
  }
  for (auto& n : nodes_where("state = 'relaunching' AND relaunch_at < ?", now - window)) {
    abandon_attempt(n);
    relaunch_failed(n, "no heartbeat from the new manager within " + secs(window));
  }
  tx([&] {
    Stmt(*db_, "UPDATE icheck_nodes SET relaunches = 0 WHERE state = 'up' AND relaunches > 0 AND up_since < ?")
        .bind(1, now - cfg_.manager_relaunch_reset).run();
  });
}

void Controller::abandon_attempt(const std::string& n) {
  Stmt q(*db_, "SELECT relaunch_pid FROM icheck_nodes WHERE node = ?");
  q.bind(1, n);
  if (!q.step()) return;
  const pid_t pid = pid_t(q.i64(0));
  if (pid > 1 && children_.count(pid)) ::kill(-pid, SIGKILL);
}

void Controller::lose_agents(const std::string& n) {
  tx([&] {
    Stmt(*db_, "UPDATE icheck_apps SET needs_change = 1 WHERE id IN "
               "(SELECT app_id FROM icheck_agents WHERE node = ? AND state = 'up')")
        .bind(1, n).run();
    Stmt(*db_, "UPDATE icheck_agents SET state = 'lost' WHERE node = ? AND state = 'up'").bind(1, n).run();
    // retiring and prepared agents exit with their manager too: nothing counts on them
    Stmt(*db_, "UPDATE icheck_agents SET state = 'gone' WHERE node = ? AND state IN ('retiring','prepared')").bind(1, n).run();
  });
}

void Controller::mark_node_down(const std::string& n) {
  std::fprintf(stderr, "icheckd controller: node %s: down\n", n.c_str());
  tx([&] {
    Stmt(*db_, "UPDATE icheck_nodes SET state = 'down' WHERE node = ?").bind(1, n).run();
    lose_agents(n);
  });
}

void Controller::node_lost(const std::string& n, const std::string& why) {
  std::fprintf(stderr, "icheckd controller: node %s: manager lost (%s)\n", n.c_str(), why.c_str());
  lose_agents(n);
  relaunch_or_down(n);
}

void Controller::relaunch_failed(const std::string& n, const std::string& why) {
  std::fprintf(stderr, "icheckd controller: node %s: relaunch failed: %s\n", n.c_str(), why.c_str());
  relaunch_or_down(n);
}

void Controller::relaunch_or_down(const std::string& n) {
  const std::string cmd = manager_launch_command(cfg_, n);
  int used = 0;
  {
    Stmt q(*db_, "SELECT relaunches FROM icheck_nodes WHERE node = ?");
    q.bind(1, n);
    if (q.step()) used = int(q.i64(0));
  }
  const int max = cfg_.manager_relaunch_attempts;
  while (!cmd.empty() && used < max) {
    ++used;
    try {
      pid_t pid = spawn_detached(cmd, (fs::path(cfg_.run_dir) / ("manager-" + n + ".log")).string(), reaped_);
      children_.insert(pid);
      record_pid("manager-" + n, pid);
      tx([&] {
        Stmt(*db_, "UPDATE icheck_nodes SET state = 'relaunching', relaunches = ?, relaunch_at = ?, relaunch_pid = ? "
                   "WHERE node = ?")
            .bind(1, used).bind(2, wall()).bind(3, int64_t(pid)).bind(4, n).run();
      });
      std::fprintf(stderr, "icheckd controller: node %s: relaunching its manager (attempt %d of %d, pid %d): %s\n",
                   n.c_str(), used, max, int(pid), cmd.c_str());
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "icheckd controller: node %s: relaunch attempt %d of %d: %s\n", n.c_str(), used, max,
                   e.what());
    }
  }
  tx([&] {
    Stmt(*db_, "UPDATE icheck_nodes SET state = 'down', relaunches = ?, relaunch_at = NULL, relaunch_pid = NULL "
               "WHERE node = ?")
        .bind(1, used).bind(2, n).run();
  });
  std::fprintf(stderr, "icheckd controller: node %s: down (%s)\n", n.c_str(),
               cmd.empty() ? "relaunch disabled: manager_launch is empty"
                           : ("after " + std::to_string(used) + " relaunch attempt(s)").c_str());
}

json Controller::heartbeat(const json& m) {
  const std::string node = m.at("node");
  const int64_t e = m.value("epoch", int64_t(0));
  int64_t cur = 0;
  std::string state;
  {
    Stmt q(*db_, "SELECT epoch, state FROM icheck_nodes WHERE node = ?");
    q.bind(1, node);
    if (q.step()) cur = q.i64(0), state = q.text(1);
  }
  if (e > 0 && e < cur)
    return {{"error", "superseded: node " + node + " is served by a newer manager (epoch " + std::to_string(cur) +
                          ", this one has epoch " + std::to_string(e) + ")"},
            {"superseded", true},
            {"epoch", cur}};
  const bool registering = e == 0;
  const int64_t epoch = registering ? cur + 1 : e;
  const int64_t pid = m.value("pid", int64_t(0));
  tx([&] {
    if (registering && cur > 0) lose_agents(node);  // the previous manager's agents exit with it
    Stmt(*db_, "INSERT INTO icheck_nodes(node, address, state, last_heartbeat, metrics, epoch, pid, host, up_since) "
               "VALUES(?1, ?2, 'up', ?3, ?4, ?5, ?6, ?7, ?3) "
               "ON CONFLICT(node) DO UPDATE SET address = excluded.address, state = 'up', "
               "last_heartbeat = excluded.last_heartbeat, metrics = excluded.metrics, epoch = excluded.epoch, "
               "pid = excluded.pid, host = excluded.host, relaunch_at = NULL, relaunch_pid = NULL, "
               "up_since = CASE WHEN icheck_nodes.state = 'up' AND icheck_nodes.epoch = excluded.epoch "
               "THEN COALESCE(icheck_nodes.up_since, excluded.up_since) ELSE excluded.up_since END")
        .bind(1, node).bind(2, m.value("address", "")).bind(3, wall()).bind(4, m.value("metrics", json::object()).dump())
        .bind(5, epoch).bind(6, pid).bind(7, m.value("host", ""))
        .run();
    for (auto& a : m.value("dead_agents", json::array())) {
      std::string id = a;
      Stmt(*db_, "UPDATE icheck_apps SET needs_change = 1 WHERE id = (SELECT app_id FROM icheck_agents WHERE id = ?)")
          .bind(1, id).run();
      Stmt(*db_, "UPDATE icheck_agents SET state = 'lost' WHERE id = ?").bind(1, id).run();
    }
  });
  if (registering || state != "up")
    std::fprintf(stderr, "icheckd controller: node %s: manager pid %lld %s (epoch %lld)%s\n", node.c_str(),
                 (long long)pid, registering ? "registered" : "is back", (long long)epoch,
                 state == "relaunching" ? ", relaunch done" : "");
  // Agents the manager still runs that this controller no longer counts
  // on (declared lost while the manager was unreachable, or stopped): the
  // manager stops them, so they do not hold their memory for nothing.
  // Ids the controller does not know yet (a start in flight) are left alone.
  json stop_ids = json::array();
  for (auto& a : m.value("agents", json::array())) {
    if (!a.is_string()) continue;
    Stmt q(*db_, "SELECT state FROM icheck_agents WHERE id = ? AND node = ?");
    q.bind(1, a.get<std::string>()).bind(2, node);
    if (q.step() && q.text(0) != "up" && q.text(0) != "retiring" && q.text(0) != "prepared") stop_ids.push_back(a);
  }
  if (!stop_ids.empty())
    std::fprintf(stderr, "icheckd controller: node %s: asking the manager to stop %zu agent(s) no longer in use\n",
                 node.c_str(), stop_ids.size());
  return {{"ok", true}, {"heartbeat_interval", cfg_.heartbeat_interval}, {"epoch", epoch}, {"stop_agents", stop_ids}};
}

std::vector<NodeStatus> Controller::nodes() {
  std::vector<NodeStatus> out;
  // agents that hold memory there count against its capacity; a draining
  // node (REMOVE_NODES in progress) gets no new agent
  Stmt q(*db_, "SELECT n.node, n.state, n.metrics, (SELECT COUNT(*) FROM icheck_agents a WHERE a.node = n.node AND "
               "a.state IN ('up','retiring','prepared')), n.draining FROM icheck_nodes n");
  while (q.step()) {
    NodeStatus s;
    s.node = q.text(0);
    s.up = q.text(1) == "up" && q.i64(4) == 0;
    json mt = json::parse(q.text(2), nullptr, false);
    if (mt.is_object()) {
      s.avail_mem = mt.value("avail_mem", 0.0);
      s.bandwidth = mt.value("bandwidth", 0.0);
      s.ncops_per_min = mt.value("ncops_per_min", 0.0);
      s.power = mt.value("power", 0.0);
    }
    s.agents = int(q.i64(3));
    out.push_back(s);
  }
  return out;
}

std::string Controller::node_address(const std::string& n) {
  Stmt q(*db_, "SELECT address FROM icheck_nodes WHERE node = ?");
  q.bind(1, n);
  return q.step() ? q.text(0) : "";
}

}  // namespace dynres::icheck::ctl
