// Store: listing, reading, verifying, retention and committing of versions.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <tuple>

#include "detail.hpp"

namespace dynres::ckstore {

using nlohmann::json;
using namespace detail;
namespace fs = std::filesystem;

namespace {

std::atomic<unsigned> g_counter{0};

/// Open chunk files of one version, mapping a missing file to corrupt.
class FileCache {
 public:
  explicit FileCache(fs::path dir) : dir_(std::move(dir)) {}
  int get(const std::string& name, std::string& path_out) {
    path_out = (dir_ / name).string();
    auto it = fds_.find(name);
    if (it != fds_.end()) return it->second.get();
    try {
      Fd f = open_read(dir_ / name);
      int fd = f.get();
      fds_.emplace(name, std::move(f));
      return fd;
    } catch (const Error& e) {
      if (e.code() == Errc::not_found) throw Error(Errc::corrupt, path_out, "chunk file missing");
      throw;
    }
  }

 private:
  fs::path dir_;
  std::map<std::string, Fd> fds_;
};

std::string chunk_where(const Region& r, const ChunkInfo& c) {
  return "chunk at raw offset " + std::to_string(c.raw_offset) + " of label '" + r.info.label +
         "' rank " + std::to_string(r.info.rank);
}

/// Read chunk c and verify it; the raw bytes end in `raw` (c.raw_length).
/// `raw` may point into the caller's destination.
void load_chunk(int fd, const std::string& fpath, const Region& r, const ChunkInfo& c, char* raw,
                std::vector<char>& sbuf) {
  if (!c.compressed) {
    pread_exact(fd, raw, c.stored_length, c.file_offset, fpath);
    if (xxh3(raw, c.stored_length) != c.stored_xxh3)
      throw Error(Errc::corrupt, fpath, "checksum mismatch in " + chunk_where(r, c));
    return;
  }
  sbuf.resize(c.stored_length);
  pread_exact(fd, sbuf.data(), c.stored_length, c.file_offset, fpath);
  if (xxh3(sbuf.data(), sbuf.size()) != c.stored_xxh3)
    throw Error(Errc::corrupt, fpath, "checksum mismatch (stored bytes) in " + chunk_where(r, c));
  std::size_t n = ZSTD_decompress(raw, c.raw_length, sbuf.data(), sbuf.size());
  if (ZSTD_isError(n))
    throw Error(Errc::corrupt, fpath,
                std::string("zstd: ") + ZSTD_getErrorName(n) + " in " + chunk_where(r, c));
  if (n != c.raw_length)
    throw Error(Errc::corrupt, fpath, "decompressed length differs in " + chunk_where(r, c));
  if (xxh3(raw, n) != c.raw_xxh3)
    throw Error(Errc::corrupt, fpath, "checksum mismatch (raw bytes) in " + chunk_where(r, c));
}

Manifest load_manifest(const Store& s, std::uint64_t v) {
  fs::path vd = s.version_dir(v);
  fs::path mp = vd / kManifestName;
  std::string text;
  try {
    text = read_file(mp);
  } catch (const Error& e) {
    if (e.code() == Errc::not_found) {
      std::error_code ec;
      if (!fs::exists(vd, ec))
        throw Error(Errc::not_found, vd.string(), "no such version");
      throw Error(Errc::not_found, mp.string(), "no manifest (incomplete version)");
    }
    throw;
  }
  Manifest m = Manifest::from_json(text, mp.string());
  if (m.app != s.app() || m.uid != s.uid() || m.version != v)
    throw Error(Errc::mismatch, mp.string(),
                "manifest identity (" + m.app + ", uid " + std::to_string(m.uid) + ", v" +
                    std::to_string(m.version) + ") differs from the directory it is in");
  return m;
}

Manifest verify_unchecked(const Store& s, std::uint64_t v, Check how) {
  Manifest m = load_manifest(s, v);
  fs::path vd = s.version_dir(v);
  std::map<std::string, std::uint64_t> expect;
  for (auto& r : m.regions)
    for (auto& c : r.chunks) expect[c.file] += c.stored_length;
  FileCache files(vd);
  for (auto& [name, size] : expect) {
    std::string fpath;
    int fd = files.get(name, fpath);
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw_errno(errno, fpath, "fstat");
    if (!S_ISREG(st.st_mode)) throw Error(Errc::corrupt, fpath, "not a regular file");
    auto have = static_cast<std::uint64_t>(st.st_size);
    if (have < size)
      throw Error(Errc::corrupt, fpath, "truncated: " + std::to_string(have) + " bytes, expected " +
                                            std::to_string(size));
    if (have > size)
      throw Error(Errc::corrupt, fpath, "oversized: " + std::to_string(have) +
                                            " bytes, expected " + std::to_string(size));
  }
  if (how == Check::deep) {
    std::vector<char> sbuf, rbuf;
    for (auto& r : m.regions)
      for (auto& c : r.chunks) {
        std::string fpath;
        int fd = files.get(c.file, fpath);
        rbuf.resize(c.raw_length);
        load_chunk(fd, fpath, r, c, rbuf.data(), sbuf);
      }
  }
  return m;
}

bool soft_error(Errc c) {
  return c == Errc::corrupt || c == Errc::not_found || c == Errc::mismatch || c == Errc::io;
}

std::optional<std::uint64_t> newest_valid_unchecked(const Store& s,
                                                    const std::vector<std::uint64_t>& versions,
                                                    Check how) {
  for (auto v : versions) {
    try {
      verify_unchecked(s, v, how);
      return v;
    } catch (const Error& e) {
      if (!soft_error(e.code())) throw;
    }
  }
  return std::nullopt;
}

std::vector<std::uint64_t> list_unchecked(const Store& s) {
  std::vector<std::uint64_t> out;
  std::error_code ec;
  fs::directory_iterator it(s.app_dir(), ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return out;
    throw Error(Errc::io, s.app_dir().string(), "list: " + ec.message());
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw Error(Errc::io, s.app_dir().string(), "list: " + ec.message());
    std::error_code ec2;
    auto v = parse_version_dir_name(it->path().filename().string());
    if (v && !it->is_symlink(ec2) && it->is_directory(ec2)) out.push_back(*v);
  }
  if (ec) throw Error(Errc::io, s.app_dir().string(), "list: " + ec.message());
  std::sort(out.rbegin(), out.rend());
  return out;
}

void remove_unchecked(const Store& s, std::uint64_t v) {
  fs::path vd = s.version_dir(v);
  fs::path hidden = s.app_dir() / (".del-" + version_dir_name(v) + "-" +
                                   std::to_string(::getpid()) + "-" +
                                   std::to_string(g_counter.fetch_add(1)));
  if (::rename(vd.c_str(), hidden.c_str()) != 0) throw_errno(errno, vd.string(), "rename for deletion");
  std::error_code ec;
  fs::remove_all(hidden, ec);
  // another writer's retain_unchecked may sweep our ".del-" directory as a
  // leftover while we remove it: gone is what we wanted
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw Error(Errc::io, hidden.string(), "remove: " + ec.message());
}

void check_write_access(const Store& s) {
  if (s.uid() != ::geteuid() && ::geteuid() != 0)
    throw Error(Errc::perm, s.app_dir().string(),
                "cannot write for uid " + std::to_string(s.uid()) + " as uid " +
                    std::to_string(::geteuid()));
  check_owned_dir(s.root() / std::to_string(s.uid()), s.uid());
  check_owned_dir(s.app_dir(), s.uid());
}

std::vector<std::uint64_t> retain_unchecked(const Store& s, std::size_t keep_last) {
  std::vector<std::uint64_t> deleted;
  if (keep_last == 0) return deleted;
  // leftovers of interrupted deletions
  std::error_code ec;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(s.app_dir(), ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    if (it->path().filename().string().rfind(".del-", 0) == 0) stale.push_back(it->path());
  for (auto& p : stale) fs::remove_all(p, ec);
  auto versions = list_unchecked(s);
  auto nv = newest_valid_unchecked(s, versions, Check::shallow);
  if (!nv) return deleted;
  // Newest first. Directories newer than the newest valid version may be
  // in progress and are never touched. At and below it, only versions that
  // pass the shallow check count toward keep_last (a half-written or
  // abandoned directory must not take the place of a valid older version
  // that a later corruption of the newest one would need); the others go.
  std::size_t kept = 0;
  for (std::uint64_t v : versions) {
    if (v > *nv) continue;
    if (kept < keep_last) {
      bool ok = false;
      try {
        verify_unchecked(s, v, Check::shallow);
        ok = true;
      } catch (const Error&) {
      }
      if (ok) {
        ++kept;
        continue;
      }
    }
    try {
      remove_unchecked(s, v);
      deleted.push_back(v);
    } catch (const Error& e) {
      if (e.code() != Errc::not_found) throw;  // concurrently deleted
    }
  }
  return deleted;
}

}  // namespace

// ------------------------------------------------------------------ Store

Store::Store(fs::path root, std::string app) : Store(std::move(root), std::move(app), ::geteuid()) {}

Store::Store(fs::path root, std::string app, std::uint32_t uid)
    : root_(std::move(root)), app_(std::move(app)), uid_(uid) {
  if (!safe_component(app_))
    throw Error(Errc::invalid, "", "unsafe application name '" + app_ + "'");
  if (root_.empty()) throw Error(Errc::invalid, "", "empty store root");
}

fs::path Store::app_dir() const { return root_ / std::to_string(uid_) / app_; }

fs::path Store::version_dir(std::uint64_t v) const { return app_dir() / version_dir_name(v); }

void Store::check_read_access() const {
  // root may read any uid's store (the iCheck agents run as root and write
  // the second level for the application's uid); the directories must still
  // belong to that uid.
  if (uid_ != ::geteuid() && ::geteuid() != 0)
    throw Error(Errc::perm, app_dir().string(),
                "checkpoints of uid " + std::to_string(uid_) + " cannot be read by uid " +
                    std::to_string(::geteuid()));
  check_owned_dir(root_ / std::to_string(uid_), uid_);
  check_owned_dir(app_dir(), uid_);
}

std::vector<std::uint64_t> Store::list_versions() const {
  check_read_access();
  return list_unchecked(*this);
}

bool Store::has_manifest(std::uint64_t v) const {
  check_read_access();
  std::error_code ec;
  return fs::exists(version_dir(v) / kManifestName, ec);
}

Manifest Store::manifest(std::uint64_t v) const {
  check_read_access();
  return load_manifest(*this, v);
}

Manifest Store::verify(std::uint64_t v, Check how) const {
  check_read_access();
  return verify_unchecked(*this, v, how);
}

bool Store::valid(std::uint64_t v, Check how) const {
  check_read_access();
  try {
    verify_unchecked(*this, v, how);
    return true;
  } catch (const Error& e) {
    if (soft_error(e.code())) return false;
    throw;
  }
}

std::optional<std::uint64_t> Store::newest_valid(Check how) const {
  check_read_access();
  return newest_valid_unchecked(*this, list_unchecked(*this), how);
}

void Store::read_range(const Manifest& m, const Region& r, std::uint64_t offset, void* dst,
                       std::size_t bytes) const {
  check_read_access();
  if (m.app != app_ || m.uid != uid_)
    throw Error(Errc::mismatch, app_dir().string(), "manifest of another store");
  if (offset > r.bytes() || bytes > r.bytes() - offset)
    throw Error(Errc::invalid, version_dir(m.version).string(),
                "range [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                    ") outside label '" + r.info.label + "' of " + std::to_string(r.bytes()) +
                    " bytes");
  if (bytes == 0) return;
  if (dst == nullptr) throw Error(Errc::invalid, "", "null destination");
  FileCache files(version_dir(m.version));
  std::vector<char> sbuf, rbuf;
  const std::uint64_t end = offset + bytes;
  for (auto& c : r.chunks) {
    const std::uint64_t cend = c.raw_offset + c.raw_length;
    if (cend <= offset || c.raw_offset >= end) continue;
    const std::uint64_t lo = std::max(offset, c.raw_offset), hi = std::min(end, cend);
    char* out = static_cast<char*>(dst) + (lo - offset);
    const bool whole = lo == c.raw_offset && hi == cend;
    std::string fpath;
    int fd = files.get(c.file, fpath);
    if (whole) {
      load_chunk(fd, fpath, r, c, out, sbuf);
    } else {
      rbuf.resize(c.raw_length);
      load_chunk(fd, fpath, r, c, rbuf.data(), sbuf);
      std::memcpy(out, rbuf.data() + (lo - c.raw_offset), hi - lo);
    }
  }
}

void Store::read_region(std::uint64_t v, int rank, std::string_view label, void* dst,
                        std::size_t bytes) const {
  Manifest m = manifest(v);
  const Region* r = m.find(rank, label);
  if (!r)
    throw Error(Errc::not_found, version_dir(v).string(),
                "no label '" + std::string(label) + "' for rank " + std::to_string(rank));
  if (r->bytes() != bytes)
    throw Error(Errc::mismatch, version_dir(v).string(),
                "label '" + std::string(label) + "' rank " + std::to_string(rank) + " holds " +
                    std::to_string(r->bytes()) + " bytes, caller expects " + std::to_string(bytes));
  read_range(m, *r, 0, dst, bytes);
}

std::vector<std::byte> Store::read_region(std::uint64_t v, int rank, std::string_view label) const {
  Manifest m = manifest(v);
  const Region* r = m.find(rank, label);
  if (!r)
    throw Error(Errc::not_found, version_dir(v).string(),
                "no label '" + std::string(label) + "' for rank " + std::to_string(rank));
  std::vector<std::byte> out(r->bytes());
  read_range(m, *r, 0, out.data(), out.size());
  return out;
}

VersionWriter Store::begin_version(std::uint64_t v, int nranks, const Options& opt) const {
  return VersionWriter(root_, app_, uid_, v, nranks, opt);
}

std::vector<std::uint64_t> Store::retain(std::size_t keep_last) const {
  check_write_access(*this);
  return retain_unchecked(*this, keep_last);
}

void Store::remove_version(std::uint64_t v) const {
  check_write_access(*this);
  std::error_code ec;
  if (!fs::is_directory(version_dir(v), ec))
    throw Error(Errc::not_found, version_dir(v).string(), "no such version");
  remove_unchecked(*this, v);
}

// ------------------------------------------------------------------ commit

Manifest commit_parts(const Store& store, std::uint64_t v, int nranks,
                      std::span<const std::string> parts, const Options& opt,
                      const std::map<std::string, std::string>& attrs) {
  check_write_access(store);
  const fs::path vd = store.version_dir(v);
  const std::string vds = vd.string();
  if (nranks < 1) throw Error(Errc::invalid, vds, "nranks must be >= 1");
  std::error_code ec;
  if (!fs::is_directory(vd, ec)) throw Error(Errc::not_found, vds, "no such version directory");
  if (fs::exists(vd / kManifestName, ec))
    throw Error(Errc::invalid, vds, "version already committed");

  Manifest m;
  m.app = store.app();
  m.uid = store.uid();
  m.version = v;
  m.nranks = nranks;
  m.created_unix = static_cast<std::int64_t>(std::time(nullptr));
  for (auto& text : parts) try {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("format", "") != "dynres-ckstore-part")
      throw Error(Errc::invalid, vds, "not a sealed writer part");
    if (j.value("app", "") != m.app || j.value("uid", 0ULL) != m.uid ||
        j.value("version", 0ULL) != v)
      throw Error(Errc::mismatch, vds, "part belongs to another app/uid/version");
    for (auto& [k, val] : j.at("attrs").items()) m.attrs[k] = val.get<std::string>();
    for (auto& rj : j.at("regions")) {
      Region r;
      try {
        r = region_from_json(rj, vds, nranks);
      } catch (const Error& e) {
        throw Error(Errc::invalid, vds, std::string("bad part: ") + e.what());
      }
      m.regions.push_back(std::move(r));
    }
  } catch (const json::exception& e) {
    throw Error(Errc::invalid, vds, std::string("bad part: ") + e.what());
  }
  for (auto& [k, val] : attrs) m.attrs[k] = val;
  // A version is complete only with every rank's data: a missing part (an
  // agent that collected too few pieces, a lost writer) must not become a
  // "valid" version that retention then keeps instead of older complete ones.
  std::vector<bool> has_rank(static_cast<std::size_t>(nranks), false);
  for (auto& r : m.regions) has_rank.at(static_cast<std::size_t>(r.info.rank)) = true;
  for (int i = 0; i < nranks; ++i)
    if (!has_rank[static_cast<std::size_t>(i)])
      throw Error(Errc::invalid, vds, "incomplete version: no region of rank " + std::to_string(i));
  std::sort(m.regions.begin(), m.regions.end(), [](const Region& a, const Region& b) {
    return std::tie(a.info.rank, a.info.label) < std::tie(b.info.rank, b.info.label);
  });
  for (std::size_t i = 1; i < m.regions.size(); ++i)
    if (m.regions[i - 1].info.rank == m.regions[i].info.rank &&
        m.regions[i - 1].info.label == m.regions[i].info.label)
      throw Error(Errc::invalid, vds,
                  "duplicate label '" + m.regions[i].info.label + "' for rank " +
                      std::to_string(m.regions[i].info.rank));
  std::map<std::string, std::uint64_t> expect;
  for (auto& r : m.regions)
    for (auto& c : r.chunks) expect[c.file] += c.stored_length;
  for (auto& [name, size] : expect) {
    struct stat st {};
    fs::path p = vd / name;
    if (::lstat(p.c_str(), &st) != 0)
      throw Error(Errc::corrupt, p.string(), "chunk file missing at commit");
    if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != size)
      throw Error(Errc::corrupt, p.string(),
                  "chunk file has " + std::to_string(st.st_size) + " bytes at commit, expected " +
                      std::to_string(size));
  }

  const std::string text = m.to_json();
  const fs::path tmp = vd / ("." + std::string(kManifestName) + ".tmp-" +
                             std::to_string(::getpid()) + "-" +
                             std::to_string(g_counter.fetch_add(1)));
  const fs::path final_path = vd / kManifestName;
  try {
    Fd f = create_file(tmp, store.uid());
    write_all(f.get(), text.data(), text.size(), tmp.string());
    if (opt.durable) fsync_fd(f.get(), tmp.string());
    f.close_checked(tmp.string());
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST) throw Error(Errc::invalid, vds, "version committed concurrently");
      if (errno != EINVAL && errno != ENOSYS) throw_errno(errno, final_path.string(), "rename");
      if (::rename(tmp.c_str(), final_path.c_str()) != 0)
        throw_errno(errno, final_path.string(), "rename");
    }
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (opt.durable) fsync_dir(vd);
  if (opt.keep_last > 0) retain_unchecked(store, opt.keep_last);
  return m;
}

Manifest write_version(const fs::path& root, std::string_view app, std::uint32_t uid,
                       std::uint64_t version, std::span<const RegionData> regions,
                       const Options& opt, int nranks) {
  if (nranks == 0)
    for (auto& r : regions) nranks = std::max(nranks, r.info.rank + 1);
  if (nranks == 0) nranks = 1;
  VersionWriter w(root, std::string(app), uid, version, nranks, opt);
  for (auto& r : regions) w.add_region(r.info, r.data);
  return w.commit();
}

}  // namespace dynres::ckstore
