#include "client_impl.hpp"

namespace dynres::icheck {

bool safe_name(const std::string& s) {
  return ckstore::safe_component(s);
}

Client::Client() : impl_(std::make_unique<ClientImpl>()) {}
Client::~Client() {
  if (impl_ && impl_->worker.joinable()) impl_->worker.join();
}

int Client::init(const char* config, const char* app_name, const void* comm, int* status) {
  auto& s = *impl_;
  if (s.inited) return ICHECK_ESTATE;
  const double t_init0 = now_s();
  if (!app_name || !status) return ICHECK_EINVAL;
  if (!safe_name(app_name)) return ICHECK_ELABEL;
  try {
    s.cfg = load_static(resolve_config_path(config));
  } catch (const std::exception& e) {
    s.last_error = e.what();
    return ICHECK_EINVAL;
  }
  if (s.cfg.dyn.strategy != "shmr") s.cfg.dyn.strategy = "mr";
  s.comm.set(comm);
  s.app = app_name;
  s.uid = uint32_t(::geteuid());
  s.version = 0;
  json reply = {{"mode", "direct"}};
  if (s.comm.rank() == 0) {
    if (s.cfg.direct) {
      reply = {{"mode", "direct"}, {"reason", "configured"}};
    } else if (!s.cfg.agents.empty()) {
      json l = json::array();
      for (size_t i = 0; i < s.cfg.agents.size(); ++i) l.push_back({{"address", s.cfg.agents[i]}, {"id", "a" + std::to_string(i)}});
      reply = {{"mode", "rdma"}, {"agents", l}};
    } else if (!s.cfg.controllers.empty()) {
      try {
        reply = s.ctl(s.register_msg(), s.cfg.request_timeout_ms);
        reply["mode"] = "rdma";
      } catch (const std::exception& e) {
        // a configuration the controller refuses (the N:M rule of MA-MA,
        // [John24 §7.2.2]) fails icheck_init instead of hiding in direct mode
        const bool refused = std::string(e.what()).find("invalid: malleability") != std::string::npos;
        reply = {{"mode", refused ? "error" : "direct"}, {"reason", e.what()}};
      }
    }
  }
  const double t_reg = now_s();
  reply = json::parse(s.comm.bcast(reply.dump()));
  if (reply["mode"] == "error") {
    s.last_error = reply.value("reason", std::string("registration refused"));
    if (s.comm.rank() == 0) std::fprintf(stderr, "icheck: icheck_init: %s\n", s.last_error_.c_str());
    return ICHECK_EINVAL;
  }
  s.app_id = reply.value("app_id", -1LL);
  s.app_token = reply.value("app_token", std::string());
  if (reply.contains("params")) s.apply_params(reply["params"]);
  s.version = reply.value("version", int64_t(0));
  s.mode = "direct";
  if (reply["mode"] == "rdma" && s.connect_agents(reply["agents"])) {
    s.mode = "rdma";
    s.add_readers(reply);
  } else if (reply["mode"] == "rdma" && !s.slow_agents.empty()) {
    s.slow_reply = reply;  // alive but slow: the first probes try them again
  } else if (reply["mode"] == "rdma")
    s.ctl_quiet({{"op", "agent_failed"}, {"app_id", s.app_id}, {"error", s.last_error}});
  const int64_t acknowledged = s.version;  // newest version the controller recorded as committed
  const double t_conn = now_s();
  s.discover();
  // ICHECK_TIMING=1: where icheck_init's time goes (bench/mj/restart_resize.sh)
  if (std::getenv("ICHECK_TIMING") && s.comm.rank() == 0)
    std::fprintf(stderr, "icheck: init timing: register %.3f s, agents %.3f s, discover %.3f s\n", t_reg - t_init0,
                 t_conn - t_reg, now_s() - t_conn);
  if (acknowledged > s.restart_v) {
    // Never roll back silently: a committed version is not restorable
    // (agents lost it and the second level does not hold it).
    s.last_error = "version " + std::to_string(acknowledged) + " of " + s.app +
                   " was committed, but the newest restorable version is " + std::to_string(s.restart_v) +
                   (s.restart_v > 0 ? "; restarting from it" : "; starting anew");
    if (s.comm.rank() == 0) std::fprintf(stderr, "icheck: WARNING: %s\n", s.last_error_.c_str());
  }
  *status = s.restart_v > 0 ? ICHECK_STATUS_RESTART : ICHECK_STATUS_NEW;
  s.inited = true;
  s.last_probe = now_s();
  return ICHECK_OK;
}

int Client::add(const char* label, void* ptr, size_t count, int type) {
  auto& s = *impl_;
  if (!s.inited) return ICHECK_ESTATE;
  if (!label || !ptr || count == 0) return ICHECK_EINVAL;
  size_t es = icheck_elem_size(type);
  if (!es) return ICHECK_EINVAL;
  if (count > (SIZE_MAX / 2) / es) return ICHECK_EINVAL;  // bytes would overflow
  if (!safe_name(label)) return ICHECK_ELABEL;
  if (s.by_label.count(label)) return ICHECK_EEXIST;
  if (s.worker.joinable()) return ICHECK_ESTATE;
  size_t off = s.total_bytes();
  s.regions.push_back({label, ptr, count, type, count * es, off});
  s.by_label[label] = s.regions.size() - 1;
  return ICHECK_OK;
}

int Client::commit() {
  auto& s = *impl_;
  if (!s.inited) return ICHECK_ESTATE;
  // Collective: a rank without regions must not return alone while the
  // others wait for it inside the commit.
  if (!s.comm.all(!s.regions.empty())) return ICHECK_ENOENT;
  int rc = wait();
  if (rc != ICHECK_OK) return rc;
  const int64_t v = s.version + 1;
  s.commit_t0 = now_s();
  // Direct mode: retry the agents from time to time (§6.5.2 t_wait). Rank
  // 0's clock decides for all ranks (probe() is collective).
  bool probe_due = s.mode == "direct" && !s.cfg.controllers.empty() && !s.cfg.direct &&
                   now_s() - s.last_probe > 2 * s.cfg.heartbeat_interval;
  probe_due = s.comm.bcast(probe_due ? "1" : "0") == "1";
  if (probe_due) {
    probe(nullptr);
    s.commit_t0 = now_s();
  }
  if (s.mode != "rdma") {
    rc = s.direct_write(v);
    if (rc == ICHECK_OK) s.version = v;
    s.last_tsync = now_s() - s.commit_t0;
    return rc;
  }
  if (s.shmr()) return s.commit_shmr(v);
  bool ok = true;
  if (!s.async && s.register_regions()) {
    try {
      s.transfer_direct(v);
    } catch (const std::exception& e) {
      s.last_error = e.what();
      ok = false;
    }
    return s.finish_commit(v, ok);
  }
  try {
    s.ensure_buffer(s.total_bytes());
  } catch (const std::exception& e) {
    s.last_error = e.what();
    ok = false;
  }
  if (s.async && ok) {
    bool staged = s.buf->len >= s.total_bytes();
    if (staged) {
      s.copy_out(0, s.total_bytes(), static_cast<char*>(s.buf->p));
      s.fallback_src = static_cast<const char*>(s.buf->p);
    }
    s.pending_v = v;
    s.worker_ok = false;
    s.worker = std::thread([&s, v, staged] {
      try {
        s.transfer(v, staged);
        s.worker_ok = true;
      } catch (const std::exception& e) {
        s.worker_err = e.what();
      }
    });
    return ICHECK_OK;
  }
  if (ok) {
    try {
      s.transfer(v, false);
    } catch (const std::exception& e) {
      s.last_error = e.what();
      ok = false;
    }
  }
  return s.finish_commit(v, ok);
}

int Client::wait() {
  auto& s = *impl_;
  if (!s.inited) return ICHECK_ESTATE;
  if (!s.worker.joinable() && s.pending_v == 0) return ICHECK_OK;
  if (s.worker.joinable()) s.worker.join();
  if (!s.worker_ok) s.last_error = std::string(s.worker_err);
  int64_t v = s.pending_v;
  s.pending_v = 0;
  return s.finish_commit(v, s.worker_ok);
}

int Client::restart() {
  auto& s = *impl_;
  if (!s.inited) return ICHECK_ESTATE;
  if (s.restart_v <= 0) return ICHECK_ENOENT;
  s.restored_in_place = false;
  s.restore_corrupt = false;
  bool ok = false;
  if (s.restart_src == "agents" && s.mode == "rdma" && s.shmr()) ok = s.comm.all(s.restore_shmr(s.restart_v));
  else if (s.restart_src == "agents" && s.agent) ok = s.comm.all(s.restore_from_agent(s.restart_v));
  else s.comm.all(false);
  int rc = ok ? ICHECK_OK : ICHECK_ENOENT;
  // A rank whose agent copy failed its checksums (verify_region): said on
  // stderr, and the restart ends in ICHECK_ECORRUPT unless the second level
  // has a valid version.
  bool agent_corrupt = false;
  if (!ok && s.restart_src == "agents") {
    const bool mine = s.restore_corrupt;
    if (mine)
      std::fprintf(stderr, "icheck: WARNING: rank %d: %s; falling back to the second level\n", s.comm.rank(),
                   s.last_error_.c_str());
    agent_corrupt = !s.comm.all(!mine);
  }
  if (!ok && s.restart_src == "agents" && s.mode == "rdma") {
    // Fence the agents before the fallback writes the regions: an agent
    // that timed out may still be moving data into them (RMA into the
    // registered regions) and its late replies would be read as answers to
    // later requests. Every rank drops its agent link, deregisters its
    // memory and closes its endpoint, and continues in direct mode.
    s.drop_agents();
  }
  if (!ok) {
    // Some rank may have restored in place from its agent before another
    // rank's agent failed: every rank now takes the second-level version.
    s.restored_in_place = false;
    // Second level: newest version <= restart_v that every rank can read and
    // verify; corrupt ones are refused and the next older valid one is used.
    std::vector<int64_t> cands;
    if (s.comm.rank() == 0) {
      try {
        ckstore::Store st(s.pfs_root(), s.app, s.uid);
        for (auto v : st.list_versions())
          if (st.has_manifest(v)) cands.push_back(int64_t(v));
      } catch (...) {
      }
    }
    json cj = cands;
    cands = json::parse(s.comm.bcast(cj.dump())).get<std::vector<int64_t>>();
    rc = ICHECK_ENOENT;
    for (int64_t v : cands) {
      int lrc = s.restore_from_pfs(v);
      int worst = s.comm.min_int(lrc);
      if (worst == ICHECK_OK) {
        rc = ICHECK_OK;
        s.restart_v = v;
        break;
      }
      if (worst == ICHECK_EPERM) {
        rc = ICHECK_EPERM;
        break;
      }
      rc = worst;
    }
    if (rc == ICHECK_ENOENT && agent_corrupt) rc = ICHECK_ECORRUPT;
  }
  if (rc == ICHECK_OK) s.restarted = true;
  return rc;
}

int Client::restore(const char* label, void* ptr, size_t count) {
  auto& s = *impl_;
  if (!s.inited || !s.restarted) return ICHECK_ESTATE;
  if (!label || !ptr || count == 0) return ICHECK_EINVAL;
  if (s.restored_in_place) {
    // restart_all restored every region in place; copy from there.
    auto it = s.by_label.find(label);
    if (it == s.by_label.end()) return ICHECK_ENOENT;
    const auto& g = s.regions[it->second];
    if (g.count != count) return ICHECK_EMISMATCH;
    if (ptr != g.ptr) std::memmove(ptr, g.ptr, g.bytes);
    return ICHECK_OK;
  }
  for (auto& r : s.rregions) {
    if (r.value("label", "") != label) continue;
    size_t n = r.at("count");
    int type = r.at("type");
    auto it = s.by_label.find(label);
    if (it != s.by_label.end() && s.regions[it->second].type != type) return ICHECK_EMISMATCH;
    if (n != count) return ICHECK_EMISMATCH;
    size_t off = r.at("offset"), bytes = n * icheck_elem_size(type);
    if (off + bytes > s.rdata.size()) return ICHECK_ECORRUPT;
    std::memcpy(ptr, s.rdata.data() + off, bytes);
    return ICHECK_OK;
  }
  return ICHECK_ENOENT;
}

int Client::restart_all() {
  auto& s = *impl_;
  if (!s.inited) return ICHECK_ESTATE;
  if (s.regions.empty()) return ICHECK_ENOENT;
  s.direct_restore = true;
  s.restored_in_place = false;
  int rc = restart();
  s.direct_restore = false;
  if (rc != ICHECK_OK) return rc;
  if (s.restored_in_place) return ICHECK_OK;
  for (auto& r : s.regions) {
    rc = restore(r.label.c_str(), r.ptr, r.count);
    if (rc != ICHECK_OK) return rc;
  }
  return ICHECK_OK;
}

int Client::probe(const icheck_hints* hints) {
  auto& s = *impl_;
  if (!s.inited) return ICHECK_ESTATE;
  int rc = wait();
  if (rc != ICHECK_OK) return rc;
  s.last_probe = now_s();
  double t = hints && hints->last_commit_seconds >= 0 ? hints->last_commit_seconds : s.last_tsync;
  json reply = {{"changed", false}};
  if (s.comm.rank() == 0 && !s.cfg.controllers.empty() && !s.cfg.direct) {
    try {
      if (s.app_id < 0) {
        reply = s.ctl(s.register_msg(), s.cfg.request_timeout_ms);
        reply["changed"] = true;
      } else {
        reply = s.ctl({{"op", "probe"}, {"app_id", s.app_id}, {"tsync", t},
                       {"nodes", hints && hints->num_nodes ? hints->num_nodes : s.comm.nodes()},
                       {"procs", hints && hints->num_procs ? hints->num_procs : s.comm.size()},
                       {"failed", s.mode != "rdma" && s.slow_agents.empty()}},
                      s.cfg.request_timeout_ms);
      }
    } catch (const std::exception& e) {
      s.last_error = e.what();
      reply = {{"changed", false}, {"unreachable", true}};
    }
  }
  reply = json::parse(s.comm.bcast(reply.dump()));
  if (reply.contains("app_id")) s.app_id = reply["app_id"];
  if (reply.contains("app_token") && reply["app_token"].is_string()) s.app_token = reply["app_token"];
  if (reply.contains("params")) s.apply_params(reply["params"]);  // dynamic config changes (Listing 6.2)
  if (!reply.value("changed", false) && (s.mode == "rdma" || s.slow_agents.empty()))
    return reply.value("unreachable", false) ? ICHECK_ECONTROLLER : ICHECK_OK;
  if (!reply.value("changed", false))  // the same agents, once more
    reply = s.slow_reply.is_object() ? s.slow_reply : json{{"agents", s.slow_agents}};
  s.agent.reset();
  s.extra.clear();
  if (s.connect_agents(reply["agents"])) {
    s.mode = "rdma";
    s.add_readers(reply);
    s.slow_reply = json();
    return ICHECK_OK;
  }
  s.mode = "direct";
  if (!s.slow_agents.empty()) s.slow_reply = reply;
  else s.ctl_quiet({{"op", "agent_failed"}, {"app_id", s.app_id}, {"error", s.last_error}});
  return ICHECK_EAGENT;
}

int Client::enable_async(int flag) {
  auto& s = *impl_;
  if (!s.inited) return ICHECK_ESTATE;
  if (!flag) {
    int rc = wait();
    if (rc) return rc;
  }
  s.async = flag != 0;
  // Map, pre-fault and register the staging buffer now rather than inside
  // the first asynchronous commit.
  if (s.async && s.mode == "rdma" && s.fab && !s.regions.empty() && !s.shmr()) {
    try {
      s.ensure_buffer(s.total_bytes());
    } catch (const std::exception& e) {
      s.last_error = e.what();  // the commit will retry and report
    }
  }
  return ICHECK_OK;
}

int Client::finalize(int flags) {
  auto& s = *impl_;
  if (!s.inited) return ICHECK_ESTATE;
  if (flags & ~IC_PERSIST) return ICHECK_EINVAL;
  int rc = wait();
  bool persist = flags & IC_PERSIST;
  // Without IC_PERSIST the agents stop after this: the newest version must
  // be on the second level first. A failed flush (the agent's write, or on
  // a multi-agent set the manifest of all parts) is reported: every rank
  // returns ICHECK_EIO and icheck_strerror/last error name the cause.
  bool flushed = true;
  if (s.agent && !persist) {
    try {
      request(s.agent->sock, {{"op", "flush"}, {"timeout_ms", 120000}}, 125000);
    } catch (const std::exception& e) {
      s.last_error = std::string("flush before finalize failed: ") + e.what();
      // The controller may have moved the agents off a node given back to
      // the batch pool (REMOVE_NODES, or iCheck's own release) just now: it
      // stops them only once the newest version is durable [John24 Alg. 9
      // line 6], so a second level holding it (or a newer one) is all the
      // flush had to achieve.
      std::optional<uint64_t> nv;
      try {
        if (s.version > 0) nv = ckstore::Store(s.pfs_root(), s.app, s.uid).newest_valid(ckstore::Check::shallow);
      } catch (...) {
      }
      if (nv && int64_t(*nv) >= s.version) {
        std::fprintf(stderr, "icheck: %s; the second level holds version %lld (committed %lld): finalize goes on\n",
                     s.last_error_.c_str(), (long long)*nv, (long long)s.version);
      } else {
        std::fprintf(stderr, "icheck: %s\n", s.last_error_.c_str());
        flushed = false;
      }
    }
  }
  flushed = s.comm.all(flushed);
  if (rc == ICHECK_OK && !flushed) rc = ICHECK_EIO;
  s.comm.barrier();
  s.ctl_quiet({{"op", "finalize"}, {"app_id", s.app_id}, {"persist", persist}});
  s.agent.reset();
  s.extra.clear();
  s.buf.reset();
  s.rmr.clear();
  s.seg.reset();
  s.fab.reset();
  s.zc_broken = false;
  s.restored_in_place = false;
  s.comm.free();
  s.regions.clear();
  s.by_label.clear();
  s.rdata.clear();
  s.inited = false;
  s.async = false;
  s.mode = "none";
  s.restarted = false;
  return rc;
}

int64_t Client::version() const { return impl_->version; }
const char* Client::mode() const { return impl_->mode.c_str(); }
double Client::last_commit_seconds() const { return impl_->last_tsync; }
const char* Client::last_error() const { return impl_->last_error_.c_str(); }

// ---- hooks of the data redistribution (adapt.cpp, [John24 §7.4.1])
RestartView Client::restart_view() {
  auto& s = *impl_;
  RestartView v{s.inited, &s.comm, s.restart_v, s.restart_src, s.pfs_root(), s.app, s.uid, s.resize_n};
  if (s.resize_n > 0) return v;
  if (s.agent)
    for (auto& e : s.agent->versions)
      if (e.value("v", int64_t(0)) == s.restart_v && e.contains("regions") && e["regions"].is_array())
        for (auto& r : e["regions"])
          if (r.is_object() && r.contains("nranks") && r["nranks"].is_number_unsigned())
            v.agent_nranks = std::max(v.agent_nranks, int(std::min<uint64_t>(r["nranks"].get<uint64_t>(), 1u << 20)));
  return v;
}
bool Client::flush_agents() {
  auto& s = *impl_;
  bool ok = true;
  if (s.agent) {
    try {
      request(s.agent->sock, {{"op", "flush"}, {"timeout_ms", 120000}}, 125000);
    } catch (const std::exception& e) {
      s.last_error = std::string("flush for a redistributing restart failed: ") + e.what();
      ok = false;
    }
  }
  return s.comm.all(ok);
}
void Client::set_error(const std::string& e) { impl_->last_error = e; }

std::string Client::agent_pieces(int64_t v, int n, const std::string& meta_label, size_t max_meta, bool defer_verify) {
  return impl_->agent_pieces(v, n, meta_label, max_meta, defer_verify);
}
std::string Client::verify_wait() {
  return impl_->verify_wait();
}
bool Client::read_agent(int agent, int slot, int64_t v, uint64_t off, void* dst, uint64_t len) {
  return impl_->read_agent(agent, slot, v, off, dst, len);
}
bool Client::add_read_target(char* p, uint64_t n) { return impl_->add_read_target(p, n); }
void Client::clear_read_targets() { impl_->rtargets.clear(); }
bool Client::read_agents(const std::vector<AgentRead>& reads) { return impl_->read_agents(reads); }

}  // namespace dynres::icheck
