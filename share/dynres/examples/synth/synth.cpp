/* synth — the synthetic checkpoint benchmark of [John24 §8.2.3.1]
 * (Listing 8.1: configuration file, Listing 8.2: pseudocode), using the iCheck
 * C API of include/icheck.h (§6.1.3).
 *
 * Usage:
 *   synth [CONFIG.yaml] [-s KEY=VALUE]... [--mpi | --no-mpi] [-q]
 *   mpiexec -n 4 synth synth.yaml
 *   synth synth.yaml -s enable_ichk=false -s cp_count=200
 *
 * Each process allocates cp_size elements of cp_type, then runs cp_count
 * iterations of a deterministic update data[i] = f(data[i], iteration, i).
 * Every cp_interval it commits a checkpoint with iCheck (labels "array" and
 * "iteration") and/or writes one collectively with MPI-IO (cp_mpiio), every
 * probe_interval it calls icheck_probe_agents, and at fault_inject it kills
 * itself with SIGKILL. If icheck_init reports a checkpoint (RESTART) the run
 * restores it (one icheck_redistribute per label) and continues from the
 * stored iteration counter; a restarted run never injects a fault again. The last line (rank 0) is
 *
 *   synth: checksum=<16 hex digits> iterations=<n>
 *
 * a hash over all ranks' data (in rank order), so an interrupted and
 * restarted run prints the same line as an uninterrupted one.
 *
 * Configuration keys (Listing 8.1; the units follow the listing):
 *   cp_size        elements per process (integer), or bytes with a unit
 *                  suffix ("64MiB", "1GB", "4096B"); default 100000
 *   cp_type        float | double | int | char | binary; default float
 *   cp_interval    checkpoint interval: a number = seconds (Listing 8.1),
 *                  or "500ms", "10s", "20it" (iterations); 0 = never;
 *                  default 10 (seconds)
 *   cp_count       iterations to run; default 1000
 *   cp_mpiio       also write an MPI-IO checkpoint (collective
 *                  MPI_File_write_at_all, rank r at offset r*bytes) to
 *                  mpiio_file; without MPI a plain pwrite+fsync; default false
 *   enable_ichk    use iCheck (enable_icheck is accepted too); default true
 *   fault_inject   kill the process (SIGKILL) after this time: seconds since
 *                  start, or "30it" = after that many completed iterations;
 *                  0/false = never; default never
 *   probe_interval icheck_probe_agents interval (seconds or "Nit"); 0 = never
 *   is_invasive    iMPI variant of §8.2.3.2; accepted, but iMPI is not
 *                  available, so the non-invasive benchmark runs (warning)
 * Extra keys ("the benchmark supports more options", §8.2.3.1):
 *   app_name       iCheck application name (identity with the uid); "synth"
 *   icheck_config  path handed to icheck_init (default: NULL = $ICHECK_CONFIG)
 *   mpiio_file     path of the MPI-IO checkpoint file; "synth.mpiio"
 *   iter_passes    update passes per iteration (more work per iteration); 1
 *   cp_async       icheck_enable_asynchronous(1) (§6.1.3.3); default false
 *   persist        icheck_finalize(IC_PERSIST) (Listing 6.1) or 0; true
 *   restart        restore the checkpoint icheck_init reports (default true);
 *                  false starts anew but keeps committing under the same
 *                  application (commit-time benchmarks whose per-process
 *                  size changes between runs, bench/icheck/maram)
 *   cp_global      elements of ONE global array block-distributed over the
 *                  ranks [John24 §7.4.1.2] instead of cp_size per process;
 *                  values depend on the global index only, so the checksum is
 *                  the same for every rank count, and a checkpoint restarts
 *                  on another rank count (icheck_add_adapt_global, BLOCK;
 *                  "iteration" is ICHECK_CONSTANT); 0 = off (default)
 *
 * MPI: MPI_Init is called when the process was started by a launcher
 * (PMI_RANK / PMI_SIZE / PMIX_RANK / OMPI_COMM_WORLD_SIZE in the
 * environment) or with --mpi; otherwise synth runs as one plain process.
 * Time-based decisions are taken by rank 0 and broadcast, so all ranks commit
 * together. Output: one "synth: commit ..." / "synth: mpiio ..." line per
 * checkpoint with the slowest rank's time in seconds.
 *
 * Exit codes: 0 success, 1 runtime error (iCheck / I/O), 2 bad configuration
 * or arguments, 3 enable_ichk requested but synth was built without iCheck.
 */
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef SYNTH_HAVE_MPI
#include <mpi.h>
#endif
#ifndef NO_ICHECK
#include "icheck.h"
#endif

namespace {

// ------------------------------------------------------------ configuration

struct Interval {
  enum Unit { Off, Seconds, Iterations } unit = Off;
  double value = 0;  // seconds or iterations
  std::string str() const {
    char b[64];
    if (unit == Off) return "off";
    if (unit == Seconds) std::snprintf(b, sizeof b, "%gs", value);
    else std::snprintf(b, sizeof b, "%.0fit", value);
    return b;
  }
};

struct Config {
  std::uint64_t cp_size = 100000;  // elements per process
  std::string cp_size_bytes;       // unit-suffixed text, resolved after cp_type
  std::string cp_type = "float";
  Interval cp_interval{Interval::Seconds, 10};
  std::uint64_t cp_count = 1000;
  bool cp_mpiio = false;
  bool enable_ichk = true;
  Interval fault_inject{};
  Interval probe_interval{};
  bool is_invasive = false;
  std::string app_name = "synth";
  std::string icheck_config;
  std::string mpiio_file = "synth.mpiio";
  unsigned iter_passes = 1;
  bool cp_async = false;
  bool persist = true;
  std::uint64_t cp_global = 0;  // elements of one BLOCK-distributed global array; 0 = off
  bool restart = true;          // restore a checkpoint icheck_init reports (false: start anew)
};

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Interval parse_interval(const YAML::Node& n, const std::string& key) {
  const std::string s = n.as<std::string>();
  if (s == "false" || s == "off" || s == "no" || s == "never") return {};
  static const std::regex re(R"(^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-z]*)\s*$)");
  std::smatch m;
  if (!std::regex_match(s, m, re)) throw ConfigError(key + ": cannot parse '" + s + "'");
  double v = std::stod(m[1].str());
  const std::string u = m[2].str();
  Interval iv;
  if (u.empty() || u == "s" || u == "sec" || u == "seconds") {
    iv = {Interval::Seconds, v};
  } else if (u == "ms") {
    iv = {Interval::Seconds, v / 1000.0};
  } else if (u == "it" || u == "iter" || u == "iters" || u == "iterations") {
    if (v != std::floor(v)) throw ConfigError(key + ": iterations must be whole: '" + s + "'");
    iv = {Interval::Iterations, v};
  } else {
    throw ConfigError(key + ": unknown unit '" + u + "' (use s, ms or it)");
  }
  if (v <= 0) return {};
  return iv;
}

std::uint64_t parse_u64(const YAML::Node& n, const std::string& key) {
  const std::string s = n.as<std::string>();
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || s[0] == '-')
    throw ConfigError(key + ": not a non-negative integer: '" + s + "'");
  return v;
}

bool parse_bool(const YAML::Node& n, const std::string& key) {
  try {
    return n.as<bool>();
  } catch (const YAML::Exception&) {
    throw ConfigError(key + ": not a boolean: '" + n.as<std::string>() + "'");
  }
}

std::size_t type_size(const std::string& t) {
  if (t == "float" || t == "int") return 4;
  if (t == "double") return 8;
  if (t == "char" || t == "binary") return 1;
  throw ConfigError("cp_type: unknown type '" + t + "' (float, double, int, char, binary)");
}

std::uint64_t parse_bytes(const std::string& s) {
  static const std::regex re(R"(^\s*([0-9]+)\s*(B|KB|KiB|MB|MiB|GB|GiB|TB|TiB)\s*$)");
  std::smatch m;
  if (!std::regex_match(s, m, re)) throw ConfigError("cp_size: cannot parse '" + s + "'");
  std::uint64_t v = std::stoull(m[1].str());
  const std::string u = m[2].str();
  std::uint64_t f = 1;
  if (u == "KB") f = 1000;
  else if (u == "KiB") f = 1ULL << 10;
  else if (u == "MB") f = 1000 * 1000;
  else if (u == "MiB") f = 1ULL << 20;
  else if (u == "GB") f = 1000ULL * 1000 * 1000;
  else if (u == "GiB") f = 1ULL << 30;
  else if (u == "TB") f = 1000ULL * 1000 * 1000 * 1000;
  else if (u == "TiB") f = 1ULL << 40;
  return v * f;
}

Config load_config(const std::string& path, const std::vector<std::string>& sets) {
  YAML::Node root;
  if (!path.empty()) {
    try {
      root = YAML::LoadFile(path);
    } catch (const YAML::Exception& e) {
      throw ConfigError(path + ": " + e.what());
    }
    if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    if (!root.IsMap()) throw ConfigError(path + ": not a YAML mapping");
  } else {
    root = YAML::Node(YAML::NodeType::Map);
  }
  for (auto& kv : sets) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--set wants KEY=VALUE: '" + kv + "'");
    root[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  static const std::set<std::string> known{
      "cp_size",     "cp_type",      "cp_interval", "cp_count",   "cp_mpiio",
      "enable_ichk", "enable_icheck", "fault_inject", "probe_interval", "is_invasive",
      "app_name",    "icheck_config", "mpiio_file", "iter_passes", "cp_async", "persist",
      "cp_global",   "restart"};
  Config c;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    const YAML::Node& v = it->second;
    if (!known.count(k)) throw ConfigError("unknown key '" + k + "'");
    if (!v.IsScalar()) throw ConfigError(k + ": expected a scalar value");
    if (k == "cp_size") {
      const std::string s = v.as<std::string>();
      if (!s.empty() && std::isdigit(static_cast<unsigned char>(s.back()))) {
        c.cp_size = parse_u64(v, k);
        c.cp_size_bytes.clear();
      } else {
        c.cp_size_bytes = s;
      }
    } else if (k == "cp_type") c.cp_type = v.as<std::string>();
    else if (k == "cp_interval") c.cp_interval = parse_interval(v, k);
    else if (k == "cp_count") c.cp_count = parse_u64(v, k);
    else if (k == "cp_mpiio") c.cp_mpiio = parse_bool(v, k);
    else if (k == "enable_ichk" || k == "enable_icheck") c.enable_ichk = parse_bool(v, k);
    else if (k == "fault_inject") c.fault_inject = parse_interval(v, k);
    else if (k == "probe_interval") c.probe_interval = parse_interval(v, k);
    else if (k == "is_invasive") c.is_invasive = parse_bool(v, k);
    else if (k == "app_name") c.app_name = v.as<std::string>();
    else if (k == "icheck_config") c.icheck_config = v.as<std::string>();
    else if (k == "mpiio_file") c.mpiio_file = v.as<std::string>();
    else if (k == "iter_passes") c.iter_passes = static_cast<unsigned>(parse_u64(v, k));
    else if (k == "cp_async") c.cp_async = parse_bool(v, k);
    else if (k == "persist") c.persist = parse_bool(v, k);
    else if (k == "cp_global") c.cp_global = parse_u64(v, k);
    else if (k == "restart") c.restart = parse_bool(v, k);
  }
  const std::size_t es = type_size(c.cp_type);
  if (!c.cp_size_bytes.empty()) {
    std::uint64_t b = parse_bytes(c.cp_size_bytes);
    if (b % es != 0)
      throw ConfigError("cp_size: " + c.cp_size_bytes + " is not a multiple of the " +
                        std::to_string(es) + "-byte " + c.cp_type);
    c.cp_size = b / es;
  }
  if (c.cp_size == 0) throw ConfigError("cp_size must be > 0");
  if (c.cp_count > 0x7fffffffULL) throw ConfigError("cp_count too large (max 2^31-1)");
  if (c.iter_passes == 0) c.iter_passes = 1;
  if (c.app_name.empty()) throw ConfigError("app_name must not be empty");
  return c;
}

// ------------------------------------------------------------ MPI shim

struct Par {
  bool mpi = false;
  int rank = 0;
  int size = 1;
};

[[maybe_unused]] bool launched_by_mpiexec() {
  for (const char* v : {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

double max_over_ranks(const Par& p, double v) {
#ifdef SYNTH_HAVE_MPI
  if (p.mpi) {
    double out = v;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
  }
#endif
  (void)p;
  return v;
}

void bcast_int(const Par& p, int& v) {
#ifdef SYNTH_HAVE_MPI
  if (p.mpi) MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
#endif
  (void)p;
  (void)v;
}

void barrier(const Par& p) {
#ifdef SYNTH_HAVE_MPI
  if (p.mpi) MPI_Barrier(MPI_COMM_WORLD);
#endif
  (void)p;
}

[[noreturn]] void die(const Par& p, int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef SYNTH_HAVE_MPI
  if (p.mpi) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  (void)p;
  std::exit(code);
}

// ------------------------------------------------------------ data

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t hash_bytes(const unsigned char* p, std::size_t n) {
  std::uint64_t h = mix64(n);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix64(h ^ w);
  }
  std::uint64_t tail = 0;
  for (std::size_t k = 0; i < n; ++i, ++k) tail |= static_cast<std::uint64_t>(p[i]) << (8 * k);
  return mix64(h ^ tail);
}

/// Deterministic initial values, different per rank.
/// base: global index of element 0 (cp_global mode; rank is then 0).
void init_data(const std::string& t, void* d, std::uint64_t n, int rank, std::uint64_t base = 0) {
  if (t == "float") {
    auto* f = static_cast<float*>(d);
    for (std::uint64_t i = 0; i < n; ++i) f[i] = static_cast<float>(((base + i) * 7 + rank) % 1000) * 0.01f;
  } else if (t == "double") {
    auto* f = static_cast<double*>(d);
    for (std::uint64_t i = 0; i < n; ++i) f[i] = static_cast<double>(((base + i) * 7 + rank) % 1000) * 0.01;
  } else if (t == "int") {
    auto* u = static_cast<std::uint32_t*>(d);
    for (std::uint64_t i = 0; i < n; ++i) u[i] = static_cast<std::uint32_t>((base + i) * 2654435761u + rank);
  } else {
    auto* b = static_cast<unsigned char*>(d);
    for (std::uint64_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>((base + i) * 13 + rank);
  }
}

/// One iteration's deterministic update data[i] = f(data[i], it, i).
/// base: global index of element 0 (cp_global mode), else 0.
void compute(const std::string& t, void* d, std::uint64_t n, std::uint64_t it, unsigned passes, std::uint64_t base = 0) {
  it += base;  // every formula below uses it + i: global index base + i
  for (unsigned p = 0; p < passes; ++p) {
    if (t == "float") {
      auto* f = static_cast<float*>(d);
      for (std::uint64_t i = 0; i < n; ++i)
        f[i] = f[i] * 0.999f + static_cast<float>((i + it) % 97) * 0.001f;
    } else if (t == "double") {
      auto* f = static_cast<double*>(d);
      for (std::uint64_t i = 0; i < n; ++i)
        f[i] = f[i] * 0.999 + static_cast<double>((i + it) % 97) * 0.001;
    } else if (t == "int") {
      auto* u = static_cast<std::uint32_t*>(d);
      for (std::uint64_t i = 0; i < n; ++i)
        u[i] = u[i] * 1664525u + 1013904223u + static_cast<std::uint32_t>(it + i);
    } else {
      auto* b = static_cast<unsigned char*>(d);
      for (std::uint64_t i = 0; i < n; ++i)
        b[i] = static_cast<unsigned char>(b[i] * 31u + it + i);
    }
  }
}

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// ------------------------------------------------------------ checkpoints

/// Collective MPI-IO checkpoint (or POSIX without MPI); returns seconds (max).
double write_mpiio(const Par& p, const Config& c, const void* data, std::uint64_t bytes) {
  const double t0 = now_s();
#ifdef SYNTH_HAVE_MPI
  if (p.mpi) {
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, c.mpiio_file.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY,
                           MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) {
      std::fprintf(stderr, "synth: MPI_File_open %s failed\n", c.mpiio_file.c_str());
      die(p, 1);
    }
    const std::uint64_t step = 1ULL << 30;  // int count limit: write in 1 GiB pieces
    const auto* b = static_cast<const char*>(data);
    for (std::uint64_t off = 0; off < bytes; off += step) {
      const int n = static_cast<int>(std::min(step, bytes - off));
      MPI_Offset at = static_cast<MPI_Offset>(static_cast<std::uint64_t>(p.rank) * bytes + off);
      if (MPI_File_write_at_all(fh, at, b + off, n, MPI_BYTE, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        std::fprintf(stderr, "synth: MPI_File_write_at_all failed\n");
        die(p, 1);
      }
    }
    MPI_File_sync(fh);
    MPI_File_close(&fh);
    return max_over_ranks(p, now_s() - t0);
  }
#endif
  int fd = ::open(c.mpiio_file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::perror(("synth: open " + c.mpiio_file).c_str());
    die(p, 1);
  }
  const auto* b = static_cast<const char*>(data);
  std::uint64_t off = 0;
  while (off < bytes) {
    ssize_t w = ::pwrite(fd, b + off, bytes - off, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      std::perror("synth: pwrite");
      die(p, 1);
    }
    off += static_cast<std::uint64_t>(w);
  }
  ::fsync(fd);
  ::close(fd);
  return now_s() - t0;
}

#ifndef NO_ICHECK
icheck_type ichk_type(const std::string& t) {
  if (t == "float") return ICHECK_FLOAT;
  if (t == "double") return ICHECK_DOUBLE;
  if (t == "int") return ICHECK_INT;
  if (t == "char") return ICHECK_CHAR;
  return ICHECK_BINARY;
}

void check_ic(const Par& p, int rc, const char* what) {
  if (rc == ICHECK_OK) return;
  const char* why = icheck_last_error();
  std::fprintf(stderr, "synth: rank %d: %s failed: %s (%d)%s%s\n", p.rank, what, icheck_strerror(rc), rc, *why ? ": " : "",
               why);
  die(p, 1);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"synth: synthetic checkpoint benchmark [John24 §8.2.3.1, Listing 8.1]"};
  std::string cfg_path;
  std::vector<std::string> sets;
  bool force_mpi = false, no_mpi = false, quiet = false;
  app.add_option("config", cfg_path, "YAML configuration (keys of Listing 8.1)")->check(CLI::ExistingFile);
  app.add_option("-s,--set", sets, "override a configuration key: KEY=VALUE (repeatable)");
  auto* om = app.add_flag("--mpi", force_mpi, "call MPI_Init even without a launcher");
  app.add_flag("--no-mpi", no_mpi, "never call MPI_Init")->excludes(om);
  app.add_flag("-q,--quiet", quiet, "only print the final checksum line");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  Config c;
  try {
    c = load_config(cfg_path, sets);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "synth: configuration error: %s\n", e.what());
    return 2;
  }
#ifdef NO_ICHECK
  if (c.enable_ichk) {
    std::fprintf(stderr, "synth: enable_ichk is true but synth was built without iCheck "
                         "(set enable_ichk: false)\n");
    return 3;
  }
#endif

  Par par;
#ifdef SYNTH_HAVE_MPI
  par.mpi = !no_mpi && (force_mpi || launched_by_mpiexec());
  if (par.mpi) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &par.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &par.size);
  }
#else
  if (force_mpi) {
    std::fprintf(stderr, "synth: built without MPI\n");
    return 2;
  }
#endif
  const bool say = !quiet && par.rank == 0;
  if (c.is_invasive && par.rank == 0)
    std::fprintf(stderr, "synth: is_invasive: iMPI is not available; running the non-invasive "
                         "benchmark [John24 §8.2.3.1]\n");

  const std::size_t es = type_size(c.cp_type);
  // cp_global: this rank's BLOCK of the global array (first G % size ranks one more)
  const std::uint64_t R = std::uint64_t(par.rank), S = std::uint64_t(par.size), G = c.cp_global;
  const std::uint64_t n_local = G ? G / S + (R < G % S ? 1 : 0) : c.cp_size;
  const std::uint64_t g0 = G ? R * (G / S) + std::min(R, G % S) : 0;
  const std::uint64_t bytes = n_local * es;
  std::vector<double> storage((bytes + 7) / 8 + 1);  // 8-byte aligned for every type, never empty
  void* data = storage.data();
  init_data(c.cp_type, data, n_local, G ? 0 : par.rank, g0);
  int iter_done = 0;  // completed iterations; checkpointed as label "iteration"
  bool restarted = false;

  if (say)
    std::printf("synth: ranks=%d cp_size=%" PRIu64 " cp_type=%s bytes_per_rank=%" PRIu64
                " cp_interval=%s cp_count=%" PRIu64 " cp_mpiio=%d enable_ichk=%d fault_inject=%s "
                "probe_interval=%s\n",
                par.size, n_local, c.cp_type.c_str(), bytes, c.cp_interval.str().c_str(),
                c.cp_count, c.cp_mpiio ? 1 : 0, c.enable_ichk ? 1 : 0,
                c.fault_inject.str().c_str(), c.probe_interval.str().c_str());

#ifndef NO_ICHECK
  if (c.enable_ichk) {
    int status = ICHECK_STATUS_NEW;
    const void* comm = nullptr;
#ifdef SYNTH_HAVE_MPI
    MPI_Comm world = MPI_COMM_WORLD;
    if (par.mpi) comm = ICHECK_COMM(world);
#endif
    const double t0 = now_s();
    check_ic(par, icheck_init(c.icheck_config.empty() ? nullptr : c.icheck_config.c_str(),
                              c.app_name.c_str(), comm, &status),
             "icheck_init");
    if (G) {  // one global array: restartable on any rank count [John24 §7.4.1]
      check_ic(par, icheck_add_adapt_global("array", data, ichk_type(c.cp_type), G, ICHECK_BLOCK, size_t(1)), "add array");
      check_ic(par, icheck_add_adapt("iteration", &iter_done, 1, ICHECK_INT, ICHECK_CONSTANT), "add iteration");
    } else {
      check_ic(par, icheck_add("array", data, c.cp_size, ichk_type(c.cp_type)), "icheck_add(array)");
      check_ic(par, icheck_add("iteration", &iter_done, 1, ICHECK_INT), "icheck_add(iteration)");
    }
    if (say)
      std::printf("synth: icheck_init mode=%s status=%s seconds=%.6f\n", icheck_mode(),
                  status == ICHECK_STATUS_RESTART ? "restart" : "new", now_s() - t0);
    if (status == ICHECK_STATUS_RESTART && c.restart) {
      const double t1 = now_s();
      // one icheck_redistribute per label [John24 §7.4.2, Listing 7.2]: this
      // rank's part straight from the agents (or the second level), on any
      // rank count in cp_global mode
      check_ic(par, icheck_redistribute("array", data, n_local), "icheck_redistribute(array)");
      check_ic(par, icheck_redistribute("iteration", &iter_done, 1), "icheck_redistribute(iteration)");
      const double dt = max_over_ranks(par, now_s() - t1);
      restarted = true;
      if (say)
        std::printf("synth: restart version=%" PRId64 " iteration=%d seconds=%.6f from_ranks=%d ranks=%d\n",
                    icheck_version(), iter_done, dt, icheck_restart_size(), par.size);
      if (iter_done < 0 || static_cast<std::uint64_t>(iter_done) > c.cp_count) {
        std::fprintf(stderr, "synth: restored iteration %d outside 0..%" PRIu64 "\n", iter_done,
                     c.cp_count);
        die(par, 1);
      }
    }
    if (c.cp_async) check_ic(par, icheck_enable_asynchronous(1), "icheck_enable_asynchronous");
  }
#endif
  if (restarted && c.fault_inject.unit != Interval::Off && say)
    std::printf("synth: restarted run: fault injection disabled\n");

  const bool timed = c.cp_interval.unit == Interval::Seconds ||
                     c.fault_inject.unit == Interval::Seconds ||
                     c.probe_interval.unit == Interval::Seconds;
  const double t_begin = now_s();
  double t_last_cp = t_begin, t_last_probe = t_begin;
  [[maybe_unused]] double last_commit_s = -1.0;
  int commits = 0;
  [[maybe_unused]] bool async_pending = false;
  enum { F_COMMIT = 1, F_PROBE = 2, F_FAULT = 4 };

  auto due = [](const Interval& iv, int done, double since) {
    if (iv.unit == Interval::Iterations) return done % static_cast<int>(iv.value) == 0;
    if (iv.unit == Interval::Seconds) return since >= iv.value;
    return false;
  };

  for (std::uint64_t it = static_cast<std::uint64_t>(iter_done); it < c.cp_count; ++it) {
#ifndef NO_ICHECK
    if (async_pending) {  // the regions may only change after the transfer (§6.1.3.3)
      check_ic(par, icheck_wait(), "icheck_wait");
      async_pending = false;
    }
#endif
    compute(c.cp_type, data, n_local, it, c.iter_passes, g0);
    iter_done = static_cast<int>(it + 1);

    int flags = 0;
    if (par.rank == 0 || !timed) {
      const double t = now_s();
      if (due(c.cp_interval, iter_done, t - t_last_cp)) flags |= F_COMMIT;
      if (due(c.probe_interval, iter_done, t - t_last_probe)) flags |= F_PROBE;
      if (!restarted) {
        if (c.fault_inject.unit == Interval::Iterations &&
            iter_done == static_cast<int>(c.fault_inject.value))
          flags |= F_FAULT;
        if (c.fault_inject.unit == Interval::Seconds && t - t_begin >= c.fault_inject.value)
          flags |= F_FAULT;
      }
    }
    if (timed) bcast_int(par, flags);

    if (flags & F_COMMIT) {
      ++commits;
#ifndef NO_ICHECK
      if (c.enable_ichk) {
        const double t0 = now_s();
        check_ic(par, icheck_commit(), "icheck_commit");
        last_commit_s = max_over_ranks(par, now_s() - t0);
        async_pending = c.cp_async;
        if (say)
          std::printf("synth: commit iteration=%d version=%" PRId64 " seconds=%.6f bytes=%" PRIu64
                      " MBps=%.1f mode=%s%s\n",
                      iter_done, icheck_version(), last_commit_s, bytes * par.size,
                      last_commit_s > 0 ? bytes * par.size / last_commit_s / 1e6 : 0.0,
                      icheck_mode(), c.cp_async ? " async" : "");
      }
#endif
      if (c.cp_mpiio) {
        const double s = write_mpiio(par, c, data, bytes);
        if (say)
          std::printf("synth: mpiio iteration=%d seconds=%.6f bytes=%" PRIu64 " MBps=%.1f\n",
                      iter_done, s, bytes * par.size, s > 0 ? bytes * par.size / s / 1e6 : 0.0);
      }
      if (!c.enable_ichk && !c.cp_mpiio && say)
        std::printf("synth: checkpoint iteration=%d skipped (enable_ichk and cp_mpiio off)\n",
                    iter_done);
      t_last_cp = now_s();
    }
    if (flags & F_PROBE) {
#ifndef NO_ICHECK
      if (c.enable_ichk) {
        icheck_hints h{last_commit_s, 0, par.size};
        int rc = icheck_probe_agents(&h);
        if (rc != ICHECK_OK && par.rank == 0)
          std::fprintf(stderr, "synth: icheck_probe_agents: %s\n", icheck_strerror(rc));
        else if (say)
          std::printf("synth: probe iteration=%d\n", iter_done);
      }
#endif
      t_last_probe = now_s();
    }
    if (flags & F_FAULT) {
      if (par.rank == 0)
        std::printf("synth: fault_inject at iteration=%d after %.3f s: SIGKILL\n", iter_done,
                    now_s() - t_begin);
      std::fflush(stdout);
      std::fflush(stderr);
      ::raise(SIGKILL);
    }
  }
#ifndef NO_ICHECK
  if (async_pending) check_ic(par, icheck_wait(), "icheck_wait");
#endif
  const double elapsed = max_over_ranks(par, now_s() - t_begin);

  // checksum over all ranks' data, combined in rank order
  std::uint64_t h = hash_bytes(static_cast<const unsigned char*>(data), bytes);
  if (G) {  // cp_global: sum over global elements, independent of the rank count
    h = 0;
    for (std::uint64_t i = 0; i < n_local; ++i) {
      std::uint64_t bits = 0;
      std::memcpy(&bits, static_cast<const char*>(data) + i * es, es);
      h += mix64(mix64(g0 + i) ^ bits);
    }
  }
  std::vector<std::uint64_t> all(static_cast<std::size_t>(par.size), h);
#ifdef SYNTH_HAVE_MPI
  if (par.mpi)
    MPI_Gather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
#endif
  std::uint64_t total = mix64(static_cast<std::uint64_t>(par.size));
  for (auto x : all) total = mix64(total ^ x);
  if (G) {
    total = 0;
    for (auto x : all) total += x;
    total = mix64(total ^ G);
  }

#ifndef NO_ICHECK
  if (c.enable_ichk) check_ic(par, icheck_finalize(c.persist ? IC_PERSIST : 0), "icheck_finalize");
#endif
  barrier(par);
  if (par.rank == 0) {
    if (!quiet)
      std::printf("synth: done seconds=%.3f commits=%d restarted=%d\n", elapsed, commits,
                  restarted ? 1 : 0);
    std::printf("synth: checksum=%016" PRIx64 " iterations=%d\n", total, iter_done);
  }
#ifdef SYNTH_HAVE_MPI
  if (par.mpi) MPI_Finalize();
#endif
  return 0;
}
