// iCheck client: reading the pieces of a version committed by another
// process count straight from the agents (restart-based resize from agent
// memory, [John24 §7.4.4]): which agent holds which old rank, and RMA of
// byte ranges of those pieces. The plan of what to read is Adapt's.
#include "client_impl.hpp"

namespace dynres::icheck {

AgentLink& ClientImpl::link_to(int idx, bool second) {
  if (agent && agent->index == idx && !second) return *agent;
  auto& l = extra[second ? -1 - idx : idx];
  if (l) return *l;
  if (!agent_list.is_array() || idx < 0 || size_t(idx) >= agent_list.size())
    throw std::runtime_error("no agent " + std::to_string(idx) + " in the agent list");
  auto n = open_link(agent_list[size_t(idx)], idx, true);
  // a reader link: the agent's slot layout (that of the running commit) stays
  json r = request(n->sock,
                   {{"op", "hello"}, {"app", app}, {"uid", uid}, {"reader", true},
                    {"provider", fab->provider()}, {"addr", fab->address_hex()}},
                   cfg.hello_timeout_ms);
  n->peer = fab->add_peer(r.at("addr"));
  l = std::move(n);
  return *l;
}

std::string ClientImpl::agent_pieces(int64_t v, int n, const std::string& meta_label, size_t max_meta, bool defer_verify) {
  json out = {{"ok", false}, {"err", "not asked"}};
  if (comm.rank() == 0) {
    try {
      if (shmr()) throw std::runtime_error("the SHMR strategy keeps node segments, not ranks' pieces");
      if (!fab || !agent_list.is_array() || agent_list.empty()) throw std::runtime_error("no agents");
      if (n < 1 || n > (1 << 20)) throw std::runtime_error("invalid process count " + std::to_string(n));
      json slots = json::array();
      for (int i = 0; i < n; ++i) slots.push_back(nullptr);
      // every agent at once: each checks its pieces' checksums (the bulk of
      // the time) while the others do the same
      const double t0 = now_s();
      std::vector<AgentLink*> links;
      for (size_t a = 0; a < agent_list.size(); ++a) links.push_back(&link_to(int(a)));
      const double t1 = now_s();
      verifying.clear();
      if (defer_verify)
        for (size_t a = 0; a < agent_list.size(); ++a) {
          // a second reader connection per agent: the check runs there
          // while this rank's reads use the first one
          send_msg(link_to(int(a), true).sock, {{"op", "held"}, {"v", v}, {"verify", true}});
          verifying.push_back(int(a));
        }
      for (auto* l : links) send_msg(l->sock, {{"op", "held"}, {"v", v}, {"verify", !defer_verify}});
      std::string bad;
      for (size_t a = 0; a < links.size(); ++a) {
        json r = recv_msg(links[a]->sock, cfg.request_timeout_ms);
        if (r.is_object() && r.contains("error")) {
          if (bad.empty()) bad = "agent " + std::to_string(a) + ": " + (r["error"].is_string() ? r["error"].get<std::string>() : r["error"].dump());
          continue;
        }
        for (auto& p : r.at("pieces")) {
          const int s = p.at("slot").get<int>();
          if (s < 0 || s >= n || !p.at("regions").is_array()) continue;
          if (slots[size_t(s)].is_null()) slots[size_t(s)] = {{"agent", int(a)}, {"total", p.at("total")}, {"regions", p["regions"]}};
        }
      }
      if (!bad.empty()) throw std::runtime_error(bad);
      const double t2 = now_s();
      // every old rank's metadata region, all agents at once
      std::vector<std::string> texts(static_cast<size_t>(n));
      std::vector<AgentRead> reads;
      for (int s = 0; s < n; ++s) {
        if (slots[size_t(s)].is_null())
          throw std::runtime_error("no agent holds old rank " + std::to_string(s) + "'s piece of version " + std::to_string(v));
        for (auto& x : slots[size_t(s)]["regions"])
          if (x.value("label", "") == meta_label) {
            const uint64_t off = x.at("offset"), bytes = x.at("count");  // ICHECK_CHAR: count = bytes
            if (bytes > max_meta) throw std::runtime_error("redistribution metadata too large");
            texts[size_t(s)].assign(size_t(bytes), '\0');
            reads.push_back({slots[size_t(s)]["agent"].get<int>(), s, v, off, bytes, texts[size_t(s)].data()});
          }
      }
      for (auto& r : reads)
        if (!add_read_target(r.dst, r.len)) throw std::runtime_error(last_error_);
      const bool got = read_agents(reads);
      rtargets.clear();
      if (!got) throw std::runtime_error(last_error_);
      json meta = json::array();
      for (auto& t : texts) meta.push_back(t);
      if (std::getenv("ICHECK_TIMING"))
        std::fprintf(stderr, "icheck: agent pieces timing: links %.4f s, held+verify %.4f s, metadata %.4f s\n", t1 - t0,
                     t2 - t1, now_s() - t2);
      out = {{"ok", true}, {"slots", slots}, {"meta", meta}};
    } catch (const std::exception& e) {
      out = {{"ok", false}, {"err", std::string("agents: ") + e.what()}};
      for (int a : verifying) extra.erase(-1 - a);  // replies unread: links out of step
      verifying.clear();
    }
  }
  return comm.bcast(out.dump());
}

bool ClientImpl::read_agent(int idx, int slot, int64_t v, uint64_t off, void* dst, uint64_t len) {
  try {
    if (!fab) throw std::runtime_error("no fabric");
    AgentLink& l = link_to(idx);
    if (len == 0) return true;
    auto mr = fab->register_memory(dst, len, Fabric::Access::target);
    json r = request(l.sock, {{"op", "rbegin"}, {"v", v}, {"slot", slot}, {"mode", "pull"}}, cfg.request_timeout_ms);
    const uint64_t total = r.at("total");
    if (off > total || len > total - off) throw std::runtime_error("range outside old rank " + std::to_string(slot) + "'s piece");
    {
      Fabric::Busy busy(*fab);  // we are the RMA target
      request(l.sock, {{"op", "rchunk"}, {"buf_off", 0}, {"data_off", off}, {"len", len}, {"key", mr->key},
                       {"base", mr->remote_base}},
              cfg.request_timeout_ms);
    }
    request(l.sock, {{"op", "rend"}}, cfg.request_timeout_ms);
    return true;
  } catch (const std::exception& e) {
    last_error = std::string("read of old rank ") + std::to_string(slot) + " from agent " + std::to_string(idx) + ": " + e.what();
    extra.erase(idx);  // a broken link is reopened next time
    return false;
  }
}

std::string ClientImpl::verify_wait() {
  std::string bad;
  if (comm.rank() == 0) {
    for (int a : verifying) {
      try {
        auto it = extra.find(-1 - a);
        if (it == extra.end() || !it->second) throw std::runtime_error("verify link gone");
        json r = recv_msg(it->second->sock, std::max(cfg.request_timeout_ms, 120000));
        if (r.is_object() && r.contains("error"))
          throw std::runtime_error(r["error"].is_string() ? r["error"].get<std::string>() : r["error"].dump());
      } catch (const std::exception& e) {
        if (bad.empty()) bad = "agent " + std::to_string(a) + ": " + e.what();
        extra.erase(-1 - a);
      }
    }
  }
  verifying.clear();
  return comm.bcast(bad);
}

bool ClientImpl::add_read_target(char* p, uint64_t n) {
  try {
    if (!fab) throw std::runtime_error("no fabric");
    for (auto& [base, mr] : rtargets)
      if (p >= base && p + n <= base + mr->len) return true;
    rtargets.emplace_back(p, fab->register_memory(p, size_t(n), Fabric::Access::target));
    return true;
  } catch (const std::exception& e) {
    last_error = std::string("registration of the redistribution target: ") + e.what();
    return false;
  }
}

bool ClientImpl::read_agents(const std::vector<AgentRead>& reads) {
  // Per agent one message list: per old rank rbegin, its rchunks, rend.
  // One request in flight per agent, all agents at once: agent a moves its
  // data while agent b's reply is awaited.
  struct Queue {
    AgentLink* link = nullptr;
    std::vector<json> msgs;
    std::vector<uint64_t> need;  ///< per message: bytes of the piece it needs (rbegin checks total)
    size_t next = 0;
    uint64_t total = 0;
  };
  std::map<int, Queue> q;
  int current = -1;
  try {
    if (!fab) throw std::runtime_error("no fabric");
    std::vector<const AgentRead*> sorted;
    for (auto& r : reads)
      if (r.len) sorted.push_back(&r);
    std::stable_sort(sorted.begin(), sorted.end(), [](const AgentRead* a, const AgentRead* b) {
      return a->agent != b->agent ? a->agent < b->agent : a->slot < b->slot;
    });
    for (size_t k = 0; k < sorted.size(); ++k) {
      const AgentRead& r = *sorted[k];
      Queue& qa = q[r.agent];
      if (!qa.link) qa.link = &link_to(r.agent);
      const bool first = k == 0 || sorted[k - 1]->agent != r.agent || sorted[k - 1]->slot != r.slot;
      if (first) qa.msgs.push_back({{"op", "rbegin"}, {"v", r.v}, {"slot", r.slot}, {"mode", "pull"}}), qa.need.push_back(0);
      const MemRegion* mr = nullptr;
      char* base = nullptr;
      for (auto& [b, m] : rtargets)
        if (r.dst >= b && r.dst + r.len <= b + m->len) mr = m.get(), base = b;
      if (!mr) throw std::runtime_error("read into unregistered memory");
      qa.msgs.push_back({{"op", "rchunk"}, {"buf_off", uint64_t(r.dst - base)}, {"data_off", r.off}, {"len", r.len},
                         {"key", mr->key}, {"base", mr->remote_base}});
      qa.need.push_back(r.off + r.len);
      const bool last = k + 1 == sorted.size() || sorted[k + 1]->agent != r.agent || sorted[k + 1]->slot != r.slot;
      if (last) qa.msgs.push_back({{"op", "rend"}}), qa.need.push_back(0);
    }
    Fabric::Busy busy(*fab);  // we are the RMA target
    // Pipelined: every message of every agent is sent at once (an agent
    // answers its connection's requests in order), then the replies are
    // read; one round trip per batch instead of one per request.
    for (auto& [a, qa] : q) {
      current = a;
      for (auto& m : qa.msgs) send_msg(qa.link->sock, m);
    }
    std::string bad;
    for (auto& [a, qa] : q) {
      current = a;
      for (; qa.next < qa.msgs.size(); ++qa.next) {
        json r = recv_msg(qa.link->sock, cfg.request_timeout_ms);
        if (r.is_object() && r.contains("error") && bad.empty())
          bad = "agent " + std::to_string(a) + ": " + (r["error"].is_string() ? r["error"].get<std::string>() : r["error"].dump());
        if (qa.msgs[qa.next]["op"] == "rbegin" && r.is_object() && r.contains("total")) qa.total = r["total"].get<uint64_t>();
        else if (qa.need[qa.next] > qa.total && bad.empty()) bad = "agent " + std::to_string(a) + ": range outside the old rank's piece";
      }
    }
    if (!bad.empty()) throw std::runtime_error(bad);
    return true;
  } catch (const std::exception& e) {
    last_error = "redistribution read (agent " + std::to_string(current) + "): " + e.what();
    // a link with requests in flight is out of step: reopened next time
    for (auto& [a, qa] : q)
      if (qa.next < qa.msgs.size()) extra.erase(a);
    return false;
  }
}

}  // namespace dynres::icheck
