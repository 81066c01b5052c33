// iCheck client: agents and RMA transfers (MR strategy): fabric, connections, commit and restore by chunks, checksums.
#include "client_impl.hpp"

namespace dynres::icheck {

std::string ClientImpl::choose_provider(const std::string& agent_addr, const std::string& host) {
  if (cfg.provider != "auto") return cfg.provider;
  std::string h = host.empty() ? address_host(agent_addr) : host;
  if (h.empty() || h == "127.0.0.1" || h == "localhost" || h == hostname()) return "shm";
  return "tcp;ofi_rxm";
}

void ClientImpl::ensure_fabric(const std::string& prov) {
  if (fab && fab_prov == prov) return;
  buf.reset();
  rmr.clear();
  if (seg) seg->mr.reset();
  fab.reset();
  FabricOptions fo;
  fo.provider = prov;
  fo.node = cfg.fabric_node;
  try {
    fab = std::make_unique<Fabric>(fo);
  } catch (const FabricError&) {
    if (prov != "shm") throw;
    fo.provider = "tcp;ofi_rxm";  // shm unusable here (e.g. no CMA): fall back to tcp
    fab = std::make_unique<Fabric>(fo);
  }
  fab_prov = prov;
}

std::unique_ptr<AgentLink> ClientImpl::open_link(const json& a, int idx, bool keep_fabric) {
  auto l = std::make_unique<AgentLink>();
  l->addr = a.at("address");
  l->id = a.value("id", "");
  l->host = a.value("host", "");
  l->index = idx;
  if (!keep_fabric || !fab) ensure_fabric(choose_provider(l->addr, l->host));
  l->sock = connect_to(l->addr, cfg.connect_timeout_ms * 3);
  return l;
}

bool ClientImpl::connect_agents(const json& list) {
  bool ok = true, slow = false;
  agent.reset();
  extra.clear();
  try {
    if (!list.is_array() || list.empty()) throw std::runtime_error("empty agent list");
    if (shmr() && !comm.node_leader()) throw Skip{};  // the node leader talks for us
    int m = int(list.size());
    const int slot = shmr() ? comm.node_index() : comm.rank();
    const int nslots = shmr() ? comm.nodes() : comm.size();
    int idx = slot % m;  // agents >= nslots get no slot: min(m, nslots) write second-level parts
    auto l = open_link(list[size_t(idx)], idx, false);
    std::vector<std::string> peers;
    for (auto& x : list) peers.push_back(x.at("address"));
    json r = request(l->sock,
                     {{"op", "hello"}, {"app", app}, {"uid", uid}, {"slot", slot}, {"nslots", nslots},
                      {"nagents", std::min(m, nslots)}, {"agent_index", idx}, {"nranks", comm.size()},
                      {"peers", peers}, {"provider", fab->provider()},
                      {"addr", fab->address_hex()}},
                     cfg.hello_timeout_ms);
    l->peer = fab->add_peer(r.at("addr"));
    l->versions = r.value("versions", json::array());
    l->app_versions = r.value("app_versions", json::array());
    agent = std::move(l);
  } catch (const Skip&) {
  } catch (const std::exception& e) {
    last_error = e.what();
    ok = false;
    const std::string w = e.what();
    slow = w.find("timeout") != std::string::npos || w.find("timed out") != std::string::npos;
  }
  const bool only_slow = comm.all(ok || slow);  // no rank failed for another reason
  ok = comm.all(ok);
  if (!ok) agent.reset();
  agent_list = ok ? list : json::array();
  if (!ok && only_slow && ++slow_connects <= kMaxSlowConnects) {
    slow_agents = list;
  } else {
    slow_agents = json::array();
    slow_reply = json();
    slow_connects = 0;
  }
  return ok;
}

void ClientImpl::ensure_buffer(size_t total) {
  size_t cap = std::max<size_t>(chunk_bytes(), size_t(cfg.dyn.buffer_mb * 1048576.0));
  size_t want = std::min(total, cap);
  want = (want + 4095) & ~size_t(4095);
  if (buf && buf->len >= want) return;
  buf.reset();
  auto b = std::make_unique<Buffer>();
  b->mem = std::make_unique<Mapping>(want, true);
  b->p = b->mem->p;
  b->len = want;
  b->mr = fab->register_memory(b->p, want, Fabric::Access::source);  // commits only: data leaves
  buf = std::move(b);
}

bool ClientImpl::register_regions() {
  if (zc_broken || !cfg.dyn.zero_copy || !fab) return false;
  try {
    rmr.resize(regions.size());
    for (size_t i = 0; i < regions.size(); ++i)
      // commits only: the agent may read the regions (pull) or the
      // library writes from them (push); nobody may write into them
      if (!rmr[i]) rmr[i] = fab->register_memory(regions[i].ptr, regions[i].bytes, Fabric::Access::source);
    return true;
  } catch (const std::exception& e) {
    last_error = std::string("zero copy disabled: ") + e.what();
    rmr.clear();
    zc_broken = true;
    return false;
  }
}

void ClientImpl::transfer_direct(int64_t v) {
  AgentLink& a = *agent;
  // the regions' checksums, computed beside the transfer (both only read them)
  auto sums_f = std::async(std::launch::async, [this] { return region_sums(); });
  const size_t total = total_bytes();
  const bool pull = cfg.dyn.transfer != "push";
  const int to = cfg.request_timeout_ms;
  json r = request(a.sock,
                   {{"op", "begin"}, {"v", v}, {"total", total}, {"regions", regions_json()},
                    {"mode", pull ? "pull" : "push"}, {"key", 0}, {"base", 0}},
                   to);
  if (pull) {
    Fabric::Busy busy(*fab);  // we are the RMA target: poll without naps
    const size_t C = std::max(chunk_bytes(), size_t(64) << 20);
    size_t outstanding = 0;
    auto ack = [&] {
      json m = recv_msg(a.sock, to);
      if (m.contains("error")) throw WireError(m["error"].get<std::string>());
      outstanding--;
    };
    for (size_t i = 0; i < regions.size(); ++i) {
      const Region& g = regions[i];
      for (size_t off = 0; off < g.bytes; off += C) {
        size_t len = std::min(C, g.bytes - off);
        if (outstanding == 32) ack();
        send_msg(a.sock, {{"op", "chunk"}, {"buf_off", off}, {"data_off", g.offset + off}, {"len", len},
                          {"key", rmr[i]->key}, {"base", rmr[i]->remote_base}});
        outstanding++;
      }
    }
    while (outstanding) ack();
  } else {
    uint64_t rkey = r.at("key"), rbase = r.at("base");
    for (size_t i = 0; i < regions.size(); ++i)
      fab->write(a.peer, *rmr[i], 0, regions[i].bytes, rbase + regions[i].offset, rkey, 15000);
  }
  request(a.sock, {{"op", "end"}, {"v", v}, {"mode", pull ? "pull" : "push"}, {"sums", sums_f.get()}}, to);
}

json ClientImpl::region_sums() const {
  json out = json::array();
  for (auto& g : regions) out.push_back(region_sum(g.ptr, g.bytes));
  return out;
}

std::string ClientImpl::verify_region(const json& x, const void* p, size_t n, int64_t v) const {
  const std::string label = x.value("label", std::string("?"));
  auto it = x.find("xxh3");
  if (it == x.end() || !it->is_number_unsigned())
    return "corrupt: region '" + label + "' of version " + std::to_string(v) + " from the agent has no checksum";
  if (region_sum(p, n) != it->get<uint64_t>())
    return "corrupt: region '" + label + "' of version " + std::to_string(v) +
           " from the agent does not match its checksum";
  return "";
}

void ClientImpl::require_intact(const std::string& bad) {
  if (bad.empty()) return;
  restore_corrupt = true;
  throw std::runtime_error(bad);
}

void ClientImpl::transfer_via(int64_t v, bool staged, MemRegion& bmr, size_t blen, size_t total, const json& regs) {
  AgentLink& a = *agent;
  const bool pull = cfg.dyn.transfer != "push";
  const size_t C = staged ? std::max(chunk_bytes(), size_t(64) << 20) : chunk_bytes();
  const int to = cfg.request_timeout_ms;
  json r = request(a.sock,
                   {{"op", "begin"}, {"v", v}, {"total", total}, {"regions", regs},
                    {"mode", pull ? "pull" : "push"}, {"key", bmr.key}, {"base", bmr.remote_base}},
                   to);
  char* b = static_cast<char*>(bmr.base);
  const size_t nsl = std::max<size_t>(1, blen / C);
  // Checksums of what the agent will hold, computed beside the transfer:
  // the staged copy (buffer or node segment, at each region's offset), else
  // the regions themselves (unchanged until the commit returns, or until
  // icheck_wait when asynchronous).
  auto sums_f = std::async(std::launch::async, [this, &regs, b, staged] {
    json sums = json::array();
    for (size_t i = 0; i < regs.size(); ++i) {
      const size_t off = regs[i].at("offset"), n = regs[i].at("bytes");
      sums.push_back(staged ? region_sum(b + off, n) : region_sum(regions.at(i).ptr, regions.at(i).bytes));
    }
    return sums;
  });
  if (pull) {
    Fabric::Busy busy(*fab);  // we are the RMA target: poll without naps
    size_t outstanding = 0;
    for (size_t off = 0, k = 0; off < total; off += C, ++k) {
      size_t len = std::min(C, total - off);
      size_t boff = staged ? off : (k % nsl) * C;
      if (!staged && outstanding == nsl) {
        json ack = recv_msg(a.sock, to);
        if (ack.contains("error")) throw WireError(ack["error"].get<std::string>());
        outstanding--;
      }
      if (!staged) copy_out(off, len, b + boff);
      send_msg(a.sock, {{"op", "chunk"}, {"buf_off", boff}, {"data_off", off}, {"len", len}});
      outstanding++;
    }
    while (outstanding--) {
      json ack = recv_msg(a.sock, to);
      if (ack.contains("error")) throw WireError(ack["error"].get<std::string>());
    }
  } else {
    uint64_t rkey = r.at("key"), rbase = r.at("base");
    if (staged) {
      fab->write(a.peer, bmr, 0, total, rbase, rkey, 15000);
    } else {
      std::future<void> inflight;
      for (size_t off = 0, k = 0; off < total; off += C, ++k) {
        size_t len = std::min(C, total - off);
        size_t boff = (k % nsl) * C;
        if (nsl == 1 && inflight.valid()) inflight.get();
        copy_out(off, len, b + boff);
        if (inflight.valid()) inflight.get();
        inflight = std::async(std::launch::async, [this, &a, &bmr, boff, len, off, rbase, rkey] {
          fab->write(a.peer, bmr, boff, len, rbase + off, rkey, 15000);
        });
      }
      if (inflight.valid()) inflight.get();
    }
  }
  request(a.sock, {{"op", "end"}, {"v", v}, {"mode", pull ? "pull" : "push"}, {"sums", sums_f.get()}}, to);
}

int ClientImpl::finish_commit(int64_t v, bool ok) {
  ok = comm.all(ok);
  if (ok) {
    bool pok = true;
    try {
      if (agent) request(agent->sock, {{"op", "publish"}, {"v", v}}, cfg.request_timeout_ms);
    } catch (const std::exception& e) {
      last_error = e.what();
      pok = false;
    }
    ok = comm.all(pok);
  }
  int rc = ICHECK_OK;
  if (ok) {
    version = v;
  } else {
    // §6.5.1: an agent failed during the transfer -> every rank reverts to
    // direct writes of the same version; back to RDMA after a later probe.
    ctl_quiet({{"op", "agent_failed"}, {"app_id", app_id}, {"error", last_error_}});
    agent.reset();
    mode = "direct";
    rc = direct_write(v);
    if (rc == ICHECK_OK) version = v;
  }
  fallback_src = nullptr;
  last_tsync = now_s() - commit_t0;
  if (rc == ICHECK_OK)
    ctl_quiet({{"op", "version"}, {"app_id", app_id}, {"v", v}, {"bytes", total_bytes() * size_t(comm.size())},
               {"tsync", last_tsync}, {"mode", mode}});
  return rc;
}

void ClientImpl::drop_agents() {
  agent.reset();
  extra.clear();
  rmr.clear();
  buf.reset();
  if (seg) seg->mr.reset();
  fab.reset();
  fab_prov.clear();
  mode = "direct";
  ctl_quiet({{"op", "agent_failed"}, {"app_id", app_id}, {"error", last_error_}});
}

bool ClientImpl::in_place_ok() const {
  if (!rregions.is_array() || rregions.size() != regions.size()) return false;
  for (size_t i = 0; i < regions.size(); ++i) {
    const json& x = rregions[i];
    if (x.value("label", "") != regions[i].label || x.value("type", 0) != regions[i].type ||
        x.value("count", size_t(0)) != regions[i].count || x.value("offset", size_t(0)) != regions[i].offset)
      return false;
  }
  return true;
}

bool ClientImpl::restore_from_agent(int64_t v) {
  try {
    AgentLink& a = *agent;
    // A restore is always read by this process (fi_read from the agent's
    // registered piece, "push" for the agent: it keeps its endpoint
    // progressing), whatever the commit direction: a read completes once
    // the bytes are here, shm does it with process_vm_readv and without
    // this process's progress thread, which a loaded core can starve.
    const bool pull = false;
    json r = request(a.sock, {{"op", "rbegin"}, {"v", v}, {"mode", pull ? "pull" : "push"}}, cfg.request_timeout_ms);
    size_t total = r.at("total");
    rregions = r.at("regions");
    std::vector<std::unique_ptr<MemRegion>> tmr;  // restore targets, deregistered when done
    if (direct_restore && in_place_ok() && !zc_broken && cfg.dyn.zero_copy) {
      try {
        for (auto& g : regions) tmr.push_back(fab->register_memory(g.ptr, g.bytes, Fabric::Access::target));
      } catch (const std::exception& e) {
        last_error = std::string("in-place restore disabled: ") + e.what();
        tmr.clear();
      }
    }
    if (!tmr.empty()) {
      // restart_all: RMA straight into the application's regions, through
      // registrations that allow writes only for this restore.
      Fabric::Busy busy(*fab);
      for (size_t i = 0; i < regions.size(); ++i) {
        const Region& g = regions[i];
        if (pull)
          request(a.sock, {{"op", "rchunk"}, {"buf_off", 0}, {"data_off", g.offset}, {"len", g.bytes},
                           {"key", tmr[i]->key}, {"base", tmr[i]->remote_base}}, cfg.request_timeout_ms);
        else
          fab->read(a.peer, *tmr[i], 0, g.bytes, uint64_t(r.at("base")) + g.offset, r.at("key"), 15000);
      }
      request(a.sock, {{"op", "rend"}}, cfg.request_timeout_ms);
      rdata.clear();
      for (size_t i = 0; i < regions.size(); ++i) {
        require_intact(verify_region(rregions[i], regions[i].ptr, regions[i].bytes, v));
      }
      restored_in_place = true;
      return true;
    }
    rdata.assign(total, 0);
    if (total) {
      auto mr = fab->register_memory(rdata.data(), total, Fabric::Access::target);
      Fabric::Busy busy(*fab);
      if (pull)
        request(a.sock, {{"op", "rchunk"}, {"buf_off", 0}, {"data_off", 0}, {"len", total},
                         {"key", mr->key}, {"base", mr->remote_base}}, cfg.request_timeout_ms);
      else
        fab->read(a.peer, *mr, 0, total, r.at("base"), r.at("key"), 15000);
    }
    request(a.sock, {{"op", "rend"}}, cfg.request_timeout_ms);
    for (auto& x : rregions) {
      const size_t off = x.at("offset"), n = x.at("bytes");
      if (off > total || n > total - off) throw std::runtime_error("corrupt: region outside the agent's piece");
      require_intact(verify_region(x, rdata.data() + off, n, v));
    }
    return true;
  } catch (const std::exception& e) {
    last_error = e.what();
    return false;
  }
}

}  // namespace dynres::icheck
