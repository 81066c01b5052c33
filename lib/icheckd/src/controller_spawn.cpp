// iCheck controller: starting and stopping agents through the node managers.
#include "controller_impl.hpp"
#include "dynres/ckstore.hpp"

namespace dynres::icheck::ctl {

pid_t spawn_detached(const std::string& command, const std::string& log, const std::shared_ptr<Reaped>& reaped) {
  const std::string script = "exec " + command;
  const char* argv[] = {"/bin/sh", "-c", script.c_str(), nullptr};
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {  // async-signal-safe calls only from here on
    ::setsid();
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in >= 0) ::dup2(in, 0);
    if (out >= 0) ::dup2(out, 1), ::dup2(out, 2);
    ::close_range(3, ~0U, 0);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv("/bin/sh", const_cast<char* const*>(argv));
    ::_exit(127);
  }
  std::thread([pid, reaped] {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    std::lock_guard<std::mutex> g(reaped->mu);
    reaped->done.emplace_back(pid, st);
  }).detach();
  return pid;
}

void Controller::record_pid(const std::string& name, pid_t pid) {
  const std::string line = name + " " + std::to_string(pid) + "\n";
  const std::string path = (fs::path(cfg_.run_dir) / "pids").string();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != ssize_t(line.size()))
    std::fprintf(stderr, "icheckd controller: cannot record %s in %s: %s\n", line.c_str(), path.c_str(),
                 std::strerror(errno));
  if (fd >= 0) ::close(fd);
}

json Controller::start_agents(int64_t app, const std::string& name, uint32_t uid, int count, const char* state) {
  std::set<std::string> excluded;  // nodes whose manager refused this start
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto ns = nodes();
    std::erase_if(ns, [&](const NodeStatus& n) { return excluded.count(n.node) > 0; });
    auto cand = select_candidates(ns, dyn_.node_selection, dyn_.candidate_count);
    if (cand.empty()) throw std::runtime_error("no checkpoint node is up");
    std::vector<int> cap;
    for (auto& c : cand)
      for (auto& n : ns)
        if (n.node == c) cap.push_back(std::max(0, dyn_.max_agents_node - n.agents));
    auto placed = place_agents(count, cand, cap, dyn_.distribution, dyn_.block_size);
    if (placed.empty()) throw std::runtime_error("every checkpoint node is full");
    std::map<std::string, int> per;
    for (auto& p : placed) per[p]++;
    json agents = json::array();
    bool failed = false;
    for (auto& [node, k] : per) {
      try {
        const std::string address = node_address(node);
        std::vector<std::string> ids;
        for (int i = 0; i < k; ++i) {
          std::string id = "a";  // built by appending: GCC 12 warns falsely (-Wrestrict) on "a" + ...
          id += std::to_string(app) + "-" + std::to_string(++seq_) + "-" + std::to_string(int64_t(wall()) % 100000);
          ids.push_back(id);
        }
        const json req = {{"op", "start"}, {"app", name}, {"uid", uid}, {"ids", ids},
                          {"pfs_every", dyn_.pfs_every}, {"multi_level", dyn_.enable_multi_level},
                          {"compress_threshold_mb", dyn_.compress_threshold_mb}, {"keep", dyn_.keep_versions},
                          {"max_bytes", uint64_t(std::max(0.0, dyn_.max_mem_node_gb) * 1e9)}};
        // the manager may take up to request_timeout_ms: without the lock
        // (heartbeats and other applications' requests go on meanwhile)
        json r = unlocked([&] {
          Socket s = connect_to(address, 2000);
          send_msg(s, req);
          return recv_msg(s, cfg_.request_timeout_ms);
        });
        if (r.contains("error")) throw std::runtime_error("refused: " + r["error"].get<std::string>());
        try {
          tx([&] {
            for (auto& a : r.at("agents"))
              Stmt(*db_, "INSERT OR REPLACE INTO icheck_agents VALUES(?,?,?,?,?,?,?,?)")
                  .bind(1, a.at("id").get<std::string>()).bind(2, app).bind(3, node)
                  .bind(4, a.at("address").get<std::string>()).bind(5, a.value("host", ""))
                  .bind(6, a.value("pid", int64_t(0))).bind(7, state).bind(8, wall()).run();
          });
        } catch (const Fenced&) {
          // superseded while the manager started them: nobody will count
          // on these agents, so they must not hold their memory
          unlocked([&] {
            try {
              Socket s = connect_to(address, 1000);
              request(s, {{"op", "stop"}, {"ids", ids}, {"flush", false}}, 30000);
            } catch (const std::exception& e) {
              std::fprintf(stderr, "icheckd controller: stopping agents started while fenced: %s\n", e.what());
            }
            return 0;
          });
          throw;
        }
        for (auto& a : r.at("agents")) {
          json x = a;
          x["node"] = node;
          agents.push_back(x);
        }
      } catch (const Fenced&) {
        throw;
      } catch (const WireError& e) {  // no answer: the manager is lost (§6.5.3)
        node_lost(node, std::string("unreachable: ") + e.what());
        failed = true;
      } catch (const std::exception& e) {  // it answers, but could not start these agents:
        // the node and its other agents stay up; this start avoids it
        std::fprintf(stderr, "icheckd controller: manager of %s: %s (node left out of this placement)\n",
                     node.c_str(), e.what());
        excluded.insert(node);
        failed = true;
      }
    }
    if (!failed) return agents;
    // roll back the partial set and retry without the failed node
    std::vector<std::string> ids;
    for (auto& a : agents) ids.push_back(a.at("id").get<std::string>());
    stop_agent_ids(ids, false);
  }
  throw std::runtime_error("could not start agents");
}

std::vector<std::pair<std::string, std::string>> Controller::ask_managers(
    const std::map<std::string, std::vector<std::string>>& per_node,
    const std::function<json(const std::vector<std::string>&)>& make) {
  std::vector<std::pair<std::string, std::string>> jobs;  // node, address
  for (auto& [node, v] : per_node) jobs.emplace_back(node, node_address(node));
  std::vector<std::string> errs(jobs.size());
  unlocked([&] {
    std::vector<std::thread> th;
    for (size_t i = 0; i < jobs.size(); ++i)
      th.emplace_back([&, i] {
        try {
          Socket s = connect_to(jobs[i].second, 1000);
          json r = request(s, make(per_node.at(jobs[i].first)), 65000);
          for (auto& e : r.value("flush_errors", json::array()))
            errs[i] += (errs[i].empty() ? "" : "; ") + e.value("id", std::string("?")) + ": " +
                       e.value("error", std::string("?"));
        } catch (const std::exception& e) {
          errs[i] = std::string("manager unreachable: ") + e.what();
        }
      });
    for (auto& t : th) t.join();
    return 0;
  });
  std::vector<std::pair<std::string, std::string>> failed;
  for (size_t i = 0; i < jobs.size(); ++i)
    if (!errs[i].empty()) failed.emplace_back(jobs[i].first, errs[i]);
  return failed;
}

bool Controller::stop_agent_ids(const std::vector<std::string>& ids, bool flush) {
  std::map<std::string, std::vector<std::string>> per_node;
  for (auto& id : ids) {
    Stmt q(*db_, "SELECT node FROM icheck_agents WHERE id = ?");
    q.bind(1, id);
    if (q.step()) per_node[q.text(0)].push_back(id);
  }
  auto failed = ask_managers(per_node, [&](const std::vector<std::string>& v) {
    return json{{"op", "stop"}, {"ids", v}, {"flush", flush}};
  });
  for (auto& [node, err] : failed)
    std::fprintf(stderr, "icheckd controller: node %s: stopping agents%s: %s\n", node.c_str(),
                 flush ? " with flush" : "", err.c_str());
  tx([&] {
    for (auto& id : ids) Stmt(*db_, "UPDATE icheck_agents SET state = 'stopped' WHERE id = ?").bind(1, id).run();
  });
  return failed.empty();
}

bool Controller::flush_set(int64_t app) {
  std::map<std::string, std::vector<std::string>> per_node;
  {
    Stmt q(*db_, "SELECT id, node FROM icheck_agents WHERE app_id = ? AND state = 'up'");
    q.bind(1, app);
    while (q.step()) per_node[q.text(1)].push_back(q.text(0));
  }
  if (per_node.empty()) return true;
  auto failed = ask_managers(per_node, [](const std::vector<std::string>& v) {
    return json{{"op", "flush"}, {"ids", v}, {"timeout_ms", 50000}};
  });
  for (auto& [node, err] : failed)
    std::fprintf(stderr, "icheckd controller: application %lld: flush on node %s failed: %s\n", (long long)app,
                 node.c_str(), err.c_str());
  return failed.empty();
}

bool Controller::newest_durable(int64_t app) {
  if (flush_set(app)) return true;
  std::string name;
  uint32_t uid = 0;
  int64_t committed = 0;
  {
    Stmt q(*db_, "SELECT name, uid, version FROM icheck_apps WHERE id = ?");
    q.bind(1, app);
    if (!q.step()) return false;
    name = q.text(0), uid = uint32_t(q.i64(1)), committed = q.i64(2);
  }
  if (committed == 0) return true;
  try {
    auto nv = ckstore::Store(cfg_.pfs_dir, name, uid).newest_valid(ckstore::Check::shallow);
    return nv && int64_t(*nv) >= committed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "icheckd controller: application %lld: second level unreadable: %s\n", (long long)app,
                 e.what());
    return false;
  }
}

bool Controller::stop_agents(int64_t app, bool flush) {
  std::vector<std::string> ids;
  Stmt q(*db_, "SELECT id FROM icheck_agents WHERE app_id = ? AND state = 'up'");
  q.bind(1, app);
  while (q.step()) ids.push_back(q.text(0));
  q.reset();  // see reg()
  const bool ok = stop_agent_ids(ids, flush);
  tx([&] { Stmt(*db_, "UPDATE icheck_agents SET state = 'gone' WHERE app_id = ? AND state = 'lost'").bind(1, app).run(); });
  return ok;
}

json Controller::agents_of(int64_t app, bool* all_up) {
  json out = json::array();
  *all_up = true;
  Stmt q(*db_, "SELECT a.id, a.address, a.host, a.node, a.state, n.state FROM icheck_agents a "
               "LEFT JOIN icheck_nodes n ON n.node = a.node WHERE a.app_id = ? AND a.state IN ('up','lost') ORDER BY a.rowid");
  q.bind(1, app);
  while (q.step()) {
    if (q.text(4) != "up" || q.text(5) != "up") *all_up = false;
    out.push_back({{"id", q.text(0)}, {"address", q.text(1)}, {"host", q.text(2)}, {"node", q.text(3)}});
  }
  if (out.empty()) *all_up = false;
  return out;
}

}  // namespace dynres::icheck::ctl
