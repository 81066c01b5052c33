// iCheck controller: the link to the batch scheduler [John24 §7.3.1]: a
// Status every status_interval, the proactive scaler (Alg. 8) every
// scaler_interval — asking for nodes, and giving idle borrowed ones back
// (ic_release) — and the reactive scaler (Alg. 9) for the Resource changes
// the scheduler's answers carry. Protocol: mjsched(8) ICHECK PROTOCOL.
#include "controller_impl.hpp"
#include "dynres/icheck_scaler.hpp"
#include "dynres/proto.hpp"

namespace dynres::icheck::ctl {

namespace {
struct LinkNode {
  sched::icheck::ScalerNode s;
  std::string state;
  int holding = 0;  ///< agents holding memory there: up, retiring or prepared
};
}  // namespace

void Controller::scheduler_link(std::atomic<bool>* stop) {
  const std::string& sock = cfg_.scheduler_socket;
  sched::icheck::ScalerState sst;
  sched::icheck::ReleaseState rst;               // borrowed nodes seen idle, since when
  std::map<std::string, std::string> kept_why;   // last refusal per node (REMOVE_NODES or release): logged once
  double next_scale = wall() + cfg_.scaler_interval;
  int fixed = -1;  // nodes the controller had at start: its boot nodes
  auto say = [](const std::string& m) { std::fprintf(stderr, "icheckd controller: scheduler: %s\n", m.c_str()); };
  auto ask = [&](const json& m) -> std::optional<json> {
    auto a = proto::request(sock, m, 2000);
    if (a && a->contains("error")) say(m.value("op", "") + " refused: " + a->value("error", ""));
    return a;
  };
  while (!*stop) {
    for (double t = 0; t < cfg_.status_interval && !*stop; t += 0.1)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (*stop) break;
    std::vector<LinkNode> nodes;
    json apps = json::array();  // the applications by batch job: APP_INFO names them
    try {
      std::lock_guard<std::mutex> g(mu_);
      check_epoch();
      // active, or between the exit and the relaunch of a restart-based resize (1 h at most)
      Stmt pa(*db_, "SELECT job_id, num_agents, name FROM icheck_apps WHERE job_id > 0 AND (is_active = 1 OR updated > ?) "
                    "ORDER BY updated DESC LIMIT 4096");
      pa.bind(1, wall() - 3600);
      while (pa.step())
        apps.push_back({{"job", pa.i64(0)}, {"agents", std::max<int64_t>(0, pa.i64(1))},
                        {"mode", agents_mode_of(cfg_, pa.text(2))}});
      Stmt q(*db_, "SELECT n.node, n.state, n.metrics, (SELECT COUNT(*) FROM icheck_agents a WHERE a.node = n.node "
                   "AND a.state = 'up'), (SELECT COUNT(*) FROM icheck_agents a WHERE a.node = n.node AND a.state IN "
                   "('up','retiring','prepared')) FROM icheck_nodes n WHERE n.state != 'removed' ORDER BY n.node");
      while (q.step()) {
        LinkNode n;
        n.s.name = q.text(0);
        n.state = q.text(1);
        n.s.up = n.state == "up";
        json mt = json::parse(q.text(2), nullptr, false);
        if (mt.is_object()) {
          n.s.avail_mem = std::max(0.0, mt.value("avail_mem", 0.0));
          n.s.total_mem = n.s.avail_mem + std::max(0.0, mt.value("used_bytes", 0.0));
          n.s.depletion_rate = mt.value("mem_depletion_rate", 0.0);
          n.s.bandwidth = mt.value("bandwidth", -1.0);
          n.s.cp_frequency = mt.value("ncops_per_min", 0.0);
        }
        n.s.agents = int(q.i64(3));
        n.holding = int(q.i64(4));
        nodes.push_back(n);
      }
    } catch (const std::exception& e) {
      say(std::string("status: ") + e.what());
      continue;
    }
    // the boot nodes are icheck.yaml's managers; without that list, the nodes
    // of the first Status (a restarted controller would count lent ones too)
    if (fixed < 0) fixed = cfg_.managers.empty() ? int(nodes.size()) : int(cfg_.managers.size());
    const int min_nodes = std::max(1, cfg_.scaler_min_nodes > 0 ? cfg_.scaler_min_nodes : fixed);
    const int max_nodes = std::max(min_nodes, cfg_.scaler_max_nodes > 0 ? cfg_.scaler_max_nodes : fixed);
    json st = json::array();
    for (auto& n : nodes)
      st.push_back({{"name", n.s.name},
                    {"total_mem", n.s.total_mem},
                    {"avail_mem", std::min(n.s.avail_mem, n.s.total_mem)},
                    {"agents", n.s.agents},
                    {"up", n.s.up}});
    auto a = ask({{"op", "ic_status"},
                  {"nodes", st},
                  {"min_nodes", min_nodes},
                  {"max_nodes", max_nodes},
                  {"fixed_nodes", std::min(fixed, max_nodes)},
                  {"apps", apps}});
    if (!a || !a->contains("changes") || !(*a)["changes"].is_array()) continue;
    // the nodes the scheduler lent to iCheck and counts as held: the only
    // ones iCheck gives back on its own (boot nodes never are lent)
    std::vector<std::string> lent;
    if (a->contains("lent") && (*a)["lent"].is_array() && (*a)["lent"].size() <= 4096)
      for (const auto& x : (*a)["lent"])
        if (x.is_string() && !x.get_ref<const std::string&>().empty() && x.get_ref<const std::string&>().size() <= 255)
          lent.push_back(x.get<std::string>());

    // reactive scaler (Alg. 9)
    try {
    for (const auto& c : (*a)["changes"]) {
      if (c.is_object() && c.value("kind", "") == "APP_INFO" && c.contains("change") && c["change"].is_number_integer()) {
        bool good = false;
        {
          std::unique_lock<std::mutex> g(mu_);
          tl_lock_ = &g;  // app_info's agent starts release it
          struct Clear {
            ~Clear() { tl_lock_ = nullptr; }
          } clear;
          try {
            app_info(c);  // every field range-checked there; an unknown job is refused
            good = true;
          } catch (const Fenced&) {
            throw;
          } catch (const std::exception& e) {
            say("APP_INFO change " + std::to_string(c["change"].get<int64_t>()) + " refused: " + e.what());
          }
        }
        ask({{"op", "ic_response"}, {"change", c["change"]}, {"kind", "APP_INFO"}, {"ok", good}});
        continue;
      }
      if (!c.is_object() || !c.contains("change") || !c["change"].is_number_integer() || !c.contains("nodes") ||
          !c["nodes"].is_array() || c["nodes"].size() > 4096)
        continue;
      const std::string kind = c.value("kind", "");
      std::vector<std::string> ok, failed;
      std::string why_failed;
      std::unique_lock<std::mutex> g(mu_);
      tl_lock_ = &g;  // drain_node's network calls release it
      struct Clear {
        ~Clear() { tl_lock_ = nullptr; }
      } clear;
      for (const auto& x : c["nodes"]) {
        if (!x.is_object() || !x.contains("name") || !x["name"].is_string()) continue;
        const std::string n = x["name"];
        if (n.empty() || n.size() > 255) continue;
        std::string state;
        int agents = 0;
        {
          Stmt q(*db_, "SELECT state, (SELECT COUNT(*) FROM icheck_agents a WHERE a.node = ?1 AND a.state = 'up') "
                       "FROM icheck_nodes WHERE node = ?1");
          q.bind(1, n);
          if (q.step()) state = q.text(0), agents = int(q.i64(1));
        }
        if (kind == "NEW_NODES") {  // launch_manager (Alg. 9 lines 17-22)
          if (state == "up") ok.push_back(n);
          else if (state == "down") failed.push_back(n);
          else if (state.empty() || state == "removed") {
            tx([&] {
              Stmt(*db_, "INSERT INTO icheck_nodes(node, state, relaunches) VALUES(?1, 'relaunching', 0) "
                         "ON CONFLICT(node) DO UPDATE SET state = 'relaunching', relaunches = 0")
                  .bind(1, n).run();
            });
            say("NEW_NODES: starting a manager on " + n);
            relaunch_or_down(n);
          }  // relaunching: answered once its manager registered
        } else if (kind == "REMOVE_NODES") {  // node_removal (Alg. 9 lines 1-16)
          (void)agents;
          if (state.empty() || state == "removed" || state == "down") {
            ok.push_back(n);
          } else {
            // the agents there move to the other nodes first (drain_node);
            // a version that cannot be made durable keeps the node
            std::string why, code = "error";
            bool drained = false;
            try {
              drained = drain_node(n, &why, &code);
            } catch (const Fenced&) {
              throw;
            } catch (const std::exception& e) {
              why = e.what();
            }
            if (!drained) {
              // the scheduler asks again (with back-off): logged once per reason
              if (kept_why[n] != code) say("REMOVE_NODES: keeping " + n + ": " + why);
              kept_why[n] = code;
              why_failed = code;
              failed.push_back(n);
              continue;
            }
            kept_why.erase(n);
            // a bumped epoch supersedes its manager: it stops at its next heartbeat
            tx([&] {
              Stmt(*db_, "UPDATE icheck_nodes SET state = 'removed', draining = 0, epoch = epoch + 1000000 "
                         "WHERE node = ?").bind(1, n).run();
            });
            ok.push_back(n);
          }
        }
      }
      auto answer = [&](const std::vector<std::string>& v, bool good) {
        if (v.empty()) return;
        if (good) say(kind + " change " + std::to_string(c["change"].get<int64_t>()) + " done: " + std::to_string(v.size()) + " node(s)");
        json r = {{"op", "ic_response"}, {"change", c["change"]}, {"kind", kind}, {"ok", good}, {"nodes", v}};
        if (!good && !why_failed.empty()) r["reason"] = why_failed;  // the scheduler's back-off restarts when it changes
        ask(r);
      };
      answer(ok, true);
      answer(failed, false);
    }
    } catch (const Fenced&) {
      break;  // a newer controller holds the state file: this one stops (fence())
    } catch (const std::exception& e) {
      say(std::string("resource change: ") + e.what());
    }

    // a node given back whose ic_release was lost (this controller or the
    // scheduler stopped in between): the scheduler still lists it, send again
    try {
      std::vector<std::string> again;
      {
        std::lock_guard<std::mutex> g(mu_);
        for (const auto& n : lent) {
          Stmt q(*db_, "SELECT state FROM icheck_nodes WHERE node = ?");
          q.bind(1, n);
          if (!q.step() || q.text(0) == "removed") again.push_back(n);
        }
      }
      if (!again.empty()) {
        say("giving back " + std::to_string(again.size()) + " node(s) again (their release was not acknowledged)");
        ask({{"op", "ic_release"}, {"nodes", again}});
      }
    } catch (const std::exception& e) {
      say(std::string("release: ") + e.what());
    }

    // proactive scaler (Alg. 8)
    if (wall() < next_scale) continue;
    next_scale = wall() + cfg_.scaler_interval;
    sched::icheck::ScalerConfig sc;
    sc.lower = cfg_.scaler_lower;
    sc.upper = cfg_.scaler_upper;
    sc.depletion_rate = cfg_.scaler_depletion_rate;
    sc.bw_threshold = cfg_.scaler_bw_threshold;
    sc.cp_threshold = cfg_.scaler_cp_threshold;
    sc.min_nodes = min_nodes;
    sc.max_nodes = max_nodes;
    std::vector<sched::icheck::ScalerNode> sn;
    for (auto& n : nodes) sn.push_back(n.s);
    auto r = sched::icheck::proactive_scaler(sn, sc, sst);
    sst = r.state;
    using A = sched::icheck::ScalerAction;
    if (r.action == A::request_high || r.action == A::request_low) {
      const char* u = r.action == A::request_high ? "HIGH" : "LOW";
      say(std::string("requesting ") + std::to_string(r.nodes) + " node(s), urgency " + u + " (node " +
          (r.flagged.empty() ? std::string("?") : r.flagged[0]) + ")");
      ask({{"op", "ic_request"}, {"urgency", u}, {"nodes", r.nodes}});
    } else if (r.action == A::query) {
      auto q = ask({{"op", "ic_query"}});
      if (q && q->contains("idle_nodes") && (*q)["idle_nodes"].is_number_integer())
        sst.idle_nodes = int(std::clamp<int64_t>((*q)["idle_nodes"].get<int64_t>(), 0, 1 << 20));
    }
    if (r.action != A::none) continue;  // asking for nodes: none goes back in the same pass

    // scale-down side: a borrowed node idle for release_after s goes back
    sched::icheck::ReleaseConfig rc;
    rc.below = cfg_.scaler_release_below;
    rc.after = cfg_.scaler_release_after;
    rc.lower = cfg_.scaler_lower;
    rc.min_nodes = min_nodes;
    for (size_t i = 0; i < nodes.size(); ++i) sn[i].agents = nodes[i].holding;
    auto rel = sched::icheck::idle_release(sn, lent, rc, wall(), rst);
    rst = rel.state;
    if (rel.node.empty()) continue;
    try {
      std::string why, code = "error";
      if (!give_back(rel.node, &why, &code)) {
        if (kept_why[rel.node] != code) say("keeping idle node " + rel.node + " for now: " + why);
        kept_why[rel.node] = code;
        rst.idle_since[rel.node] = wall();  // tried again after release_after
        continue;
      }
      kept_why.erase(rel.node);
      say("giving back idle node " + rel.node + " (no agent, or under " +
          std::to_string(int(cfg_.scaler_release_below * 100 + 0.5)) + " % of its memory used, for " +
          secs(cfg_.scaler_release_after) + ")");
      ask({{"op", "ic_release"}, {"nodes", json::array({rel.node})}});
    } catch (const Fenced&) {
      break;
    } catch (const std::exception& e) {
      say("release of " + rel.node + ": " + e.what());
    }
  }
}

bool Controller::give_back(const std::string& n, std::string* why, std::string* code) {
  std::unique_lock<std::mutex> g(mu_);
  tl_lock_ = &g;  // drain_node's network calls release it
  struct Clear {
    ~Clear() { tl_lock_ = nullptr; }
  } clear;
  check_epoch();
  {
    Stmt q(*db_, "SELECT state FROM icheck_nodes WHERE node = ?");
    q.bind(1, n);
    const std::string state = q.step() ? q.text(0) : "unknown";
    if (state != "up") {
      *why = "it is " + state, *code = "state";
      return false;
    }
  }
  // the agents there move to the other nodes first, as for REMOVE_NODES
  if (!drain_node(n, why, code)) return false;
  // a bumped epoch supersedes its manager: it stops at its next heartbeat
  tx([&] {
    Stmt(*db_, "UPDATE icheck_nodes SET state = 'removed', draining = 0, epoch = epoch + 1000000 WHERE node = ?")
        .bind(1, n).run();
  });
  return true;
}

bool Controller::drain_node(const std::string& n, std::string* why, std::string* code) {
  tx([&] { Stmt(*db_, "UPDATE icheck_nodes SET draining = 1 WHERE node = ?").bind(1, n).run(); });
  auto keep = [&](const std::string& w, const char* c) {
    *why = w;
    if (code) *code = c;
    tx([&] { Stmt(*db_, "UPDATE icheck_nodes SET draining = 0 WHERE node = ?").bind(1, n).run(); });
    return false;
  };
  std::vector<int64_t> apps;
  {
    Stmt q(*db_, "SELECT DISTINCT app_id FROM icheck_agents WHERE node = ? AND state IN ('up','retiring','prepared')");
    q.bind(1, n);
    while (q.step()) apps.push_back(q.i64(0));
  }
  for (int64_t app : apps) {
    AppBusy busy(*this, app);  // no register/probe of it meanwhile
    std::string name;
    uint32_t uid = 0;
    {
      Stmt q(*db_, "SELECT name, uid FROM icheck_apps WHERE id = ?");
      q.bind(1, app);
      if (!q.step()) continue;
      name = q.text(0), uid = uint32_t(q.i64(1));
    }
    std::vector<std::string> here, idle;  // committing agents on n; retiring/prepared ones
    {
      Stmt q(*db_, "SELECT id, state FROM icheck_agents WHERE app_id = ? AND node = ? AND state IN ('up','retiring','prepared')");
      q.bind(1, app).bind(2, n);
      while (q.step()) (q.text(1) == "up" ? here : idle).push_back(q.text(0));
    }
    if (!here.empty()) {
      // Alg. 9 line 6: fence, then the whole set writes its newest version
      auto fence = [&](bool on) {
        return ask_managers({{n, here}}, [on](const std::vector<std::string>& v) {
          return json{{"op", "retire"}, {"ids", v}, {"on", on}};
        });
      };
      if (auto f = fence(true); !f.empty())
        return keep("application " + std::to_string(app) + ": its agents on " + n + " could not be fenced: " + f[0].second,
                    "agents unreachable");
      const bool durable = newest_durable(app);
      int64_t committed = 0;
      {
        Stmt q(*db_, "SELECT version FROM icheck_apps WHERE id = ?");
        q.bind(1, app);
        if (q.step()) committed = q.i64(0);
      }
      if (!durable) {
        fence(false);
        return keep("application " + std::to_string(app) + ": its newest version " + std::to_string(committed) +
                    " could not be made durable before moving its agents off " + n,
                    "newest version not durable");
      }
      // Alg. 9 lines 8-9: replacements on the other nodes (none is placed
      // on a draining node); the application reconnects at its next probe
      try {
        start_agents(app, name, uid, int(here.size()));
      } catch (const Fenced&) {
        throw;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "icheckd controller: application %lld: no replacement agents (%s): its next probe "
                             "places them\n", (long long)app, e.what());
      }
      std::fprintf(stderr, "icheckd controller: application %lld: version %lld durable; moving %zu agent(s) off %s\n",
                   (long long)app, (long long)committed, here.size(), n.c_str());
    }
    // Alg. 9 line 7: the agents there stop
    here.insert(here.end(), idle.begin(), idle.end());
    stop_agent_ids(here, false);
    // its next probe reconnects to the set (also when a commit the fence
    // diverted already reported an agent failure)
    tx([&] { Stmt(*db_, "UPDATE icheck_apps SET needs_change = 2 WHERE id = ?").bind(1, app).run(); });
  }
  return true;
}

}  // namespace dynres::icheck::ctl
