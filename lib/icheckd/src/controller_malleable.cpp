// iCheck controller: agents that follow a resized job — MA-RA and MA-MA
// [John24 §7.2, Alg. 7] — and the APP_INFO preparation of a resize the
// scheduler announces [John24 §7.3.1.1, Alg. 9 lines 40-42].
#include "controller_impl.hpp"

namespace dynres::icheck::ctl {

namespace {
AgentsMode mode_of(const StaticConfig& cfg, const std::string& app) {
  return parse_agents_mode(agents_mode_of(cfg, app)).value_or(AgentsMode::ma_ra);
}
}  // namespace

json Controller::readers_of(int64_t app) {
  json out = json::array();
  Stmt q(*db_, "SELECT id, address, host, node FROM icheck_agents WHERE app_id = ? AND state = 'retiring' ORDER BY rowid");
  q.bind(1, app);
  while (q.step()) out.push_back({{"id", q.text(0)}, {"address", q.text(1)}, {"host", q.text(2)}, {"node", q.text(3)}});
  return out;
}

json Controller::follow_job(int64_t app, const std::string& name, uint32_t uid, int cur_res, int new_res,
                            const AppShape& shape) {
  const AgentsMode mode = mode_of(cfg_, name);
  const char* mname = mode == AgentsMode::ma_ma ? "MA-MA" : "MA-RA";
  bool up = false;
  json cur = agents_of(app, &up);
  const int m = int(cur.size());
  int want = resize_agent_count(mode, m, cur_res, new_res, agent_upper_bound(shape, dyn_));
  // never past the user's share; the agents the application has stay
  want = std::min(want, std::max(m, dyn_.max_agents_user - agents_of_user(uid, app)));
  std::fprintf(stderr, "icheckd controller: application %lld (%s): %d -> %d %s, agents %d -> %d\n", (long long)app,
               mname, cur_res, new_res, shape.shmr ? "nodes" : "processes", m, want);
  if (want > m) {
    // the agents an APP_INFO prepared first, then new ones (appended: the
    // old agents keep their indices and what they hold)
    std::vector<std::string> prepared;
    {
      Stmt q(*db_, "SELECT a.id FROM icheck_agents a JOIN icheck_nodes n ON n.node = a.node WHERE a.app_id = ? AND "
                   "a.state = 'prepared' AND n.state = 'up' AND n.draining = 0 ORDER BY a.rowid");
      q.bind(1, app);
      while (q.step()) prepared.push_back(q.text(0));
    }
    const int take = std::min(int(prepared.size()), want - m);
    tx([&] {
      for (int i = 0; i < take; ++i)
        Stmt(*db_, "UPDATE icheck_agents SET state = 'up' WHERE id = ?").bind(1, prepared[size_t(i)]).run();
      Stmt(*db_, "UPDATE icheck_apps SET prepared = NULL WHERE id = ?").bind(1, app).run();
    });
    if (take < int(prepared.size())) stop_agent_ids({prepared.begin() + take, prepared.end()}, false);
    if (take > 0)
      std::fprintf(stderr, "icheckd controller: application %lld: %d agent(s) prepared by APP_INFO taken\n",
                   (long long)app, take);
    if (want - m - take > 0) {
      try {
        start_agents(app, name, uid, want - m - take);
      } catch (const Fenced&) {
        throw;
      } catch (const std::exception& e) {  // the old agents still serve it
        std::fprintf(stderr, "icheckd controller: application %lld: %s could not add agents (%s): keeping %d\n",
                     (long long)app, mname, e.what(), m + take);
      }
    }
  } else if (want < m) {
    // the agents past the new count keep what they hold for the restore
    // (readers) until the application commits a newer version
    int64_t version = 0;
    {
      Stmt q(*db_, "SELECT version FROM icheck_apps WHERE id = ?");
      q.bind(1, app);
      if (q.step()) version = q.i64(0);
    }
    tx([&] {
      for (int i = want; i < m; ++i)
        Stmt(*db_, "UPDATE icheck_agents SET state = 'retiring' WHERE id = ?")
            .bind(1, cur[size_t(i)].at("id").get<std::string>()).run();
      Stmt(*db_, "UPDATE icheck_apps SET retire_after = ? WHERE id = ?").bind(1, version).bind(2, app).run();
    });
  }
  json agents = agents_of(app, &up);
  tx([&] {
    Stmt(*db_, "UPDATE icheck_apps SET num_agents = ?, needs_change = 0 WHERE id = ?")
        .bind(1, int(agents.size())).bind(2, app).run();
  });
  return {{"agents", agents}, {"readers", readers_of(app)}, {"num_agents", agents.size()}};
}

void Controller::retire_superseded() {
  std::map<int64_t, std::vector<std::string>> stop;
  {
    Stmt q(*db_, "SELECT a.app_id, a.id FROM icheck_agents a JOIN icheck_apps p ON p.id = a.app_id "
                 "WHERE a.state = 'retiring' AND (p.version > COALESCE(p.retire_after, 0) OR p.is_active = 0)");
    while (q.step()) stop[q.i64(0)].push_back(q.text(1));
  }
  {
    Stmt q(*db_, "SELECT app_id, id FROM icheck_agents WHERE state = 'prepared' AND started < ?");
    q.bind(1, wall() - kPreparedTtl);
    while (q.step()) stop[q.i64(0)].push_back(q.text(1));
  }
  for (auto& [app, ids] : stop) {
    if (busy_apps_.count(app)) continue;  // an agent change is in progress: next pass
    AppBusy busy(*this, app);
    std::fprintf(stderr, "icheckd controller: application %lld: stopping %zu retired or unused prepared agent(s)\n",
                 (long long)app, ids.size());
    stop_agent_ids(ids, false);
  }
}

json Controller::app_info(const json& msg) {
  // Alg. 9 lines 40-42: {"op":"app_info", "job", "from", "to"} (nodes of the job)
  const int64_t job = int_in(msg, "job", -1, 1, int64_t(1) << 62, "app_info");
  const int from = int(int_in(msg, "from", -1, 1, kMaxAppNodes, "app_info"));
  const int to = int(int_in(msg, "to", -1, 1, kMaxAppNodes, "app_info"));
  if (job < 0 || from < 0 || to < 0) throw std::runtime_error("invalid: app_info needs job, from and to");
  // active or not: a job resized by restart leaves iCheck (finalize) before
  // it registers again on its new nodes, and the APP_INFO may come between
  Stmt q(*db_, "SELECT id, name, uid, nodes, procs, strategy, num_agents FROM icheck_apps WHERE job_id = ? "
               "ORDER BY updated DESC LIMIT 1");
  q.bind(1, job);
  if (!q.step()) {
    std::fprintf(stderr, "icheckd controller: APP_INFO refused: no application of job %lld is registered\n",
                 (long long)job);
    throw std::runtime_error("noent: app_info: no application of job " + std::to_string(job) + " is registered");
  }
  const int64_t app = q.i64(0);
  const std::string name = q.text(1);
  const uint32_t uid = uint32_t(q.i64(2));
  const int nodes = int(q.i64(3)), procs = int(q.i64(4));
  const bool shmr = q.text(5) == "shmr";
  const int m0 = int(q.i64(6));
  q.reset();
  AppBusy busy(*this, app);
  // MR maps processes: the job keeps its processes per node of its batch
  // allocation (`from` nodes; the library's own host count, `nodes`, is 1 on
  // a local virtual cluster, where every node is this machine)
  const int ppn = std::max(1, procs / from);
  const int cur_res = shmr ? nodes : procs;
  const int new_res = shmr ? to : std::min<int64_t>(int64_t(to) * ppn, kMaxAppProcs);
  const AppShape shape{to, shmr ? to : new_res, shmr};
  const AgentsMode mode = mode_of(cfg_, name);
  bool up = false;
  json cur = agents_of(app, &up);
  const int have = int(cur.size());
  const int want = resize_agent_count(mode, have > 0 ? have : m0, cur_res, new_res, agent_upper_bound(shape, dyn_));
  int prepared = 0;
  {
    Stmt p(*db_, "SELECT COUNT(*) FROM icheck_agents WHERE app_id = ? AND state = 'prepared'");
    p.bind(1, app);
    if (p.step()) prepared = int(p.i64(0));
  }
  const int room = std::max(0, dyn_.max_agents_user - agents_of_user(uid, app) - have - prepared);
  const int add = std::min(std::max(0, want - have - prepared), room);
  json plan = {{"job", job}, {"from", from}, {"to", to}, {"resources", new_res}, {"agents", want},
               {"mode", mode == AgentsMode::ma_ma ? "ma-ma" : "ma-ra"}, {"time", wall()}};
  if (add > 0 && up) {
    try {
      start_agents(app, name, uid, add, "prepared");
      prepared += add;
    } catch (const Fenced&) {
      throw;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "icheckd controller: APP_INFO job %lld: could not prepare agents: %s\n", (long long)job,
                   e.what());
    }
  }
  plan["prepared"] = prepared;
  tx([&] { Stmt(*db_, "UPDATE icheck_apps SET prepared = ? WHERE id = ?").bind(1, plan.dump()).bind(2, app).run(); });
  std::fprintf(stderr,
               "icheckd controller: APP_INFO job %lld (application %lld, %s): %d -> %d nodes, agents %d -> %d, "
               "%d prepared\n",
               (long long)job, (long long)app, plan["mode"].get<std::string>().c_str(), from, to, have, want, prepared);
  return {{"ok", true}, {"app_id", app}, {"agents", want}, {"prepared", prepared}};
}

}  // namespace dynres::icheck::ctl
