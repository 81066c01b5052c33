// iCheck client: the SHMR strategy [John24 §6.2.2]: one shared-memory segment per node, moved by the node leader.
#include "client_impl.hpp"

namespace dynres::icheck {

bool ClientImpl::ensure_segment(size_t bytes) {
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

int ClientImpl::commit_shmr(int64_t v) {
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

bool ClientImpl::restore_shmr(int64_t v) {
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

}  // namespace dynres::icheck
