#include "dynres/icheck/client.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <thread>
#include <vector>

#include "comm.hpp"
#include "dynres/icheck/types.hpp"
#include "dynres/icheck/config.hpp"
#include "dynres/icheck/fabric.hpp"
#include "dynres/icheck/wire.hpp"
#include "dynres/ckstore.hpp"

namespace fs = std::filesystem;

namespace dynres::icheck {

bool safe_name(const std::string& s) {
  return ckstore::safe_component(s);
}

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
/// Checksum of one region's bytes as sent to an agent with `end` ("sums")
/// and checked again on restore: XXH3_64, as ckstore's chunk checksums.
uint64_t region_sum(const void* p, size_t n) { return XXH3_64bits(p, n); }
std::string hostname() {
  char h[256] = {0};
  ::gethostname(h, sizeof h - 1);
  return h;
}
/// Library staging buffer (async commits, or blocking ones without zero
/// copy): pre-faulted, registered once, reused by every commit.
struct Buffer {
  std::unique_ptr<Mapping> mem;
  void* p = nullptr;
  size_t len = 0;
  std::unique_ptr<MemRegion> mr;
  ~Buffer() { mr.reset(); }
};
struct Region {
  std::string label;
  void* ptr;
  size_t count;
  int type;
  size_t bytes;
  size_t offset;
};
struct AgentLink {
  std::string addr, id, host;
  int index = 0;
  Socket sock;
  uint64_t peer = 0;
  json versions = json::array();
};
}  // namespace

class ClientImpl {
 public:
  // ---- state
  bool inited = false;
  StaticConfig cfg;
  Comm comm;
  std::string app;
  uint32_t uid = 0;
  std::string mode = "none";  // none|rdma|direct
  std::vector<Region> regions;
  std::map<std::string, size_t> by_label;
  std::unique_ptr<Fabric> fab;
  std::string fab_prov;
  std::unique_ptr<Buffer> buf;
  /// Zero copy (DynamicConfig::zero_copy): each added region registered with
  /// `fab` once, index-parallel to `regions`; cleared before `fab` changes.
  std::vector<std::unique_ptr<MemRegion>> rmr;
  bool zc_broken = false;       ///< a region could not be registered: stage instead
  bool direct_restore = false;  ///< restart_all in progress: RMA into the regions
  bool restored_in_place = false;
  bool restore_corrupt = false;  ///< this restart: the agent copy failed verify_region
  std::unique_ptr<AgentLink> agent;  ///< MR: every process; SHMR: node leaders only
  /// SHMR node segment (§6.2.2): POSIX shared memory (mode 0600, unlinked
  /// once every node process mapped it) holding the checkpoints of all of
  /// the node's processes back to back; the leader registers it once.
  struct Segment {
    void* p = nullptr;
    size_t len = 0;
    std::unique_ptr<MemRegion> mr;
    ~Segment() {
      mr.reset();
      if (p) ::munmap(p, len);
    }
  };
  std::unique_ptr<Segment> seg;
  json agent_list = json::array();
  long long app_id = -1;
  std::string app_token;  ///< given by the controller at registration; sent with every app_id
  int64_t version = 0;
  int64_t restart_v = 0;
  std::string restart_src;  // agents|pfs
  bool restarted = false;
  std::vector<char> rdata;
  json rregions = json::array();
  bool async = false;
  std::thread worker;
  bool worker_ok = false;
  std::string worker_err;
  int64_t pending_v = 0;
  /// While an asynchronous commit is in flight: where this rank's copy of
  /// that version lives (staging buffer or SHMR segment), laid out like
  /// regions' offsets; the fallback writes it instead of the live regions.
  const char* fallback_src = nullptr;
  double commit_t0 = 0;
  double last_tsync = -1;
  double last_probe = 0;
  std::string last_error_;
  struct ErrRef {
    std::string& s;
    ErrRef& operator=(const std::string& v) {
      s = v;
      if (std::getenv("ICHECK_DEBUG")) std::fprintf(stderr, "icheck: %s\n", v.c_str());
      return *this;
    }
    const char* c_str() const { return s.c_str(); }
    operator const std::string&() const { return s; }
  };
  ErrRef last_error{last_error_};

  size_t total_bytes() const {
    size_t t = 0;
    for (auto& r : regions) t += r.bytes;
    return t;
  }
  json regions_json() const {
    json a = json::array();
    for (auto& r : regions)
      a.push_back({{"label", r.label}, {"type", r.type}, {"count", r.count}, {"rank", comm.rank()},
                   {"nranks", comm.size()}, {"offset", r.offset}, {"bytes", r.bytes}});
    return a;
  }
  size_t chunk_bytes() const { return std::max<size_t>(64 << 10, size_t(cfg.dyn.chunk_mb * 1048576.0)); }

  /// Gather [off, off+len) of the concatenated regions into dst.
  void copy_out(size_t off, size_t len, char* dst) const {
    for (auto& r : regions) {
      if (off >= r.offset + r.bytes || off + len <= r.offset) continue;
      size_t a = std::max(off, r.offset), b = std::min(off + len, r.offset + r.bytes);
      std::memcpy(dst + (a - off), static_cast<char*>(r.ptr) + (a - r.offset), b - a);
    }
  }

  // ---- controller
  /// msg plus this application's token when it names the application.
  json with_token(const json& msg) const {
    json m = msg;
    if (m.contains("app_id") && !app_token.empty()) m["app_token"] = app_token;
    return m;
  }
  json ctl(const json& msg0, int timeout_ms) {
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
        }
      }
      if (cfg.controllers.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200 * (attempt + 1)));
    }
    throw WireError("controller unreachable: " + err);
  }
  void ctl_quiet(const json& msg0) {
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

  // ---- agents
  std::string choose_provider(const std::string& agent_addr, const std::string& host) {
    if (cfg.provider != "auto") return cfg.provider;
    std::string h = host.empty() ? address_host(agent_addr) : host;
    if (h.empty() || h == "127.0.0.1" || h == "localhost" || h == hostname()) return "shm";
    return "tcp;ofi_rxm";
  }
  void ensure_fabric(const std::string& prov) {
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
  /// Collective: connect every rank to its agent. true when all succeeded.
  bool connect_agents(const json& list) {
    bool ok = true;
    agent.reset();
    try {
      if (!list.is_array() || list.empty()) throw std::runtime_error("empty agent list");
      if (shmr() && !comm.node_leader()) throw Skip{};  // the node leader talks for us
      int m = int(list.size());
      const int slot = shmr() ? comm.node_index() : comm.rank();
      const int nslots = shmr() ? comm.nodes() : comm.size();
      int idx = slot % m;  // agents >= nslots get no slot: min(m, nslots) write second-level parts
      const json& a = list[size_t(idx)];
      auto l = std::make_unique<AgentLink>();
      l->addr = a.at("address");
      l->id = a.value("id", "");
      l->host = a.value("host", "");
      l->index = idx;
      ensure_fabric(choose_provider(l->addr, l->host));
      l->sock = connect_to(l->addr, cfg.connect_timeout_ms * 3);
      std::vector<std::string> peers;
      for (auto& x : list) peers.push_back(x.at("address"));
      json r = request(l->sock,
                       {{"op", "hello"}, {"app", app}, {"uid", uid}, {"slot", slot}, {"nslots", nslots},
                        {"nagents", std::min(m, nslots)}, {"agent_index", idx}, {"nranks", comm.size()},
                        {"peers", peers}, {"provider", fab->provider()},
                        {"addr", fab->address_hex()}},
                       cfg.connect_timeout_ms * 10);
      l->peer = fab->add_peer(r.at("addr"));
      l->versions = r.value("versions", json::array());
      agent = std::move(l);
    } catch (const Skip&) {
    } catch (const std::exception& e) {
      last_error = e.what();
      ok = false;
    }
    ok = comm.all(ok);
    if (!ok) agent.reset();
    agent_list = ok ? list : json::array();
    return ok;
  }

  void ensure_buffer(size_t total) {
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

  /// Apply the transfer settings the controller sends with a registration
  /// and with every probe reply ("params": the dynamic configuration of
  /// seed 000 Listing 6.2 as the controller last read it): transfer
  /// (pull|push), chunk_mb and buffer_mb (MiB, > 0), zero_copy. Every rank
  /// applies the same broadcast reply, so all ranks agree. ICHECK_TRANSFER
  /// and ICHECK_ZERO_COPY in the environment win; values of the wrong type
  /// or out of range are ignored. The strategy (MR/SHMR) is fixed for the
  /// life of a registration (it shapes the agents' slots).
  void apply_params(const json& p) {
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

  struct Skip {};
  bool shmr() const { return cfg.dyn.strategy == "shmr"; }

  /// Collective over the node: map a node segment of at least `bytes`
  /// (reused while large enough). Returns the same verdict on every node
  /// process.
  bool ensure_segment(size_t bytes) {
    bool have = seg && seg->len >= bytes;
    if (comm.node_bcast(have ? "1" : "0") == "1") return true;
    seg.reset();
    const size_t len = (std::max<size_t>(bytes, 1) + (2u << 20) - 1) & ~size_t((2u << 20) - 1);
    std::string name;
    if (comm.node_leader()) {
      static std::atomic<int> counter{0};
      name = "/icheck." + std::to_string(uid) + "." + std::to_string(::getpid()) + "." + std::to_string(counter++);
      int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0 || ::ftruncate(fd, off_t(len)) != 0) {
        last_error = "shmr: shm_open/ftruncate " + name + ": " + std::strerror(errno);
        if (fd >= 0) ::close(fd), ::shm_unlink(name.c_str());
        name.clear();
      } else {
        ::close(fd);
      }
    }
    name = comm.node_bcast(name);
    if (name.empty()) return false;
    void* p = MAP_FAILED;
    int fd = ::shm_open(name.c_str(), O_RDWR, 0);
    if (fd >= 0) {
      p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
      ::close(fd);
    }
    bool mine = p != MAP_FAILED;
    if (!mine) last_error = "shmr: cannot map node segment " + name + ": " + std::strerror(errno);
    // every node process must have mapped it before the name disappears
    const bool all = comm.node_bcast(std::to_string(comm.node_allgather(mine ? 1 : 0) == std::vector<int64_t>(size_t(comm.node_size()), 1))) == "1";
    if (comm.node_leader()) ::shm_unlink(name.c_str());
    if (mine) {
      seg = std::make_unique<Segment>();
      seg->p = p;
      seg->len = len;
    }
    if (!all) seg.reset();
    return all;
  }

  /// SHMR commit (§6.2.2, Eq. 6.2): every process of a node copies its
  /// regions into the node segment (t_shmcopy), then the node leader moves
  /// the whole segment to its agent with one RMA stream; the version becomes
  /// current when all leaders' agents hold it. Collective over the world.
  int commit_shmr(int64_t v) {
    const size_t mine = total_bytes();
    auto sizes = comm.node_allgather(int64_t(mine));
    size_t base = 0, node_total = 0;
    for (int i = 0; i < int(sizes.size()); ++i) {
      if (i < comm.node_rank()) base += size_t(sizes[size_t(i)]);
      node_total += size_t(sizes[size_t(i)]);
    }
    bool ok = ensure_segment(node_total);
    json regs = regions_json();
    for (auto& r : regs) r["offset"] = size_t(r["offset"]) + base;
    if (ok) copy_out(0, mine, static_cast<char*>(seg->p) + base);
    auto parts = comm.node_gather(regs.dump());
    comm.node_barrier();  // the node's data is in the segment
    json all = json::array();
    for (auto& p : parts)
      for (auto& r : json::parse(p)) all.push_back(r);
    if (ok && agent) {
      auto run = [this, v, node_total, all] {
        if (!seg->mr) seg->mr = fab->register_memory(seg->p, seg->len);
        transfer_via(v, true, *seg->mr, seg->len, node_total, all);
      };
      if (async) {
        pending_v = v;
        worker_ok = false;
        fallback_src = static_cast<const char*>(seg->p) + base;  // this rank's copy of v
        worker = std::thread([this, run] {
          try {
            run();
            worker_ok = true;
          } catch (const std::exception& e) {
            worker_err = e.what();
          }
        });
        return ICHECK_OK;
      }
      try {
        run();
      } catch (const std::exception& e) {
        last_error = e.what();
        ok = false;
      }
    } else if (ok && async) {
      pending_v = v;  // non-leader: the leader's agent transfer is pending
      worker_ok = true;
      fallback_src = static_cast<const char*>(seg->p) + base;  // this rank's copy of v
      return ICHECK_OK;
    }
    return finish_commit(v, ok);
  }

  /// SHMR restart: the node leader fetches the node's piece into the node
  /// segment with one RMA, every node process takes its own regions (by
  /// world rank). Collective over the node; same verdict on all of it.
  bool restore_shmr(int64_t v) {
    const bool pull = cfg.dyn.transfer != "push";
    json info = {{"ok", false}};
    json r;
    if (agent) {
      try {
        r = request(agent->sock, {{"op", "rbegin"}, {"v", v}, {"mode", pull ? "pull" : "push"}}, cfg.request_timeout_ms);
        info = {{"ok", true}, {"total", r.at("total")}, {"regions", r.at("regions")}};
      } catch (const std::exception& e) {
        last_error = e.what();
      }
    }
    info = json::parse(comm.node_bcast(info.dump()));
    if (!info.value("ok", false)) return false;
    const size_t total = info["total"];
    bool ok = ensure_segment(total);
    if (agent) {
      try {
        if (ok && total) {
          if (!seg->mr) seg->mr = fab->register_memory(seg->p, seg->len);
          Fabric::Busy busy(*fab);
          if (pull)
            request(agent->sock, {{"op", "rchunk"}, {"buf_off", 0}, {"data_off", 0}, {"len", total},
                                  {"key", seg->mr->key}, {"base", seg->mr->remote_base}}, cfg.request_timeout_ms);
          else
            fab->read(agent->peer, *seg->mr, 0, total, r.at("base"), r.at("key"), 15000);
        }
        request(agent->sock, {{"op", "rend"}}, cfg.request_timeout_ms);
      } catch (const std::exception& e) {
        last_error = e.what();
        ok = false;
      }
    }
    ok = comm.node_bcast(ok ? "1" : "0") == "1";  // the leader's verdict
    if (!ok) return false;
    json regs = json::array();
    size_t t = 0;
    for (auto& x : info["regions"])
      if (x.value("rank", -1) == comm.rank()) t += size_t(x.at("bytes"));
    rdata.assign(t, 0);
    t = 0;
    bool sane = true;
    for (auto& x : info["regions"]) {
      if (x.value("rank", -1) != comm.rank()) continue;
      size_t off = x.at("offset"), n = x.at("bytes");
      if (off > total || n > total - off) {
        last_error = "shmr: region outside the node piece";
        sane = false;
        break;
      }
      std::string bad = verify_region(x, static_cast<char*>(seg->p) + off, n, v);
      if (!bad.empty()) {
        last_error = bad;
        restore_corrupt = true;
        sane = false;
        break;
      }
      std::memcpy(rdata.data() + t, static_cast<char*>(seg->p) + off, n);
      json y = x;
      y["offset"] = t;
      regs.push_back(y);
      t += n;
    }
    rregions = regs;
    comm.node_barrier();  // segment free again
    return sane;
  }

  /// Register every added region with the fabric (once per region and
  /// fabric). false (and zero copy off for this client) when the provider
  /// refuses one, e.g. memory it cannot register.
  bool register_regions() {
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

  /// Zero-copy part of a blocking RDMA commit (§6.2.3.1): the application's
  /// registered regions are the RMA source. pull: one `chunk` request per
  /// region slice (<= max(chunk, 64 MiB)) carrying that region's key, the
  /// agent fi_reads it into its piece; push: the library fi_writes each
  /// region into the piece at the region's offset. No library copy.
  void transfer_direct(int64_t v) {
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

  /// Checksums of the added regions (region_sum), in the order of regions_json().
  json region_sums() const {
    json out = json::array();
    for (auto& g : regions) out.push_back(region_sum(g.ptr, g.bytes));
    return out;
  }

  /// Check restored bytes against the checksums the library sent with the
  /// version (`end` "sums", kept by the agent in the region's "xxh3"): a
  /// region without a checksum or whose bytes differ is refused, so a
  /// corrupted agent copy is never handed to the application. Returns ""
  /// when it matches, else the reason ("corrupt: ...").
  std::string verify_region(const json& x, const void* p, size_t n, int64_t v) const {
    const std::string label = x.value("label", std::string("?"));
    auto it = x.find("xxh3");
    if (it == x.end() || !it->is_number_unsigned())
      return "corrupt: region '" + label + "' of version " + std::to_string(v) + " from the agent has no checksum";
    if (region_sum(p, n) != it->get<uint64_t>())
      return "corrupt: region '" + label + "' of version " + std::to_string(v) +
             " from the agent does not match its checksum";
    return "";
  }
  /// verify_region's verdict for a restore: "" passes; else noted and thrown.
  void require_intact(const std::string& bad) {
    if (bad.empty()) return;
    restore_corrupt = true;
    throw std::runtime_error(bad);
  }

  /// Local part of an RDMA commit: begin + chunks + end with this rank's agent.
  /// staged: the whole checkpoint is already in the buffer at its offset.
  void transfer(int64_t v, bool staged) { transfer_via(v, staged, *buf->mr, buf->len, total_bytes(), regions_json()); }

  /// Move `total` bytes described by `regs` through the registered buffer
  /// `mr` (length `blen`): staged = the data already sits in the buffer at
  /// its offset (async MR commits, SHMR node segments), else the regions are
  /// copied in chunk by chunk (pipelining, §6.2.3.1).
  void transfer_via(int64_t v, bool staged, MemRegion& bmr, size_t blen, size_t total, const json& regs) {
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

  /// Collective tail of a commit: agree, publish, or fall back to direct writes.
  int finish_commit(int64_t v, bool ok) {
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

  /// Drop the agent link and fence every RMA target of this process: all
  /// registrations (regions, staging buffer, SHMR segment) and the endpoint
  /// are closed, so nothing an agent still sends can land; direct mode until
  /// a later probe reconnects. Tells the controller (rank 0).
  void drop_agents() {
    agent.reset();
    rmr.clear();
    buf.reset();
    if (seg) seg->mr.reset();
    fab.reset();
    fab_prov.clear();
    mode = "direct";
    ctl_quiet({{"op", "agent_failed"}, {"app_id", app_id}, {"error", last_error_}});
  }

  std::string pfs_root() {
    if (!cfg.pfs_dir.empty()) return cfg.pfs_dir;
    return "/tmp/icheck-" + std::to_string(uid) + "/pfs";
  }

  /// Collective: write version v of every rank's regions to the second level.
  int direct_write(int64_t v) {
    bool ok = true;
    int code = ICHECK_OK;
    std::string part;
    bool exists = false;
    try {
      ckstore::Store st(pfs_root(), app, uid);
      exists = st.has_manifest(uint64_t(v));
      if (!exists) {
        ckstore::Options o;
        o.compress_threshold = uint64_t(cfg.dyn.compress_threshold_mb * 1048576.0);
        o.keep_last = size_t(std::max(1, cfg.dyn.keep_versions));
        auto w = st.begin_version(uint64_t(v), comm.size(), o);
        for (auto& r : regions) {
          ckstore::RegionInfo ri;
          ri.label = r.label;
          ri.type = ckstore::ElemType(r.type);
          ri.count = r.count;
          ri.rank = comm.rank();
          // An asynchronous commit that fell back: the application may
          // already have changed its regions; version v is the staged copy.
          w.add_region(ri, fallback_src ? fallback_src + r.offset : r.ptr);
        }
        part = w.seal();
      }
    } catch (const ckstore::Error& e) {
      last_error = e.what();
      ok = false;
      code = e.code() == ckstore::Errc::perm ? ICHECK_EPERM : ICHECK_EIO;
    } catch (const std::exception& e) {
      last_error = e.what();
      ok = false;
      code = ICHECK_EIO;
    }
    exists = comm.min_int(exists ? 1 : 0) == 1;
    auto parts = comm.gather(part);
    ok = comm.all(ok);
    if (exists) return ICHECK_OK;
    if (!ok) return code != ICHECK_OK ? code : ICHECK_EIO;
    int cok = 1;
    if (comm.rank() == 0) {
      try {
        ckstore::Store st(pfs_root(), app, uid);
        ckstore::Options o;
        o.keep_last = size_t(std::max(1, cfg.dyn.keep_versions));
        ckstore::commit_parts(st, uint64_t(v), comm.size(), parts, o, {{"writer", "libicheck-direct"}});
      } catch (const std::exception& e) {
        last_error = e.what();
        try {
          ckstore::Store st(pfs_root(), app, uid);
          cok = st.valid(uint64_t(v), ckstore::Check::shallow) ? 1 : 0;
        } catch (...) {
          cok = 0;
        }
      }
    }
    cok = int(comm.max(comm.rank() == 0 ? cok : 0));
    return cok ? ICHECK_OK : ICHECK_EIO;
  }

  /// Collective: find the newest restorable version (agents and second level).
  void discover() {
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
    version = std::max({version, v_agents, v_pfs, v_dir});
  }

  /// The stored regions of this rank are exactly the added ones (label,
  /// type, count and offset), so a restart can land in place.
  bool in_place_ok() const {
    if (!rregions.is_array() || rregions.size() != regions.size()) return false;
    for (size_t i = 0; i < regions.size(); ++i) {
      const json& x = rregions[i];
      if (x.value("label", "") != regions[i].label || x.value("type", 0) != regions[i].type ||
          x.value("count", size_t(0)) != regions[i].count || x.value("offset", size_t(0)) != regions[i].offset)
        return false;
    }
    return true;
  }

  bool restore_from_agent(int64_t v) {
    try {
      AgentLink& a = *agent;
      const bool pull = cfg.dyn.transfer != "push";
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

  int restore_from_pfs(int64_t v) {
    try {
      ckstore::Store st(pfs_root(), app, uid);
      auto m = st.manifest(uint64_t(v));
      size_t total = 0;
      json regs = json::array();
      for (auto& r : m.regions)
        if (r.info.rank == comm.rank()) {
          regs.push_back({{"label", r.info.label}, {"type", int(r.info.type)}, {"count", r.info.count},
                          {"offset", total}, {"bytes", r.bytes()}});
          total += r.bytes();
        }
      if (regs.empty()) {
        last_error = "version " + std::to_string(v) + " holds no region of rank " + std::to_string(comm.rank());
        return ICHECK_ENOENT;
      }
      std::vector<char> data(total);
      for (auto& x : regs)
        st.read_region(uint64_t(v), comm.rank(), x["label"].get<std::string>(), data.data() + size_t(x["offset"]),
                       size_t(x["bytes"]));
      rdata.swap(data);
      rregions = regs;
      return ICHECK_OK;
    } catch (const ckstore::Error& e) {
      last_error = e.what();
      switch (e.code()) {
        case ckstore::Errc::corrupt: return ICHECK_ECORRUPT;
        case ckstore::Errc::perm: return ICHECK_EPERM;
        case ckstore::Errc::not_found: return ICHECK_ENOENT;
        default: return ICHECK_EIO;
      }
    } catch (const std::exception& e) {
      last_error = e.what();
      return ICHECK_EIO;
    }
  }
};

Client::Client() : impl_(std::make_unique<ClientImpl>()) {}
Client::~Client() {
  if (impl_ && impl_->worker.joinable()) impl_->worker.join();
}

int Client::init(const char* config, const char* app_name, const void* comm, int* status) {
  auto& s = *impl_;
  if (s.inited) return ICHECK_ESTATE;
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
        reply = s.ctl({{"op", "register"}, {"app", s.app}, {"uid", s.uid}, {"nodes", s.comm.nodes()},
                       {"procs", s.comm.size()}, {"strategy", s.cfg.dyn.strategy}, {"host", hostname()},
                       {"pid", ::getpid()}},
                      s.cfg.request_timeout_ms);
        reply["mode"] = "rdma";
      } catch (const std::exception& e) {
        reply = {{"mode", "direct"}, {"reason", e.what()}};
      }
    }
  }
  reply = json::parse(s.comm.bcast(reply.dump()));
  s.app_id = reply.value("app_id", -1LL);
  s.app_token = reply.value("app_token", std::string());
  if (reply.contains("params")) s.apply_params(reply["params"]);
  s.version = reply.value("version", int64_t(0));
  s.mode = "direct";
  if (reply["mode"] == "rdma" && s.connect_agents(reply["agents"])) s.mode = "rdma";
  else if (reply["mode"] == "rdma")
    s.ctl_quiet({{"op", "agent_failed"}, {"app_id", s.app_id}, {"error", s.last_error}});
  const int64_t acknowledged = s.version;  // newest version the controller recorded as committed
  s.discover();
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
        reply = s.ctl({{"op", "register"}, {"app", s.app}, {"uid", s.uid}, {"nodes", s.comm.nodes()},
                       {"procs", s.comm.size()}, {"strategy", s.cfg.dyn.strategy}, {"host", hostname()},
                       {"pid", ::getpid()}},
                      s.cfg.request_timeout_ms);
        reply["changed"] = true;
      } else {
        reply = s.ctl({{"op", "probe"}, {"app_id", s.app_id}, {"tsync", t},
                       {"nodes", hints && hints->num_nodes ? hints->num_nodes : s.comm.nodes()},
                       {"procs", hints && hints->num_procs ? hints->num_procs : s.comm.size()},
                       {"failed", s.mode != "rdma"}},
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
  if (!reply.value("changed", false)) return reply.value("unreachable", false) ? ICHECK_ECONTROLLER : ICHECK_OK;
  s.agent.reset();
  if (s.connect_agents(reply["agents"])) {
    s.mode = "rdma";
    return ICHECK_OK;
  }
  s.mode = "direct";
  s.ctl_quiet({{"op", "agent_failed"}, {"app_id", s.app_id}, {"error", s.last_error}});
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
      std::fprintf(stderr, "icheck: %s\n", s.last_error_.c_str());
      flushed = false;
    }
  }
  flushed = s.comm.all(flushed);
  if (rc == ICHECK_OK && !flushed) rc = ICHECK_EIO;
  s.comm.barrier();
  s.ctl_quiet({{"op", "finalize"}, {"app_id", s.app_id}, {"persist", persist}});
  s.agent.reset();
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

// ---- hooks of the data redistribution (adapt.cpp, seed 000 §7.4.1)
RestartView Client::restart_view() {
  auto& s = *impl_;
  RestartView v{s.inited, &s.comm, s.restart_v, s.restart_src, s.pfs_root(), s.app, s.uid, 0};
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

}  // namespace dynres::icheck
