// iCheck configuration [John24 §6.3.6].
//
// Static file (Listing 6.3; read once): addresses of the controller(s),
// managers, heartbeat/status intervals, the second-level directory, the
// transport. Dynamic file (Listing 6.2; re-read every read_interval seconds
// by the controller): agent limits, Alg. 5/6 parameters, transfer technique,
// multilevel schedule and compression threshold. Both are YAML; see
// icheck.yaml(5) and etc/icheck.yaml, etc/icheck-dynamic.yaml.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dynres::icheck {

/// Listing 6.2 (dynamic configuration). Units in the member comments.
struct DynamicConfig {
  double read_interval = 30;      ///< s, re-read period of this file
  int max_agents_node = 80;       ///< agents per checkpoint node (fill-to-completion capacity)
  int max_agents_app = 80;        ///< agents per application
  int max_agents_user = 32;       ///< agents of one user's applications together (one user cannot fill the nodes)
  double max_mem_node_gb = 90;    ///< GB an iCheck node may use for checkpoints
  int init_agent_count = 0;       ///< 0 = num_nodes (Alg. 5 line 16), else fixed
  double factor = 2;              ///< Alg. 5 growth/back-off factor
  int candidate_count = 5;        ///< Alg. 6 candidate_num
  std::string node_selection = "memory";  ///< memory|bandwidth|frequency|power (Alg. 6 l. 8-15)
  std::string distribution = "roundrobin"; ///< block|roundrobin|fill (Alg. 6 l. 26-35)
  int block_size = 0;             ///< agents per node for block; 0 = even split
  bool is_dynamic_as = true;      ///< agent scaling on probe (Alg. 5)
  bool is_dynamic_hs = true;      ///< horizontal scaling (needs a malleable RM; recorded only)
  bool enable_multi_level = true; ///< write the second level (§6.2.5)
  int pfs_every = 1;              ///< write every k-th committed version to the second level
  double compress_threshold_mb = 1024; ///< zstd-compress regions larger than this (MiB)
  std::string strategy = "mr";    ///< mr|shmr (§6.2.1/6.2.2)
  std::string transfer = "pull";  ///< pull|push (§6.2)
  double chunk_mb = 16;           ///< pipeline chunk (MiB, §6.2.3.1)
  double buffer_mb = 1024;        ///< library RMA buffer cap per process (MiB)
  /// Blocking commits register the application's regions with libfabric
  /// once and move them by RMA straight into the agent's buffer (no staging
  /// copy in the library; §6.2.3.1). false: always stage through the
  /// library buffer. Env ICHECK_ZERO_COPY=0|1 overrides.
  bool zero_copy = true;
  int keep_versions = 2;          ///< second-level versions kept
  bool force_config = false;      ///< ignore application hints
};

/// Listing 6.3 (static configuration).
struct StaticConfig {
  std::string path;                       ///< file this was read from ("" = defaults)
  std::vector<std::string> controllers;   ///< primary first, then standby (ControllerAddress:ControllerPort)
  std::vector<std::string> managers;      ///< iCheckManagerNode labels (informational)
  double heartbeat_interval = 5;          ///< s (HeartBeatInterval)
  double status_interval = 5;             ///< s (StatusMessageInterval)
  int heartbeat_misses = 3;               ///< missed heartbeats before a node is lost (relaunch or down)
  /// §6.5.2-6.5.3: command template that (re)starts the manager of a node,
  /// run as /bin/sh -c "exec ..." in its own session; "{node}" and "{config}" become the
  /// shell-quoted node label and absolute path of this file (see
  /// manager_launch_command). "" = no relaunch: a silent node is marked down.
  std::string manager_launch;
  int manager_relaunch_attempts = 2;      ///< relaunches tried per node before it is marked down
  double manager_relaunch_reset = 60;     ///< s a node must stay up before its relaunch count resets
  std::string irm_node;                   ///< iRMNodeName (recorded; no iRM here)
  int irm_port = 0;                       ///< iRMiCheckPort
  std::string state_file;                 ///< SQLite state file (controller metadata)
  std::string pfs_dir;                    ///< second-level root ("the PFS")
  std::string run_dir;                    ///< sockets of managers/agents (mode 0700)
  std::string dynamic_file;               ///< path of the dynamic configuration
  std::string provider = "auto";          ///< libfabric provider: auto|shm|tcp;ofi_rxm|tcp
  std::string fabric_node;                ///< source address for tcp (e.g. 127.0.0.1)
  int connect_retries = 3;                ///< attempts per controller at icheck_init
  int connect_timeout_ms = 1000;          ///< per attempt
  int request_timeout_ms = 60000;         ///< controller request timeout (starting agents)
  /// How long a process waits for its agent's answer to "hello", ms: a new
  /// agent loads libfabric and opens its endpoint first (0.5 s on an idle
  /// core, 8-25 s on a loaded 2-core node). A dead agent is noticed at once
  /// (connection refused or closed); only an agent alive but not answering
  /// costs this wait, after which the process writes directly (and its
  /// probes try the agent again).
  int hello_timeout_ms = 30000;
  std::vector<std::string> agents;        ///< optional: fixed agent addresses (no controller)
  bool direct = false;                    ///< force direct second-level writes (no agents)
  DynamicConfig dyn;                      ///< the dynamic file's values at load time
  /// iCheck-aware scheduling [John24 §7.3.1] (icheck.yaml "scheduler:"):
  /// mjsched's socket ("" = the controller talks to no scheduler; Status
  /// every status_interval s) and the proactive scaler (Alg. 8) every
  /// scaler_interval s: used fractions of a node's memory (lower flags,
  /// upper may trigger), depletion rate (bytes/s), bandwidth (bytes/s; 0 =
  /// pass off) and checkpoint frequency (commits/min) thresholds, and the
  /// bounds on iCheck's nodes (0 = the nodes the controller has at start).
  std::string scheduler_socket;
  double scaler_interval = 10;
  double scaler_lower = 0.8, scaler_upper = 0.9;
  double scaler_depletion_rate = 0;
  double scaler_bw_threshold = 0, scaler_cp_threshold = 0;
  int scaler_min_nodes = 0, scaler_max_nodes = 0;
  /// Alg. 8's scale-down side: a borrowed node holding no agent, or whose
  /// used fraction stays below release_below, for release_after s goes back
  /// to the batch pool (0 = never); boot nodes never do.
  double scaler_release_below = 0.10;
  double scaler_release_after = 60;
  /// Agents of a resized (malleable) application [John24 §7.2, Alg. 7]
  /// (icheck.yaml "malleability:"): "ma-ra" keeps the agent count and re-maps
  /// the new processes (MR) or nodes (SHMR) round-robin onto it; "ma-ma"
  /// keeps the N:M ratio, adding and removing agents with the job (N must
  /// then be a multiple of M at registration). `agents_mode` is the default,
  /// `agents_modes` names the mode of applications by name or shell pattern.
  std::string agents_mode = "ma-ra";
  std::map<std::string, std::string> agents_modes;
};

/// The agent mode ("ma-ra" | "ma-ma") of application `app` under `cfg`:
/// its own entry, else the first entry whose key is a shell pattern
/// (fnmatch) matching it ("heat-*"), else the default.
const std::string& agents_mode_of(const StaticConfig& cfg, const std::string& app);

/// Load the static file (and the dynamic file it names). Relative paths in the
/// file are resolved against the file's directory; unset paths default under
/// $DYNRES_HOME (pfs/, run/, state.db). Throws std::runtime_error with the
/// file name on a YAML or type error.
StaticConfig load_static(const std::string& path);
/// The shell command that starts the manager of `node` [John24 §6.5.2:
/// "the controller tries to relaunch the manager"]: cfg.manager_launch with
/// every "{node}" replaced by the single-quoted node label and every
/// "{config}" by the single-quoted absolute path of cfg.path, ready for
/// /bin/sh -c. Returns "" when manager_launch is empty (relaunch disabled).
std::string manager_launch_command(const StaticConfig& cfg, const std::string& node);
/// Load a dynamic file over `base` (keys absent keep their value).
DynamicConfig load_dynamic(const std::string& path, DynamicConfig base = {});
/// The config path icheck_init uses for `explicit_path` (may be NULL/empty):
/// explicit, $ICHECK_CONFIG, $DYNRES_HOME/icheck.yaml, else "".
std::string resolve_config_path(const char* explicit_path);

}  // namespace dynres::icheck
