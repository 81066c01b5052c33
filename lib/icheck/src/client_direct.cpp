// iCheck client: the second level written and read by the processes themselves (direct mode, restore from files).
#include "client_impl.hpp"

namespace dynres::icheck {

std::string ClientImpl::pfs_root() {
  if (!cfg.pfs_dir.empty()) return cfg.pfs_dir;
  return "/tmp/icheck-" + std::to_string(uid) + "/pfs";
}

int ClientImpl::direct_write(int64_t v) {
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

int ClientImpl::restore_from_pfs(int64_t v) {
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

}  // namespace dynres::icheck
