#include "controller_impl.hpp"
#include "dynres/ckstore.hpp"

namespace dynres::icheck::ctl {

std::string random_token() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t r = ::getrandom(b + got, sizeof b - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    got += size_t(r);
  }
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) s += hex[c >> 4], s += hex[c & 15];
  return s;
}

std::string secs(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%g s", s);
  return b;
}

std::string describe_status(int st) {
  if (WIFEXITED(st)) return "exit status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "killed by signal " + std::to_string(WTERMSIG(st));
  return "wait status " + std::to_string(st);
}

Controller::Controller(const ControllerOptions& o) : opt_(o), cfg_(load_static(o.config)) {
  if (cfg_.state_file.empty()) throw std::runtime_error("controller: no state_file configured");
  db_ = std::make_unique<Db>(cfg_.state_file, true);
  db_->migrate("icheck", kMigrations);
  ::chmod(cfg_.state_file.c_str(), 0600);
  sqlite3_set_authorizer(db_->handle(), &Controller::authorize, nullptr);  // writes only in tx()
  dyn_ = cfg_.dyn;
  if (!opt_.listen.empty()) addr_ = opt_.listen;
  else if (opt_.standby && cfg_.controllers.size() > 1) addr_ = cfg_.controllers[1];
  else if (!cfg_.controllers.empty()) addr_ = cfg_.controllers[0];
  else throw std::runtime_error("controller: no controller address configured");
}

int Controller::run(std::atomic<bool>* stop) {
  stop_ = stop;
  require_safe_tcp_auth(addr_);  // before waiting as a standby: fail at start
  const double lease = cfg_.heartbeat_interval * cfg_.heartbeat_misses;
  if (opt_.standby) {
    std::fprintf(stderr, "icheckd controller: standby, watching the primary's lease\n");
    while (!*stop) {
      Stmt q(*db_, "SELECT pid, heartbeat FROM icheck_controller WHERE id = 1");
      double hb = q.step() ? q.f64(1) : 0;
      if (wall() - hb > lease) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(int(cfg_.heartbeat_interval * 500)));
    }
    if (*stop) return 0;
    std::fprintf(stderr, "icheckd controller: primary lease expired, taking over on %s\n", addr_.c_str());
  }
  take_lease(opt_.standby);
  lease_db_ = std::make_unique<Db>(cfg_.state_file, false);
  std::thread lease_th([&] { lease_loop(stop); });
  if (is_unix_address(addr_)) fs::create_directories(fs::path(addr_.substr(5)).parent_path());
  Socket l = listen_on(addr_);
  std::printf("READY %s\n", bound_address(l, addr_).c_str());
  std::fflush(stdout);
  std::thread mon([&] { monitor(stop); });
  std::thread link;
  if (!cfg_.scheduler_socket.empty()) link = std::thread([&] { scheduler_link(stop); });
  // Connections are authenticated on their own thread (a slow or hostile
  // TCP peer never stalls this loop). Caps: kMaxConnections in all;
  // kMaxAuthPerHost still authenticating per TCP peer host (the only
  // identity known before the MUNGE credential); once the peer's uid is
  // known, kMaxPerUid per uid (the service's own uid is not capped), so that
  // one user's connections never lock out another's (every local user is
  // 127.0.0.1). A request may announce at most kMaxRequest bytes, and the
  // memory for it grows with the bytes that arrive.
  while (!*stop) {
    Socket c = accept_unauthenticated(l, 200);
    if (!c.valid()) continue;
    const std::string host = peer_host(c);
    bool over = active_ >= kMaxConnections;
    if (!over && !host.empty()) {
      std::lock_guard<std::mutex> g(peers_mu_);
      if (authenticating_[host] >= kMaxAuthPerHost) over = true;
      else authenticating_[host]++;
    }
    if (over) {
      refuse_busy(c, "too many connections to the controller" + (host.empty() ? std::string() : " from " + host));
      continue;
    }
    auto sp = std::make_shared<Socket>(std::move(c));
    active_++;
    std::thread([this, sp, host] {
      const bool ok = authenticate_accepted(*sp);
      if (!host.empty()) {
        std::lock_guard<std::mutex> g(peers_mu_);
        if (--authenticating_[host] <= 0) authenticating_.erase(host);
      }
      const long uid = ok ? peer_uid(*sp) : -1;
      const bool capped = uid >= 0 && !is_service(uid);
      bool admitted = ok;
      if (capped) {
        std::lock_guard<std::mutex> g(peers_mu_);
        if (per_uid_[uid] >= kMaxPerUid) admitted = false;
        else per_uid_[uid]++;
      }
      if (ok && !admitted) refuse_busy(*sp, "too many connections to the controller from uid " + std::to_string(uid));
      if (admitted) serve(*sp);
      if (admitted && capped) {
        std::lock_guard<std::mutex> g(peers_mu_);
        if (--per_uid_[uid] <= 0) per_uid_.erase(uid);
      }
      active_--;
    }).detach();
  }
  mon.join();
  if (link.joinable()) link.join();
  lease_th.join();
  // the per-connection threads use this object: wait for them (each ends
  // within its 10 s receive timeout plus its request)
  while (active_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (fenced_) std::fprintf(stderr, "icheckd controller: stopped (fenced by epoch %lld)\n", (long long)fenced_by_);
  return fenced_ ? 3 : 0;
}

void Controller::refuse_busy(Socket& c, const std::string& why) {
  // logged at most once a second: a flood of refusals must not fill the log
  static std::atomic<int64_t> last_log{-1};
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  if (last_log.exchange(now) != now) std::fprintf(stderr, "icheckd controller: refused a connection: %s\n", why.c_str());
  try {
    send_msg(c, {{"error", "busy: " + why}});
  } catch (...) {
  }
}

void Controller::serve(Socket& s) {
  json m;
  try {
    m = recv_msg(s, 10000, kMaxRequest);
  } catch (const std::exception& e) {
    // a request over the limit is answered, then closed (the rest is never
    // read); a peer that went away or stayed silent gets nothing
    if (std::string(e.what()).find("exceeds the limit") != std::string::npos) try {
        send_msg(s, {{"error", std::string("invalid: ") + e.what()}});
      } catch (...) {
      }
    return;
  }
  try {
    json r;
    try {
      r = handle(m, peer_uid(s));
    } catch (const std::exception& e) {
      r = {{"error", e.what()}};
    }
    send_msg(s, r);
  } catch (...) {
  }
}

int64_t Controller::owned_app(const json& m, long uid, const std::string& op) {
  auto it = m.find("app_id");
  if (it == m.end() || !it->is_number_integer() || it->get<int64_t>() < 0)
    throw std::runtime_error("invalid: " + op + " needs a non-negative integer app_id");
  const int64_t app = it->get<int64_t>();
  Stmt q(*db_, "SELECT uid, token FROM icheck_apps WHERE id = ?");
  q.bind(1, app);
  if (!q.step()) throw std::runtime_error("noent: unknown application " + std::to_string(app));
  const long owner = long(q.i64(0));
  const std::string token = q.is_null(1) ? "" : q.text(1);
  q.reset();
  // Anybody but the service also needs the application's token (the
  // only check when the peer's identity is unknown: ICHECK_TCP_AUTH=none).
  if (!(uid >= 0 && is_service(uid))) {
    auto t = m.find("app_token");
    if (token.empty() || t == m.end() || !t->is_string() || t->get<std::string>() != token) {
      std::fprintf(stderr, "icheckd controller: refused %s of application %lld: wrong or missing app_token\n",
                   op.c_str(), (long long)app);
      throw std::runtime_error("perm: " + op + " of application " + std::to_string(app) +
                               " without its app_token (given at registration)");
    }
  }
  if (uid >= 0 && !is_service(uid) && owner != uid) {
    std::fprintf(stderr, "icheckd controller: refused %s of application %lld (uid %ld) from uid %ld\n", op.c_str(),
                 (long long)app, owner, uid);
    throw std::runtime_error("perm: application " + std::to_string(app) + " belongs to another user");
  }
  return app;
}

json Controller::handle(const json& m, long uid) {
  if (!m.is_object()) throw std::runtime_error("invalid: a request must be a JSON object");
  std::string op = m.value("op", "");
  if (uid >= 0 && m.contains("uid") && !is_service(uid) &&
      (!m["uid"].is_number_integer() || m["uid"].get<long>() != uid))
    throw std::runtime_error("perm: uid mismatch");
  if (op == "heartbeat" && uid >= 0 && !is_service(uid)) {
    std::fprintf(stderr, "icheckd controller: refused heartbeat from uid %ld: only managers (uid %ld) may send it\n",
                 uid, long(::geteuid()));
    throw std::runtime_error("perm: only the iCheck managers (uid " + std::to_string(::geteuid()) +
                             ") may send heartbeat");
  }
  if (op == "heartbeat") {  // from the service (checked above): noted before it waits for mu_
    auto nd = m.find("node");
    auto ep = m.find("epoch");
    if (nd != m.end() && nd->is_string() && ep != m.end() && ep->is_number_integer() && ep->get<int64_t>() > 0) {
      std::lock_guard<std::mutex> ag(arrived_mu_);
      if (arrived_.size() < 65536 || arrived_.count(nd->get<std::string>()))
        arrived_[nd->get<std::string>()] = {wall(), ep->get<int64_t>()};
    }
  }
  std::unique_lock<std::mutex> g(mu_);
  tl_lock_ = &g;  // network calls of this request release it (unlocked())
  struct Clear {
    ~Clear() { tl_lock_ = nullptr; }
  } clear;
  check_epoch();
  if (op == "heartbeat") return heartbeat(m);
  if (op == "register") return reg(m, uid);
  if (op == "probe") {
    AppBusy busy(*this, owned_app(m, uid, op));
    return probe(m);
  }
  if (op == "status") return status(uid);
  if (op == "app_info") {  // the scheduler's APP_INFO, also through this socket (mjsched(8))
    if (uid < 0 || !is_service(uid)) {
      std::fprintf(stderr, "icheckd controller: refused app_info from uid %ld: only the iCheck service (uid %ld) may send it\n",
                   uid, long(::geteuid()));
      throw std::runtime_error("perm: only the iCheck service (uid " + std::to_string(::geteuid()) + ") may send app_info");
    }
    return app_info(m);
  }
  const int64_t app_id = owned_app(m, uid, op);
  if (op == "version") {
    const int64_t app = app_id;
    auto vj = m.find("v");
    if (vj == m.end() || !vj->is_number_integer() || vj->get<int64_t>() < 1)
      throw std::runtime_error("invalid: version needs an integer v >= 1");
    const int64_t v = vj->get<int64_t>();
    const int64_t bytes = int_in(m, "bytes", 0, 0, int64_t(1) << 53, op);
    if (auto t = m.find("tsync"); t != m.end() && !t->is_number())
      throw std::runtime_error("invalid: version: tsync must be a number of seconds");
    tx([&] {
      Stmt(*db_, "INSERT OR REPLACE INTO icheck_versions VALUES(?,?,?,?,?,?)")
          .bind(1, app).bind(2, v).bind(3, bytes).bind(4, m.value("tsync", 0.0))
          .bind(5, m.value("mode", "")).bind(6, wall()).run();
      Stmt(*db_, "UPDATE icheck_apps SET version = ?, bytes = ?, updated = ? WHERE id = ?")
          .bind(1, v).bind(2, bytes).bind(3, wall()).bind(4, app).run();
    });
    return {{"ok", true}};
  }
  if (op == "agent_failed") {
    tx([&] { Stmt(*db_, "UPDATE icheck_apps SET needs_change = 1 WHERE id = ?").bind(1, app_id).run(); });
    return {{"ok", true}};
  }
  if (op == "finalize") {
    const int64_t app = app_id;
    AppBusy busy(*this, app);
    tx([&] { Stmt(*db_, "UPDATE icheck_apps SET is_active = 0 WHERE id = ?").bind(1, app).run(); });
    if (m.value("persist", false)) return {{"ok", true}};
    // Stop the agents only once the whole set's newest version is on the
    // second level; otherwise they keep it in memory (a rerun restarts
    // from them) rather than lose it.
    if (!newest_durable(app)) {
      std::fprintf(stderr, "icheckd controller: application %lld: keeping its agents (newest version not durable)\n",
                   (long long)app);
      return {{"ok", true}, {"kept_agents", true}};
    }
    stop_agents(app, false);
    return {{"ok", true}};
  }
  throw std::runtime_error("invalid: unknown op '" + op + "'");
}

json Controller::params() const {
  return {{"transfer", dyn_.transfer}, {"strategy", dyn_.strategy}, {"chunk_mb", dyn_.chunk_mb},
          {"buffer_mb", dyn_.buffer_mb}, {"zero_copy", dyn_.zero_copy}};
}

int64_t Controller::int_in(const json& m, const char* key, int64_t dflt, int64_t lo, int64_t hi, const std::string& op) {
  auto it = m.find(key);
  if (it == m.end()) return dflt;
  bool ok = false;
  int64_t v = 0;
  if (it->is_number_unsigned()) {
    ok = it->get<uint64_t>() <= uint64_t(hi);
    if (ok) v = int64_t(it->get<uint64_t>());
  } else if (it->is_number_integer()) {
    v = it->get<int64_t>();
    ok = true;
  }
  if (!ok || v < lo || v > hi)
    throw std::runtime_error("invalid: " + op + ": " + key + " must be an integer in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "]");
  return v;
}

int Controller::agents_of_user(uint32_t uid, int64_t app) {
  Stmt q(*db_, "SELECT COUNT(*) FROM icheck_agents g JOIN icheck_apps p ON g.app_id = p.id "
               "WHERE p.uid = ? AND p.id != ? AND g.state = 'up'");
  q.bind(1, int64_t(uid)).bind(2, app);
  const int used = q.step() ? int(q.i64(0)) : 0;
  q.reset();
  return used;
}

int Controller::user_room(uint32_t uid, int64_t app) {
  const int used = agents_of_user(uid, app), room = dyn_.max_agents_user - used;
  if (room < 1)
    throw std::runtime_error("busy: uid " + std::to_string(uid) + " already has " + std::to_string(used) +
                             " agents for other applications (max_agents_user " + std::to_string(dyn_.max_agents_user) +
                             ")");
  return room;
}

json Controller::reg(const json& m, long peer) {
  auto an = m.find("app");
  if (an == m.end() || !an->is_string() || !ckstore::safe_component(an->get<std::string>()))
    throw std::runtime_error("invalid: register needs an application name of 1-128 printable characters, "
                             "without '/', not starting with '.'");
  const std::string name = an->get<std::string>();
  // the application is bound to the authenticated uid (the claimed one
  // only from the service, or when the identity is unknown)
  if (!m.contains("uid") || !m["uid"].is_number_unsigned() || m["uid"].get<uint64_t>() > UINT32_MAX)
    throw std::runtime_error("invalid: register needs the uid");
  uint32_t uid = m["uid"].get<uint32_t>();
  if (peer >= 0 && !is_service(peer) && long(uid) != peer) throw std::runtime_error("perm: uid mismatch");
  AppShape shape{int(int_in(m, "nodes", 1, 1, kMaxAppNodes, "register")),
                 int(int_in(m, "procs", 1, 1, kMaxAppProcs, "register")), m.value("strategy", "mr") == "shmr"};
  // the batch job it runs in (MJ_JOB_ID): APP_INFO names the job
  const int64_t job = int_in(m, "job", 0, 0, int64_t(1) << 62, "register");
  Stmt q(*db_, "SELECT id, num_agents, version, token, nodes, procs, strategy FROM icheck_apps WHERE name = ? AND uid = ?");
  q.bind(1, name).bind(2, int64_t(uid));
  int64_t id = -1, version = 0;
  int num = 0, old_res = 0;
  std::string token;
  if (q.step()) {
    id = q.i64(0), num = int(q.i64(1)), version = q.i64(2), token = q.is_null(3) ? "" : q.text(3);
    old_res = int(q.text(6) == "shmr" ? q.i64(4) : q.i64(5));
  }
  const int new_res = shape.shmr ? shape.num_nodes : shape.num_procs;
  const AgentsMode mode = parse_agents_mode(agents_mode_of(cfg_, name)).value_or(AgentsMode::ma_ra);
  q.reset();  // end the read: a statement kept open would pin a stale snapshot
              // and make this connection's writes fail "database is locked"
              // once the lease thread (own connection) has written
  const int room = user_room(uid, id);  // before anything is recorded or started
  std::optional<AppBusy> busy;
  if (id >= 0) busy.emplace(*this, id);
  if (id >= 0 && token.empty()) {  // registered before tokens existed
    token = random_token();
    tx([&] { Stmt(*db_, "UPDATE icheck_apps SET token = ? WHERE id = ?").bind(1, token).bind(2, id).run(); });
  }
  if (id >= 0) {
    bool up = false;
    json agents = agents_of(id, &up);
    tx([&] {
      Stmt(*db_, "UPDATE icheck_apps SET is_active = 1, nodes = ?, procs = ?, strategy = ?, updated = ?, job_id = ? "
                 "WHERE id = ?")
          .bind(1, shape.num_nodes).bind(2, shape.num_procs).bind(3, shape.shmr ? "shmr" : "mr").bind(4, wall())
          .bind(5, job).bind(6, id).run();
    });
    if (up && old_res > 0 && old_res != new_res) {  // a resized job: its agents follow it (Alg. 7)
      json l = follow_job(id, name, uid, old_res, new_res, shape);
      return {{"app_id", id}, {"app_token", token}, {"agents", l["agents"]}, {"readers", l["readers"]},
              {"version", version}, {"params", params()}};
    }
    if (up && int(agents.size()) <= agent_upper_bound(shape, dyn_))  // restart: same agents (l. 17-19)
      return {{"app_id", id}, {"app_token", token}, {"agents", agents}, {"readers", readers_of(id)},
              {"version", version}, {"params", params()}};
    if (up && !newest_durable(id)) {  // the set must not go before its newest version is durable
      std::fprintf(stderr, "icheckd controller: application %lld: keeping its agents (newest version not durable)\n",
                   (long long)id);
      return {{"app_id", id}, {"app_token", token}, {"agents", agents}, {"version", version}, {"params", params()}};
    }
    stop_agents(id, false);
    if (old_res > 0 && old_res != new_res)
      num = resize_agent_count(mode, num, old_res, new_res, agent_upper_bound(shape, dyn_));
    num = std::clamp(num, 1, agent_upper_bound(shape, dyn_));
  } else {
    num = initial_agent_count(shape, dyn_);  // l. 15-16
    // §7.2.2: MA-MA keeps N:M, so N must be a multiple of M from the start
    if (mode == AgentsMode::ma_ma)
      if (std::string why = nm_ratio_problem(mode, new_res, std::min(num, room)); !why.empty()) {
        std::fprintf(stderr, "icheckd controller: refused registration of %s (uid %u): malleability ma-ma: %s\n",
                     name.c_str(), uid, why.c_str());
        throw std::runtime_error("invalid: malleability: " + name + " (ma-ma, " + std::to_string(new_res) + " " +
                                 (shape.shmr ? "nodes" : "processes") + ", " + std::to_string(std::min(num, room)) +
                                 " agents): " + why);
      }
    token = random_token();
    tx([&] {
      Stmt(*db_, "INSERT INTO icheck_apps(name, uid, nodes, procs, strategy, num_agents, old_tsync, updated, token, "
                 "job_id) VALUES(?,?,?,?,?,?,-1,?,?,?)")
          .bind(1, name).bind(2, int64_t(uid)).bind(3, shape.num_nodes).bind(4, shape.num_procs)
          .bind(5, shape.shmr ? "shmr" : "mr").bind(6, num).bind(7, wall()).bind(8, token).bind(9, job).run();
      id = db_->last_insert_id();
    });
    busy.emplace(*this, id);
  }
  json agents = start_agents(id, name, uid, std::min(num, room));
  tx([&] {
    Stmt(*db_, "UPDATE icheck_apps SET num_agents = ?, needs_change = 0 WHERE id = ?")
        .bind(1, int(agents.size())).bind(2, id).run();
  });
  return {{"app_id", id}, {"app_token", token}, {"agents", agents}, {"version", version}, {"params", params()}};
}

json Controller::probe(const json& m) {
  int64_t id = m.at("app_id");
  Stmt q(*db_, "SELECT name, uid, num_agents, old_tsync, last_change, frozen, needs_change, nodes, procs, strategy FROM icheck_apps WHERE id = ?");
  q.bind(1, id);
  if (!q.step()) throw std::runtime_error("noent: unknown application");
  std::string name = q.text(0);
  uint32_t uid = uint32_t(q.i64(1));
  CountState cs{int(q.i64(2)), q.f64(3), int(q.i64(4)), q.i64(5) != 0};
  bool needs = q.i64(6) != 0 || m.value("failed", false);
  const bool moved = q.i64(6) == 2;
  AppShape shape{int(int_in(m, "nodes", q.i64(7), 1, kMaxAppNodes, "probe")),
                 int(int_in(m, "procs", q.i64(8), 1, kMaxAppProcs, "probe")), q.text(9) == "shmr"};
  const int old_res = int(q.text(9) == "shmr" ? q.i64(7) : q.i64(8));
  q.reset();  // see reg()
  bool up = false;
  json cur = agents_of(id, &up);
  if (!up) needs = true;
  const int new_res = shape.shmr ? shape.num_nodes : shape.num_procs;
  if (up && moved) {  // a REMOVE_NODES moved agents of it (drain_node): the set is ready, reconnect
    tx([&] { Stmt(*db_, "UPDATE icheck_apps SET needs_change = 0 WHERE id = ?").bind(1, id).run(); });
    return {{"changed", true}, {"agents", cur}, {"readers", readers_of(id)}, {"num_agents", cur.size()},
            {"params", params()}};
  }
  if (up && !needs && old_res > 0 && new_res != old_res) {  // resized in place: the agents follow it (Alg. 7)
    tx([&] {
      Stmt(*db_, "UPDATE icheck_apps SET nodes = ?, procs = ? WHERE id = ?")
          .bind(1, shape.num_nodes).bind(2, shape.num_procs).bind(3, id).run();
    });
    json l = follow_job(id, name, uid, old_res, new_res, shape);
    return {{"changed", true}, {"agents", l["agents"]}, {"readers", l["readers"]}, {"num_agents", l["num_agents"]},
            {"params", params()}};
  }
  CountState next = cs;
  if (dyn_.is_dynamic_as && !needs) next = next_agent_count(cs, m.value("tsync", -1.0), shape, dyn_);
  if (needs) next.num_agents = std::clamp(cs.num_agents, 1, agent_upper_bound(shape, dyn_));
  // never past the user's share (at least one agent: the application has it already)
  next.num_agents = std::clamp(next.num_agents, 1, std::max(1, dyn_.max_agents_user - agents_of_user(uid, id)));
  bool change = needs || next.num_agents != cs.num_agents;
  tx([&] {
    Stmt(*db_, "UPDATE icheck_apps SET old_tsync = ?, last_change = ?, frozen = ?, nodes = ?, procs = ? WHERE id = ?")
        .bind(1, next.old_tsync).bind(2, next.last_change).bind(3, int(next.frozen)).bind(4, shape.num_nodes)
        .bind(5, shape.num_procs).bind(6, id).run();
  });
  if (!change) return {{"changed", false}, {"num_agents", cs.num_agents}, {"params", params()}};
  // The old agents go only once their newest version is on the second
  // level (all of them up: a flush failure keeps them, the change waits
  // for a later probe); with agents lost, what they held is gone anyway.
  if (up && !newest_durable(id)) {
    std::fprintf(stderr, "icheckd controller: application %lld: agent change postponed (newest version not durable)\n",
                 (long long)id);
    return {{"changed", false}, {"num_agents", cs.num_agents}, {"params", params()}};
  }
  stop_agents(id, false);
  json agents = start_agents(id, name, uid, next.num_agents);
  tx([&] {
    Stmt(*db_, "UPDATE icheck_apps SET num_agents = ?, needs_change = 0 WHERE id = ?")
        .bind(1, int(agents.size())).bind(2, id).run();
  });
  return {{"changed", true}, {"agents", agents}, {"num_agents", agents.size()}, {"params", params()}};
}

json Controller::status(long uid) {
  json out = {{"controller", addr_}, {"pid", ::getpid()}, {"nodes", json::array()}, {"apps", json::array()}};
  Stmt n(*db_, "SELECT node, address, state, last_heartbeat, metrics, epoch, pid, host, relaunches, relaunch_pid "
               "FROM icheck_nodes ORDER BY node");
  while (n.step())
    out["nodes"].push_back({{"node", n.text(0)}, {"address", n.text(1)}, {"state", n.text(2)},
                            {"last_heartbeat", n.f64(3)}, {"metrics", json::parse(n.text(4), nullptr, false)},
                            {"epoch", n.i64(5)}, {"manager_pid", n.i64(6)}, {"host", n.text(7)},
                            {"relaunches", n.i64(8)}, {"relaunch_pid", n.i64(9)}});
  Stmt a(*db_, "SELECT id, name, uid, num_agents, version, is_active, needs_change FROM icheck_apps ORDER BY id");
  while (a.step()) {
    if (uid >= 0 && !is_service(uid) && a.i64(2) != uid) continue;
    bool up;
    out["apps"].push_back({{"id", a.i64(0)}, {"name", a.text(1)}, {"uid", a.i64(2)}, {"num_agents", a.i64(3)},
                           {"version", a.i64(4)}, {"active", a.i64(5) != 0}, {"needs_change", a.i64(6) != 0},
                           {"agents", agents_of(a.i64(0), &up)}});
  }
  return out;
}

}  // namespace dynres::icheck::ctl

namespace dynres::icheck {

int run_controller(const ControllerOptions& o, std::atomic<bool>* stop) {
  ctl::Controller c(o);
  return c.run(stop);
}

}  // namespace dynres::icheck
