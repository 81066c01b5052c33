// Internal helpers of dynres_ckstore (not installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dynres/ckstore.hpp"

namespace dynres::ckstore::detail {

namespace fs = std::filesystem;

/// Throw Error(io) with strerror(err) appended to `what`.
[[noreturn]] void throw_errno(int err, const std::string& path, const std::string& what);

/// XXH3_64bits of a buffer.
std::uint64_t xxh3(const void* p, std::size_t n) noexcept;
/// 16 lowercase hex digits.
std::string hex64(std::uint64_t v);
/// Parse 16 hex digits; false on malformed input.
bool parse_hex64(std::string_view s, std::uint64_t& out) noexcept;

/// RAII file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  /// close() reporting errors (io).
  void close_checked(const std::string& path);

 private:
  int fd_ = -1;
};

/// Open for reading; not_found on ENOENT, io otherwise.
Fd open_read(const fs::path& p);
/// Create a 0600 file owned by `uid` (chown when running as root for
/// another uid): truncating an existing one, or with `exclusive` failing
/// (Errc::io, EEXIST) when the name exists.
Fd create_file(const fs::path& p, std::uint32_t uid, bool exclusive = false);
void write_all(int fd, const void* p, std::size_t n, const std::string& path);
/// pread exactly n bytes at off; Error(corrupt, "truncated") on short read.
void pread_exact(int fd, void* p, std::size_t n, std::uint64_t off, const std::string& path);
void fsync_fd(int fd, const std::string& path);
void fsync_dir(const fs::path& dir);
/// mkdir with `mode`; an existing directory is accepted when it is a real
/// directory (not a symlink) owned by `uid`, else Error(perm). Newly created
/// directories are chown'ed to uid when running as root for another uid.
void ensure_dir(const fs::path& p, unsigned mode, std::uint32_t uid);
/// Whole file as a string (not_found / io).
std::string read_file(const fs::path& p);
/// Check owner/type of an existing directory; returns false if absent.
bool check_owned_dir(const fs::path& p, std::uint32_t uid);

/// Region <-> JSON (manifests and writer parts). region_from_json validates
/// everything (safe names, sizes, contiguous chunks) and throws
/// Error(corrupt, path, ...). nranks < 1 skips the rank range check.
nlohmann::json region_to_json(const Region& r);
Region region_from_json(const nlohmann::json& j, const std::string& path, int nranks);
/// Schema part of Manifest::from_json (after the checksum was checked).
Manifest manifest_from_checked_json(const nlohmann::json& j, const std::string& path);
}  // namespace dynres::ckstore::detail
