// Power sources [John24 §5.1.3]: Linux powercap RAPL energy counters for
// real nodes, and a modelled draw for virtual nodes (idle watts, per-job
// per-node draw from --min-power/--max-power hints or the history of earlier
// runs of the same job name and size). Readings say which they are.
// Units: watts, joules (energy counters in microjoules), seconds.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dynres::power {

/// A RAPL reading could not be used; what() names the file and the cause.
class RaplError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One powercap zone at one instant.
struct RaplZone {
  std::string dir;        ///< directory name, e.g. "intel-rapl:0" or "intel-rapl:0:1"
  std::string name;       ///< contents of `name`: "package-0", "dram", "psys", "core" ...
  std::string kind;       ///< "package", "dram" (summed), "psys" (skipped), "other" (inside a package)
  uint64_t energy_uj = 0;        ///< energy_uj, microjoules
  uint64_t max_energy_range_uj = 0;  ///< the counter wraps to 0 after this value
  std::string error;      ///< non-empty: this zone's counter could not be read (why)
};

struct RaplSnapshot {
  double time = 0;        ///< seconds (caller's clock)
  std::vector<RaplZone> zones;
};

/// Read every zone under root (default /sys/class/powercap) whose directory is
/// intel-rapl:* or amd-rapl:* (AMD Zen registers under intel-rapl on most
/// kernels, some under amd-rapl). Unreadable counters (energy_uj is root-only
/// since Linux 5.10, CVE-2020-8694) are kept with `error` set; values are
/// range-checked (decimal, fits uint64, energy <= max_energy_range_uj).
/// Throws RaplError when root has no RAPL zone at all.
RaplSnapshot rapl_read(const std::string& root, double time);

/// Energy used between two counter values in microjoules, handling one wrap:
/// e1 >= e0: e1 - e0; else the counter wrapped at max_range: (max_range - e0) + e1.
/// Throws RaplError when a value exceeds max_range or max_range is 0.
uint64_t rapl_delta_uj(uint64_t e0, uint64_t e1, uint64_t max_range);

struct RaplPower {
  double watts = 0;          ///< package + dram, watts
  double package_watts = 0, dram_watts = 0;
  std::vector<std::string> skipped;  ///< zones left out and why (psys, unreadable)
};
/// Power between two snapshots: sum over package and dram zones of
/// delta_uj / 1e6 / (t1 - t0). psys is skipped (it already contains the
/// packages); sub-zones (core, uncore) are inside their package. Throws
/// RaplError when t1 <= t0 or no package/dram zone is readable in both
/// (the message lists each zone's problem).
RaplPower rapl_power(const RaplSnapshot& a, const RaplSnapshot& b);

// ---------------------------------------------------------------- modelled

/// Settings of the modelled source (dynres.yaml `power:` section).
struct PowerModel {
  double idle_watts = 71;       ///< power.idle_watts: an idle node (§9.2.4: 71 W)
  double node_max_watts = 250;  ///< power.node_max_watts: most a busy node draws (§9.2.4: heat, 250 W)
  /// power.record_samples: mjsched records the modelled samples under every
  /// policy while a corridor is in force (the power policy always does), so
  /// that pcorridor counts a static backfill run's violations as mjsim does.
  bool record_samples = false;
};
/// Read the `power:` section of dynres.yaml (missing file or keys: defaults).
/// Throws std::runtime_error naming the file and key for a non-number, a
/// negative value, a record_samples that is not a boolean, or idle_watts >
/// node_max_watts; unknown keys are refused.
PowerModel load_power_model(const std::string& yaml_path);

/// The per-node draw of a job and where it came from.
struct JobDraw {
  double min_watts = 0, max_watts = 0;  ///< per node
  std::string source;  ///< "hint" (--min-power/--max-power), "history" (earlier runs), "default"
};

/// One earlier run: job name, node count, average watts per node.
struct HistoryRun {
  std::string name;
  int nodes = 0;
  double watts_per_node = 0;
};

/// §5.1.3: hints first (one given: used for both); else the earlier runs
/// with the same name and node count (min and max of their averages); else
/// [idle_watts, node_max_watts].
JobDraw job_draw(const std::optional<double>& min_power, const std::optional<double>& max_power,
                 const std::string& name, int nodes, const std::vector<HistoryRun>& history,
                 const PowerModel& model);

}  // namespace dynres::power
