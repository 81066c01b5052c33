// The checkpoint controller's proactive scaler as a pure function over a
// status snapshot [John24 §7.3.1.2, Alg. 8], and the reactive scaler's choice
// of nodes to give back [John24 Alg. 9 lines 31-38]. No I/O, no clock: the
// controller (icheckd) measures, this decides.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace dynres::sched::icheck {

/// One checkpoint node as the controller's monitoring sees it [John24 §6.3].
struct ScalerNode {
  std::string name;
  bool up = true;             ///< false: ignored by both passes
  double total_mem = 0;       ///< bytes agents may use on the node
  double avail_mem = 0;       ///< bytes free, in [0, total_mem]
  double depletion_rate = 0;  ///< bytes/s the free memory shrinks by (> 0: filling)
  double bandwidth = -1;      ///< bytes/s of recent commits; < 0: unknown (never flagged)
  double cp_frequency = 0;    ///< commits per minute on the node
  int agents = 0;
};

/// Thresholds (icheck.yaml scaler.*). Fractions are of a node's total memory.
struct ScalerConfig {
  double lower = 0.80;          ///< used fraction that flags a node (Alg. 8 line 4)
  double upper = 0.90;          ///< used fraction that may trigger a request (line 11)
  double depletion_rate = 0;    ///< bytes/s; a flagged node above `upper` must deplete faster
  double bw_threshold = 0;      ///< bytes/s; 0 disables the bandwidth pass (line 24)
  double cp_threshold = 0;      ///< commits per minute (line 24)
  int min_nodes = 1, max_nodes = 1;  ///< iCheck's own bounds; no request at max_nodes
};

/// What the scaler remembers between passes (Alg. 8 lines 27-35).
struct ScalerState {
  bool pending_query = false;  ///< a Query was sent; its Response decides
  int idle_nodes = -1;         ///< idle nodes the scheduler reported; < 0: no answer yet
};

enum class ScalerAction { none, request_high, request_low, query };
const char* to_string(ScalerAction a);

struct ScalerResult {
  ScalerAction action = ScalerAction::none;
  int nodes = 0;                    ///< nodes to request (request_* only; 1 per pass)
  std::vector<std::string> flagged; ///< nodes of the pass that decided (for the log)
  ScalerState state;                ///< state for the next pass
};

/// One pass of Alg. 8 over the up nodes of `nodes`:
///  1. memory: a node whose used fraction (1 - avail/total) is above `lower`
///     is flagged, the others' free bytes are summed. For each flagged node
///     in order: if its used fraction is above `upper` and its
///     depletion_rate above cfg.depletion_rate, request one node — HIGH when
///     the sum is smaller than that node's total_mem (the conservative test
///     of line 13), else LOW — and stop; otherwise subtract its total_mem
///     from the sum (line 19).
///  2. bandwidth (cfg.bw_threshold > 0): nodes with bandwidth in [0,
///     bw_threshold) and cp_frequency above cp_threshold are flagged; with a
///     pending query answered by idle_nodes >= 1: request LOW (pending
///     cleared); else, when any is flagged, send a Query (pending set).
/// No request is made when the up nodes already number cfg.max_nodes (the
/// memory pass still reports what it flagged, action none). Never throws
/// (except std::bad_alloc).
ScalerResult proactive_scaler(const std::vector<ScalerNode>& nodes, const ScalerConfig& cfg,
                              const ScalerState& state);

/// Alg. 9 lines 31-38: the `count` nodes to give back — most free memory
/// first, then fewest agents, then name — never leaving fewer than
/// max(1, min_nodes) up nodes; down nodes are never chosen. Returns names.
std::vector<std::string> removal_candidates(const std::vector<ScalerNode>& nodes, int count, int min_nodes);

/// Alg. 8's scale-down side: when a borrowed node goes back on its own
/// (icheck.yaml scheduler.release_below, release_after).
struct ReleaseConfig {
  double below = 0.10;  ///< used fraction under which a node counts as idle
  double after = 60;    ///< s a node must stay idle before it goes back; <= 0: never
  double lower = 0.80;  ///< the scaler's lower threshold: what stays must stay under it
  int min_nodes = 1;    ///< up nodes iCheck keeps (boot nodes included)
};

/// When each borrowed node was first seen idle (seconds, the caller's clock),
/// and with how many agents.
struct ReleaseState {
  std::map<std::string, double> idle_since;
  std::map<std::string, int> agents;
};

struct ReleaseResult {
  std::string node;    ///< the node to give back; empty: none this pass
  ReleaseState state;  ///< for the next pass (the chosen node is dropped from it)
};

/// One pass of the scale-down side of Alg. 8 at time `now` (s). A node is a
/// candidate only when it is up and in `lent` (borrowed from the batch
/// pool: boot nodes never are). It is idle when it holds no agent (`agents`
/// counts every agent holding memory there: up, retiring, prepared) or its
/// used fraction (1 - avail/total) is below cfg.below; a node that stops
/// being idle, or whose agent count changes (an application just placed
/// agents there, not yet committed), starts over. A node idle for at least cfg.after seconds goes
/// back — at most one per pass, most free memory first, then fewest agents,
/// then name (Alg. 9 lines 32-33) — unless that would leave fewer than
/// max(1, min_nodes) up nodes, or the bytes used on all up nodes would
/// exceed `lower` of the total of the nodes that stay (the proactive pass
/// would ask for a node again). cfg.after <= 0: nothing is released (the
/// state is still kept). Never throws (except std::bad_alloc).
ReleaseResult idle_release(const std::vector<ScalerNode>& nodes, const std::vector<std::string>& lent,
                           const ReleaseConfig& cfg, double now, const ReleaseState& state);

}  // namespace dynres::sched::icheck
