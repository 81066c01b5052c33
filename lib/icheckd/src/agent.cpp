#include "dynres/icheck/agent.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "dynres/icheck/fabric.hpp"
#include "dynres/icheck/types.hpp"
#include "dynres/icheck/wire.hpp"
#include "dynres/ckstore.hpp"

namespace dynres::icheck {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Field `k` of a control message as a checked unsigned integer: present, a
/// JSON integer >= 0 (negative numbers, floats, strings and booleans are
/// refused instead of being converted) and <= max. Throws "invalid: ..."
/// naming the field.
uint64_t need_u64(const json& m, const char* k, uint64_t max = UINT64_MAX) {
  auto it = m.find(k);
  if (it == m.end()) throw std::runtime_error(std::string("invalid: field '") + k + "' missing");
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))
    throw std::runtime_error(std::string("invalid: field '") + k + "' must be a non-negative integer, got " +
                             it->dump().substr(0, 64));
  uint64_t v = it->get<uint64_t>();
  if (v > max)
    throw std::runtime_error(std::string("invalid: field '") + k + "' = " + std::to_string(v) + " exceeds " +
                             std::to_string(max));
  return v;
}
/// Optional variant: `def` when the field is absent.
uint64_t opt_u64(const json& m, const char* k, uint64_t def, uint64_t max = UINT64_MAX) {
  return m.contains(k) ? need_u64(m, k, max) : def;
}
/// [off, off + len) lies inside [0, total), without overflow.
bool inside(uint64_t off, uint64_t len, uint64_t total) { return len <= total && off <= total - len; }

/// MemAvailable of /proc/meminfo in bytes (0 = unknown).
uint64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string k, unit;
  uint64_t v = 0;
  while (f >> k >> v >> unit)
    if (k == "MemAvailable:") return v * 1024;
  return 0;
}

/// Limits of the control protocol (bytes / counts).
constexpr uint64_t kMaxSlots = 1u << 20;       ///< slots, agents, ranks of one application
constexpr size_t kMaxRegions = 1u << 16;       ///< regions of one piece

/// One version of one slot held in agent memory [John24 §6.2.3]: a
/// pre-faulted mapping registered once with the slot's fabric. After the next
/// version is published the piece becomes the slot's spare and is recycled
/// as the target of the following commit (double buffering), so a steady
/// state commit neither maps, faults nor registers memory.
struct Piece {
  int slot = 0;
  Fabric* fab = nullptr;  ///< fabric `mr` is registered with
  uint64_t v = 0;
  size_t total = 0;
  std::unique_ptr<Mapping> mem;
  std::unique_ptr<MemRegion> mr;
  json regions;
  bool complete = false;
  bool lazy = false;  ///< spare whose pages were handed to MADV_FREE (Mapping::lazy_free)
  size_t received = 0;
  double t0 = 0, t1 = 0;
};
using PieceP = std::shared_ptr<Piece>;

struct SlotState {
  PieceP current;
  std::map<uint64_t, PieceP> pending;
  PieceP spare;  ///< recycled buffer of a superseded version (AgentOptions::recycle)
};

class Agent {
 public:
  explicit Agent(const AgentOptions& o) : opt_(o) {}

  int run(std::atomic<bool>* ext_stop) {
    require_safe_tcp_auth(opt_.listen);
    // libfabric's start-up (every provider loaded, /proc/kallsyms scanned
    // twice: ~0.4 s of CPU alone, 8-25 s while two applications' ranks and
    // agents start at once on 2 cores) begins now, in the background, not
    // inside the first "hello", which the library waits for only
    // hello_timeout_ms before it falls back to direct writes
    prepare_fabric();
    Socket l = listen_on(opt_.listen);
    std::string addr = bound_address(l, opt_.listen);
    self_addr_ = addr;
    if (!opt_.ready_file.empty()) {
      std::ofstream(opt_.ready_file + ".tmp") << addr << "\n";
      std::rename((opt_.ready_file + ".tmp").c_str(), opt_.ready_file.c_str());
    }
    if (opt_.print_ready) {
      std::printf("READY %s\n", addr.c_str());
      std::fflush(stdout);
    }
    if (test_ops_)
      std::fprintf(stderr, "icagent %s: test operations enabled (ICHECK_AGENT_TEST_OPS=1): for tests only\n",
                   opt_.id.c_str());
    std::thread pfs([this] { pfs_loop(); });
    // One thread per control connection, which first authenticates its peer
    // (MUNGE on TCP, up to kAuthTimeoutMs): a slow or silent client never
    // stalls the accept loop and thus never the other clients. At most
    // kMaxPreAuth connections of one peer host wait for authentication at a
    // time, kMaxConns connections in all. A finished thread is joined by the
    // accept loop and its socket closed (managers open one per heartbeat).
    struct Worker {
      std::thread t;
      std::shared_ptr<std::atomic<bool>> done;
    };
    std::list<Worker> workers;
    auto reap = [&workers] {
      for (auto it = workers.begin(); it != workers.end();)
        if (*it->done) {
          it->t.join();
          it = workers.erase(it);
        } else {
          ++it;
        }
    };
    const pid_t parent = ::getppid();
    while (!stop_ && !(ext_stop && *ext_stop)) {
      if (opt_.exit_with_parent && ::getppid() != parent) break;  // orphaned
      Socket c = accept_unauthenticated(l, 200);
      trim_spares();
      reap();
      if (!c.valid()) continue;
      const std::string host = peer_host(c);
      std::string over;
      if (workers.size() >= kMaxConns) {
        over = "too many connections";
      } else if (!host.empty()) {
        std::lock_guard<std::mutex> g(mu_);
        if (pre_auth_[host] >= kMaxPreAuth) over = "too many unauthenticated connections from " + host;
        else pre_auth_[host]++;
      }
      if (!over.empty()) {
        std::fprintf(stderr, "icagent %s: refused a connection: %s\n", opt_.id.c_str(), over.c_str());
        try { send_msg(c, {{"error", "busy: " + over}}); } catch (...) {}
        continue;
      }
      auto sp = std::make_shared<Socket>(std::move(c));
      {
        std::lock_guard<std::mutex> g(mu_);
        conns_.push_back(sp);
      }
      auto done = std::make_shared<std::atomic<bool>>(false);
      workers.push_back({std::thread([this, sp, done, host] {
                           const bool authed = authenticate_accepted(*sp);
                           if (!host.empty()) {
                             std::lock_guard<std::mutex> g(mu_);
                             if (--pre_auth_[host] <= 0) pre_auth_.erase(host);
                           }
                           if (authed && peer_allowed(*sp)) serve(*sp);
                           {
                             std::lock_guard<std::mutex> g(mu_);
                             conns_.erase(std::remove(conns_.begin(), conns_.end(), sp), conns_.end());
                           }
                           *done = true;
                         }),
                         done});
    }
    {
      // under mu_, then wake every waiter: a flush waiting for its write or
      // its manifest ends at once ("shutdown: ...") instead of at its timeout
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
      for (auto& c : conns_) c->shutdown();
      pfs_done_cv_.notify_all();
      pfs_cv_.notify_all();
    }
    for (auto& w : workers) w.t.join();
    pfs_cv_.notify_all();
    pfs.join();
    if (is_unix_address(opt_.listen)) ::unlink(opt_.listen.substr(5).c_str());
    return 0;
  }

 private:
  Fabric& fabric(const std::string& prov) {
    std::lock_guard<std::mutex> g(fab_mu_);
    auto it = fabrics_.find(prov);
    if (it != fabrics_.end()) return *it->second;
    FabricOptions fo;
    fo.provider = prov;
    fo.node = opt_.fabric_node;
    auto f = std::make_unique<Fabric>(fo);
    auto& ref = *f;
    fabrics_[prov] = std::move(f);
    return ref;
  }

  /// The application's uid, or the service (root, or the uid this agent
  /// runs as: its manager and peer agents); -1 = TCP without authentication
  /// (allowed on loopback only). Others are answered "perm: ..." and dropped.
  bool peer_allowed(Socket& c) {
    long pu = peer_uid(c);
    if (pu < 0 || uint32_t(pu) == opt_.uid || pu == 0 || pu == long(::geteuid())) return true;
    std::fprintf(stderr, "icagent %s: refused a connection from uid %ld (serves uid %u)\n", opt_.id.c_str(), pu,
                 opt_.uid);
    try { send_msg(c, {{"error", "perm: connection from another user"}}); } catch (...) {}
    return false;
  }

  json versions_of(int slot) {
    std::lock_guard<std::mutex> g(mu_);
    json out = json::array();
    auto it = slots_.find(slot);
    if (it == slots_.end()) return out;
    auto add = [&](const PieceP& p, bool cur) {
      out.push_back({{"v", p->v}, {"current", cur}, {"total", p->total}, {"regions", p->regions}});
    };
    if (it->second.current) add(it->second.current, true);
    for (auto& [v, p] : it->second.pending)
      if (p->complete) add(p, false);
    return out;
  }

  /// Versions this agent holds complete in ANY slot of the application,
  /// newest first, each with the process count that committed it (regions'
  /// "nranks"): after a resize a new rank's own slot may hold nothing while
  /// the agents hold the old ranks' pieces [John24 §7.4.4].
  json app_versions() {
    std::lock_guard<std::mutex> g(mu_);
    std::map<uint64_t, int, std::greater<>> vs;
    auto add = [&](const PieceP& p) {
      int n = 0;
      for (auto& r : p->regions) n = std::max(n, int(r.value("nranks", 0)));
      vs[p->v] = std::max(vs[p->v], n);
    };
    for (auto& [k, st] : slots_) {
      if (st.current) add(st.current);
      for (auto& [v, p] : st.pending)
        if (p->complete) add(p);
    }
    json out = json::array();
    for (auto& [v, n] : vs) out.push_back({{"v", v}, {"nranks", n}});
    return out;
  }

  /// The pieces of version v this agent holds, every slot: [{slot, total,
  /// regions}]. With verify, each region's bytes are checked against the
  /// library's XXH3_64 first ("corrupt: ..." on a mismatch): a reader that
  /// takes only byte ranges (a redistributing restore) cannot check the
  /// whole region itself.
  json held(uint64_t v, bool verify) {
    std::vector<PieceP> ps;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto& [k, st] : slots_) {
        if (st.current && st.current->v == v) ps.push_back(st.current);
        else if (auto p = st.pending.find(v); p != st.pending.end() && p->second->complete) ps.push_back(p->second);
      }
    }
    json out = json::array();
    for (auto& p : ps) {
      if (verify)
        for (auto& r : p->regions) {
          const uint64_t off = r.value("offset", uint64_t(0));
          const uint64_t n = r.value("count", uint64_t(0)) * icheck_elem_size(r.value("type", 0));
          if (!inside(off, n, p->total)) throw std::runtime_error("corrupt: region outside its piece");
          if (!r.contains("xxh3") || XXH3_64bits(static_cast<const char*>(p->mem->p) + off, n) != r["xxh3"].get<uint64_t>())
            throw std::runtime_error("corrupt: region '" + r.value("label", std::string()) + "' of slot " +
                                     std::to_string(p->slot) + " v" + std::to_string(v) + " does not match its checksum");
        }
      out.push_back({{"slot", p->slot}, {"total", p->total}, {"regions", p->regions}});
    }
    return out;
  }

  PieceP find_piece(int slot, uint64_t v) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = slots_.find(slot);
    if (it == slots_.end()) return nullptr;
    if (it->second.current && it->second.current->v == v) return it->second.current;
    auto p = it->second.pending.find(v);
    if (p != it->second.pending.end() && p->second->complete) return p->second;
    return nullptr;
  }

  void serve(Socket& s) {
    struct Conn {
      bool hello = false;
      int slot = -1;
      Fabric* fab = nullptr;
      uint64_t peer = 0;
      uint64_t key = 0, base = 0;
      PieceP piece;
      std::unique_ptr<Fabric::Busy> busy;
    } c;
    for (;;) {
      json m;
      try {
        m = recv_msg(s, -1);
      } catch (const WireError&) {
        break;  // library gone: pending pieces stay pending (never current)
      }
      json r = {{"ok", true}};
      try {
        std::string op = m.value("op", "");
        if (op == "hello") {
          if (m.value("app", "") != opt_.app || m.value("uid", -1L) != long(opt_.uid))
            throw std::runtime_error("perm: this agent serves another application/user");
          // reader: a redistributing restore reading other slots' pieces
          // (held, rbegin with slot); it changes nothing of the agent's
          // slot layout and may not commit
          const bool reader = m.value("reader", false);
          const int slot = reader ? 0 : int(need_u64(m, "slot", kMaxSlots - 1));
          const int nslots = int(opt_u64(m, "nslots", 1, kMaxSlots));
          const int nagents = int(opt_u64(m, "nagents", 1, kMaxSlots));
          const int index = int(opt_u64(m, "agent_index", 0, kMaxSlots - 1));
          // SHMR: slots are nodes, not ranks; the registered rank count
          // decides when a second-level version is complete (0 = unknown).
          const int nranks = int(opt_u64(m, "nranks", 0, kMaxSlots));
          if (nslots < 1 || slot >= nslots || nagents < 1 || index >= nagents)
            throw std::runtime_error("invalid: hello with slot " + std::to_string(slot) + " of " +
                                     std::to_string(nslots) + ", agent " + std::to_string(index) + " of " +
                                     std::to_string(nagents));
          std::vector<std::string> peers;
          if (m.contains("peers")) peers = m["peers"].get<std::vector<std::string>>();
          if (peers.size() > kMaxSlots) throw std::runtime_error("invalid: too many peers");
          c.slot = reader ? -1 : slot;
          c.fab = &fabric(m.value("provider", opt_.provider));
          c.peer = c.fab->add_peer(m.at("addr"));
          c.hello = true;
          if (!reader) {
            std::lock_guard<std::mutex> g(mu_);
            nslots_ = nslots;
            nagents_ = nagents;
            index_ = index;
            nranks_ = nranks;
            if (!peers.empty()) peers_ = peers;
            slots_[c.slot];
          }
          r["addr"] = c.fab->address_hex();
          r["provider"] = c.fab->provider();
          if (!reader) r["versions"] = versions_of(c.slot);
          r["app_versions"] = app_versions();
          r["id"] = opt_.id;
        } else if (op == "part") {
          // The reply waits for the manifest (at most timeout_ms): the
          // sending agent's flush succeeds only once the version is durable.
          const uint64_t v = need_u64(m, "v");
          add_part(v, int(need_u64(m, "index", kMaxSlots - 1)), m.at("part").get<std::string>());
          wait_manifest(v, int(opt_u64(m, "timeout_ms", 60000, 3600000)));
        } else if (op == "stats") {
          std::lock_guard<std::mutex> g(mu_);
          size_t mem = 0;
          size_t spare = 0;
          for (auto& [k, st] : slots_) {
            if (st.spare && st.spare->mem) spare += st.spare->mem->len;
            if (st.current) mem += st.current->total;
            for (auto& [v, p] : st.pending) mem += p->total;
          }
          const Resident res = resident_memory();
          r.update({{"ncops", ncops_}, {"bytes", bytes_}, {"seconds", seconds_}, {"last_op", last_op_},
                    {"mem_bytes", mem}, {"slots", slots_.size()}, {"rss", res.rss}, {"lazy_free", res.lazy_free},
                    {"spare_bytes", spare}, {"recycled", recycled_.load()},
                    {"pulls", pulls_.load()}, {"pushes", pushes_.load()}});
        } else if (op == "shutdown") {
          if (m.value("flush", false)) {
            try {
              flush_all(true, int(opt_u64(m, "timeout_ms", 120000, 3600000)));
            } catch (const std::exception& e) {
              r = {{"error", e.what()}};  // reported; the agent stops all the same
            }
          }
          send_msg(s, r);
          stop_ = true;
          return;
        } else if (op == "flush") {  // also from the manager (no hello): the whole agent
          flush_all(true, int(opt_u64(m, "timeout_ms", 120000, 3600000)));
        } else if (op == "retire") {
          // also from the manager (no hello): a REMOVE_NODES moves this agent
          // off its node [John24 Alg. 9]: from now on no commit begins or is
          // published here (the library falls back to the second level for
          // it), so the flush that follows holds the newest version; reads
          // and flushes go on. {"on": false} lifts the fence.
          retiring_ = m.value("on", true);
          r["retiring"] = retiring_.load();
        } else if (op == "test_corrupt" && test_ops_) {
          r["pieces"] = test_corrupt(need_u64(m, "v"));
        } else if (!c.hello) {
          throw std::runtime_error("state: hello first");
        } else if (c.slot < 0 && (op == "begin" || op == "chunk" || op == "end" || op == "publish" || op == "versions")) {
          throw std::runtime_error("state: a reader connection cannot " + op);
        } else if ((op == "begin" || op == "publish") && retiring_) {
          throw std::runtime_error("retiring: this agent is being moved off its node; no new version here");
        } else if (op == "begin") {
          auto p = std::make_shared<Piece>();
          p->slot = c.slot;
          p->v = need_u64(m, "v", uint64_t(INT64_MAX));
          p->total = need_u64(m, "total", SIZE_MAX / 2);
          p->regions = m.at("regions");
          check_regions(p->regions, p->total);
          check_capacity(p->total);
          p->fab = c.fab;
          p->t0 = now_s();
          take_buffer(c.slot, *p);
          c.key = opt_u64(m, "key", 0);
          c.base = opt_u64(m, "base", 0);
          c.piece = p;
          {
            std::lock_guard<std::mutex> g(mu_);
            slots_[c.slot].pending[p->v] = p;
          }
          (m.value("mode", "pull") == "push" ? pushes_ : pulls_)++;
          if (m.value("mode", "pull") == "push") {
            c.busy = std::make_unique<Fabric::Busy>(*c.fab);
            r["key"] = p->mr->key;
            r["base"] = p->mr->remote_base;
          }
        } else if (op == "chunk") {
          if (!c.piece) throw std::runtime_error("state: chunk without begin");
          const uint64_t doff = need_u64(m, "data_off"), len = need_u64(m, "len"), boff = need_u64(m, "buf_off");
          if (!inside(doff, len, c.piece->total))
            throw std::runtime_error("invalid: chunk [" + std::to_string(doff) + ", +" + std::to_string(len) +
                                     ") outside the piece of " + std::to_string(c.piece->total) + " bytes");
          // Zero-copy commits name the source region's key per chunk.
          const uint64_t key = opt_u64(m, "key", c.key);
          const uint64_t base = opt_u64(m, "base", c.base);
          if (boff > UINT64_MAX - base) throw std::runtime_error("invalid: buf_off + base overflows");
          c.fab->read(c.peer, *c.piece->mr, doff, len, base + boff, key);
          c.piece->received += len;
        } else if (op == "end") {
          if (!c.piece) throw std::runtime_error("state: end without begin");
          c.busy.reset();
          if (m.value("mode", "pull") == "pull" && c.piece->received != c.piece->total)
            throw std::runtime_error("incomplete: piece misses bytes");
          // The library's checksum of every region (XXH3_64, regions' order):
          // kept with the region, checked by a restore and before the
          // second-level write.
          if (m.contains("sums")) {
            const json& sums = m["sums"];
            if (!sums.is_array() || sums.size() != c.piece->regions.size())
              throw std::runtime_error("invalid: end needs one checksum per region");
            json regs = c.piece->regions;
            for (size_t i = 0; i < sums.size(); ++i) {
              if (!sums[i].is_number_unsigned() && !(sums[i].is_number_integer() && sums[i].get<int64_t>() >= 0))
                throw std::runtime_error("invalid: checksum " + std::to_string(i) + " is not a non-negative integer");
              regs[i]["xxh3"] = sums[i].get<uint64_t>();
            }
            c.piece->regions = std::move(regs);
          }
          std::lock_guard<std::mutex> g(mu_);
          c.piece->complete = true;
          c.piece->t1 = now_s();
          ncops_++;
          bytes_ += c.piece->total;
          seconds_ += c.piece->t1 - c.piece->t0;
          last_op_ = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
          c.piece.reset();
        } else if (op == "publish") {
          publish(c.slot, need_u64(m, "v"));
        } else if (op == "versions") {
          r["versions"] = versions_of(c.slot);
        } else if (op == "held") {
          r["pieces"] = held(need_u64(m, "v", uint64_t(INT64_MAX)), m.value("verify", false));
        } else if (op == "rbegin") {
          // "slot": another slot of the same application (a redistributing
          // restore reads the old ranks' pieces), else the connection's own
          const int slot = m.contains("slot") ? int(need_u64(m, "slot", kMaxSlots - 1)) : c.slot;
          auto p = find_piece(slot, need_u64(m, "v"));
          if (!p) throw std::runtime_error("noent: version not held by this agent");
          c.piece = p;
          c.key = opt_u64(m, "key", 0);
          c.base = opt_u64(m, "base", 0);
          if (!p->mr || p->mr.get() == nullptr) throw std::runtime_error("state: piece not registered");
          r.update({{"total", p->total}, {"regions", p->regions}, {"key", p->mr->key}, {"base", p->mr->remote_base}});
          if (m.value("mode", "pull") == "push") c.busy = std::make_unique<Fabric::Busy>(*c.fab);
        } else if (op == "rchunk") {
          if (!c.piece) throw std::runtime_error("state: rchunk without rbegin");
          const uint64_t doff = need_u64(m, "data_off"), len = need_u64(m, "len"), boff = need_u64(m, "buf_off");
          if (!inside(doff, len, c.piece->total))
            throw std::runtime_error("invalid: rchunk [" + std::to_string(doff) + ", +" + std::to_string(len) +
                                     ") outside the piece of " + std::to_string(c.piece->total) + " bytes");
          if (m.contains("key")) c.key = need_u64(m, "key"), c.base = need_u64(m, "base");
          if (boff > UINT64_MAX - c.base) throw std::runtime_error("invalid: buf_off + base overflows");
          c.fab->write(c.peer, *c.piece->mr, doff, len, c.base + boff, c.key);
        } else if (op == "rend") {
          c.busy.reset();
          c.piece.reset();
        } else {
          throw std::runtime_error("invalid: unknown op '" + op + "'");
        }
      } catch (const std::exception& e) {
        r = {{"error", e.what()}};
        const bool named = m.is_object() && m.contains("op") && m["op"].is_string();
        std::fprintf(stderr, "icagent %s: refused %s: %s\n", opt_.id.c_str(),
                     named ? m["op"].get<std::string>().c_str() : "?", e.what());
      }
      try {
        send_msg(s, r);
      } catch (const WireError&) {
        break;
      }
    }
    c.busy.reset();
  }

  /// The regions of a `begin`: each one an object with a safe label, a known
  /// type, a rank, and [offset, offset + count * elem size) inside the piece
  /// of `total` bytes (checked without overflow). Throws "invalid: ...".
  void check_regions(const json& regs, uint64_t total) {
    if (!regs.is_array()) throw std::runtime_error("invalid: regions must be an array");
    if (regs.size() > kMaxRegions) throw std::runtime_error("invalid: more than " + std::to_string(kMaxRegions) + " regions");
    for (auto& r : regs) {
      if (!r.is_object() || !r.contains("label") || !r["label"].is_string())
        throw std::runtime_error("invalid: region without a label");
      const std::string label = r["label"];
      const uint64_t type = need_u64(r, "type", 255);
      const size_t es = icheck_elem_size(int(type));
      if (!es) throw std::runtime_error("invalid: region '" + label + "' has unknown type " + std::to_string(type));
      const uint64_t count = need_u64(r, "count"), off = need_u64(r, "offset");
      need_u64(r, "rank", kMaxSlots - 1);
      if (r.contains("nranks")) need_u64(r, "nranks", kMaxSlots);
      if (count > UINT64_MAX / es || !inside(off, count * es, total))
        throw std::runtime_error("invalid: region '" + label + "' [" + std::to_string(off) + ", +" +
                                 std::to_string(count) + " x " + std::to_string(es) + " bytes) outside the piece of " +
                                 std::to_string(total) + " bytes");
    }
  }

  /// Refuse a piece the agent may not hold (before allocating anything):
  /// larger than AgentOptions::max_bytes, or than this node's MemAvailable
  /// plus the memory this agent could recycle. "nomem: ..." reaches the
  /// application, whose library then writes the version to the second level.
  void check_capacity(uint64_t total) {
    if (opt_.max_bytes > 0 && total > opt_.max_bytes)
      throw std::runtime_error("nomem: checkpoint piece of " + std::to_string(total) +
                               " bytes exceeds this agent's limit of " + std::to_string(opt_.max_bytes) +
                               " bytes (max_mem_node_gb)");
    uint64_t spare = 0;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto& [k, st] : slots_)
        if (st.spare && st.spare->mem) spare += st.spare->mem->len;
    }
    const uint64_t avail = mem_available_bytes();
    if (avail > 0 && total > avail + spare)
      throw std::runtime_error("nomem: checkpoint piece of " + std::to_string(total) + " bytes exceeds the " +
                               std::to_string(avail) + " bytes of memory available on this node");
    check_node_budget(total);
  }

  /// The node's checkpoint memory (manager --mem-limit-gb): refuse `total`
  /// when it exceeds what the manager left at its last count, less what this
  /// agent took since (AgentOptions::node_budget_file). A missing or
  /// unreadable file imposes nothing.
  void check_node_budget(uint64_t total) {
    if (opt_.node_budget_file.empty()) return;
    struct stat sb {};
    if (::stat(opt_.node_budget_file.c_str(), &sb) != 0) return;
    double left = -1;
    {
      std::ifstream f(opt_.node_budget_file);
      if (!(f >> left) || !std::isfinite(left) || left < 0) return;
    }
    std::lock_guard<std::mutex> g(budget_mu_);
    const int64_t stamp = int64_t(sb.st_mtim.tv_sec) * 1000000000 + sb.st_mtim.tv_nsec;
    if (stamp != budget_stamp_) budget_stamp_ = stamp, budget_taken_ = 0;
    if (double(total) > left - double(budget_taken_))
      throw std::runtime_error("nomem: checkpoint piece of " + std::to_string(total) + " bytes exceeds the " +
                               std::to_string(uint64_t(std::max(0.0, left - double(budget_taken_)))) +
                               " bytes of checkpoint memory left on this node (manager --mem-limit-gb)");
    budget_taken_ += total;
  }

  /// Give `p` a registered buffer of at least p.total bytes: the slot's
  /// spare when it is large enough, registered with the same fabric and no
  /// longer referenced (a restart or the second-level writer may still read
  /// it), else a fresh pre-faulted mapping registered now.
  void take_buffer(int slot, Piece& p) {
    PieceP spare;
    {
      std::lock_guard<std::mutex> g(mu_);
      auto& st = slots_[slot];
      if (st.spare && st.spare.use_count() == 1 && st.spare->fab == p.fab && st.spare->mem &&
          st.spare->mem->len >= p.total && st.spare->mem->len <= 2 * p.total + (1u << 20)) {
        spare = std::move(st.spare);
      } else if (st.spare && st.spare.use_count() == 1 && st.spare->mem && st.spare->mem->len > 2 * p.total + (1u << 20)) {
        st.spare.reset();  // much too large: return the memory
      }
    }
    if (spare) {
      if (spare->lazy) spare->mem->reuse();
      p.mem = std::move(spare->mem);
      p.mr = std::move(spare->mr);
      recycled_++;
      return;
    }
    p.mem = std::make_unique<Mapping>(p.total, true);
    p.mr = p.fab->register_memory(p.mem->p, p.mem->len);
  }

  /// Hand the pages of every unreferenced spare to the kernel as lazily
  /// freeable (Mapping::lazy_free): between two commits the spare is then
  /// reclaimable like page cache, so the agent holds one checkpoint of
  /// unreclaimable memory per slot, not two, while a commit that finds the
  /// spare intact still writes into faulted-in, registered memory. A spare
  /// still read by the second-level writer or a restart (use_count > 1) is
  /// left for a later call (the accept loop calls this every 200 ms).
  void trim_spares() {
    if (!opt_.recycle) return;
    std::lock_guard<std::mutex> g(mu_);
    for (auto& [k, st] : slots_)
      if (st.spare && !st.spare->lazy && st.spare.use_count() == 1 && st.spare->mem) {
        st.spare->mem->lazy_free();
        st.spare->lazy = true;
      }
  }

  void publish(int slot, uint64_t v) {
    std::unique_lock<std::mutex> g(mu_);
    auto& st = slots_[slot];
    auto it = st.pending.find(v);
    if (it == st.pending.end() || !it->second->complete) {
      if (st.current && st.current->v == v) return;
      throw std::runtime_error("noent: version not complete on this agent");
    }
    PieceP old = st.current;
    st.current = it->second;
    // Drop everything older than v (the previous version stays until now);
    // the largest superseded buffer is kept as the next commit's target.
    auto keep = [&](const PieceP& p) {
      if (!opt_.recycle || !p || p == st.current || !p->mem) return;
      if (!st.spare || st.spare->mem->len < p->mem->len) st.spare = p;
    };
    keep(old);
    for (auto p = st.pending.begin(); p != st.pending.end();) {
      if (p->first <= v) {
        keep(p->second);
        p = st.pending.erase(p);
      } else {
        p = std::next(p);
      }
    }
    // All my slots at v? Then schedule the second level.
    if (!opt_.multi_level || opt_.pfs_dir.empty() || v % uint64_t(std::max(1, opt_.pfs_every)) != 0) return;
    for (int s = 0; s < nslots_; ++s)
      if (nagents_ > 0 && s % nagents_ == index_) {
        auto f = slots_.find(s);
        if (f == slots_.end() || !f->second.current || f->second.current->v != v) return;
      }
    queue_part(v);
  }

  /// Queue the second-level write of version v with the pieces that hold it
  /// NOW (the current pieces of this agent's slots): the writer must not
  /// look them up later, when some slots may already have moved on to v+1
  /// and the part would miss their regions. Caller holds mu_.
  void queue_part(uint64_t v) {
    if (written_.count(v)) return;
    std::vector<PieceP> pieces;
    for (auto& [s, st] : slots_)
      if (st.current && st.current->v == v) pieces.push_back(st.current);
    if (pieces.empty()) return;
    written_.insert(v);
    while (written_.size() > 1024) written_.erase(written_.begin());
    // Writes not started yet of older versions are superseded by v: drop
    // them so that a slow file system never pins one buffer set per commit.
    std::erase_if(pfs_queue_, [v](const PfsJob& j) { return j.v < v; });
    pfs_queue_.push_back({v, std::move(pieces)});
    own_newest_ = std::max(own_newest_, v);
    pfs_cv_.notify_all();
    pfs_done_cv_.notify_all();  // a peer's part of a version skipped here waits in wait_manifest
  }

  /// Agent 0: why the manifest of v can no longer be written by this agent
  /// ("" while it still can): its own part of v was skipped (a newer version
  /// was queued before the writer took up v, see queue_part) or failed.
  /// A peer's part of such a version must be answered at once: the peer's
  /// single second-level writer blocks on the answer, and its part of the
  /// newer version this agent needs next is queued behind it (a wait cycle
  /// that only the 60 s timeout of "part" broke). Caller holds mu_.
  std::string own_part_lost(uint64_t v) const {
    if (auto d = done_.find(v); d != done_.end() && !d->second.empty())
      return "io: agent 0's part of v" + std::to_string(v) + " failed: " + d->second;
    if (own_newest_ <= v || own_started_.count(v)) return "";
    for (const auto& j : pfs_queue_)
      if (j.v == v) return "";
    return "superseded: agent 0 skipped v" + std::to_string(v) + " for the newer v" + std::to_string(own_newest_);
  }

  /// Write the newest current version to the second level now; with
  /// `wait`, block until that version is DURABLE (at most timeout_ms ms):
  /// this agent's part written and, on agent 0 of a multi-agent set, the
  /// manifest of all parts committed (a non-zero agent's part delivery
  /// itself waits for the manifest, see "part"). Throws ("timeout: ...",
  /// "io: ...", "shutdown: ...") otherwise, so "flush" never reports a
  /// version safe on disk that is not.
  void flush_all(bool wait, int timeout_ms = 120000) {
    std::unique_lock<std::mutex> g(mu_);
    uint64_t v = 0;
    for (auto& [s, st] : slots_)
      if (st.current) v = std::max(v, st.current->v);
    if (!v || opt_.pfs_dir.empty()) return;
    queue_part(v);
    if (!wait) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    if (!pfs_done_cv_.wait_until(g, deadline, [&] { return done_.count(v) || stop_; }))
      throw std::runtime_error("timeout: second-level write of v" + std::to_string(v) + " still running");
    auto it = done_.find(v);
    if (it == done_.end()) throw std::runtime_error("shutdown: second-level write of v" + std::to_string(v) + " interrupted");
    if (!it->second.empty()) throw std::runtime_error("io: second-level write of v" + std::to_string(v) + ": " + it->second);
    if (index_ != 0 || nagents_ <= 1) return;  // single agent: its part was the manifest; others: see "part"
    g.unlock();
    wait_manifest(v, int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                   deadline - std::chrono::steady_clock::now()).count())));
  }

  /// Agent 0: wait until the manifest of v is committed (all agents' parts
  /// arrived) or timeout_ms passed; throws when it was not written.
  void wait_manifest(uint64_t v, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::unique_lock<std::mutex> g(mu_);
    auto done = [&] {
      return manifests_.count(v) || stop_ || (!manifests_.empty() && manifests_.rbegin()->first > v) ||
             !own_part_lost(v).empty();
    };
    // a peer that found v superseded on the second level (the library wrote
    // a newer version itself) sends no part of v: looked at every 250 ms
    // rather than waiting out the timeout for it
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      pfs_done_cv_.wait_until(g, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(250)),
                              done);
      if (done()) break;
      g.unlock();
      const bool newer = superseded(v);
      g.lock();
      if (newer) manifests_.emplace(v, "");
    }
    if (!done()) {
      int have = parts_.count(v) ? int(parts_[v].size()) : 0;
      throw std::runtime_error("timeout: manifest of v" + std::to_string(v) + " not written: " +
                               std::to_string(have) + " of " + std::to_string(nagents_) +
                               " agents' parts arrived within " + std::to_string(timeout_ms) + " ms");
    }
    auto it = manifests_.find(v);
    if (it == manifests_.end() && !stop_)
      if (std::string lost = own_part_lost(v); !lost.empty()) throw std::runtime_error(lost);
    if (it == manifests_.end() && !stop_)
      throw std::runtime_error("superseded: manifest of v" + std::to_string(v) + " not written, a newer one was");
    if (it == manifests_.end()) throw std::runtime_error("shutdown: manifest of v" + std::to_string(v) + " not written");
    if (!it->second.empty()) throw std::runtime_error("io: manifest of v" + std::to_string(v) + ": " + it->second);
  }

  // Background writer of the second level (§6.2.5).
  void pfs_loop() {
    for (;;) {
      PfsJob job;
      {
        std::unique_lock<std::mutex> g(mu_);
        pfs_cv_.wait(g, [&] { return stop_ || !pfs_queue_.empty(); });
        if (pfs_queue_.empty()) return;
        job = std::move(pfs_queue_.front());
        pfs_queue_.pop_front();
        own_started_.insert(job.v);
        while (own_started_.size() > 1024) own_started_.erase(own_started_.begin());
      }
      std::string err;
      try {
        write_part(job.v, job.pieces);
      } catch (const std::exception& e) {
        if (superseded(job.v)) {
          // the library's retention removed this unfinished older version
          // directory under the writer: nothing the set needs is lost
          std::fprintf(stderr, "icagent %s: second level v%llu: superseded by a newer valid version (%s)\n",
                       opt_.id.c_str(), (unsigned long long)job.v, e.what());
          mark_manifest_done(job.v);
        } else {
          err = e.what();
          std::fprintf(stderr, "icagent %s: second level v%llu: %s\n", opt_.id.c_str(), (unsigned long long)job.v, e.what());
        }
      }
      job.pieces.clear();  // release the buffers (a superseded one may become a spare)
      std::lock_guard<std::mutex> g(mu_);
      done_[job.v] = err;
      while (done_.size() > 64) done_.erase(done_.begin());
      pfs_done_cv_.notify_all();
    }
  }

  void write_part(uint64_t v, const std::vector<PieceP>& pieces) {
    int nslots, index;
    std::vector<std::string> peers;
    {
      std::lock_guard<std::mutex> g(mu_);
      nslots = nslots_;
      index = index_;
      peers = peers_;
    }
    if (pieces.empty()) return;
    int nranks = 0;
    {
      std::lock_guard<std::mutex> g(mu_);
      nranks = nranks_;
    }
    for (auto& p : pieces)
      for (auto& r : p->regions) nranks = std::max({nranks, int(r.value("nranks", nslots)), int(r.value("rank", 0)) + 1});
    ckstore::Options o;
    o.compress = true;
    o.compress_threshold = uint64_t(opt_.compress_threshold_mb * 1048576.0);
    o.keep_last = size_t(std::max(1, opt_.keep_versions));
    o.chunk_size = 16ull << 20;
    ckstore::Store store(opt_.pfs_dir, opt_.app, opt_.uid);
    if (store.has_manifest(v) || superseded(v)) {
      // already durable, or a newer version is (the library's direct
      // fallback wrote it): a peer's part of v waiting on agent 0 is
      // answered now, not at its timeout
      mark_manifest_done(v);
      return;
    }
    auto w = store.begin_version(v, nranks, o);
    for (auto& p : pieces)
      for (auto& r : p->regions) {
        ckstore::RegionInfo ri;
        ri.label = r.at("label");
        ri.type = ckstore::ElemType(int(r.at("type")));
        ri.count = r.at("count");
        ri.rank = r.at("rank");
        size_t off = r.at("offset");
        const char* src = static_cast<const char*>(p->mem->p) + off;
        // the library's checksum of the region ("end" sums): a copy damaged
        // in this agent's memory is not written as a valid version
        if (r.contains("xxh3") && XXH3_64bits(src, ri.bytes()) != r["xxh3"].get<uint64_t>())
          throw std::runtime_error("corrupt: region '" + ri.label + "' of rank " + std::to_string(ri.rank) +
                                   " in agent memory does not match the application's checksum");
        w.add_region(ri, src);
      }
    std::string part = w.seal();
    if (index == 0) {
      add_part(v, 0, part);
    } else if (!peers.empty()) {
      Socket s = connect_to(peers[0], 5000);
      request(s, {{"op", "part"}, {"v", v}, {"index", index}, {"part", part}, {"timeout_ms", 60000}}, 65000);
    }
  }

  /// True when the second level holds a valid version newer than v: the
  /// library wrote it itself (mode=direct), e.g. after this agent refused
  /// a piece for memory ("nomem") while its writer still had v to write.
  /// v is then superseded: writing it is wasted, and the library's
  /// retention removes its unfinished directory (older than the newest
  /// valid version) under the writer, which must not fail every later
  /// "flush" of this agent with "create: No such file or directory".
  bool superseded(uint64_t v) const {
    try {
      auto nv = ckstore::Store(opt_.pfs_dir, opt_.app, opt_.uid).newest_valid(ckstore::Check::shallow);
      return nv && *nv > v;
    } catch (const std::exception&) {
      return false;  // unreadable: the write (or its error) decides
    }
  }

  /// Agent 0: v needs no manifest of ours (durable already or superseded);
  /// a peer's part of v waiting in wait_manifest is answered now.
  void mark_manifest_done(uint64_t v) {
    std::lock_guard<std::mutex> g(mu_);
    if (index_ != 0) return;
    manifests_.emplace(v, "");
    pfs_done_cv_.notify_all();
  }

  void add_part(uint64_t v, int index, const std::string& part) {
    std::vector<std::string> all;
    int nranks = 0;
    {
      std::lock_guard<std::mutex> g(mu_);
      parts_[v][index] = part;
      if (int(parts_[v].size()) < std::max(1, nagents_)) return;
      for (auto& [i, p] : parts_[v]) all.push_back(p);
      parts_.erase(v);
      for (auto it = parts_.begin(); it != parts_.end();) it = it->first < v ? parts_.erase(it) : std::next(it);
      nranks = nranks_ > 0 ? nranks_ : nslots_;
    }
    ckstore::Store store(opt_.pfs_dir, opt_.app, opt_.uid);
    ckstore::Options o;
    o.keep_last = size_t(std::max(1, opt_.keep_versions));
    // nranks of the manifest: the registered rank count (hello "nranks"),
    // raised by the largest rank recorded + 1; a missing rank is then
    // refused by commit_parts instead of shrinking the version.
    for (auto& p : all) {
      auto j = json::parse(p, nullptr, false);
      if (j.is_object() && j.contains("regions"))
        for (auto& r : j["regions"]) nranks = std::max(nranks, int(r.value("rank", 0)) + 1);
    }
    std::map<std::string, std::string> attrs{{"writer", "icagent"}, {"agents", std::to_string(all.size())}};
    std::string err;
    try {
      ckstore::commit_parts(store, v, nranks, all, o, attrs);
    } catch (const std::exception& e) {
      err = e.what();
      std::fprintf(stderr, "icagent %s: manifest v%llu: %s\n", opt_.id.c_str(), (unsigned long long)v, e.what());
    }
    std::lock_guard<std::mutex> g(mu_);
    manifests_[v] = err;
    while (manifests_.size() > 64) manifests_.erase(manifests_.begin());
    pfs_done_cv_.notify_all();
    if (!err.empty()) throw std::runtime_error(err);
  }

  /// Test operation (ICHECK_AGENT_TEST_OPS=1 only): flip one bit (0x40) of
  /// byte (total / 2) | 7 of every piece of version v this agent holds, as a
  /// memory fault would. Returns how many pieces were changed.
  int test_corrupt(uint64_t v) {
    std::lock_guard<std::mutex> g(mu_);
    int n = 0;
    auto flip = [&](const PieceP& p) {
      if (!p || p->v != v || !p->complete || !p->mem || p->total == 0) return;
      // the last byte of the 8-byte word in the middle: for a region of
      // doubles starting at an aligned offset, its sign/exponent byte
      const size_t at = std::min(p->total - 1, (p->total / 2) | 7);
      static_cast<unsigned char*>(p->mem->p)[at] ^= 0x40;
      ++n;
    };
    for (auto& [k, st] : slots_) {
      flip(st.current);
      for (auto& [pv, p] : st.pending) flip(p);
    }
    std::fprintf(stderr, "icagent %s: test_corrupt: flipped a byte in %d piece(s) of v%llu\n", opt_.id.c_str(), n,
                 (unsigned long long)v);
    return n;
  }

  AgentOptions opt_;
  /// ICHECK_AGENT_TEST_OPS=1 in the agent's environment enables the test
  /// operation "test_corrupt" (integration tests only; never set it in
  /// production: any peer allowed to talk to the agent could damage versions).
  const bool test_ops_ = [] {
    const char* e = std::getenv("ICHECK_AGENT_TEST_OPS");
    return e && std::string(e) == "1";
  }();
  std::string self_addr_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> retiring_{false};  ///< "retire": no commit begins or is published here
  std::mutex fab_mu_;
  std::map<std::string, std::unique_ptr<Fabric>> fabrics_;
  std::mutex mu_;
  std::mutex budget_mu_;         ///< guards budget_stamp_, budget_taken_
  int64_t budget_stamp_ = -1;    ///< mtime (ns) of the budget file last read
  uint64_t budget_taken_ = 0;    ///< bytes granted since that file changed
  std::vector<std::shared_ptr<Socket>> conns_;
  std::map<std::string, int> pre_auth_;  ///< TCP peer host -> connections not yet authenticated (mu_)
  static constexpr size_t kMaxConns = 4096;  ///< connections served at once (slots, managers, peers)
  static constexpr int kMaxPreAuth = 16;     ///< of them waiting for authentication, per peer host
  std::map<int, SlotState> slots_;
  int nslots_ = 1, nagents_ = 1, index_ = 0, nranks_ = 0;
  std::vector<std::string> peers_;
  long long ncops_ = 0;
  std::atomic<long long> recycled_{0};
  std::atomic<long long> pulls_{0}, pushes_{0};  ///< commits begun per technique (§6.2)
  double bytes_ = 0, seconds_ = 0, last_op_ = 0;
  /// A queued second-level write: the version and the pieces holding it.
  struct PfsJob {
    uint64_t v = 0;
    std::vector<PieceP> pieces;
  };
  std::deque<PfsJob> pfs_queue_;
  std::set<uint64_t> written_;
  uint64_t own_newest_ = 0;         ///< newest version queued for this agent's own part (mu_)
  std::set<uint64_t> own_started_;  ///< versions whose own part the writer took up (mu_)
  std::map<uint64_t, std::string> done_;  ///< finished writes: v -> "" or the error
  std::map<uint64_t, std::string> manifests_;  ///< agent 0: manifests committed: v -> "" or the error
  std::map<uint64_t, std::map<int, std::string>> parts_;
  std::condition_variable pfs_cv_, pfs_done_cv_;
};

}  // namespace

int run_agent(const AgentOptions& opt, std::atomic<bool>* stop) {
  Agent a(opt);
  return a.run(stop);
}

}  // namespace dynres::icheck
