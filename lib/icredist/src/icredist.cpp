// icredist: see include/dynres/icredist.hpp.
#include "dynres/icredist.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "dynres/icheck/meta.hpp"

namespace dynres::icredist {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ckstore::ElemType;

namespace {

constexpr std::uint64_t kMaxMetaBytes = 16u << 20;  ///< as libicheck's restore

std::string vname(const ckstore::Store& st, std::uint64_t v) {
  return "version " + std::to_string(v) + " of '" + st.app() + "'";
}

ElemType elem_type(int t) {
  if (t < 1 || t > 5) throw Error("element type " + std::to_string(t) + " is not an iCheck type (1..5)");
  return ElemType(t);
}

const json* entry_of(const json& meta, const std::string& label) {
  const json& es = meta.at("entries");
  for (auto& x : es)
    if (x.is_object() && x.value("label", "") == label) return &x;
  return nullptr;
}

bool distributed(const std::string& d) {
  return d == "block" || d == "cyclic" || d == "explicit" || d == "grid";
}

/// The old layout of a distributed object (meta::old_layout), as Error.
icheck::dist::Layout layout_of(const VersionInfo& vi, const std::string& label) {
  std::vector<const json*> olds;
  for (int i = 0; i < vi.manifest.nranks; ++i) {
    const json* e = entry_of(vi.meta[size_t(i)], label);
    if (!e) throw Error("rank " + std::to_string(i) + " recorded no object '" + label + "'");
    olds.push_back(e);
  }
  icheck::dist::Layout from;
  std::string why = icheck::meta::old_layout(olds, from);
  if (!why.empty()) throw Error("object '" + label + "': " + why);
  return from;
}

const ckstore::Region& region_of(const VersionInfo& vi, int rank, const std::string& label,
                                  std::uint64_t count) {
  const ckstore::Region* r = vi.manifest.find(rank, label);
  if (!r) throw Error("rank " + std::to_string(rank) + " stored no region '" + label + "'");
  if (r->info.count != count)
    throw Error("region '" + label + "' of rank " + std::to_string(rank) + " holds " + std::to_string(r->info.count) +
                " elements, its metadata says " + std::to_string(count));
  return *r;
}

/// Fill `dst` (new rank r's part of `to`) from the old parts of `from`:
/// per old rank one read of the span it contributes (chunk checksums
/// verified by read_range), then the copies of the plan.
void fill(const ckstore::Store& st, const VersionInfo& vi, const std::string& label, const icheck::dist::Layout& from,
          const icheck::dist::Layout& to, int r, std::size_t es, char* dst) {
  const auto moves = icheck::dist::plan(from, to, r);
  std::map<int, std::pair<std::uint64_t, std::uint64_t>> span;
  for (auto& mv : moves) {
    auto [it, fresh] = span.try_emplace(mv.src_rank, mv.src_off, mv.src_off + mv.len);
    if (!fresh) it->second.first = std::min(it->second.first, mv.src_off), it->second.second = std::max(it->second.second, mv.src_off + mv.len);
  }
  std::vector<char> buf;
  for (auto& [src, lohi] : span) {
    const ckstore::Region& reg = region_of(vi, src, label, icheck::dist::local_count(from, src));
    buf.resize((lohi.second - lohi.first) * es);
    st.read_range(vi.manifest, reg, lohi.first * es, buf.data(), buf.size());
    for (auto& mv : moves)
      if (mv.src_rank == src) std::memcpy(dst + mv.dst_off * es, buf.data() + (mv.src_off - lohi.first) * es, mv.len * es);
  }
}

}  // namespace

const Object* VersionInfo::find(const std::string& label) const {
  for (auto& o : objects)
    if (o.label == label) return &o;
  return nullptr;
}

AppSummary list_app(const ckstore::Store& st) {
  std::error_code ec;
  if (!fs::is_directory(st.app_dir(), ec))
    throw Error("unknown application '" + st.app() + "': no directory " + st.app_dir().string());
  AppSummary a;
  a.app = st.app();
  for (std::uint64_t v : st.list_versions()) {
    VersionSummary s;
    s.version = v;
    try {
      ckstore::Manifest m = st.manifest(v);
      s.complete = true;
      s.nranks = m.nranks;
      s.created_unix = m.created_unix;
      s.bytes = m.total_bytes();
      s.stored_bytes = m.total_stored_bytes();
      for (auto& r : m.regions)
        for (auto& c : r.chunks) s.compressed = s.compressed || c.compressed;
    } catch (const ckstore::Error& e) {
      if (e.code() == ckstore::Errc::perm) throw;
      s.problem = e.what();
    }
    a.versions.push_back(std::move(s));
  }
  return a;
}

std::vector<AppSummary> list(const fs::path& root, std::uint32_t uid) {
  const fs::path dir = root / std::to_string(uid);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error("no checkpoints of uid " + std::to_string(uid) + ": no directory " + dir.string());
  std::vector<std::string> names;
  for (auto& d : fs::directory_iterator(dir)) {
    const std::string n = d.path().filename().string();
    if (d.is_directory() && ckstore::safe_component(n)) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  std::vector<AppSummary> out;
  for (auto& n : names) out.push_back(list_app(ckstore::Store(root, n, uid)));
  return out;
}

std::uint64_t newest(const ckstore::Store& st) {
  AppSummary a = list_app(st);
  for (auto& v : a.versions)
    if (v.complete) return v.version;
  throw Error("application '" + st.app() + "' has no complete version (none with a valid manifest)");
}

VersionInfo describe(const ckstore::Store& st, std::uint64_t v) {
  VersionInfo vi;
  {
    std::error_code ec;
    if (!fs::is_directory(st.app_dir(), ec))
      throw Error("unknown application '" + st.app() + "': no directory " + st.app_dir().string());
  }
  try {
    vi.manifest = st.manifest(v);
  } catch (const ckstore::Error& e) {
    if (e.code() == ckstore::Errc::not_found) throw Error(vname(st, v) + " does not exist or has no manifest");
    if (e.code() == ckstore::Errc::corrupt || e.code() == ckstore::Errc::mismatch)
      throw Error(vname(st, v) + ": damaged manifest: " + e.what());
    throw;
  }
  const ckstore::Manifest& m = vi.manifest;
  const int N = m.nranks;
  int with = 0;
  for (int r = 0; r < N; ++r) with += m.find(r, icheck::meta::kLabel) != nullptr;
  vi.has_meta = with > 0;
  if (vi.has_meta) {
    if (with != N) throw Error(vname(st, v) + ": redistribution metadata of " + std::to_string(N - with) + " of " + std::to_string(N) + " ranks is missing");
    for (int r = 0; r < N; ++r) {
      const ckstore::Region* reg = m.find(r, icheck::meta::kLabel);
      if (reg->bytes() > kMaxMetaBytes) throw Error(vname(st, v) + ": metadata of rank " + std::to_string(r) + " larger than 16 MiB");
      std::string text(size_t(reg->bytes()), '\0');
      st.read_region(v, r, icheck::meta::kLabel, text.data(), text.size());
      json j = json::parse(text, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("entries") || !j["entries"].is_array() ||
          j.value("nranks", -1) != N || j.value("rank", -1) != r)
        throw Error(vname(st, v) + ": metadata of rank " + std::to_string(r) + " is malformed or names another rank/size");
      vi.meta.push_back(std::move(j));
    }
  }
  // objects: every label of the metadata (rank 0 first, then the others), then stored regions without one
  std::map<std::string, Object> objs;
  auto add_meta = [&](const json& e) {
    const std::string label = e.value("label", "");
    if (label.empty() || objs.count(label)) return;
    Object o;
    o.label = label;
    o.role = e.value("role", "");
    o.dist = e.value("dist", "");
    o.type = elem_type(e.value("type", 0));
    o.elem_size = ckstore::elem_size(o.type);
    o.global = e.value("global", std::uint64_t(0));
    o.width = e.value("width", std::uint64_t(0));
    if (e.contains("dims")) o.dims = e["dims"].get<std::vector<int>>();
    if (e.contains("shape")) o.shape = e["shape"].get<std::vector<std::uint64_t>>();
    objs[label] = std::move(o);
  };
  try {
    for (auto& mj : vi.meta)
      for (auto& e : mj["entries"])
        if (e.is_object()) add_meta(e);
  } catch (const json::exception& x) {
    throw Error(vname(st, v) + ": metadata malformed: " + x.what());
  }
  for (auto& reg : m.regions) {
    if (reg.info.label == icheck::meta::kLabel) continue;
    auto [it, fresh] = objs.try_emplace(reg.info.label);
    if (fresh) it->second.label = reg.info.label, it->second.role = "plain", it->second.type = reg.info.type;
    it->second.elem_size = reg.info.elem_size;
  }
  for (auto& [label, o] : objs) {
    o.counts.assign(size_t(N), 0);
    for (int r = 0; r < N; ++r)
      if (const ckstore::Region* reg = m.find(r, label)) o.counts[size_t(r)] = reg->info.count, o.bytes += reg->bytes();
    vi.objects.push_back(std::move(o));
  }
  return vi;
}

VerifyResult verify(const ckstore::Store& st, std::uint64_t v) {
  VerifyResult res;
  res.version = v;
  try {
    ckstore::Manifest m = st.verify(v, ckstore::Check::deep);
    for (auto& r : m.regions) res.chunks += r.chunks.size();
    res.bytes = m.total_bytes();
    res.ok = true;
  } catch (const ckstore::Error& e) {
    if (e.code() == ckstore::Errc::perm || e.code() == ckstore::Errc::invalid) throw;
    res.bad_file = e.path();
    res.message = e.what();
  }
  return res;
}

ckstore::Manifest redistribute(const ckstore::Store& st, std::uint64_t v, int M,
                               const std::map<std::string, Predefined>& predefined, const ckstore::Options& opt) {
  namespace dist = icheck::dist;
  if (M <= 0 || M > dist::kMaxProcs)
    throw Error("new rank count " + std::to_string(M) + " outside 1.." + std::to_string(dist::kMaxProcs));
  VersionInfo vi = describe(st, v);
  const ckstore::Manifest& m = vi.manifest;
  const int N = m.nranks;
  if (!vi.has_meta)
    throw Error(vname(st, v) + " has no redistribution metadata (written without icheck_add_adapt* objects): its data is rank-private");
  // the plan of every object, before anything is written
  struct Plan {
    const Object* obj;
    dist::Layout from, to;
  };
  std::vector<Plan> plans;
  std::set<std::string> used;
  for (auto& o : vi.objects) {
    Plan p{&o, {}, {}};
    if (o.role == "manual" || o.dist == "manual")
      throw Error("object '" + o.label + "' is MANUAL: only the application's restart function knows its parts on " +
                  std::to_string(M) + " ranks; restart the application on " + std::to_string(M) + " processes instead");
    if ((o.role == "plain" || o.role == "default_joining") && M > N)
      throw Error("object '" + o.label + "' is rank-private (" + (o.role == "plain" ? std::string("icheck_add") : "DEFAULT_JOINING") +
                  "): the values of new ranks " + std::to_string(N) + ".." + std::to_string(M - 1) + " are not in the checkpoint");
    if (o.role == "global") {
      p.from = layout_of(vi, o.label);
      p.to = p.from;
      p.to.nprocs = M;
      if (p.from.kind == dist::Kind::Explicit || p.from.kind == dist::Kind::Grid) {
        auto it = predefined.find(o.label);
        const bool grid = p.from.kind == dist::Kind::Grid;
        if (it == predefined.end() || (grid ? it->second.dims.empty() : it->second.counts.empty()))
          throw Error("object '" + o.label + "' is PREDEFINED (" + (grid ? "process grid" : "explicit counts/offsets") +
                      "): give its layout on " + std::to_string(M) + " ranks (" +
                      (grid ? "--grid " + o.label + "=D0xD1..." : "--layout " + o.label + "=OFFSET:COUNT,...") + ")");
        used.insert(o.label);
        if (grid) p.to.dims = it->second.dims;
        else p.to.counts = it->second.counts, p.to.offsets = it->second.offsets;
      }
      std::string why = dist::validate(p.to);
      if (!why.empty()) throw Error("object '" + o.label + "' on " + std::to_string(M) + " ranks: " + why);
    }
    plans.push_back(std::move(p));
  }
  for (auto& [label, _] : predefined)
    if (!used.count(label)) throw Error("a layout was given for '" + label + "', which is not a PREDEFINED object of " + vname(st, v));
  VerifyResult vr = verify(st, v);
  if (!vr.ok) throw Error(vname(st, v) + " is damaged, not rewritten: " + vr.message);

  std::uint64_t nv = 0;
  for (std::uint64_t x : st.list_versions()) nv = std::max(nv, x);
  if (nv >= ckstore::kMaxVersion) throw Error("no version number left after " + std::to_string(nv));
  ++nv;
  ckstore::Options o = opt;
  o.keep_last = 0;  // never delete anything here
  bool compressed = false;
  for (auto& r : m.regions)
    for (auto& c : r.chunks) compressed = compressed || c.compressed;
  o.compress = compressed;  // keep the source's choice
  if (compressed) o.compress_threshold = 0;
  ckstore::VersionWriter w = st.begin_version(nv, M, o);
  try {
    for (int r = 0; r < M; ++r) {
      json es = json::array();
      for (auto& p : plans) {
        const Object& ob = *p.obj;
        const int src = (ob.role == "constant") ? 0 : std::min(r, N - 1);
        const json* pe = entry_of(vi.meta[size_t(src)], ob.label);
        if (!pe) throw Error("rank " + std::to_string(src) + " recorded no object '" + ob.label + "'");
        json e = *pe;
        if (ob.role == "global") {
          const std::uint64_t n = dist::local_count(p.to, r);
          e["count"] = n;
          if (p.to.kind == dist::Kind::Explicit) e["offset"] = p.to.offsets[size_t(r)];
          if (p.to.kind == dist::Kind::Grid) e["dims"] = p.to.dims;
          if (n) {
            std::vector<char> buf(n * ob.elem_size);
            fill(st, vi, ob.label, p.from, p.to, r, ob.elem_size, buf.data());
            ckstore::RegionInfo ri{ob.label, ob.type, ob.elem_size, n, r, {}};
            if (p.to.kind == dist::Kind::Block || p.to.kind == dist::Kind::Cyclic) {
              ri.layout.dist = p.to.kind == dist::Kind::Block ? ckstore::Dist::Block : ckstore::Dist::Cyclic;
              ri.layout.block_size = p.to.width;
              ri.layout.global_count = p.to.global;
              if (p.to.kind == dist::Kind::Block) ri.layout.global_offset = dist::segments(p.to, r).front().off;
            }
            w.add_region(ri, buf.data());
          }
        } else if ((ob.role == "constant" && r == 0) || ob.role == "plain" || ob.role == "default_joining") {
          if (const ckstore::Region* reg = m.find(src, ob.label)) {
            std::vector<std::byte> data = st.read_region(v, src, ob.label);
            ckstore::RegionInfo ri = reg->info;
            ri.rank = r;
            w.add_region(ri, data.data());
          }
        }
        es.push_back(std::move(e));
      }
      const std::string text = json{{"format", 1}, {"nranks", M}, {"rank", r}, {"entries", es}}.dump();
      w.add_region({icheck::meta::kLabel, ElemType::Char, 1, text.size(), r, {}}, text.data());
    }
    for (auto& [k, val] : m.attrs) w.set_attr(k, val);
    w.set_attr("icredist.source", "v" + std::to_string(v) + " on " + std::to_string(N) + " ranks");
    return w.commit();
  } catch (...) {
    w.abort();
    std::error_code ec;
    fs::remove(st.version_dir(nv), ec);  // only when empty
    throw;
  }
}

std::vector<std::byte> gather(const ckstore::Store& st, const VersionInfo& vi, const std::string& label, int rank) {
  const Object* o = vi.find(label);
  if (!o) throw Error("no object '" + label + "' in " + vname(st, vi.manifest.version));
  const int N = vi.manifest.nranks;
  std::vector<std::byte> out;
  if (distributed(o->dist)) {
    icheck::dist::Layout from = layout_of(vi, label);
    out.resize(from.global * o->elem_size);
    for (int i = 0; i < N; ++i) {
      const std::uint64_t n = icheck::dist::local_count(from, i);
      if (!n) continue;
      const ckstore::Region& reg = region_of(vi, i, label, n);
      std::vector<std::byte> part(n * o->elem_size);
      st.read_range(vi.manifest, reg, 0, part.data(), part.size());
      std::uint64_t local = 0;
      for (auto& s : icheck::dist::segments(from, i)) {
        std::memcpy(out.data() + s.off * o->elem_size, part.data() + local * o->elem_size, s.len * o->elem_size);
        local += s.len;
      }
    }
    return out;
  }
  if (o->dist == "manual") {  // the parts in rank order, as a MANUAL restore assembles them
    for (int i = 0; i < N; ++i)
      if (vi.manifest.find(i, label)) {
        std::vector<std::byte> part = st.read_region(vi.manifest.version, i, label);
        out.insert(out.end(), part.begin(), part.end());
      }
    return out;
  }
  const int r = o->role == "constant" ? 0 : rank;
  if (r < 0 || r >= N) throw Error("rank " + std::to_string(rank) + " outside 0.." + std::to_string(N - 1));
  if (!vi.manifest.find(r, label))
    throw Error("object '" + label + "' (" + o->role + ") has no stored data on rank " + std::to_string(r));
  return st.read_region(vi.manifest.version, r, label);
}

std::uint64_t export_label(const ckstore::Store& st, const VersionInfo& vi, const std::string& label, const fs::path& out,
                           bool npy, int rank) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec))) throw Error("output " + out.string() + " exists; not overwritten");
  std::vector<std::byte> data = gather(st, vi, label, rank);
  const Object& o = *vi.find(label);
  std::string head;
  if (npy) {
    std::string descr;
    switch (o.type) {
      case ElemType::Float: descr = "<f4"; break;
      case ElemType::Double: descr = "<f8"; break;
      case ElemType::Int: descr = "<i4"; break;
      case ElemType::Char: descr = "|u1"; break;
      case ElemType::Binary: descr = o.elem_size == 1 ? "|u1" : "|V" + std::to_string(o.elem_size); break;
    }
    std::string shape;
    if (o.dist == "grid" && !o.shape.empty()) {
      for (auto x : o.shape) shape += std::to_string(x) + ", ";
      shape.resize(shape.size() - (o.shape.size() > 1 ? 2 : 1));
    } else {
      shape = std::to_string(data.size() / o.elem_size) + ",";
    }
    std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
    const size_t pre = 10;  // magic (6) + version (2) + header length (2)
    size_t total = pre + dict.size() + 1;
    total = (total + 63) / 64 * 64;
    dict.append(total - pre - dict.size() - 1, ' ');
    dict += '\n';
    head = std::string("\x93NUMPY\x01\x00", 8);
    head += char(dict.size() & 0xff);
    head += char(dict.size() >> 8);
    head += dict;
  }
  const fs::path tmp = out.string() + ".icredist-tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create " + tmp.string() + ": " + std::strerror(errno));
  auto put = [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n) {
      ssize_t k = ::write(fd, c, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      c += k, n -= size_t(k);
    }
    return true;
  };
  const bool ok = put(head.data(), head.size()) && put(data.data(), data.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), out.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : err);
    ::unlink(tmp.c_str());
    throw Error("cannot write " + out.string() + ": " + why);
  }
  return data.size();
}

json to_json(const AppSummary& a) {
  json vs = json::array();
  for (auto& v : a.versions) {
    json j = {{"version", v.version}, {"complete", v.complete}};
    if (v.complete)
      j.update({{"nranks", v.nranks}, {"created_unix", v.created_unix}, {"bytes", v.bytes},
                {"stored_bytes", v.stored_bytes}, {"compressed", v.compressed}});
    else
      j["problem"] = v.problem;
    vs.push_back(j);
  }
  return {{"app", a.app}, {"versions", vs}};
}

json to_json(const VersionInfo& vi) {
  const ckstore::Manifest& m = vi.manifest;
  json os = json::array();
  for (auto& o : vi.objects) {
    json j = {{"label", o.label}, {"role", o.role}, {"type", ckstore::to_string(o.type)}, {"elem_size", o.elem_size},
              {"counts", o.counts}, {"bytes", o.bytes}};
    if (!o.dist.empty()) j["dist"] = o.dist, j["global"] = o.global;
    if (o.dist == "block" || o.dist == "cyclic") j["width"] = o.width;
    if (o.dist == "grid") j["dims"] = o.dims, j["shape"] = o.shape;
    os.push_back(j);
  }
  return {{"app", m.app},       {"uid", m.uid},         {"version", m.version},
          {"nranks", m.nranks}, {"created_unix", m.created_unix}, {"bytes", m.total_bytes()},
          {"stored_bytes", m.total_stored_bytes()}, {"attrs", m.attrs}, {"redistributable", vi.has_meta},
          {"objects", os}};
}

json to_json(const VerifyResult& r) {
  json j = {{"version", r.version}, {"ok", r.ok}, {"chunks", r.chunks}, {"bytes", r.bytes}};
  if (!r.ok) j["bad_file"] = r.bad_file, j["error"] = r.message;
  return j;
}

}  // namespace dynres::icredist
