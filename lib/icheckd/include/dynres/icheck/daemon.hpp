// icheckd roles [John24 §6.1.1.2-3, §6.3, §6.5.2, §7.1].
//
// Controller: one per cluster. Registers applications, chooses the agent
// count (Algorithm 5) and places agents (Algorithm 6) on the checkpoint
// nodes whose managers heartbeat, keeps apps / agents / versions / nodes in
// the SQLite state file (module "icheck" migrations, tables icheck_*). After
// heartbeat_misses missed heartbeats a node's manager is lost: the affected
// applications get new agents at their next probe, and the controller
// relaunches the manager with the manager_launch command, marking the node
// down when that fails manager_relaunch_attempts times (§6.5.2-6.5.3). A
// --standby controller waits while the primary renews its lease in the state
// file and takes over (same metadata: nodes, epochs, attempts) when the lease
// expires.
//
// The active controller holds the next controller epoch of the state file
// and renews its lease on its own thread and connection (never behind the
// request lock); a controller that finds a newer epoch is fenced: it stops
// (run_controller returns 3). Authorisation (each peer acts only on what it owns): heartbeat only from
// the service uid (root or icheckd's own), register binds the app to the
// peer's uid, app messages need the owner's uid and the app_token handed
// out at registration; managers take commands only from the service.
// Connections are authenticated on per-connection threads (<= 32 per peer
// host, 256 in all). ICHECK_TCP_AUTH=none: TCP only on loopback (throws).
//
// Manager: one per checkpoint node. Starts/stops icagent processes on
// request, heartbeats every heartbeat_interval with the §6.3 metrics
// (available memory, depletion rate Eq. 6.5, ops Eq. 6.6 and interval 6.7,
// ops/min, bandwidth Eq. 6.8-6.9, agent count and fill rate Eq. 6.10, power).
// Its first heartbeat registers it and gets the node's epoch (incarnation);
// told it is superseded by a newer epoch, it stops its agents and exits. It
// does not start while a live manager answers on the node's socket.
#pragma once
#include <atomic>
#include <string>

namespace dynres::icheck {

struct ControllerOptions {
  std::string config;       ///< static config file
  bool standby = false;     ///< wait for the primary's lease to expire first
  std::string listen;       ///< override: address to serve (default: controllers[0] or [1] for standby)
};
/// Run until *stop. Returns 0, or 3 when fenced by a newer controller;
/// throws on setup errors.
int run_controller(const ControllerOptions& o, std::atomic<bool>* stop);

struct ManagerOptions {
  std::string config;
  std::string node;         ///< node label (e.g. n1)
  std::string listen;       ///< command address (default unix:<run_dir>/manager-<node>.sock;
                            ///< "auto": TCP on this host's address, any port; its agents then listen on TCP too)
  std::string agent_bin;    ///< icagent path (default: next to the running executable)
  double mem_limit_gb = 0;  ///< report at most this much available memory (0 = real MemAvailable)
};
/// Run until *stop, or until the controller says a newer manager serves the
/// node (then *stop is set too). Returns 0; throws on setup errors, among
/// them a live manager already answering on the node's socket.
int run_manager(const ManagerOptions& o, std::atomic<bool>* stop);

}  // namespace dynres::icheck
