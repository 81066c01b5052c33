// ckstore — the second-level (file system / PFS) checkpoint format of iCheck.
//
// [John24 §6.2.5]: iCheck is a two-level checkpointing system; the agents keep
// checkpoints in memory (level 1) and write them to the parallel file system
// (level 2), optionally zstd-compressed when the checkpoint is larger than a
// threshold (the dissertation's example: > 1 GB). The same format is written by
// libicheck's direct-write fallback (no agent reachable) and read by icredist
// for N -> M redistribution ([John24 §7.4.1.2]: BLOCK / CYCLIC with a width),
// so every region carries its layout metadata.
//
// On-disk layout (all directories 0700, all files 0600):
//
//   <root>/<uid>/<app>/v<version, 10 digits>/
//       r<rank, 6 digits>.<label>.<writer tag>.dat
//                                       stored chunks of one (rank, label),
//                                       concatenated; the tag (16 hex digits)
//                                       is unique per writer, so concurrent
//                                       writers of one version never touch
//                                       each other's files (created O_EXCL);
//                                       the manifest names the files used
//       MANIFEST.json                   written LAST: temp file, fsync,
//                                       rename, fsync directory
//
// A version directory without a valid MANIFEST.json is never valid (a crash
// mid-write leaves only chunk files, which readers ignore). The manifest
// carries its own checksum (xxh3_64 of its canonical JSON without that field)
// and, per chunk, xxh3_64 checksums of the raw and of the stored bytes.
//
// Identity of a checkpoint is (app name, uid); reading refuses a store whose
// uid differs from the caller's effective uid (unless the caller is root, as
// iCheck agents writing for an application's uid are) or whose uid or app
// directory is owned by somebody else (Errc::perm).
//
// Thread safety: Store is immutable after construction and its const methods
// may be called concurrently. One VersionWriter may be fed from several
// threads as long as each region is written by one thread at a time;
// open_region / close_region / seal / commit are internally serialised.
//
// All sizes are in bytes unless named "count" (elements). Every failure throws
// ckstore::Error (see Errc); nothing aborts the process.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dynres::ckstore {

/// On-disk format version written into every manifest ("format_version").
inline constexpr int kFormatVersion = 1;
/// File name of the manifest inside a version directory.
inline constexpr const char* kManifestName = "MANIFEST.json";
/// Largest version number representable with 10 digits.
inline constexpr std::uint64_t kMaxVersion = 9'999'999'999ULL;

// ---------------------------------------------------------------- errors

/// Error categories of ckstore::Error.
enum class Errc {
  io,         ///< a system call failed (open, write, fsync, rename, ...)
  corrupt,    ///< checksum mismatch, truncated/oversized file, bad manifest
  not_found,  ///< version, region or manifest does not exist
  mismatch,   ///< caller's size/type/identity differs from what is stored
  perm,       ///< uid or ownership check failed
  invalid     ///< bad argument: unsafe name, zero size, bad version number, misuse
};

/// Short name of an Errc ("io", "corrupt", ...).
const char* to_string(Errc c) noexcept;

/// The only exception type thrown by ckstore. what() reads
/// "ckstore: <code>: <path>: <reason>" (path omitted when empty).
class Error : public std::runtime_error {
 public:
  Error(Errc code, std::string path, const std::string& reason);
  Errc code() const noexcept { return code_; }
  /// The file or directory the error is about (may be empty).
  const std::string& path() const noexcept { return path_; }

 private:
  Errc code_;
  std::string path_;
};

// ---------------------------------------------------------------- names

/// True iff `s` is usable as one file-name component: non-empty, at most 128
/// bytes, no '/', no NUL or other control character (< 0x20, 0x7f), no "..",
/// not starting with '.', and valid UTF-8. Applies to app names and labels.
bool safe_component(std::string_view s) noexcept;

// ---------------------------------------------------------------- types

/// Element type of a region. The numeric values equal icheck_type of
/// icheck.h (ICHECK_FLOAT = 1 ... ICHECK_BINARY = 5).
enum class ElemType : int { Float = 1, Double = 2, Int = 3, Char = 4, Binary = 5 };

/// Natural element size in bytes: 4, 8, 4, 1, 1.
std::size_t elem_size(ElemType t) noexcept;
/// "float", "double", "int", "char", "binary".
const char* to_string(ElemType t) noexcept;
/// Inverse of to_string(ElemType); throws Error(invalid) for other strings.
ElemType parse_elem_type(std::string_view s);

/// Data distribution of a region over the ranks [John24 §7.4.1].
enum class Dist : int {
  None = 0,        ///< rank-private data, no global meaning (default)
  Replicated = 1,  ///< every rank holds the same data (§7.4.1.1)
  Block = 2,       ///< contiguous blocks of the global array (§7.4.1.2, BLOCK)
  Cyclic = 3       ///< round-robin blocks of block_size elements (CYCLIC)
};
/// "none", "replicated", "block", "cyclic".
const char* to_string(Dist d) noexcept;
/// Inverse of to_string(Dist); throws Error(invalid) for other strings.
Dist parse_dist(std::string_view s);

/// Layout metadata for redistribution (icredist, [John24 §7.4]). All counts in
/// elements. Everything is optional for Dist::None.
struct Layout {
  Dist dist = Dist::None;
  /// BLOCK/CYCLIC width in elements (icheck_add_adapt_global's `width`);
  /// 0 = BLOCK with blocks as large as each rank's count.
  std::uint64_t block_size = 0;
  /// Total elements of the global array (0 = unknown / not global).
  std::uint64_t global_count = 0;
  /// Global shape, slowest dimension first (e.g. {NY, NX} for a row-major
  /// 2-D grid); empty = 1-D of global_count. Product must equal global_count
  /// when both are given.
  std::vector<std::uint64_t> global_shape;
  /// BLOCK: flat element index of this rank's first element in the global
  /// array (row-major). Ignored for other distributions.
  std::uint64_t global_offset = 0;
};

/// What a writer is told about one region of one rank.
struct RegionInfo {
  std::string label;                 ///< safe_component()
  ElemType type = ElemType::Binary;  ///<
  /// Bytes per element; 0 = elem_size(type). Must equal elem_size(type)
  /// except for Binary (any value >= 1).
  std::size_t elem_size = 0;
  std::uint64_t count = 0;  ///< elements on this rank; must be > 0
  int rank = 0;             ///< 0 <= rank < nranks
  Layout layout;            ///<

  /// count * elem_size (with elem_size resolved) in bytes.
  std::uint64_t bytes() const noexcept;
};

/// One stored chunk of a region (the manifest's "chunks" entries).
struct ChunkInfo {
  std::string file;                ///< file name inside the version directory
  std::uint64_t file_offset = 0;   ///< where the stored bytes start in `file`
  std::uint64_t raw_offset = 0;    ///< byte offset inside the region's data
  std::uint64_t raw_length = 0;    ///< uncompressed bytes
  std::uint64_t stored_length = 0; ///< bytes on disk
  bool compressed = false;         ///< stored bytes are one zstd frame
  std::uint64_t raw_xxh3 = 0;      ///< XXH3_64bits of the raw bytes
  std::uint64_t stored_xxh3 = 0;   ///< XXH3_64bits of the stored bytes
};

/// A region as recorded in a manifest.
struct Region {
  RegionInfo info;                ///< elem_size always resolved
  std::vector<ChunkInfo> chunks;  ///< ordered by raw_offset, contiguous
  std::uint64_t bytes() const noexcept { return info.bytes(); }
  std::uint64_t stored_bytes() const noexcept;
};

/// Parsed and checksum-validated MANIFEST.json.
struct Manifest {
  int format_version = kFormatVersion;
  std::string app;
  std::uint32_t uid = 0;
  std::uint64_t version = 0;
  std::int64_t created_unix = 0;  ///< seconds since the epoch
  int nranks = 0;
  std::map<std::string, std::string> attrs;  ///< free-form (writer's set_attr)
  std::vector<Region> regions;               ///< sorted by (rank, label)

  /// The region of (rank, label) or nullptr.
  const Region* find(int rank, std::string_view label) const noexcept;
  /// Sum of region bytes (raw) / stored bytes.
  std::uint64_t total_bytes() const noexcept;
  std::uint64_t total_stored_bytes() const noexcept;
  /// Canonical JSON text (with the "manifest_xxh3" field).
  std::string to_json() const;
  /// Parse + validate JSON text; throws Error(corrupt) naming `path` on any
  /// syntax/schema/checksum problem.
  static Manifest from_json(std::string_view text, const std::string& path = "");
};

// ---------------------------------------------------------------- options

/// Writer options ([John24 §6.2.5]: compression configurable per app).
struct Options {
  /// Bytes per chunk (>= 4 KiB). Each chunk is checksummed (and compressed)
  /// independently, so readers can verify/decompress partial ranges.
  std::uint64_t chunk_size = 64ULL << 20;
  /// Compress at all? A region is compressed only when compress is true,
  /// its size in bytes is > compress_threshold, and per chunk only when the
  /// zstd frame is smaller than the raw chunk.
  bool compress = true;
  /// Bytes; the dissertation's example is 1 GB.
  std::uint64_t compress_threshold = 1ULL << 30;
  /// zstd level (1 = fast; negative = faster; up to 19).
  int compress_level = 1;
  /// Worker threads used to compress/checksum chunks of regions passed whole
  /// (add_region / write_version); 1 = in the calling thread.
  unsigned threads = 1;
  /// fsync chunk files and directories (turn off only for tests/benchmarks).
  bool durable = true;
  /// After a successful commit keep only this many newest versions
  /// (Store::retain); 0 = keep everything.
  std::size_t keep_last = 0;
};

/// How hard to check a version.
enum class Check {
  shallow,  ///< manifest valid and every chunk file has exactly the expected size
  deep      ///< shallow + every chunk's stored and raw checksum (decompresses)
};

class VersionWriter;

// ---------------------------------------------------------------- store

/// Access to the versions of one application of one user:
/// <root>/<uid>/<app>/. Constructing does not touch the file system.
class Store {
 public:
  /// Throws Error(invalid) if !safe_component(app). uid defaults to geteuid().
  Store(std::filesystem::path root, std::string app);
  Store(std::filesystem::path root, std::string app, std::uint32_t uid);

  const std::filesystem::path& root() const noexcept { return root_; }
  const std::string& app() const noexcept { return app_; }
  std::uint32_t uid() const noexcept { return uid_; }
  std::filesystem::path app_dir() const;                      ///< <root>/<uid>/<app>
  std::filesystem::path version_dir(std::uint64_t v) const;   ///< .../v0000000042

  /// All version directories (complete or not), newest first. Empty when the
  /// application has no directory yet. Throws perm (see class comment).
  std::vector<std::uint64_t> list_versions() const;
  /// True iff version directory v exists and holds a MANIFEST.json (not checked).
  bool has_manifest(std::uint64_t v) const;
  /// Read and validate the manifest of v (checksum, schema, identity:
  /// app/uid/version must match -> else mismatch). not_found if absent.
  Manifest manifest(std::uint64_t v) const;
  /// Check version v; throws Error(corrupt|not_found|...) naming the first
  /// bad file. Returns the manifest on success.
  Manifest verify(std::uint64_t v, Check how = Check::deep) const;
  /// verify() that returns false instead of throwing corrupt/not_found/
  /// mismatch/io (perm and invalid still throw).
  bool valid(std::uint64_t v, Check how = Check::deep) const;
  /// Newest version that passes verify(how), skipping incomplete/corrupt ones.
  std::optional<std::uint64_t> newest_valid(Check how = Check::deep) const;

  /// Copy region (rank, label) of version v into dst (exactly `bytes` bytes,
  /// must equal the region's size else mismatch), verifying every chunk's
  /// checksums (corrupt on failure, naming the chunk file).
  void read_region(std::uint64_t v, int rank, std::string_view label, void* dst,
                   std::size_t bytes) const;
  /// Same, allocating.
  std::vector<std::byte> read_region(std::uint64_t v, int rank, std::string_view label) const;
  /// Read `bytes` bytes starting at byte `offset` of a region described by a
  /// manifest `m` of this store (reads and verifies only the chunks that
  /// overlap the range; for icredist and partial loads). Range must lie inside
  /// the region (else invalid).
  void read_range(const Manifest& m, const Region& r, std::uint64_t offset, void* dst,
                  std::size_t bytes) const;

  /// Start writing version v (1 <= v <= kMaxVersion) for an application of
  /// `nranks` ranks. Creates the directories. Throws invalid if v already
  /// has a manifest.
  VersionWriter begin_version(std::uint64_t v, int nranks, const Options& opt = {}) const;

  /// Retention: keep the `keep_last` newest versions and always the newest
  /// valid one (Check::shallow); delete every other version OLDER than the
  /// newest valid one (newer incomplete versions may be in flight and are
  /// never touched). keep_last == 0 keeps everything. Deletion renames the
  /// directory to a hidden name first, then removes it. Returns the deleted
  /// version numbers.
  std::vector<std::uint64_t> retain(std::size_t keep_last) const;
  /// Delete version v (any state). not_found if it does not exist.
  void remove_version(std::uint64_t v) const;

 private:
  void check_read_access() const;
  std::filesystem::path root_;
  std::string app_;
  std::uint32_t uid_;
};

// ---------------------------------------------------------------- writer

/// Streaming writer of one version. Regions may be fed piece by piece (an
/// agent receiving data in transfers need not hold a second copy):
///
///   auto w = store.begin_version(7, nranks, opt);
///   auto id = w.open_region({"grid", ElemType::Double, 0, n, rank, layout});
///   w.write(id, piece1, len1); w.write(id, piece2, len2); ...
///   w.close_region(id);            // total must equal count * elem_size
///   Manifest m = w.commit();       // MANIFEST.json last -> version valid
///
/// Several writers (e.g. one per agent or per MPI rank, each owning disjoint
/// ranks) may write the same version: each calls seal() and hands its part
/// (JSON text) to one process that calls commit_parts().
/// Destroying an uncommitted, unsealed writer removes the files it created.
class VersionWriter {
 public:
  VersionWriter(std::filesystem::path root, std::string app, std::uint32_t uid,
                std::uint64_t version, int nranks, const Options& opt = {});
  VersionWriter(VersionWriter&&) noexcept;
  VersionWriter& operator=(VersionWriter&&) noexcept;
  VersionWriter(const VersionWriter&) = delete;
  VersionWriter& operator=(const VersionWriter&) = delete;
  ~VersionWriter();

  /// Start a region. Throws invalid (unsafe label, count 0, bad rank,
  /// elem_size, layout) or invalid on a duplicate (rank, label).
  /// Returns an id for write/close_region.
  std::size_t open_region(const RegionInfo& info);
  /// Append the next `bytes` bytes of region `id` (bytes may be 0). Throws
  /// mismatch if more than the declared size is written.
  void write(std::size_t id, const void* data, std::size_t bytes);
  /// Finish region `id` (flush, fsync). mismatch if fewer bytes were written.
  void close_region(std::size_t id);
  /// open_region + write + close_region of a whole buffer of info.bytes()
  /// bytes (uses Options::threads for compression).
  void add_region(const RegionInfo& info, const void* data);

  /// Free-form key/value stored in the manifest ("attrs").
  void set_attr(const std::string& key, const std::string& value);

  /// Finish this writer's part without writing the manifest: every region
  /// must be closed. Returns the part as JSON text for commit_parts().
  std::string seal();
  /// seal() + commit_parts() with this part alone; applies keep_last.
  Manifest commit();
  /// Remove every file this writer created (idempotent; no-op after commit).
  void abort() noexcept;

  std::uint64_t version() const noexcept;
  const std::filesystem::path& dir() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Combine the sealed parts of several writers of version `v` of `store` and
/// write MANIFEST.json (temp file, fsync, rename, fsync dir). Checks: no
/// duplicate (rank, label), every referenced chunk file exists with the
/// expected size, identity matches. Applies opt.keep_last.
Manifest commit_parts(const Store& store, std::uint64_t v, int nranks,
                      std::span<const std::string> parts, const Options& opt = {},
                      const std::map<std::string, std::string>& attrs = {});

/// A whole region for write_version.
struct RegionData {
  RegionInfo info;
  const void* data = nullptr;  ///< info.bytes() bytes
};

/// Convenience: write a complete version in one call (root/<uid>/<app>/vN).
/// nranks = 0 means max(rank) + 1.
Manifest write_version(const std::filesystem::path& root, std::string_view app,
                       std::uint32_t uid, std::uint64_t version,
                       std::span<const RegionData> regions, const Options& opt = {},
                       int nranks = 0);

/// "v0000000042" for 42; throws invalid outside 1..kMaxVersion.
std::string version_dir_name(std::uint64_t v);
/// Inverse; std::nullopt when `name` is not of that form.
std::optional<std::uint64_t> parse_version_dir_name(std::string_view name) noexcept;
/// Chunk file name of (rank, label): "r000003.grid.dat".
std::string chunk_file_name(int rank, std::string_view label, std::string_view writer_tag = {});
/// A fresh random tag (16 hex digits) naming one writer's chunk files, so
/// two writers of the same version (an agent and the library's fallback)
/// never open, truncate or unlink each other's files.
std::string new_writer_tag();

}  // namespace dynres::ckstore
