#include "dynres/icheck/config.hpp"

#include <fnmatch.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace dynres::icheck {

namespace {
template <class T>
void get(const YAML::Node& n, const char* key, T& out) {
  if (n[key]) out = n[key].as<T>();
}
std::string resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p[0] == '/' || base_dir.empty()) return p;
  return (fs::path(base_dir) / p).lexically_normal().string();
}
std::string home() {
  const char* h = std::getenv("DYNRES_HOME");
  return h ? h : "";
}
}  // namespace

DynamicConfig load_dynamic(const std::string& path, DynamicConfig d) {
  if (path.empty() || !fs::exists(path)) return d;
  try {
    YAML::Node n = YAML::LoadFile(path);
    get(n, "read_interval", d.read_interval);
    get(n, "max_agents_node", d.max_agents_node);
    get(n, "max_agents_app", d.max_agents_app);
    get(n, "max_agents_user", d.max_agents_user);
    get(n, "max_mem_node", d.max_mem_node_gb);
    if (n["init_agent_count"]) {
      auto s = n["init_agent_count"].as<std::string>();
      if (s == "num_nodes") {
        d.init_agent_count = 0;
      } else {
        char* end = nullptr;
        errno = 0;
        long v = std::strtol(s.c_str(), &end, 10);
        if (s.empty() || *end || errno || v < 1 || v > 1000000)
          throw std::runtime_error("init_agent_count must be num_nodes or an integer in [1, 1000000], not '" +
                                   s.substr(0, 40) + "'");
        d.init_agent_count = int(v);
      }
    }
    get(n, "factor", d.factor);
    get(n, "candidate_count", d.candidate_count);
    get(n, "node_selection", d.node_selection);
    get(n, "distribution", d.distribution);
    get(n, "block_size", d.block_size);
    get(n, "is_dynamic_as", d.is_dynamic_as);
    get(n, "is_dynamic_hs", d.is_dynamic_hs);
    get(n, "enable_multi_level", d.enable_multi_level);
    get(n, "pfs_every", d.pfs_every);
    get(n, "max_cp_size_mb", d.compress_threshold_mb);
    get(n, "strategy", d.strategy);
    get(n, "transfer", d.transfer);
    get(n, "chunk_mb", d.chunk_mb);
    get(n, "buffer_mb", d.buffer_mb);
    get(n, "zero_copy", d.zero_copy);
    get(n, "keep_versions", d.keep_versions);
    get(n, "force_config", d.force_config);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
  if (d.factor <= 1) d.factor = 2;
  if (d.pfs_every < 1) d.pfs_every = 1;
  // counts and sizes the controller and agents rely on
  auto range = [&](const char* key, double v, double lo, double hi) {
    if (!(v >= lo && v <= hi)) {  // also NaN
      std::ostringstream m;
      m << path << ": " << key << " must be in [" << lo << ", " << hi << "], not " << v;
      throw std::runtime_error(m.str());
    }
  };
  range("max_agents_node", d.max_agents_node, 1, 100000);
  range("max_agents_app", d.max_agents_app, 1, 100000);
  range("max_agents_user", d.max_agents_user, 1, 100000);
  range("candidate_count", d.candidate_count, 1, 100000);
  range("block_size", d.block_size, 0, 100000);
  range("keep_versions", d.keep_versions, 1, 1000000);
  range("factor", d.factor, 1, 1000);
  range("read_interval", d.read_interval, 0.01, 1e7);
  range("max_mem_node", d.max_mem_node_gb, 0, 1e7);
  range("max_cp_size_mb", d.compress_threshold_mb, 0, 1e12);
  range("chunk_mb", d.chunk_mb, 1.0 / 1024, 1e6);
  range("buffer_mb", d.buffer_mb, 1.0 / 1024, 1e7);
  return d;
}

StaticConfig load_static(const std::string& path) {
  StaticConfig c;
  c.path = path;
  std::string dir;
  if (!path.empty()) {
    if (!fs::exists(path)) throw std::runtime_error(path + ": no such configuration file");
    dir = fs::absolute(path).parent_path().string();
    try {
      YAML::Node n = YAML::LoadFile(path);
      if (n["controller"]) c.controllers.push_back(n["controller"].as<std::string>());
      if (n["controller_standby"]) c.controllers.push_back(n["controller_standby"].as<std::string>());
      if (n["managers"])
        for (auto m : n["managers"]) c.managers.push_back(m.as<std::string>());
      if (n["agents"])
        for (auto m : n["agents"]) c.agents.push_back(m.as<std::string>());
      get(n, "heartbeat_interval", c.heartbeat_interval);
      get(n, "status_interval", c.status_interval);
      get(n, "heartbeat_misses", c.heartbeat_misses);
      get(n, "manager_launch", c.manager_launch);
      get(n, "manager_relaunch_attempts", c.manager_relaunch_attempts);
      get(n, "manager_relaunch_reset", c.manager_relaunch_reset);
      get(n, "irm_node", c.irm_node);
      get(n, "irm_port", c.irm_port);
      get(n, "state_file", c.state_file);
      get(n, "pfs_dir", c.pfs_dir);
      get(n, "run_dir", c.run_dir);
      get(n, "dynamic_config", c.dynamic_file);
      get(n, "connect_retries", c.connect_retries);
      get(n, "connect_timeout_ms", c.connect_timeout_ms);
      get(n, "request_timeout_ms", c.request_timeout_ms);
      get(n, "hello_timeout_ms", c.hello_timeout_ms);
      get(n, "direct", c.direct);
      if (auto sc = n["scheduler"]) {
        get(sc, "socket", c.scheduler_socket);
        get(sc, "scaler_interval", c.scaler_interval);
        get(sc, "lower", c.scaler_lower);
        get(sc, "upper", c.scaler_upper);
        get(sc, "depletion_rate", c.scaler_depletion_rate);
        get(sc, "bw_threshold", c.scaler_bw_threshold);
        get(sc, "cp_threshold", c.scaler_cp_threshold);
        get(sc, "min_nodes", c.scaler_min_nodes);
        get(sc, "max_nodes", c.scaler_max_nodes);
        get(sc, "release_below", c.scaler_release_below);
        get(sc, "release_after", c.scaler_release_after);
      }
      if (auto ml = n["malleability"]) {
        get(ml, "agents", c.agents_mode);
        if (auto apps = ml["applications"]) {
          if (!apps.IsMap()) throw std::runtime_error("malleability.applications must map application names to ma-ra|ma-ma");
          for (auto it : apps) c.agents_modes[it.first.as<std::string>()] = it.second.as<std::string>();
        }
      }
      if (n["transport"]) {
        get(n["transport"], "provider", c.provider);
        get(n["transport"], "node", c.fabric_node);
      }
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
    if (c.manager_relaunch_attempts < 0)
      throw std::runtime_error(path + ": manager_relaunch_attempts must be >= 0, got " +
                               std::to_string(c.manager_relaunch_attempts));
    if (c.hello_timeout_ms < 1 || c.hello_timeout_ms > 600000)
      throw std::runtime_error(path + ": hello_timeout_ms must be in [1, 600000] ms, got " +
                               std::to_string(c.hello_timeout_ms));
    if (c.heartbeat_interval <= 0 || c.heartbeat_misses < 1)
      throw std::runtime_error(path + ": heartbeat_interval must be > 0 and heartbeat_misses >= 1");
    if (!(c.status_interval > 0 && c.status_interval <= 3600) || !(c.scaler_interval > 0 && c.scaler_interval <= 3600))
      throw std::runtime_error(path + ": status_interval and scheduler.scaler_interval must be in (0, 3600] seconds");
    if (!(c.scaler_lower >= 0 && c.scaler_lower <= c.scaler_upper && c.scaler_upper <= 1))
      throw std::runtime_error(path + ": need 0 <= scheduler.lower <= scheduler.upper <= 1 (fractions of a node's memory)");
    if (!(c.scaler_depletion_rate >= 0) || !(c.scaler_bw_threshold >= 0) || !(c.scaler_cp_threshold >= 0))
      throw std::runtime_error(path + ": scheduler.depletion_rate, bw_threshold and cp_threshold must be >= 0");
    if (!(c.scaler_release_below >= 0 && c.scaler_release_below <= c.scaler_lower) ||
        !(c.scaler_release_after >= 0 && c.scaler_release_after <= 86400))
      throw std::runtime_error(path + ": need 0 <= scheduler.release_below <= scheduler.lower (fractions of a node's "
                                      "memory) and scheduler.release_after in [0, 86400] seconds");
    if (c.scaler_min_nodes < 0 || c.scaler_max_nodes < 0 || c.scaler_max_nodes > 4096 ||
        (c.scaler_max_nodes > 0 && c.scaler_max_nodes < c.scaler_min_nodes))
      throw std::runtime_error(path + ": need 0 <= scheduler.min_nodes <= scheduler.max_nodes <= 4096");
    auto mode_ok = [](const std::string& m) { return m == "ma-ra" || m == "ma-ma"; };
    if (!mode_ok(c.agents_mode))
      throw std::runtime_error(path + ": malleability.agents must be ma-ra or ma-ma, not '" + c.agents_mode.substr(0, 40) + "'");
    for (auto& [app, m] : c.agents_modes)
      if (!mode_ok(m))
        throw std::runtime_error(path + ": malleability.applications." + app.substr(0, 40) + " must be ma-ra or ma-ma, not '" +
                                 m.substr(0, 40) + "'");
  }
  std::string h = home();
  auto dflt = [&](std::string& v, const char* sub) {
    if (v.empty() && !h.empty()) v = (fs::path(h) / sub).string();
    v = resolve(dir, v);
  };
  dflt(c.state_file, "state.db");
  dflt(c.pfs_dir, "pfs");
  dflt(c.run_dir, "icheck");
  dflt(c.dynamic_file, "icheck-dynamic.yaml");
  if (!c.scheduler_socket.empty()) c.scheduler_socket = resolve(dir, c.scheduler_socket);
  for (auto& a : c.controllers)
    if (a.rfind("unix:", 0) == 0 && a.size() > 5 && a[5] != '/') a = "unix:" + resolve(dir, a.substr(5));
  for (auto& a : c.agents)
    if (a.rfind("unix:", 0) == 0 && a.size() > 5 && a[5] != '/') a = "unix:" + resolve(dir, a.substr(5));
  c.dyn = load_dynamic(c.dynamic_file);
  if (const char* e = std::getenv("ICHECK_PROVIDER")) c.provider = e;
  if (const char* e = std::getenv("ICHECK_TRANSFER")) c.dyn.transfer = e;
  if (const char* e = std::getenv("ICHECK_STRATEGY"); e && *e) c.dyn.strategy = e;
  if (const char* e = std::getenv("ICHECK_PFS_DIR")) c.pfs_dir = e;
  if (const char* e = std::getenv("ICHECK_ZERO_COPY"); e && *e) c.dyn.zero_copy = std::string(e) != "0";
  return c;
}

namespace {
/// `s` as one word for /bin/sh: single quotes, embedded ' written as '\''.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}
void replace_all(std::string& s, const std::string& what, const std::string& with) {
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + with.size())) s.replace(p, what.size(), with);
}
}  // namespace

std::string manager_launch_command(const StaticConfig& cfg, const std::string& node) {
  if (cfg.manager_launch.empty()) return "";
  std::string cmd = cfg.manager_launch;
  replace_all(cmd, "{node}", shell_quote(node));
  replace_all(cmd, "{config}", shell_quote(cfg.path.empty() ? "" : fs::absolute(cfg.path).lexically_normal().string()));
  return cmd;
}

const std::string& agents_mode_of(const StaticConfig& cfg, const std::string& app) {
  auto it = cfg.agents_modes.find(app);
  if (it != cfg.agents_modes.end()) return it->second;
  for (auto& [pattern, mode] : cfg.agents_modes)  // shell patterns: "heat-*" (heat-malleable.sh's heat-JOBID)
    if (::fnmatch(pattern.c_str(), app.c_str(), 0) == 0) return mode;
  return cfg.agents_mode;
}

std::string resolve_config_path(const char* explicit_path) {
  if (explicit_path && *explicit_path) return explicit_path;
  if (const char* e = std::getenv("ICHECK_CONFIG"); e && *e) return e;
  std::string h = home();
  if (!h.empty() && fs::exists(fs::path(h) / "icheck.yaml")) return (fs::path(h) / "icheck.yaml").string();
  return "";
}

}  // namespace dynres::icheck
