// The cluster configuration file dynres.yaml (see dynres.yaml(5) and the
// commented default in etc/dynres.yaml).
#pragma once
#include <stdexcept>
#include <string>

#include "dynres/sched.hpp"
#include "dynres/slow_nodes.hpp"

namespace dynres {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Config {
  sched::PolicyConfig policy;     ///< scheduler.policy, scheduler.default_time_limit
  double tick = 1.0;              ///< scheduler.tick: seconds between passes (Alg. 1)
  /// scheduler.min_interval: seconds a wake-up waits after the end of the
  /// previous pass (Slurm's sched_min_interval), so that a burst of
  /// submissions or job ends is served by one pass; a wake-up after a quiet
  /// spell runs a pass at once. The daemon also waits the last pass's own
  /// duration, so passes take at most half its time in a storm.
  double min_interval = 0.05;
  double kill_wait = 5.0;         ///< scheduler.kill_wait: seconds from SIGTERM to SIGKILL
  std::string launcher = "local"; ///< launcher.type: local | srun
  /// scheduler.resize: the live resize protocol (mjsched(8) RESIZE PROTOCOL)
  double resize_timeout = 30;          ///< seconds an order may stay unacknowledged
  double resize_backoff = 120;         ///< seconds without orders for a job after a rollback
  double resize_restart_timeout = 600; ///< seconds a restart-based resize may take after adapt-begin
  bool resize_shrink_by_count = false; ///< policy shrinks name a count; the job chooses its nodes ([Finnerty24] preShrink)
  /// nodes: liveness of the nodes' agents (mjnoded(8)), as Slurm's SlurmdTimeout.
  /// A node whose agent disconnects is DOWN at once; one whose agent sends
  /// nothing for node_timeout seconds is DOWN ("Not responding"). 0: not watched.
  double node_timeout = 0;
  double node_heartbeat = 0.5;  ///< seconds between an agent's heartbeats
  /// scheduler.icheck.status_timeout: seconds after the controller's last
  /// Status before the scheduler stops lending it nodes [John24 §7.3.1.1]
  double icheck_status_timeout = 30;
  /// scheduler.icheck.reclaim_backoff, reclaim_backoff_max: seconds before
  /// REMOVE_NODES asks again for a node the controller refused to give back,
  /// doubling while it refuses for the same reason, up to the max.
  double icheck_reclaim_backoff = 2, icheck_reclaim_backoff_max = 60;
  /// scheduler.slow_nodes: migration off slow nodes [HoG14 §5.5.1]
  /// (dynres/slow_nodes.hpp, dynres.yaml(5)).
  sched::SlowNodeConfig slow_nodes;
};

/// Load path; a missing file gives the defaults. Throws ConfigError naming
/// the file and key for malformed YAML, unknown keys, or bad values
/// (unknown policy/launcher, tick <= 0, negative kill_wait/time limit).
Config load_config(const std::string& path);

}  // namespace dynres
