// iCheck client: the controller session: registration token, requests, transfer settings, version discovery.
#include "client_impl.hpp"

namespace dynres::icheck {

json ClientImpl::with_token(const json& msg) const {
  json m = msg;
  if (m.contains("app_id") && !app_token.empty()) m["app_token"] = app_token;
  return m;
}

json ClientImpl::ctl(const json& msg0, int timeout_ms) {
  const json msg = with_token(msg0);
  std::string err = "no controller configured";
  for (int attempt = 0; attempt < std::max(1, cfg.connect_retries); ++attempt) {
    for (auto& a : cfg.controllers) {
      try {
        Socket s = connect_to(a, cfg.connect_timeout_ms);
        return request(s, msg, timeout_ms);
      } catch (const WireError& e) {
        err = a + ": " + e.what();
        if (std::string(e.what()).find("perm") != std::string::npos) throw;
        if (std::string(e.what()).find("invalid: malleability") != std::string::npos) throw;  // asking again changes nothing
      }
    }
    if (cfg.controllers.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200 * (attempt + 1)));
  }
  throw WireError("controller unreachable: " + err);
}

json ClientImpl::register_msg() const {
  json m = {{"op", "register"}, {"app", app}, {"uid", uid}, {"nodes", comm.nodes()}, {"procs", comm.size()},
            {"strategy", cfg.dyn.strategy}, {"host", hostname()}, {"pid", ::getpid()}};
  // the batch job this runs in: the scheduler's APP_INFO names it [John24 §7.3.1.1]
  if (const char* j = std::getenv("MJ_JOB_ID"); j && *j) {
    char* end = nullptr;
    const long long v = std::strtoll(j, &end, 10);
    if (end && !*end && v > 0) m["job"] = v;
  }
  return m;
}

void ClientImpl::add_readers(const json& reply) {
  // agents a shrink of MA-MA retired [John24 §7.2.2]: they still hold the
  // old ranks' pieces, so the restore reads them (after agent_list's
  // committing agents), but nothing is committed to them
  if (!reply.contains("readers") || !reply["readers"].is_array() || reply["readers"].size() > 4096) return;
  for (const auto& r : reply["readers"])
    if (r.is_object() && r.contains("address") && r["address"].is_string()) agent_list.push_back(r);
}

void ClientImpl::ctl_quiet(const json& msg0) {
  if (comm.rank() != 0 || cfg.controllers.empty() || app_id < 0) return;
  const json msg = with_token(msg0);
  for (auto& a : cfg.controllers) {
    try {
      Socket s = connect_to(a, 500);
      request(s, msg, 5000);
      return;
    } catch (...) {
    }
  }
}

void ClientImpl::apply_params(const json& p) {
  if (!p.is_object()) return;
  auto num = [&](const char* k, double& dst) {  // MiB, sane range only
    if (p.contains(k) && p[k].is_number() && p[k].get<double>() > 0 && p[k].get<double>() <= 1048576)
      dst = p[k].get<double>();
  };
  if (p.contains("transfer") && p["transfer"].is_string() && (p["transfer"] == "pull" || p["transfer"] == "push"))
    cfg.dyn.transfer = p["transfer"].get<std::string>();
  num("chunk_mb", cfg.dyn.chunk_mb);
  num("buffer_mb", cfg.dyn.buffer_mb);
  if (p.contains("zero_copy") && p["zero_copy"].is_boolean()) cfg.dyn.zero_copy = p["zero_copy"].get<bool>();
  if (const char* e = std::getenv("ICHECK_TRANSFER"); e && *e) cfg.dyn.transfer = e;
  if (const char* e = std::getenv("ICHECK_ZERO_COPY"); e && *e) cfg.dyn.zero_copy = std::string(e) != "0";
}

void ClientImpl::discover() {
  std::vector<int64_t> mine(4, 0);
  bool linked = agent != nullptr;
  if (shmr()) linked = comm.node_bcast(agent ? "1" : "0") == "1";
  if (shmr()) {
    json vs = json::parse(comm.node_bcast(agent ? agent->versions.dump() : "[]"));
    if (!agent && linked) {
      std::vector<int64_t> x;
      for (auto& e : vs) x.push_back(e.value("v", int64_t(0)));
      std::sort(x.rbegin(), x.rend());
      for (size_t i = 0; i < x.size() && i < 4; ++i) mine[i] = x[i];
    }
  }
  if (agent) {
    std::vector<int64_t> vs;
    for (auto& x : agent->versions) vs.push_back(x.value("v", int64_t(0)));
    std::sort(vs.rbegin(), vs.rend());
    for (size_t i = 0; i < vs.size() && i < 4; ++i) mine[i] = vs[i];
  }
  auto all = comm.allgather(mine);
  int64_t v_agents = 0;
  if (linked) {
    for (int64_t cand : mine) {
      if (cand <= 0) continue;
      bool everywhere = true;
      for (int r = 0; r < comm.size() && everywhere; ++r) {
        bool has = false;
        for (int i = 0; i < 4; ++i) has |= all[size_t(r) * 4 + size_t(i)] == cand;
        everywhere = has;
      }
      if (everywhere) v_agents = std::max(v_agents, cand);
    }
  }
  v_agents = comm.all(v_agents > 0) ? -comm.max(-v_agents) : 0;  // min over ranks
  json info = {{"pfs", 0}, {"dir", 0}};
  if (comm.rank() == 0) {
    try {
      ckstore::Store st(pfs_root(), app, uid);
      auto vs = st.list_versions();
      if (!vs.empty()) info["dir"] = vs.front();
      auto nv = st.newest_valid(ckstore::Check::shallow);
      if (nv) info["pfs"] = *nv;
    } catch (...) {
    }
  }
  info = json::parse(comm.bcast(info.dump()));
  int64_t v_pfs = info["pfs"], v_dir = info["dir"];
  restart_v = std::max(v_agents, v_pfs);
  restart_src = (v_agents > 0 && v_agents >= v_pfs) ? "agents" : "pfs";
  // A resize [John24 §7.4.4]: the agents hold a newer version committed by
  // another process count (this rank's own slot may hold nothing of it).
  // Restored from the agents by the redistribution (Adapt), never waiting
  // for the second level; Adapt falls back to the latter when a piece is gone.
  int64_t app_v = 0, app_n = 0;
  if (agent && !shmr())
    for (auto& x : agent->app_versions) {
      const int64_t xv = x.value("v", int64_t(0)), xn = x.value("nranks", int64_t(0));
      if (xv > app_v && xn > 0 && xn <= (1 << 20)) app_v = xv, app_n = xn;
    }
  auto apps = comm.allgather({app_v, app_n});
  app_v = 0, app_n = 0;
  for (size_t i = 0; i + 1 < apps.size(); i += 2)
    if (apps[i] > app_v) app_v = apps[i], app_n = apps[i + 1];
  resize_n = 0;
  if (app_v > restart_v && app_n != comm.size()) {
    restart_v = app_v;
    restart_src = "agents";
    resize_n = int(app_n);
  }
  version = std::max({version, v_agents, v_pfs, v_dir, app_v});
}

}  // namespace dynres::icheck
