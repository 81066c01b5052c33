#include "dynres/config.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <type_traits>
#include <set>

namespace dynres {
namespace {

void check_keys(const YAML::Node& n, const std::string& section, const std::set<std::string>& known,
                const std::string& path) {
  if (!n || n.IsNull()) return;  // an empty section means "all defaults"
  if (!n.IsMap()) throw ConfigError(path + ": '" + section + "' must be a mapping");
  for (auto it = n.begin(); it != n.end(); ++it) {
    auto k = it->first.as<std::string>();
    if (!known.count(k))
      throw ConfigError(path + ": unknown key '" + (section.empty() ? k : section + "." + k) + "'");
  }
}

template <class T>
T get(const YAML::Node& n, const char* key, T def, const std::string& where, const std::string& path) {
  if (!n || !n.IsMap() || !n[key]) return def;
  T v;
  try {
    v = n[key].as<T>();
  } catch (const YAML::Exception&) {
    throw ConfigError(path + ": bad value for '" + where + "." + key + "'");
  }
  if constexpr (std::is_floating_point_v<T>) {
    // .nan, .inf and 1e400 parse as doubles; no setting here means them
    if (!std::isfinite(v))
      throw ConfigError(path + ": '" + where + "." + key + "' must be a finite number, not " + n[key].as<std::string>());
  }
  return v;
}

/// scheduler.malleable: parameters of the malleable policies (dynres.yaml(5)).
void load_malleable(const YAML::Node& m, sched::PolicyConfig& pc, const std::string& path) {
  const std::string w = "scheduler.malleable";
  check_keys(m, w, {"management", "step", "min_remaining", "min_resize_interval", "grow_when_held", "mtct_threshold",
                 "backfill", "start_at_minimum", "grow_cost", "grow_at_start"},
             path);
  auto mg = get<std::string>(m, "management", pc.management == sched::Management::prma ? "prma" : "pwma", w, path);
  if (mg != "prma" && mg != "pwma") throw ConfigError(path + ": " + w + ".management must be prma or pwma");
  pc.management = mg == "prma" ? sched::Management::prma : sched::Management::pwma;
  auto st = get<std::string>(m, "step", pc.step == sched::Step::one ? "one" : "greedy", w, path);
  if (st != "one" && st != "greedy") throw ConfigError(path + ": " + w + ".step must be one or greedy");
  pc.step = st == "one" ? sched::Step::one : sched::Step::greedy;
  pc.min_remaining = get<double>(m, "min_remaining", pc.min_remaining, w, path);
  if (!(pc.min_remaining >= 0)) throw ConfigError(path + ": " + w + ".min_remaining must be >= 0 seconds");
  pc.min_resize_interval = get<double>(m, "min_resize_interval", pc.min_resize_interval, w, path);
  if (!(pc.min_resize_interval >= 0)) throw ConfigError(path + ": " + w + ".min_resize_interval must be >= 0 seconds");
  pc.grow_when_held = get<bool>(m, "grow_when_held", pc.grow_when_held, w, path);
  pc.grow_cost = get<double>(m, "grow_cost", pc.grow_cost, w, path);
  if (!(pc.grow_cost >= 0)) throw ConfigError(path + ": " + w + ".grow_cost must be >= 0 seconds");
  pc.backfill = get<bool>(m, "backfill", pc.backfill, w, path);
  pc.start_at_minimum = get<bool>(m, "start_at_minimum", pc.start_at_minimum, w, path);
  pc.grow_at_start = get<bool>(m, "grow_at_start", pc.grow_at_start, w, path);
  pc.mtct_threshold = get<double>(m, "mtct_threshold", pc.mtct_threshold, w, path);
  if (!(pc.mtct_threshold >= 0)) throw ConfigError(path + ": " + w + ".mtct_threshold must be >= 0");
}

/// scheduler.icheck: iCheck-aware scheduling [John24 §7.3.2.2] (dynres.yaml(5)).
void load_icheck(const YAML::Node& m, Config& c, const std::string& path) {
  const std::string w = "scheduler.icheck";
  check_keys(m, w, {"favour", "reclaim_free", "status_timeout", "reclaim_backoff", "reclaim_backoff_max"}, path);
  auto f = get<std::string>(m, "favour", sched::to_string(c.policy.icheck_favour), w, path);
  auto fv = sched::parse_icheck_favour(f);
  if (!fv) throw ConfigError(path + ": unknown " + w + ".favour '" + f + "' (icheck|applications)");
  c.policy.icheck_favour = *fv;
  c.policy.icheck_reclaim_free = get<double>(m, "reclaim_free", c.policy.icheck_reclaim_free, w, path);
  if (!(c.policy.icheck_reclaim_free >= 0 && c.policy.icheck_reclaim_free < 1))
    throw ConfigError(path + ": " + w + ".reclaim_free must be a fraction in [0, 1)");
  c.icheck_status_timeout = get<double>(m, "status_timeout", c.icheck_status_timeout, w, path);
  if (!(c.icheck_status_timeout > 0 && c.icheck_status_timeout <= 86400))
    throw ConfigError(path + ": " + w + ".status_timeout must be in (0, 86400] seconds");
  c.icheck_reclaim_backoff = get<double>(m, "reclaim_backoff", c.icheck_reclaim_backoff, w, path);
  c.icheck_reclaim_backoff_max = get<double>(m, "reclaim_backoff_max", c.icheck_reclaim_backoff_max, w, path);
  if (!(c.icheck_reclaim_backoff > 0 && c.icheck_reclaim_backoff <= c.icheck_reclaim_backoff_max &&
        c.icheck_reclaim_backoff_max <= 86400))
    throw ConfigError(path + ": need 0 < " + w + ".reclaim_backoff <= " + w + ".reclaim_backoff_max <= 86400 seconds");
}

/// scheduler.power: parameters of the power policy (dynres.yaml(5)).
void load_power(const YAML::Node& m, sched::PolicyConfig& pc, const std::string& path) {
  const std::string w = "scheduler.power";
  check_keys(m, w,
             {"mode", "favour_malleable", "max_tries", "ilp_jobs", "ilp_steps", "pass_steps", "forecast_interval",
              "forecast_window", "ilp_time_limit", "pass_budget"},
             path);
  // the wall-clock bounds are gone: a pass is bounded by problem size and lp_solve steps (deterministic)
  for (const char* k : {"ilp_time_limit", "pass_budget"})
    if (m[k])
      throw ConfigError(path + ": " + w + "." + k +
                        " is no longer read: the power pass is bounded by ilp_jobs, ilp_steps and pass_steps "
                        "(lp_solve steps, not seconds), so its decisions do not depend on the machine's speed");
  auto mode = sched::parse_power_mode(get<std::string>(m, "mode", sched::to_string(pc.power_mode), w, path));
  if (!mode) throw ConfigError(path + ": " + w + ".mode must be aware, runtime, proactive or reactive");
  pc.power_mode = *mode;
  pc.power_forecast_interval = get<double>(m, "forecast_interval", pc.power_forecast_interval, w, path);
  if (!(pc.power_forecast_interval >= 0.01 && pc.power_forecast_interval <= 3600))
    throw ConfigError(path + ": " + w + ".forecast_interval must be between 0.01 and 3600 seconds");
  pc.power_forecast_window = get<int>(m, "forecast_window", pc.power_forecast_window, w, path);
  if (pc.power_forecast_window < 12 || pc.power_forecast_window > 1000)
    throw ConfigError(path + ": " + w + ".forecast_window must be between 12 and 1000 points");
  pc.power_favour_malleable = get<bool>(m, "favour_malleable", pc.power_favour_malleable, w, path);
  pc.power_max_tries = get<int>(m, "max_tries", pc.power_max_tries, w, path);
  if (pc.power_max_tries < 1 || pc.power_max_tries > 64)
    throw ConfigError(path + ": " + w + ".max_tries must be between 1 and 64");
  pc.power_ilp_jobs = get<int>(m, "ilp_jobs", pc.power_ilp_jobs, w, path);
  if (pc.power_ilp_jobs < 1 || pc.power_ilp_jobs > 4096)
    throw ConfigError(path + ": " + w + ".ilp_jobs must be between 1 and 4096");
  pc.power_ilp_steps = get<long>(m, "ilp_steps", pc.power_ilp_steps, w, path);
  if (pc.power_ilp_steps < 100 || pc.power_ilp_steps > 100000000)
    throw ConfigError(path + ": " + w + ".ilp_steps must be between 100 and 100000000 lp_solve steps");
  pc.power_pass_steps = get<long>(m, "pass_steps", pc.power_pass_steps, w, path);
  if (pc.power_pass_steps < 100 || pc.power_pass_steps > 1000000000)
    throw ConfigError(path + ": " + w + ".pass_steps must be between 100 and 1000000000 lp_solve steps");
}

/// scheduler.slow_nodes: migration off slow nodes (dynres.yaml(5), [HoG14 §5.5.1]).
void load_slow_nodes(const YAML::Node& m, sched::SlowNodeConfig& sc, const std::string& path) {
  const std::string w = "scheduler.slow_nodes";
  check_keys(m, w, {"enabled", "factor", "windows", "window", "cooldown", "restart_cost"}, path);
  sc.enabled = get<bool>(m, "enabled", sc.enabled, w, path);
  sc.factor = get<double>(m, "factor", sc.factor, w, path);
  if (!(sc.factor > 1 && sc.factor <= 100)) throw ConfigError(path + ": " + w + ".factor must be in (1, 100]");
  sc.windows = get<int>(m, "windows", sc.windows, w, path);
  if (sc.windows < 1 || sc.windows > 100) throw ConfigError(path + ": " + w + ".windows must be between 1 and 100");
  sc.window = get<double>(m, "window", sc.window, w, path);
  if (!(sc.window >= 0.1 && sc.window <= 3600))
    throw ConfigError(path + ": " + w + ".window must be between 0.1 and 3600 seconds");
  sc.cooldown = get<double>(m, "cooldown", sc.cooldown, w, path);
  if (!(sc.cooldown >= 0 && sc.cooldown <= 86400))
    throw ConfigError(path + ": " + w + ".cooldown must be between 0 and 86400 seconds");
  sc.restart_cost = get<double>(m, "restart_cost", sc.restart_cost, w, path);
  if (!(sc.restart_cost >= 0 && sc.restart_cost <= 86400))
    throw ConfigError(path + ": " + w + ".restart_cost must be between 0 and 86400 seconds");
}

}  // namespace

Config load_config(const std::string& path) {
  Config c;
  std::ifstream probe(path);
  if (!probe) return c;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ": " + e.what());
  }
  if (!root || root.IsNull()) return c;
  if (!root.IsMap()) throw ConfigError(path + ": top level must be a mapping");
  check_keys(root, "", {"scheduler", "launcher", "power", "icheck", "nodes"}, path);
  auto s = root["scheduler"];
  check_keys(s, "scheduler", {"policy", "tick", "min_interval", "default_time_limit", "kill_wait", "malleable", "resize", "power",
                                  "icheck", "slow_nodes"},
             path);
  auto pol = get<std::string>(s, "policy", sched::to_string(c.policy.policy), "scheduler", path);
  auto p = sched::parse_policy(pol);
  if (!p)
    throw ConfigError(path + ": unknown scheduler.policy '" + pol + "' (fcfs|backfill|easy|fpsma|egs|minagree|perf|power)");
  c.policy.policy = *p;
  load_malleable(s ? s["malleable"] : YAML::Node(), c.policy, path);
  load_power(s ? s["power"] : YAML::Node(), c.policy, path);
  load_icheck(s ? s["icheck"] : YAML::Node(), c, path);
  c.tick = get<double>(s, "tick", c.tick, "scheduler", path);
  if (!(c.tick > 0 && c.tick <= 3600)) throw ConfigError(path + ": scheduler.tick must be in (0, 3600] seconds");
  c.min_interval = get<double>(s, "min_interval", c.min_interval, "scheduler", path);
  if (!(c.min_interval >= 0 && c.min_interval <= 60))
    throw ConfigError(path + ": scheduler.min_interval must be in [0, 60] seconds");
  c.policy.default_time_limit = get<double>(s, "default_time_limit", c.policy.default_time_limit, "scheduler", path);
  if (!(c.policy.default_time_limit > 0 && c.policy.default_time_limit <= 1e9))
    throw ConfigError(path + ": scheduler.default_time_limit must be in (0, 1e9] seconds");
  c.kill_wait = get<double>(s, "kill_wait", c.kill_wait, "scheduler", path);
  if (!(c.kill_wait >= 0 && c.kill_wait <= 86400)) throw ConfigError(path + ": scheduler.kill_wait must be in [0, 86400] seconds");
  auto rz = s ? s["resize"] : YAML::Node();
  check_keys(rz, "scheduler.resize", {"timeout", "backoff", "restart_timeout", "shrink_by_count"}, path);
  const std::string rw = "scheduler.resize";
  c.resize_timeout = get<double>(rz, "timeout", c.resize_timeout, rw, path);
  c.resize_backoff = get<double>(rz, "backoff", c.resize_backoff, rw, path);
  c.resize_restart_timeout = get<double>(rz, "restart_timeout", c.resize_restart_timeout, rw, path);
  c.resize_shrink_by_count = get<bool>(rz, "shrink_by_count", c.resize_shrink_by_count, rw, path);
  if (!(c.resize_timeout > 0 && c.resize_timeout <= 86400))
    throw ConfigError(path + ": scheduler.resize.timeout must be in (0, 86400] seconds");
  if (!(c.resize_backoff >= 0 && c.resize_backoff <= 86400))
    throw ConfigError(path + ": scheduler.resize.backoff must be in [0, 86400] seconds");
  if (!(c.resize_restart_timeout > 0 && c.resize_restart_timeout <= 86400))
    throw ConfigError(path + ": scheduler.resize.restart_timeout must be in (0, 86400] seconds");
  load_slow_nodes(s ? s["slow_nodes"] : YAML::Node(), c.slow_nodes, path);
  auto nd = root["nodes"];  // node liveness (mjnoded(8) heartbeats), as Slurm's SlurmdTimeout
  check_keys(nd, "nodes", {"timeout", "heartbeat"}, path);
  c.node_timeout = get<double>(nd, "timeout", c.node_timeout, "nodes", path);
  c.node_heartbeat = get<double>(nd, "heartbeat", c.node_heartbeat, "nodes", path);
  if (!(c.node_timeout >= 0 && c.node_timeout <= 86400))
    throw ConfigError(path + ": nodes.timeout must be in [0, 86400] seconds (0: nodes not watched)");
  if (!(c.node_heartbeat > 0 && c.node_heartbeat <= 3600))
    throw ConfigError(path + ": nodes.heartbeat must be in (0, 3600] seconds");
  if (c.node_timeout > 0 && c.node_timeout < 2 * c.node_heartbeat)
    throw ConfigError(path + ": nodes.timeout must be at least twice nodes.heartbeat");
  auto l = root["launcher"];
  check_keys(l, "launcher", {"type"}, path);
  c.launcher = get<std::string>(l, "type", c.launcher, "launcher", path);
  if (c.launcher != "local" && c.launcher != "srun")
    throw ConfigError(path + ": unknown launcher.type '" + c.launcher + "' (local|srun)");
  return c;
}

}  // namespace dynres
