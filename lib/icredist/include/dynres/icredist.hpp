// icredist — offline inspection and N -> M redistribution of iCheck's
// second-level checkpoints (<pfs_dir>/<uid>/<app>/v<version>/, the ckstore
// format) [John24 §6.2.5, §7.4.1]. The logic of the icredist(1) tool.
//
// Every version written by libicheck with icheck_add_adapt* objects holds,
// per rank, the metadata region "__icheck_adapt" (dynres/icheck/meta.hpp):
// each object's role and distribution. redistribute() rewrites a version of
// N ranks as a NEW version of M ranks that an application started on M
// processes restores like one it committed itself:
//   BLOCK / CYCLIC   same kind and width over M ranks;
//   PREDEFINED       the layout over M ranks is not in the checkpoint: the
//                    caller gives it (explicit offsets/counts, or a process
//                    grid for a grid mapping), else the object is refused;
//   MANUAL           refused (only the application's restart function knows
//                    the new parts);
//   CONSTANT         rank 0's copy; SIZE/RANK/DEFAULT/VOLATILE are not stored;
//   plain (icheck_add) and DEFAULT_JOINING: rank r keeps its data for
//                    r < min(N, M) (what a restore on M does); growing is
//                    refused for them (new ranks' values are not recorded).
// The source version is verified (every checksum) before anything is
// written; the new version is number max(existing) + 1 and becomes valid only
// when its manifest is written, last (ckstore). On any error nothing is left
// behind.
//
// All counts are elements, sizes bytes. Errors: icredist::Error (bad input:
// unknown application/version/label, M <= 0, refused object, damaged
// manifest) or ckstore::Error (I/O, corrupt data).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dynres/ckstore.hpp"
#include "dynres/icheck/dist.hpp"

namespace dynres::icredist {

/// Bad input or a refused request; what() names the problem.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One version of an application as `ls` shows it.
struct VersionSummary {
  std::uint64_t version = 0;
  bool complete = false;          ///< has a manifest that parses and validates
  std::string problem;            ///< why not complete (empty when complete)
  int nranks = 0;                 ///< ranks that committed it
  std::int64_t created_unix = 0;  ///< seconds since the epoch
  std::uint64_t bytes = 0;        ///< raw bytes of all regions
  std::uint64_t stored_bytes = 0; ///< bytes on disk
  bool compressed = false;        ///< any chunk zstd-compressed
};

/// One application of the store: its versions, newest first.
struct AppSummary {
  std::string app;
  std::vector<VersionSummary> versions;
};

/// Every application of `uid` under `root` (<root>/<uid>/*), sorted by name.
/// Throws Error when <root>/<uid> does not exist.
std::vector<AppSummary> list(const std::filesystem::path& root, std::uint32_t uid);
/// The versions of one application; Error when it has no directory.
AppSummary list_app(const ckstore::Store& st);

/// One object of a version (one label), as `show` prints it.
struct Object {
  std::string label;
  std::string role;  ///< meta role, or "plain" when the version has no metadata
  std::string dist;  ///< block|cyclic|explicit|grid|manual or "" (not distributed)
  ckstore::ElemType type = ckstore::ElemType::Binary;
  std::size_t elem_size = 1;        ///< bytes
  std::uint64_t global = 0;         ///< global elements (distributed objects)
  std::uint64_t width = 0;          ///< block/cyclic width
  std::vector<int> dims;            ///< grid: process grid
  std::vector<std::uint64_t> shape; ///< grid: array shape
  std::vector<std::uint64_t> counts;///< local elements per rank (0 = not stored)
  std::uint64_t bytes = 0;          ///< stored raw bytes over all ranks
};

/// A version, its metadata and objects.
struct VersionInfo {
  ckstore::Manifest manifest;
  bool has_meta = false;             ///< written with icheck_add_adapt* metadata
  std::vector<nlohmann::json> meta;  ///< per rank (has_meta)
  std::vector<Object> objects;       ///< sorted by label, metadata region excluded
  const Object* find(const std::string& label) const;
};

/// Read and check version v: manifest (Error if missing or damaged) and the
/// metadata regions (their chunk checksums verified). Does not read data.
VersionInfo describe(const ckstore::Store& st, std::uint64_t v);
/// Newest version with a valid manifest; Error when there is none.
std::uint64_t newest(const ckstore::Store& st);

/// Result of verify(): ok, or the first bad file and why.
struct VerifyResult {
  std::uint64_t version = 0;
  bool ok = false;
  std::uint64_t chunks = 0;  ///< chunks checked (all, when ok)
  std::uint64_t bytes = 0;   ///< raw bytes checked
  std::string bad_file;      ///< first bad chunk file (or the manifest)
  std::string message;       ///< why
};
/// Check every chunk of version v (stored and raw xxh3, decompressing).
VerifyResult verify(const ckstore::Store& st, std::uint64_t v);

/// Layout over the new rank count of a PREDEFINED object.
struct Predefined {
  std::vector<std::uint64_t> offsets, counts;  ///< explicit: one per new rank
  std::vector<int> dims;                       ///< grid: process grid over M
};

/// Rewrite version v for M ranks as version max(existing) + 1 (see the file
/// comment). `predefined` gives the new layout of PREDEFINED objects by
/// label. Returns the new manifest.
ckstore::Manifest redistribute(const ckstore::Store& st, std::uint64_t v, int M,
                               const std::map<std::string, Predefined>& predefined = {},
                               const ckstore::Options& opt = {});

/// The global array of a distributed object (global * elem_size bytes), or
/// the data of a rank-private / CONSTANT object of `rank`.
std::vector<std::byte> gather(const ckstore::Store& st, const VersionInfo& vi, const std::string& label,
                              int rank = 0);
/// Write gather()'s bytes to `out` as raw bytes or as a NumPy .npy file
/// (little-endian dtype of the element type, shape = the grid's shape or
/// (count,)). Refuses an existing `out`; written to a temporary file, then
/// renamed. Returns the bytes of data written.
std::uint64_t export_label(const ckstore::Store& st, const VersionInfo& vi, const std::string& label,
                           const std::filesystem::path& out, bool npy, int rank = 0);

/// JSON of the summaries (the --json output of ls, show, verify).
nlohmann::json to_json(const AppSummary& a);
nlohmann::json to_json(const VersionInfo& vi);
nlohmann::json to_json(const VerifyResult& r);

}  // namespace dynres::icredist
