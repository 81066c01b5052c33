// Powercap RAPL reader and the modelled source [John24 §5.1.3].
#include "dynres/power_source.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace dynres::power {

namespace {
/// Read a small sysfs file; "" and err set on failure.
std::string read_small(const fs::path& p, std::string& err) {
  errno = 0;
  std::ifstream f(p);
  if (!f) {
    int e = errno;
    err = p.string() + ": " + (e ? std::strerror(e) : "cannot open");
    if (e == EACCES || e == EPERM)
      err += " (RAPL energy counters are readable only by root since Linux 5.10, CVE-2020-8694; run as root or "
             "grant read access to energy_uj)";
    return "";
  }
  std::string s;
  std::getline(f, s);
  if (f.bad() || (!f.eof() && f.fail())) {
    err = p.string() + ": read failed (" + std::strerror(errno ? errno : EIO) + ")";
    return "";
  }
  return s;
}

bool parse_u64(const std::string& s, uint64_t& v) {
  auto b = s.data(), e = s.data() + s.size();
  while (e > b && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\r' || e[-1] == '\t')) --e;
  if (b == e) return false;
  auto r = std::from_chars(b, e, v, 10);
  return r.ec == std::errc() && r.ptr == e;
}
}  // namespace

RaplSnapshot rapl_read(const std::string& root, double time) {
  RaplSnapshot snap;
  snap.time = time;
  std::error_code ec;
  fs::directory_iterator it(root, ec);
  if (ec) throw RaplError("powercap root " + root + ": " + ec.message() + " (no RAPL support here?)");
  std::vector<std::string> dirs;
  for (auto& de : it) {
    auto n = de.path().filename().string();
    if (n.rfind("intel-rapl:", 0) == 0 || n.rfind("amd-rapl:", 0) == 0) dirs.push_back(n);
  }
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) throw RaplError("powercap root " + root + ": no intel-rapl:* or amd-rapl:* zone");
  for (auto& d : dirs) {
    RaplZone z;
    z.dir = d;
    fs::path p = fs::path(root) / d;
    std::string err;
    z.name = read_small(p / "name", err);
    if (!err.empty()) {
      z.error = err;
      z.kind = "other";
      snap.zones.push_back(z);
      continue;
    }
    // a sub-zone (intel-rapl:0:1) named "dram" counts; other sub-zones are inside the package
    bool sub = std::count(d.begin(), d.end(), ':') >= 2;
    if (z.name == "psys") z.kind = "psys";
    else if (z.name.rfind("dram", 0) == 0) z.kind = "dram";
    else if (!sub && z.name.rfind("package", 0) == 0) z.kind = "package";
    else z.kind = "other";
    std::string e1, e2;
    auto es = read_small(p / "energy_uj", e1);
    auto ms = read_small(p / "max_energy_range_uj", e2);
    if (!e1.empty()) z.error = e1;
    else if (!e2.empty()) z.error = e2;
    else if (!parse_u64(es, z.energy_uj)) z.error = (p / "energy_uj").string() + ": not a non-negative integer: '" + es + "'";
    else if (!parse_u64(ms, z.max_energy_range_uj) || z.max_energy_range_uj == 0)
      z.error = (p / "max_energy_range_uj").string() + ": not a positive integer: '" + ms + "'";
    else if (z.energy_uj > z.max_energy_range_uj)
      z.error = (p / "energy_uj").string() + ": " + es + " exceeds max_energy_range_uj " + ms;
    snap.zones.push_back(z);
  }
  return snap;
}

uint64_t rapl_delta_uj(uint64_t e0, uint64_t e1, uint64_t max_range) {
  if (max_range == 0) throw RaplError("max_energy_range_uj is 0");
  if (e0 > max_range || e1 > max_range)
    throw RaplError("energy counter " + std::to_string(std::max(e0, e1)) + " exceeds max_energy_range_uj " +
                    std::to_string(max_range));
  if (e1 >= e0) return e1 - e0;
  // wrapped once: from e0 up to max_range, then from 0 to e1 (no overflow:
  // max_range - e0 < max_range and e1 < e0 <= max_range)
  return (max_range - e0) + e1;
}

RaplPower rapl_power(const RaplSnapshot& a, const RaplSnapshot& b) {
  if (!(b.time > a.time)) throw RaplError("RAPL snapshots must be taken at increasing times");
  double dt = b.time - a.time;
  RaplPower p;
  int used = 0;
  std::vector<std::string> problems;
  for (auto& zb : b.zones) {
    auto za = std::find_if(a.zones.begin(), a.zones.end(), [&](const RaplZone& z) { return z.dir == zb.dir; });
    if (zb.kind == "psys") {
      p.skipped.push_back(zb.dir + " (psys: the whole platform, already includes the packages)");
      continue;
    }
    if (zb.kind == "other") continue;
    std::string err = !zb.error.empty() ? zb.error : za == a.zones.end() ? zb.dir + ": missing in the first reading" : za->error;
    if (err.empty() && za->max_energy_range_uj != zb.max_energy_range_uj) err = zb.dir + ": max_energy_range_uj changed";
    if (!err.empty()) {
      p.skipped.push_back(err);
      problems.push_back(err);
      continue;
    }
    double w = static_cast<double>(rapl_delta_uj(za->energy_uj, zb.energy_uj, zb.max_energy_range_uj)) / 1e6 / dt;
    (zb.kind == "dram" ? p.dram_watts : p.package_watts) += w;
    ++used;
  }
  if (used == 0) {
    std::string m = "no readable RAPL package or dram counter";
    for (auto& s : problems) m += "; " + s;
    throw RaplError(m);
  }
  p.watts = p.package_watts + p.dram_watts;
  return p;
}

// ---------------------------------------------------------------- modelled

PowerModel load_power_model(const std::string& path) {
  PowerModel m;
  std::ifstream probe(path);
  if (!probe) return m;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
  if (!root || !root.IsMap() || !root["power"]) return m;
  auto p = root["power"];
  if (p.IsNull()) return m;
  if (!p.IsMap()) throw std::runtime_error(path + ": power must be a mapping");
  for (auto kv : p) {
    auto k = kv.first.as<std::string>();
    if (k == "record_samples") {
      try {
        m.record_samples = kv.second.as<bool>();
      } catch (const YAML::Exception&) {
        throw std::runtime_error(path + ": power.record_samples must be true or false");
      }
      continue;
    }
    double* dst = k == "idle_watts" ? &m.idle_watts : k == "node_max_watts" ? &m.node_max_watts : nullptr;
    if (!dst) throw std::runtime_error(path + ": unknown key power." + k + " (idle_watts, node_max_watts, record_samples)");
    try {
      *dst = kv.second.as<double>();
    } catch (const YAML::Exception&) {
      throw std::runtime_error(path + ": power." + k + " must be a number of watts");
    }
    if (!(*dst >= 0) || !std::isfinite(*dst)) throw std::runtime_error(path + ": power." + k + " must be >= 0 W");
  }
  if (m.idle_watts > m.node_max_watts)
    throw std::runtime_error(path + ": power.idle_watts must not exceed power.node_max_watts");
  return m;
}

JobDraw job_draw(const std::optional<double>& min_power, const std::optional<double>& max_power,
                 const std::string& name, int nodes, const std::vector<HistoryRun>& history,
                 const PowerModel& model) {
  JobDraw d;
  if (min_power || max_power) {
    d.min_watts = min_power ? *min_power : *max_power;
    d.max_watts = max_power ? *max_power : *min_power;
    if (d.min_watts > d.max_watts) std::swap(d.min_watts, d.max_watts);
    d.source = "hint";
    return d;
  }
  bool any = false;
  for (auto& h : history)
    if (h.name == name && h.nodes == nodes) {
      d.min_watts = any ? std::min(d.min_watts, h.watts_per_node) : h.watts_per_node;
      d.max_watts = any ? std::max(d.max_watts, h.watts_per_node) : h.watts_per_node;
      any = true;
    }
  if (any) {
    d.source = "history";
    return d;
  }
  d.min_watts = model.idle_watts;
  d.max_watts = model.node_max_watts;
  d.source = "default";
  return d;
}

}  // namespace dynres::power
