// Errors, names, element types and POSIX file helpers of dynres_ckstore.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <atomic>
#include <cstdio>
#include <random>

#include "detail.hpp"

namespace dynres::ckstore {

const char* to_string(Errc c) noexcept {
  switch (c) {
    case Errc::io: return "io";
    case Errc::corrupt: return "corrupt";
    case Errc::not_found: return "not_found";
    case Errc::mismatch: return "mismatch";
    case Errc::perm: return "perm";
    case Errc::invalid: return "invalid";
  }
  return "unknown";
}

static std::string error_text(Errc code, const std::string& path, const std::string& reason) {
  std::string s = "ckstore: ";
  s += to_string(code);
  s += ": ";
  if (!path.empty()) {
    s += path;
    s += ": ";
  }
  s += reason;
  return s;
}

Error::Error(Errc code, std::string path, const std::string& reason)
    : std::runtime_error(error_text(code, path, reason)), code_(code), path_(std::move(path)) {}

static bool valid_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n;
    std::uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
    else return false;
    if (i + n >= s.size()) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n + 1;
  }
  return true;
}

bool safe_component(std::string_view s) noexcept {
  if (s.empty() || s.size() > 128) return false;
  if (s.front() == '.') return false;
  if (s.find("..") != std::string_view::npos) return false;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '/' || c < 0x20 || c == 0x7f) return false;
  }
  return valid_utf8(s);
}

std::size_t elem_size(ElemType t) noexcept {
  switch (t) {
    case ElemType::Float: return 4;
    case ElemType::Double: return 8;
    case ElemType::Int: return 4;
    case ElemType::Char: return 1;
    case ElemType::Binary: return 1;
  }
  return 0;
}

const char* to_string(ElemType t) noexcept {
  switch (t) {
    case ElemType::Float: return "float";
    case ElemType::Double: return "double";
    case ElemType::Int: return "int";
    case ElemType::Char: return "char";
    case ElemType::Binary: return "binary";
  }
  return "unknown";
}

ElemType parse_elem_type(std::string_view s) {
  for (auto t : {ElemType::Float, ElemType::Double, ElemType::Int, ElemType::Char, ElemType::Binary})
    if (s == to_string(t)) return t;
  throw Error(Errc::invalid, "", "unknown element type '" + std::string(s) + "'");
}

const char* to_string(Dist d) noexcept {
  switch (d) {
    case Dist::None: return "none";
    case Dist::Replicated: return "replicated";
    case Dist::Block: return "block";
    case Dist::Cyclic: return "cyclic";
  }
  return "unknown";
}

Dist parse_dist(std::string_view s) {
  for (auto d : {Dist::None, Dist::Replicated, Dist::Block, Dist::Cyclic})
    if (s == to_string(d)) return d;
  throw Error(Errc::invalid, "", "unknown distribution '" + std::string(s) + "'");
}

std::uint64_t RegionInfo::bytes() const noexcept {
  std::size_t es = elem_size ? elem_size : ckstore::elem_size(type);
  return count * es;
}

std::uint64_t Region::stored_bytes() const noexcept {
  std::uint64_t s = 0;
  for (auto& c : chunks) s += c.stored_length;
  return s;
}

std::string version_dir_name(std::uint64_t v) {
  if (v < 1 || v > kMaxVersion)
    throw Error(Errc::invalid, "", "version " + std::to_string(v) + " outside 1.." +
                                       std::to_string(kMaxVersion));
  char buf[16];
  std::snprintf(buf, sizeof buf, "v%010llu", static_cast<unsigned long long>(v));
  return buf;
}

std::optional<std::uint64_t> parse_version_dir_name(std::string_view name) noexcept {
  if (name.size() != 11 || name[0] != 'v') return std::nullopt;
  std::uint64_t v = 0;
  for (std::size_t i = 1; i < 11; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(name[i] - '0');
  }
  if (v < 1) return std::nullopt;
  return v;
}

std::string chunk_file_name(int rank, std::string_view label, std::string_view writer_tag) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "r%06d.", rank);
  std::string s = buf;
  s += label;
  if (!writer_tag.empty()) {
    s += '.';
    s += writer_tag;
  }
  s += ".dat";
  return s;
}

std::string new_writer_tag() {
  static std::atomic<std::uint64_t> counter{0};
  std::random_device rd;
  const std::uint64_t x = (std::uint64_t(rd()) << 32 | rd()) ^ (std::uint64_t(::getpid()) << 20) ^ counter.fetch_add(1);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

namespace detail {

void throw_errno(int err, const std::string& path, const std::string& what) {
  Errc c = Errc::io;
  if (err == ENOENT) c = Errc::not_found;
  else if (err == EACCES || err == EPERM) c = Errc::perm;
  throw Error(c, path, what + ": " + std::strerror(err));
}

std::uint64_t xxh3(const void* p, std::size_t n) noexcept { return XXH3_64bits(p, n); }

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool parse_hex64(std::string_view s, std::uint64_t& out) noexcept {
  if (s.size() != 16) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return false;
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  out = v;
  return true;
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

void Fd::close_checked(const std::string& path) {
  if (fd_ < 0) return;
  int r = ::close(fd_);
  fd_ = -1;
  if (r != 0 && errno != EINTR) throw_errno(errno, path, "close");
}

Fd open_read(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw_errno(errno, p.string(), "open for reading");
  return Fd(fd);
}

Fd create_file(const fs::path& p, std::uint32_t uid, bool exclusive) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | (exclusive ? O_EXCL : O_TRUNC) | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw_errno(errno, p.string(), "create");
  Fd f(fd);
  if (::fchmod(fd, 0600) != 0) throw_errno(errno, p.string(), "fchmod 0600");
  if (::geteuid() != uid && ::fchown(fd, uid, static_cast<gid_t>(-1)) != 0)
    throw_errno(errno, p.string(), "fchown");
  return f;
}

void write_all(int fd, const void* p, std::size_t n, const std::string& path) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n > (1u << 30) ? (1u << 30) : n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, path, "write");
    }
    c += w;
    n -= static_cast<std::size_t>(w);
  }
}

void pread_exact(int fd, void* p, std::size_t n, std::uint64_t off, const std::string& path) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::pread(fd, c, n > (1u << 30) ? (1u << 30) : n, static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, path, "read");
    }
    if (r == 0) throw Error(Errc::corrupt, path, "truncated: unexpected end of file at byte " +
                                                     std::to_string(off));
    c += r;
    n -= static_cast<std::size_t>(r);
    off += static_cast<std::uint64_t>(r);
  }
}

void fsync_fd(int fd, const std::string& path) {
  if (::fsync(fd) != 0) throw_errno(errno, path, "fsync");
}

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno(errno, dir.string(), "open directory");
  Fd f(fd);
  if (::fsync(fd) != 0 && errno != EINVAL) throw_errno(errno, dir.string(), "fsync directory");
}

bool check_owned_dir(const fs::path& p, std::uint32_t uid) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    throw_errno(errno, p.string(), "lstat");
  }
  if (!S_ISDIR(st.st_mode))
    throw Error(Errc::perm, p.string(), "not a directory (symlinks are refused)");
  if (st.st_uid != uid)
    throw Error(Errc::perm, p.string(),
                "owned by uid " + std::to_string(st.st_uid) + ", expected " + std::to_string(uid));
  return true;
}

void ensure_dir(const fs::path& p, unsigned mode, std::uint32_t uid) {
  if (::mkdir(p.c_str(), mode) == 0) {
    if (::chmod(p.c_str(), mode) != 0) throw_errno(errno, p.string(), "chmod");
    if (::geteuid() != uid && ::chown(p.c_str(), uid, static_cast<gid_t>(-1)) != 0)
      throw_errno(errno, p.string(), "chown");
    return;
  }
  if (errno != EEXIST) throw_errno(errno, p.string(), "mkdir");
  check_owned_dir(p, uid);
}

std::string read_file(const fs::path& p) {
  Fd f = open_read(p);
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) throw_errno(errno, p.string(), "fstat");
  std::string s;
  s.resize(static_cast<std::size_t>(st.st_size));
  if (!s.empty()) pread_exact(f.get(), s.data(), s.size(), 0, p.string());
  return s;
}

}  // namespace detail
}  // namespace dynres::ckstore
