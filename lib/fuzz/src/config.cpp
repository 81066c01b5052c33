// The YAML loaders on a file of the input's bytes: dynres.yaml (load_config,
// and its power section, load_power_model), icheck.yaml (load_static) and
// icheck-dynamic.yaml (load_dynamic). Oracle: errors name the file; what a
// loader accepts keeps the bounds its documentation promises (finite
// numbers, tick > 0, kill_wait >= 0, idle <= max watts, heartbeats > 0).
#include <cmath>
#include <typeinfo>

#include "common.hpp"
#include "dynres/config.hpp"
#include "dynres/fuzz.hpp"
#include "dynres/power_source.hpp"
#ifdef DYNRES_FUZZ_ICHECK
#include "dynres/icheck/config.hpp"
#endif

namespace dynres::fuzz {

using detail::require;

namespace {
template <class F>
bool load(const char* what, const std::string& path, F&& f) {
  try {
    f();
    return true;
  } catch (const std::runtime_error& e) {
    detail::require_named(e, path, what);
  } catch (const std::exception& e) {
    throw Violation(std::string(what) + ": not a runtime_error: " + typeid(e).name() + ": " + e.what());
  }
  return false;
}
bool finite_ge(double v, double lo) { return std::isfinite(v) && v >= lo; }
}  // namespace

void config(const uint8_t* data, size_t size) {
  const std::string path = detail::write_input("config.yaml", data, size);
  Config c;
  if (load("load_config", path, [&] { c = load_config(path); })) {
    require(finite_ge(c.tick, 0) && c.tick > 0, "load_config accepted tick " + std::to_string(c.tick));
    require(finite_ge(c.kill_wait, 0), "load_config accepted kill_wait " + std::to_string(c.kill_wait));
    require(finite_ge(c.policy.default_time_limit, 0) || c.policy.default_time_limit == -1,
            "load_config accepted default_time_limit " + std::to_string(c.policy.default_time_limit));
    for (double v : {c.resize_timeout, c.resize_backoff, c.resize_restart_timeout})
      require(finite_ge(v, 0), "load_config accepted a resize time of " + std::to_string(v));
  }
  power::PowerModel m;
  if (load("load_power_model", path, [&] { m = power::load_power_model(path); })) {
    require(finite_ge(m.idle_watts, 0) && finite_ge(m.node_max_watts, 0) && m.idle_watts <= m.node_max_watts,
            "load_power_model accepted idle " + std::to_string(m.idle_watts) + " W, max " +
                std::to_string(m.node_max_watts) + " W");
  }
#ifdef DYNRES_FUZZ_ICHECK
  icheck::StaticConfig s;
  if (load("load_static", path, [&] { s = icheck::load_static(path); })) {
    require(finite_ge(s.heartbeat_interval, 0) && s.heartbeat_interval > 0 && s.heartbeat_misses >= 1,
            "load_static accepted heartbeat_interval " + std::to_string(s.heartbeat_interval));
    require(s.manager_relaunch_attempts >= 0, "load_static accepted negative manager_relaunch_attempts");
  }
  load("load_dynamic", path, [&] { icheck::load_dynamic(path); });
#endif
}

}  // namespace dynres::fuzz
