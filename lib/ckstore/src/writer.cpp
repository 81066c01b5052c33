// VersionWriter: streaming, chunked, optionally zstd-compressed writing of one
// version's chunk files [John24 §6.2.5].
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <mutex>
#include <set>

#include "detail.hpp"

namespace dynres::ckstore {

using nlohmann::json;
using namespace detail;
namespace fs = std::filesystem;

namespace {

struct XxhDeleter {
  void operator()(XXH3_state_t* s) const noexcept { XXH3_freeState(s); }
};
struct CctxDeleter {
  void operator()(ZSTD_CCtx* c) const noexcept { ZSTD_freeCCtx(c); }
};

/// A chunk ready to be appended: either `comp` (zstd frame) or the raw bytes.
struct Encoded {
  bool compressed = false;
  std::uint64_t raw_xxh3 = 0;
  std::uint64_t stored_xxh3 = 0;
  std::size_t comp_len = 0;
};

/// Checksum and (if asked) compress raw[0..n) into out; keeps the frame only
/// when it is smaller than the raw chunk.
Encoded encode(const char* raw, std::size_t n, bool compress, int level, ZSTD_CCtx* cctx,
               std::vector<char>& out, const std::string& path) {
  Encoded e;
  e.raw_xxh3 = xxh3(raw, n);
  e.stored_xxh3 = e.raw_xxh3;
  if (!compress) return e;
  out.resize(ZSTD_compressBound(n));
  std::size_t c = ZSTD_compressCCtx(cctx, out.data(), out.size(), raw, n, level);
  if (ZSTD_isError(c)) throw Error(Errc::io, path, std::string("zstd: ") + ZSTD_getErrorName(c));
  if (c < n) {
    e.compressed = true;
    e.comp_len = c;
    e.stored_xxh3 = xxh3(out.data(), c);
  }
  return e;
}

}  // namespace

struct RegionState {
  RegionInfo info;
  std::uint64_t total = 0;
  std::uint64_t written = 0;
  bool compress = false;
  bool closed = false;
  std::string file;
  fs::path fpath;
  Fd fd;
  std::uint64_t file_off = 0;
  std::uint64_t chunk_start = 0;  // raw offset of the current chunk
  std::uint64_t fill = 0;         // raw bytes of the current chunk so far
  std::unique_ptr<XXH3_state_t, XxhDeleter> xs;
  std::unique_ptr<ZSTD_CCtx, CctxDeleter> cctx;
  std::vector<char> buf;   // raw chunk (compressed regions only)
  std::vector<char> cbuf;  // zstd output
  std::vector<ChunkInfo> chunks;
};

struct VersionWriter::Impl {
  fs::path root;
  std::string app;
  std::uint32_t uid = 0;
  std::uint64_t version = 0;
  int nranks = 0;
  Options opt;
  fs::path dir;
  bool created_dir = false;
  std::string tag = new_writer_tag();  ///< names this writer's chunk files
  std::mutex mu;
  std::vector<std::unique_ptr<RegionState>> regions;
  std::set<std::pair<int, std::string>> keys;
  std::map<std::string, std::string> attrs;
  bool sealed = false;
  bool committed = false;

  std::uint64_t cap(const RegionState& r) const {
    return std::min<std::uint64_t>(opt.chunk_size, r.total - r.chunk_start);
  }

  RegionState& get(std::size_t id) {
    std::lock_guard lk(mu);
    if (id >= regions.size() || !regions[id])
      throw Error(Errc::invalid, dir.string(), "unknown region id " + std::to_string(id));
    RegionState& r = *regions[id];
    if (r.closed) throw Error(Errc::invalid, r.fpath.string(), "region already closed");
    return r;
  }

  void append_chunk(RegionState& r, std::uint64_t raw_len, const Encoded& e, const char* raw,
                    const char* comp) {
    // uncompressed regions stream raw bytes to the file as they arrive
    if (r.compress) {
      if (e.compressed) write_all(r.fd.get(), comp, e.comp_len, r.fpath.string());
      else write_all(r.fd.get(), raw, raw_len, r.fpath.string());
    }
    ChunkInfo c;
    c.file = r.file;
    c.file_offset = r.file_off;
    c.raw_offset = r.chunk_start;
    c.raw_length = raw_len;
    c.stored_length = e.compressed ? e.comp_len : raw_len;
    c.compressed = e.compressed;
    c.raw_xxh3 = e.raw_xxh3;
    c.stored_xxh3 = e.stored_xxh3;
    r.file_off += c.stored_length;
    r.chunk_start += raw_len;
    r.fill = 0;
    r.chunks.push_back(c);
  }

  /// The current chunk of a compressed region is complete in `raw`.
  void finish_compressed(RegionState& r, const char* raw, std::uint64_t n) {
    if (!r.cctx) r.cctx.reset(ZSTD_createCCtx());
    if (!r.cctx) throw Error(Errc::io, r.fpath.string(), "out of memory (zstd context)");
    Encoded e = encode(raw, n, true, opt.compress_level, r.cctx.get(), r.cbuf, r.fpath.string());
    append_chunk(r, n, e, raw, r.cbuf.data());
  }

  void finish_plain(RegionState& r, std::uint64_t n) {
    Encoded e;
    e.raw_xxh3 = e.stored_xxh3 = XXH3_64bits_digest(r.xs.get());
    XXH3_64bits_reset(r.xs.get());
    append_chunk(r, n, e, nullptr, nullptr);
  }

  void remove_files() noexcept {
    for (auto& r : regions)
      if (r) {
        r->fd = Fd();
        ::unlink(r->fpath.c_str());
      }
    if (created_dir) ::rmdir(dir.c_str());  // only if empty
  }
};

VersionWriter::VersionWriter(fs::path root, std::string app, std::uint32_t uid,
                             std::uint64_t version, int nranks, const Options& opt)
    : impl_(std::make_unique<Impl>()) {
  Impl& I = *impl_;
  if (!safe_component(app)) throw Error(Errc::invalid, "", "unsafe application name '" + app + "'");
  if (root.empty()) throw Error(Errc::invalid, "", "empty store root");
  I.dir = root / std::to_string(uid) / app / version_dir_name(version);
  if (nranks < 1) throw Error(Errc::invalid, I.dir.string(), "nranks must be >= 1");
  if (opt.chunk_size < 4096)
    throw Error(Errc::invalid, I.dir.string(), "chunk_size must be >= 4096 bytes");
  if (opt.compress && (opt.compress_level < ZSTD_minCLevel() || opt.compress_level > ZSTD_maxCLevel()))
    throw Error(Errc::invalid, I.dir.string(),
                "zstd level " + std::to_string(opt.compress_level) + " out of range");
  if (uid != ::geteuid() && ::geteuid() != 0)
    throw Error(Errc::perm, I.dir.string(),
                "cannot write for uid " + std::to_string(uid) + " as uid " +
                    std::to_string(::geteuid()));
  I.root = std::move(root);
  I.app = std::move(app);
  I.uid = uid;
  I.version = version;
  I.nranks = nranks;
  I.opt = opt;
  if (I.opt.threads == 0) I.opt.threads = 1;
  std::error_code ec;
  fs::create_directories(I.root, ec);
  if (ec) throw Error(Errc::io, I.root.string(), "create store root: " + ec.message());
  ensure_dir(I.root / std::to_string(uid), 0700, uid);
  ensure_dir(I.root / std::to_string(uid) / I.app, 0700, uid);
  I.created_dir = !fs::exists(I.dir, ec);
  ensure_dir(I.dir, 0700, uid);
  if (fs::exists(I.dir / kManifestName, ec)) {
    I.created_dir = false;
    throw Error(Errc::invalid, I.dir.string(), "version already committed");
  }
  if (I.opt.durable) fsync_dir(I.dir.parent_path());
}

VersionWriter::VersionWriter(VersionWriter&&) noexcept = default;
VersionWriter& VersionWriter::operator=(VersionWriter&& o) noexcept {
  if (this != &o) {
    if (impl_ && !impl_->sealed && !impl_->committed) abort();
    impl_ = std::move(o.impl_);
  }
  return *this;
}

VersionWriter::~VersionWriter() {
  if (impl_ && !impl_->sealed && !impl_->committed) abort();
}

std::uint64_t VersionWriter::version() const noexcept { return impl_->version; }
const fs::path& VersionWriter::dir() const noexcept { return impl_->dir; }

std::size_t VersionWriter::open_region(const RegionInfo& in) {
  Impl& I = *impl_;
  const std::string ds = I.dir.string();
  if (!safe_component(in.label)) throw Error(Errc::invalid, ds, "unsafe label '" + in.label + "'");
  RegionInfo info = in;
  if (info.elem_size == 0) info.elem_size = elem_size(info.type);
  if (elem_size(info.type) == 0) throw Error(Errc::invalid, ds, "bad element type");
  if (info.type != ElemType::Binary && info.elem_size != elem_size(info.type))
    throw Error(Errc::invalid, ds, "label '" + info.label + "': elem_size " +
                                       std::to_string(info.elem_size) + " does not fit type " +
                                       to_string(info.type));
  if (info.count == 0) throw Error(Errc::invalid, ds, "label '" + info.label + "': count is 0");
  if (info.count > (~0ULL) / info.elem_size)
    throw Error(Errc::invalid, ds, "label '" + info.label + "': size overflows");
  if (info.rank < 0 || info.rank >= I.nranks)
    throw Error(Errc::invalid, ds, "label '" + info.label + "': rank " + std::to_string(info.rank) +
                                       " outside 0.." + std::to_string(I.nranks - 1));
  Layout& L = info.layout;
  if (!L.global_shape.empty()) {
    std::uint64_t prod = 1;
    for (auto d : L.global_shape) prod *= d;
    if (L.global_count == 0) L.global_count = prod;
    if (prod != L.global_count)
      throw Error(Errc::invalid, ds, "label '" + info.label + "': global_shape does not match global_count");
  }
  if (L.dist == Dist::Block && L.global_count > 0 &&
      (L.global_offset > L.global_count || info.count > L.global_count - L.global_offset))
    throw Error(Errc::invalid, ds, "label '" + info.label + "': block outside the global array");
  if (L.dist == Dist::Cyclic && L.block_size == 0) L.block_size = 1;

  auto r = std::make_unique<RegionState>();
  r->info = info;
  r->total = info.bytes();
  r->compress = I.opt.compress && r->total > I.opt.compress_threshold;
  r->file = chunk_file_name(info.rank, info.label, I.tag);
  r->fpath = I.dir / r->file;
  std::lock_guard lk(I.mu);
  if (I.sealed) throw Error(Errc::invalid, ds, "writer already sealed");
  if (!I.keys.emplace(info.rank, info.label).second)
    throw Error(Errc::invalid, ds, "duplicate label '" + info.label + "' for rank " +
                                       std::to_string(info.rank));
  try {
    r->fd = create_file(r->fpath, I.uid, /*exclusive=*/true);
  } catch (...) {
    I.keys.erase({info.rank, info.label});
    throw;
  }
  if (!r->compress) {
    r->xs.reset(XXH3_createState());
    if (!r->xs) throw Error(Errc::io, r->fpath.string(), "out of memory (xxh3 state)");
    XXH3_64bits_reset(r->xs.get());
  }
  I.regions.push_back(std::move(r));
  return I.regions.size() - 1;
}

void VersionWriter::write(std::size_t id, const void* data, std::size_t bytes) {
  Impl& I = *impl_;
  RegionState& r = I.get(id);
  if (bytes == 0) return;
  if (data == nullptr) throw Error(Errc::invalid, r.fpath.string(), "null data");
  if (bytes > r.total - r.written)
    throw Error(Errc::mismatch, r.fpath.string(),
                "label '" + r.info.label + "': " + std::to_string(r.written + bytes) +
                    " bytes written, region holds " + std::to_string(r.total));
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const std::uint64_t cap = I.cap(r);
    if (r.compress) {
      if (r.fill == 0 && bytes >= cap) {  // whole chunk available in the caller's buffer
        I.finish_compressed(r, p, cap);
        r.written += cap;
        p += cap;
        bytes -= cap;
        continue;
      }
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, cap - r.fill));
      if (r.buf.size() < cap) r.buf.resize(cap);
      std::memcpy(r.buf.data() + r.fill, p, n);
      r.fill += n;
      r.written += n;
      p += n;
      bytes -= n;
      if (r.fill == cap) I.finish_compressed(r, r.buf.data(), cap);
    } else {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, cap - r.fill));
      write_all(r.fd.get(), p, n, r.fpath.string());
      XXH3_64bits_update(r.xs.get(), p, n);
      r.fill += n;
      r.written += n;
      p += n;
      bytes -= n;
      if (r.fill == cap) I.finish_plain(r, cap);
    }
  }
}

void VersionWriter::close_region(std::size_t id) {
  Impl& I = *impl_;
  RegionState& r = I.get(id);
  if (r.written != r.total)
    throw Error(Errc::mismatch, r.fpath.string(),
                "label '" + r.info.label + "' closed after " + std::to_string(r.written) + " of " +
                    std::to_string(r.total) + " bytes");
  if (I.opt.durable) fsync_fd(r.fd.get(), r.fpath.string());
  r.fd.close_checked(r.fpath.string());
  r.buf = {};
  r.cbuf = {};
  r.cctx.reset();
  r.xs.reset();
  std::lock_guard lk(I.mu);
  r.closed = true;
}

void VersionWriter::add_region(const RegionInfo& info, const void* data) {
  Impl& I = *impl_;
  const std::size_t id = open_region(info);
  RegionState& r = I.get(id);
  if (data == nullptr) throw Error(Errc::invalid, r.fpath.string(), "null data");
  const auto* p = static_cast<const char*>(data);
  const std::uint64_t nchunks = (r.total + I.opt.chunk_size - 1) / I.opt.chunk_size;
  if (r.compress && I.opt.threads > 1 && nchunks > 1) {
    // compress batches of `threads` chunks in parallel, append in order
    struct Job {
      std::vector<char> out;
      std::unique_ptr<ZSTD_CCtx, CctxDeleter> cctx{ZSTD_createCCtx()};
      Encoded e;
    };
    std::vector<Job> jobs(I.opt.threads);
    for (std::uint64_t k = 0; k < nchunks; k += I.opt.threads) {
      const std::uint64_t m = std::min<std::uint64_t>(I.opt.threads, nchunks - k);
      std::vector<std::future<void>> fut;
      for (std::uint64_t j = 0; j < m; ++j) {
        const std::uint64_t off = (k + j) * I.opt.chunk_size;
        const std::uint64_t len = std::min<std::uint64_t>(I.opt.chunk_size, r.total - off);
        fut.push_back(std::async(std::launch::async, [&, j, off, len] {
          if (!jobs[j].cctx) throw Error(Errc::io, r.fpath.string(), "out of memory (zstd)");
          jobs[j].e = encode(p + off, len, true, I.opt.compress_level, jobs[j].cctx.get(),
                             jobs[j].out, r.fpath.string());
        }));
      }
      for (auto& f : fut) f.wait();
      for (auto& f : fut) f.get();  // rethrow the first error
      for (std::uint64_t j = 0; j < m; ++j) {
        const std::uint64_t off = (k + j) * I.opt.chunk_size;
        const std::uint64_t len = std::min<std::uint64_t>(I.opt.chunk_size, r.total - off);
        I.append_chunk(r, len, jobs[j].e, p + off, jobs[j].out.data());
        r.written += len;
      }
    }
  } else {
    write(id, data, static_cast<std::size_t>(r.total));
  }
  close_region(id);
}

void VersionWriter::set_attr(const std::string& key, const std::string& value) {
  std::lock_guard lk(impl_->mu);
  impl_->attrs[key] = value;
}

std::string VersionWriter::seal() {
  Impl& I = *impl_;
  std::lock_guard lk(I.mu);
  if (I.committed) throw Error(Errc::invalid, I.dir.string(), "writer already committed");
  json regions = json::array();
  for (auto& r : I.regions) {
    if (!r->closed)
      throw Error(Errc::invalid, r->fpath.string(), "region '" + r->info.label + "' not closed");
    Region reg;
    reg.info = r->info;
    reg.chunks = r->chunks;
    regions.push_back(region_to_json(reg));
  }
  if (I.opt.durable) fsync_dir(I.dir);
  I.sealed = true;
  json attrs = json::object();
  for (auto& [k, v] : I.attrs) attrs[k] = v;
  return json{{"format", "dynres-ckstore-part"}, {"app", I.app},         {"uid", I.uid},
              {"version", I.version},            {"attrs", attrs},      {"regions", regions}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

Manifest VersionWriter::commit() {
  Impl& I = *impl_;
  std::string part = seal();
  Store store(I.root, I.app, I.uid);
  Manifest m = commit_parts(store, I.version, I.nranks, std::span<const std::string>(&part, 1), I.opt);
  I.committed = true;
  return m;
}

void VersionWriter::abort() noexcept {
  if (!impl_ || impl_->committed) return;
  std::lock_guard lk(impl_->mu);
  impl_->remove_files();
  impl_->regions.clear();
  impl_->keys.clear();
}

}  // namespace dynres::ckstore
