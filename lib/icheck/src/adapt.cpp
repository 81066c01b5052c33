// Data redistribution of libicheck [John24 §7.4.1, Table 9.4]: see adapt.hpp.
//
// Commit: every rank's part holds, next to its regions, the region
// "__icheck_adapt" (JSON text): the committing process count N, the rank,
// and per object its role, type, local count and distribution (BLOCK /
// CYCLIC width, PREDEFINED explicit count/offset or process grid, MANUAL
// count). CONSTANT objects are stored by rank 0 only; SIZE, RANK, DEFAULT
// and VOLATILE objects are not stored at all (their value on restore does not
// depend on the checkpoint).
//
// Restore on M processes: N is read from the agent's version list or the
// second-level manifest. M == N: Client::restart, then every rank takes its
// own regions (agents or second level), CONSTANT objects are broadcast from
// rank 0. M != N: from the agents' memory when they hold every old rank's
// piece (each agent checks its regions' checksums; every rank reads by RMA
// only the byte ranges it needs, Client::agent_pieces/read_agent), else the
// second level (agents are asked to flush first); rank 0
// reads the N metadata regions and broadcasts them; every rank rebuilds the
// old layout of each distributed object, plans its copies with
// dist::plan(old, new, rank) and reads only the byte ranges of the old parts
// it needs (ckstore::Store::read_range verifies their chunk checksums).
#include "adapt.hpp"
#include "adapt_old.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "comm.hpp"
#include "dynres/icheck/meta.hpp"
#include "dynres/icheck/redist.hpp"
#include "dynres/icheck/types.hpp"
#include "dynres/ckstore.hpp"

namespace dynres::icheck {

using json = nlohmann::json;

bool safe_name(const std::string& s);

namespace {
constexpr size_t kMaxMetaBytes = 16u << 20;  ///< a metadata region larger than this is refused
bool reserved(const char* label) { return label && std::strncmp(label, "__icheck", 8) == 0; }
const char* dist_name(dist::Kind k) {
  switch (k) {
    case dist::Kind::Block: return "block";
    case dist::Kind::Cyclic: return "cyclic";
    case dist::Kind::Explicit: return "explicit";
    case dist::Kind::Grid: return "grid";
  }
  return "?";
}
}  // namespace

bool Adapt::special() const {
  for (auto& e : entries_)
    if (e.role != Role::Plain) return true;
  return false;
}

void Adapt::clear() {
  entries_.clear();
  by_label_.clear();
  meta_.clear();
  committed_ = false;
  mode_ = Mode::None;
  old_n_ = 0;
  version_ = 0;
  old_.reset();
  verify_pending_ = false;
}

int Adapt::check_new(const char* label, int type, size_t* es) const {
  if (!c_.restart_view().inited) return ICHECK_ESTATE;
  if (!label) return ICHECK_EINVAL;
  if (!safe_name(label) || reserved(label)) return ICHECK_ELABEL;
  if (by_label_.count(label)) return ICHECK_EEXIST;
  *es = icheck_elem_size(type);
  if (!*es) return ICHECK_EINVAL;
  if (committed_) return ICHECK_ESTATE;  // the metadata of the first commit is fixed
  return ICHECK_OK;
}

int Adapt::add_plain(const char* label, void* ptr, size_t count, int type) {
  if (reserved(label)) return ICHECK_ELABEL;
  int rc = c_.add(label, ptr, count, type);
  if (rc != ICHECK_OK) return rc;
  Entry e;
  e.label = label, e.ptr = ptr, e.count = count, e.type = type, e.es = icheck_elem_size(type);
  e.role = Role::Plain, e.stored = true;
  by_label_[label] = entries_.size();
  entries_.push_back(std::move(e));
  return ICHECK_OK;
}

int Adapt::add_adapt(const char* label, void* ptr, size_t count, int type, int attr, va_list ap) {
  size_t es = 0;
  int rc = check_new(label, type, &es);
  if (rc != ICHECK_OK) return rc;
  if (!ptr || count == 0 || count > (SIZE_MAX / 2) / es) return ICHECK_EINVAL;
  Entry e;
  e.label = label, e.ptr = ptr, e.count = count, e.type = type, e.es = es;
  Comm& comm = *c_.restart_view().comm;
  switch (attr) {
    case ICHECK_CONSTANT: e.role = Role::Constant, e.stored = comm.rank() == 0; break;
    case ICHECK_SIZE:
    case ICHECK_RANK:
      if (type != ICHECK_INT && type != ICHECK_FLOAT && type != ICHECK_DOUBLE) return ICHECK_EINVAL;
      e.role = attr == ICHECK_SIZE ? Role::Size : Role::Rank;
      break;
    case ICHECK_DEFAULT:
    case ICHECK_DEFAULT_JOINING: {
      const void* v = va_arg(ap, const void*);
      if (!v) return ICHECK_EINVAL;
      e.defval.assign(static_cast<const char*>(v), static_cast<const char*>(v) + count * es);
      e.role = attr == ICHECK_DEFAULT ? Role::Default : Role::DefaultJoining;
      e.stored = attr == ICHECK_DEFAULT_JOINING;
      break;
    }
    case ICHECK_VOLATILE:
      e.recalc = va_arg(ap, icheck_recalc_fn);
      e.arg = va_arg(ap, void*);
      if (!e.recalc) return ICHECK_EINVAL;
      e.role = Role::Volatile;
      break;
    default: return ICHECK_EINVAL;
  }
  if (e.stored && (rc = c_.add(label, ptr, count, type)) != ICHECK_OK) return rc;
  by_label_[label] = entries_.size();
  entries_.push_back(std::move(e));
  return ICHECK_OK;
}

int Adapt::add_global(const char* label, void* ptr, int type, size_t global, int how, va_list ap) {
  size_t es = 0;
  int rc = check_new(label, type, &es);
  if (rc != ICHECK_OK) return rc;
  if (global == 0) return ICHECK_EINVAL;
  if (global > (SIZE_MAX / 2) / es) {
    c_.set_error("global count " + std::to_string(global) + " x " + std::to_string(es) + " bytes overflows size_t");
    return ICHECK_ELAYOUT;
  }
  Comm& comm = *c_.restart_view().comm;
  const int M = comm.size(), r = comm.rank();
  Entry e;
  e.label = label, e.ptr = ptr, e.type = type, e.es = es, e.role = Role::Global;
  dist::Layout& l = e.layout;
  l.global = global, l.nprocs = M;
  switch (how) {
    case ICHECK_BLOCK:
      l.kind = dist::Kind::Block, l.width = va_arg(ap, size_t);
      if (l.width == 0) l.width = 1;
      break;
    case ICHECK_CYCLIC: l.kind = dist::Kind::Cyclic, l.width = va_arg(ap, size_t); break;
    case ICHECK_PREDEFINED: {
      const icheck_pmap* pm = va_arg(ap, const icheck_pmap*);
      if (!pm) return ICHECK_EINVAL;
      const dist::Layout* mine = nullptr;
      for (auto& x : pm->layouts) {
        if (x.global != global) {
          c_.set_error("processor mapping for " + std::to_string(x.nprocs) + " processes covers " +
                       std::to_string(x.global) + " elements, not the global count " + std::to_string(global));
          return ICHECK_ELAYOUT;
        }
        if (x.nprocs == M) mine = &x;
      }
      if (!mine) {
        c_.set_error("no processor mapping for " + std::to_string(M) + " processes");
        return ICHECK_ELAYOUT;
      }
      l = *mine;
      break;
    }
    case ICHECK_MANUAL:
      e.role = Role::Manual;
      e.count = va_arg(ap, size_t);
      e.manual = va_arg(ap, icheck_manual_fn);
      e.arg = va_arg(ap, void*);
      e.src = va_arg(ap, int);
      if (!e.manual || e.src < ICHECK_ALL || e.src >= M) return ICHECK_EINVAL;
      if (e.count > global) {
        c_.set_error("manual local count " + std::to_string(e.count) + " exceeds the global count");
        return ICHECK_ELAYOUT;
      }
      break;
    default: return ICHECK_EINVAL;
  }
  if (e.role == Role::Global) {
    std::string why = dist::validate(l);
    if (!why.empty()) {
      c_.set_error(std::string("icheck_add_adapt_global(") + label + "): " + why);
      return ICHECK_ELAYOUT;
    }
    e.count = size_t(dist::local_count(l, r));
  }
  if (e.count && !ptr) return ICHECK_EINVAL;
  e.stored = e.count > 0;
  if (e.stored && (rc = c_.add(label, ptr, e.count, type)) != ICHECK_OK) return rc;
  by_label_[label] = entries_.size();
  entries_.push_back(std::move(e));
  return ICHECK_OK;
}

int Adapt::local_count(const char* label, size_t* count) const {
  if (!label || !count) return ICHECK_EINVAL;
  auto it = by_label_.find(label);
  if (it == by_label_.end()) return ICHECK_ENOENT;
  *count = entries_[it->second].count;
  return ICHECK_OK;
}

std::string Adapt::meta_json() const {
  Comm& comm = *c_.restart_view().comm;
  json es = json::array();
  static const char* roles[] = {"plain", "constant", "size", "rank", "default", "default_joining", "volatile", "global", "manual"};
  for (auto& e : entries_) {
    json j = {{"label", e.label}, {"role", roles[int(e.role)]}, {"type", e.type}, {"count", e.count}};
    if (e.role == Role::Global) {
      const dist::Layout& l = e.layout;
      j["dist"] = dist_name(l.kind);
      j["global"] = l.global;
      if (l.kind == dist::Kind::Block || l.kind == dist::Kind::Cyclic) j["width"] = l.width;
      if (l.kind == dist::Kind::Explicit) j["offset"] = l.offsets[size_t(comm.rank())];
      if (l.kind == dist::Kind::Grid) j["dims"] = l.dims, j["shape"] = l.shape;
    }
    if (e.role == Role::Manual) j["dist"] = "manual", j["global"] = e.layout.global;
    es.push_back(j);
  }
  return json{{"format", 1}, {"nranks", comm.size()}, {"rank", comm.rank()}, {"entries", es}}.dump();
}

int Adapt::before_commit() {
  if (!special() || committed_) return ICHECK_OK;
  RestartView v = c_.restart_view();
  if (!v.inited) return ICHECK_ESTATE;
  // MANUAL: the local counts must add up to the global count (collective).
  for (auto& e : entries_)
    if (e.role == Role::Manual) {
      uint64_t sum = 0;
      for (int64_t x : v.comm->allgather({int64_t(e.count)})) sum += uint64_t(x);
      if (sum != e.layout.global) {
        c_.set_error("manual object '" + e.label + "': local counts sum to " + std::to_string(sum) +
                     ", not to the global count " + std::to_string(e.layout.global));
        return ICHECK_ELAYOUT;
      }
    }
  meta_ = meta_json();
  int rc = c_.add(kMetaLabel, meta_.data(), meta_.size(), ICHECK_CHAR);
  if (rc != ICHECK_OK) return rc;
  committed_ = true;
  return ICHECK_OK;
}

icheck_adapt_info Adapt::info() const {
  Comm& comm = *const_cast<Client&>(c_).restart_view().comm;
  return {old_n_, comm.size(), comm.rank(), version_};
}

int Adapt::restart(bool in_place, bool defer_verify) {
  RestartView v = c_.restart_view();
  if (!v.inited) return ICHECK_ESTATE;
  Comm& comm = *v.comm;
  mode_ = Mode::None, old_.reset(), old_n_ = 0, verify_pending_ = false;
  if (!special()) {
    int rc = in_place ? c_.restart_all() : c_.restart();
    if (rc == ICHECK_OK) mode_ = Mode::Same, old_n_ = comm.size(), version_ = c_.restart_view().restart_v;
    return rc;
  }
  if (v.restart_v <= 0) return ICHECK_ENOENT;
  // N: as the agent recorded it, else from the second-level manifest.
  int64_t n = 0;
  if (comm.rank() == 0) {
    if (v.restart_src == "agents" && v.agent_nranks > 0) n = v.agent_nranks;
    else
      try {
        ckstore::Store st(v.pfs_root, v.app, v.uid);
        if (st.has_manifest(uint64_t(v.restart_v))) n = st.manifest(uint64_t(v.restart_v)).nranks;
      } catch (...) {
      }
  }
  n = std::stoll(comm.bcast(std::to_string(n)));
  if (n == 0 || n == comm.size()) {
    int rc = in_place ? c_.restart_all() : c_.restart();
    if (rc == ICHECK_OK) mode_ = Mode::Same, old_n_ = comm.size(), version_ = c_.restart_view().restart_v;
    return rc;
  }
  // M != N, the agents hold the version: read the old ranks' pieces from
  // their memory (resize from agent memory, [John24 §7.4.4]); nothing waits
  // for the second level. When a piece is gone (an agent died), the second
  // level below.
  if (comm.bcast(v.restart_src) == "agents") {
    json a = json::parse(c_.agent_pieces(v.restart_v, int(n), kMetaLabel, kMaxMetaBytes, defer_verify), nullptr, false);
    if (a.is_object() && a.value("ok", false)) {
      auto old = std::make_shared<Old>();
      old->agents = a["slots"];
      old->v = v.restart_v;
      bool good = true;
      for (int i = 0; i < int(n) && good; ++i) {
        json j = json::parse(a["meta"][size_t(i)].get<std::string>(), nullptr, false);
        good = j.is_object() && j.value("rank", -1) == i && j.value("nranks", -1) == int(n) && j.contains("entries") &&
               j["entries"].is_array();
        old->meta.push_back(std::move(j));
      }
      if (good) {
        old_ = old;
        old_n_ = int(n);
        version_ = v.restart_v;
        mode_ = Mode::Redist;
        verify_pending_ = defer_verify;
        return ICHECK_OK;
      }
      if (comm.rank() == 0) std::fprintf(stderr, "icheck: WARNING: redistribution metadata from the agents is malformed; using the second level\n");
    } else if (comm.rank() == 0) {
      std::fprintf(stderr, "icheck: WARNING: %s; restoring from the second level\n",
                   a.is_object() ? a.value("err", std::string("?")).c_str() : "?");
    }
  }
  if (defer_verify) c_.verify_wait();  // drained: the second level below
  return open_pfs();
}

int Adapt::open_pfs() {
  RestartView v = c_.restart_view();
  Comm& comm = *v.comm;
  // The second level. Agents holding the version write it first.
  if (comm.bcast(v.restart_src) == "agents" && !c_.flush_agents() && comm.rank() == 0)
    std::fprintf(stderr, "icheck: WARNING: %s\n", c_.last_error());
  json hdr = {{"ok", false}, {"rc", ICHECK_ENOENT}};
  if (comm.rank() == 0) {
    try {
      ckstore::Store st(v.pfs_root, v.app, v.uid);
      uint64_t ver = uint64_t(v.restart_v);
      if (!st.valid(ver, ckstore::Check::shallow)) {
        auto nv = st.newest_valid(ckstore::Check::shallow);
        if (!nv) throw ckstore::Error(ckstore::Errc::not_found, st.app_dir().string(), "no valid version on the second level");
        std::fprintf(stderr, "icheck: WARNING: version %lld of %s is not on the second level; restoring version %llu on %d processes\n",
                     (long long)ver, v.app.c_str(), (unsigned long long)*nv, comm.size());
        ver = *nv;
      }
      auto m = st.manifest(ver);
      json metas = json::array();
      for (int i = 0; i < m.nranks; ++i) {
        const ckstore::Region* reg = m.find(i, kMetaLabel);
        if (!reg) {
          hdr = {{"ok", false}, {"rc", ICHECK_EMISMATCH},
                 {"err", "version " + std::to_string(ver) + " of " + std::to_string(m.nranks) + " processes has no redistribution metadata of rank " +
                             std::to_string(i) + " (committed without icheck_add_adapt*): restore it on " + std::to_string(m.nranks) + " processes"}};
          throw 0;
        }
        if (reg->bytes() > kMaxMetaBytes) throw ckstore::Error(ckstore::Errc::corrupt, "", "redistribution metadata too large");
        std::string text(size_t(reg->bytes()), '\0');
        st.read_region(ver, i, kMetaLabel, text.data(), text.size());
        json j = json::parse(text, nullptr, false);
        if (!j.is_object() || j.value("rank", -1) != i || j.value("nranks", -1) != m.nranks || !j.contains("entries") || !j["entries"].is_array())
          throw ckstore::Error(ckstore::Errc::corrupt, "", "redistribution metadata of rank " + std::to_string(i) + " is malformed");
        metas.push_back(std::move(j));
      }
      hdr = {{"ok", true}, {"v", ver}, {"n", m.nranks}, {"meta", metas}};
    } catch (const ckstore::Error& e) {
      int rc = e.code() == ckstore::Errc::corrupt ? ICHECK_ECORRUPT : e.code() == ckstore::Errc::perm ? ICHECK_EPERM
             : e.code() == ckstore::Errc::not_found ? ICHECK_ENOENT : ICHECK_EIO;
      hdr = {{"ok", false}, {"rc", rc}, {"err", e.what()}};
    } catch (const int&) {
    } catch (const std::exception& e) {
      hdr = {{"ok", false}, {"rc", ICHECK_EIO}, {"err", e.what()}};
    }
  }
  hdr = json::parse(comm.bcast(hdr.dump()));
  if (!hdr.value("ok", false)) {
    c_.set_error(hdr.value("err", std::string("no checkpoint to redistribute")));
    return hdr.value("rc", int(ICHECK_ENOENT));
  }
  auto old = std::make_shared<Old>();
  int rc = ICHECK_OK;
  try {
    old->st = std::make_unique<ckstore::Store>(v.pfs_root, v.app, v.uid);
    old->m = old->st->manifest(hdr["v"].get<uint64_t>());
    for (auto& j : hdr["meta"]) old->meta.push_back(j);
  } catch (const std::exception& e) {
    c_.set_error(e.what());
    rc = ICHECK_EIO;
  }
  rc = comm.min_int(rc);
  if (rc != ICHECK_OK) return rc;
  old_ = old;
  old_n_ = hdr["n"].get<int>();
  version_ = hdr["v"].get<int64_t>();
  mode_ = Mode::Redist;
  return ICHECK_OK;
}

int Adapt::set_value(Entry& e, void* ptr, double x) {
  for (size_t i = 0; i < e.count; ++i) {
    if (e.type == ICHECK_INT) static_cast<int*>(ptr)[i] = int(x);
    else if (e.type == ICHECK_FLOAT) static_cast<float*>(ptr)[i] = float(x);
    else static_cast<double*>(ptr)[i] = x;
  }
  return ICHECK_OK;
}

int Adapt::restore_entry(Entry& e, void* ptr, size_t count) {
  Comm& comm = *c_.restart_view().comm;
  const bool collective = e.role == Role::Constant || e.role == Role::Manual;
  if (!collective && (count != e.count || (count && !ptr))) return count != e.count ? ICHECK_EMISMATCH : ICHECK_EINVAL;
  switch (e.role) {
    case Role::Size: return set_value(e, ptr, comm.size());
    case Role::Rank: return set_value(e, ptr, comm.rank());
    case Role::Default: std::memcpy(ptr, e.defval.data(), e.defval.size()); return ICHECK_OK;
    case Role::Volatile: {
      icheck_adapt_info in = info();
      return e.recalc(e.label.c_str(), ptr, count, &in, e.arg) == 0 ? ICHECK_OK : ICHECK_EINVAL;
    }
    default: break;
  }
  const bool ok_args = count == e.count && (ptr || !count);
  if (mode_ == Mode::Same) {
    if (e.role == Role::Constant) {
      // rank 0 stored it; everybody gets rank 0's copy
      std::string blob;
      if (comm.rank() == 0) {
        int rc = ok_args ? c_.restore(e.label.c_str(), ptr, e.count) : ICHECK_EMISMATCH;
        blob = rc == ICHECK_OK ? std::string(static_cast<const char*>(ptr), e.count * e.es) : std::to_string(rc);
        blob.insert(0, 1, rc == ICHECK_OK ? '1' : '0');
      }
      blob = comm.bcast(blob);
      if (blob.empty() || blob[0] != '1') return blob.size() > 1 ? std::atoi(blob.c_str() + 1) : ICHECK_ENOENT;
      if (!ok_args || blob.size() != 1 + e.count * e.es) return ICHECK_EMISMATCH;
      if (comm.rank() != 0) std::memcpy(ptr, blob.data() + 1, blob.size() - 1);
      return ICHECK_OK;
    }
    if (!ok_args) return ICHECK_EMISMATCH;
    return e.count ? c_.restore(e.label.c_str(), ptr, e.count) : ICHECK_OK;
  }
  if (mode_ != Mode::Redist) return ICHECK_ESTATE;
  if (!ok_args && e.role != Role::Manual) return ICHECK_EMISMATCH;
  try {
    return restore_redist(e, ptr);
  } catch (const std::bad_alloc&) {
    return ICHECK_ENOMEM;
  }
  catch (const ckstore::Error& x) {
    c_.set_error(x.what());
    switch (x.code()) {
      case ckstore::Errc::corrupt: return ICHECK_ECORRUPT;
      case ckstore::Errc::perm: return ICHECK_EPERM;
      case ckstore::Errc::not_found: return ICHECK_ENOENT;
      case ckstore::Errc::mismatch: return ICHECK_EMISMATCH;
      default: return ICHECK_EIO;
    }
  }
  catch (const AgentReadError& x) {
    c_.set_error(x.what());
    return ICHECK_EAGENT;
  }
  catch (const std::exception& x) {
    c_.set_error(x.what());
    return ICHECK_EIO;
  }
}

int Adapt::restore_redist(Entry& e, void* ptr) {
  Old& o = *old_;
  const int r = c_.restart_view().comm->rank(), N = old_n_;
  auto fail = [&](int rc, const std::string& why) {
    c_.set_error("restore of '" + e.label + "' from " + std::to_string(N) + " processes: " + why);
    return rc;
  };
  // one stored region of an old rank, checked against this object
  auto region = [&](int rank, uint64_t want_count) -> std::optional<Old::Reg> {
    auto reg = o.find(rank, e.label);
    if (!reg || reg->type != e.type || reg->count != want_count) return std::nullopt;
    return reg;
  };
  auto read_whole = [&](int rank) {
    auto reg = o.find(rank, e.label);
    if (!reg) return fail(ICHECK_ENOENT, "rank " + std::to_string(rank) + " stored no such region");
    if (reg->type != e.type || reg->count != e.count)
      return fail(ICHECK_EMISMATCH, "stored " + std::to_string(reg->count) + " elements of type " +
                                        std::to_string(reg->type) + ", restoring " + std::to_string(e.count) +
                                        " of type " + std::to_string(e.type));
    o.read(c_, rank, *reg, 0, ptr, e.count * e.es);
    return int(ICHECK_OK);
  };
  switch (e.role) {
    case Role::Plain:
      if (r >= N) return fail(ICHECK_ENOENT, "rank-private (icheck_add) data of rank " + std::to_string(r) + " does not exist; declare it with icheck_add_adapt");
      return read_whole(r);
    case Role::Constant: return read_whole(0);
    case Role::DefaultJoining:
      if (r >= N) {
        std::memcpy(ptr, e.defval.data(), e.defval.size());
        return ICHECK_OK;
      }
      return read_whole(r);
    default: break;
  }
  // distributed: the old layout from the N metadata regions
  std::vector<const json*> olds;
  for (int i = 0; i < N; ++i) {
    const json* found = nullptr;
    for (auto& x : o.meta[size_t(i)]["entries"])
      if (x.is_object() && x.value("label", "") == e.label) found = &x;
    if (!found || !found->contains("dist"))
      return fail(ICHECK_EMISMATCH, "old rank " + std::to_string(i) + " did not record it as a distributed object");
    if (found->value("type", 0) != e.type || found->value("global", uint64_t(0)) != e.layout.global)
      return fail(ICHECK_EMISMATCH, "committed with type " + std::to_string(found->value("type", 0)) + " and global count " +
                                        std::to_string(found->value("global", uint64_t(0))) + ", restoring type " +
                                        std::to_string(e.type) + " and global count " + std::to_string(e.layout.global));
    olds.push_back(found);
  }
  std::vector<size_t> counts(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i) counts[size_t(i)] = olds[size_t(i)]->value("count", size_t(0));
  const std::string kind = olds[0]->value("dist", "");
  if (e.role == Role::Manual || kind == "manual") {
    if (e.role != Role::Manual || kind != "manual") return fail(ICHECK_EMISMATCH, "MANUAL on one side only");
    uint64_t sum = 0;
    for (size_t c : counts) sum += c;
    if (sum != e.layout.global) return fail(ICHECK_ECORRUPT, "old counts do not sum to the global count");
    std::vector<char> global;
    const bool receive = e.src == ICHECK_ALL || e.src == r;
    if (receive) {
      global.resize(e.layout.global * e.es);
      uint64_t off = 0;
      for (int i = 0; i < N; ++i) {
        auto reg = counts[size_t(i)] ? region(i, counts[size_t(i)]) : std::nullopt;
        if (counts[size_t(i)] && !reg) return fail(ICHECK_ECORRUPT, "part of old rank " + std::to_string(i) + " missing");
        if (counts[size_t(i)]) o.read(c_, i, *reg, 0, global.data() + off * e.es, counts[size_t(i)] * e.es);
        off += counts[size_t(i)];
      }
    }
    icheck_adapt_info in = info();
    int rc = e.manual(e.label.c_str(), receive ? global.data() : nullptr, e.layout.global, counts.data(), ptr, e.count, &in, e.arg);
    return rc == 0 ? ICHECK_OK : ICHECK_EINVAL;
  }
  dist::Layout from;
  std::string why = meta::old_layout(olds, from);
  if (!why.empty()) return fail(ICHECK_ECORRUPT, why);
  for (int i = 0; i < N; ++i)
    if (counts[size_t(i)] && !region(i, counts[size_t(i)]))
      return fail(ICHECK_ECORRUPT, "part of old rank " + std::to_string(i) + " missing or of another size");
  redist::Reader rd = old_reader(e.label);
  const auto st = redist::fill(from, e.layout, r, e.es, rd, static_cast<char*>(ptr));
  if (std::getenv("ICHECK_TIMING") && r == 0)
    std::fprintf(stderr, "icheck: fill of '%s' (rank 0): path %d, %llu reads in %llu batches, %llu bytes, %.4f s reading\n",
                 e.label.c_str(), st.path, (unsigned long long)st.reads, (unsigned long long)st.batches,
                 (unsigned long long)st.bytes_read, st.read_s);
  return ICHECK_OK;
}

int Adapt::restore(const char* label, void* ptr, size_t count) {
  if (!label) return ICHECK_EINVAL;
  auto it = by_label_.find(label);
  if (mode_ == Mode::None) return special() ? ICHECK_ESTATE : c_.restore(label, ptr, count);
  if (it == by_label_.end()) return mode_ == Mode::Same ? c_.restore(label, ptr, count) : ICHECK_ENOENT;
  return restore_entry(entries_[it->second], ptr, count);
}

int Adapt::restart_all() {
  if (!special()) {
    int rc = c_.restart_all();
    mode_ = rc == ICHECK_OK ? Mode::Same : Mode::None;
    if (rc == ICHECK_OK) old_n_ = c_.restart_view().comm->size(), version_ = c_.restart_view().restart_v;
    return rc;
  }
  if (entries_.empty()) return ICHECK_ENOENT;
  int rc = restart();
  if (rc != ICHECK_OK) return rc;
  // every rank walks every object (CONSTANT and MANUAL are collective);
  // VOLATILE objects last: their recalculation may use the others
  int first = ICHECK_OK;
  for (int pass = 0; pass < 2; ++pass)
    for (auto& e : entries_) {
      if ((e.role == Role::Volatile) != (pass == 1)) continue;
      int x = restore_entry(e, e.ptr, e.count);
      if (x != ICHECK_OK && first == ICHECK_OK) first = x;
    }
  return c_.restart_view().comm->min_int(first);
}

}  // namespace dynres::icheck
