// The scheduler's side of the iCheck controller <-> scheduler protocol
// [John24 §7.3.1.1, §7.3.2.1]: nodes lent to the checkpoint service leave the
// batch pool and come back, durably, through the state file.
//
// Every message is a request of the controller over mjsched's Unix socket
// (lib/proto framing), answered at once; the scheduler's own messages
// (Resource change NEW_NODES / REMOVE_NODES, App info) ride on the answers to
// the controller's periodic Status, and stay there until the controller
// answers them with a Response. Ops (mjsched(8) "iCheck protocol"):
//   ic_status    {nodes:[{name,total_mem,avail_mem,agents,up}], min_nodes,
//                 max_nodes, fixed_nodes}  -> {ok, changes:[...]}
//   ic_query     {}                        -> {ok, idle_nodes}
//   ic_request   {urgency:"HIGH"|"LOW", nodes}  -> {ok}
//   ic_response  {change, kind:"NEW_NODES"|"REMOVE_NODES", ok, nodes:[names],
//                 reason?}                  -> {ok}
//   ic_release   {nodes:[names]}           -> {ok}   (held nodes the controller
//                                           gave back on its own, Alg. 8)
//   ic_response  {change, kind:"APP_INFO", ok}   -> {ok}
// The ic_status answer lists lent:[names], the nodes held. A refused
// REMOVE_NODES is asked again after a back-off that doubles while the
// controller gives the same reason (reclaim_backoff .. reclaim_backoff_max
// s) and starts over when the reason changes or the job it was for no
// longer waits. ic_status may carry apps:[{job, agents, mode}] (the applications
// registered with iCheck by batch job); an APP_INFO {change, kind:"APP_INFO",
// job, from, to} rides on its answer before a resize order goes to such a job.
// Only the cluster owner (the uid mjsched runs as, from SO_PEERCRED) may
// speak it; every field is range-checked and a refused message changes
// nothing.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dynres/proto.hpp"
#include "dynres/sched.hpp"
#include "dynres/state.hpp"

namespace dynres::schedd {

/// Create / migrate the tables of module "icsched" (icheck_link, icheck_lent,
/// icheck_lent_history).
void icheck_migrate(State& st);

/// Ids (nodes.id) of the nodes lent to iCheck, in any state; empty when the
/// scheduler never spoke the protocol. For build_snapshot (call it inside
/// the snapshot's read transaction).
std::set<int64_t> icheck_lent_ids(State& st);

/// Bounds of the protocol's fields.
inline constexpr int kIcMaxNodes = 4096;          ///< nodes in one Status / request
inline constexpr size_t kIcMaxName = 255;         ///< bytes of a node name
inline constexpr double kIcMaxMem = 1125899906842624.0;  ///< 2^50 bytes per node
inline constexpr int kIcMaxAgents = 1000000;
inline constexpr size_t kIcMaxReason = 200;       ///< bytes of a refusal's reason

class IcheckServer {
 public:
  using Log = std::function<void(const std::string&)>;
  /// backoff, backoff_max: seconds before a refused REMOVE_NODES is asked
  /// again (dynres.yaml scheduler.icheck.reclaim_backoff, reclaim_backoff_max).
  IcheckServer(double status_timeout, Log log, double backoff = 2, double backoff_max = 60)
      : status_timeout_(status_timeout), backoff_(backoff), backoff_max_(backoff_max), log_(std::move(log)) {}

  /// Serve one ic_* message of a peer with uid `peer_uid` (the daemon checks
  /// nothing else). Returns the answer: {ok:true,...} or {error:"..."} (a
  /// refusal is logged and changes nothing). Throws only on state-file errors.
  proto::json serve(State& st, uint32_t peer_uid, const proto::json& m, double now);

  /// App info [John24 §7.3.1.1]: job `job` (registered with iCheck, as the
  /// controller's last Status younger than status_timeout lists) is about
  /// to be resized from `from` to `to` nodes: an APP_INFO is queued (event
  /// icheck_app_info) for the next Status answer. false (nothing written)
  /// for a job iCheck does not know or without a live controller.
  bool app_info(State& st, int64_t job, int from, int to, double now);

  /// Put iCheck into the snapshot: lent nodes (any state) get job
  /// kIcheckJob; with a Status younger than status_timeout, icheck.present,
  /// the held nodes' memory, the pending request and the exchanges in flight.
  /// Held nodes whose refused REMOVE_NODES is backing off get reclaim_wait;
  /// a back-off whose job no longer waits in `snap` is dropped (logged).
  void annotate(State& st, sched::Snapshot& snap, const std::vector<int64_t>& node_ids, double now);

  /// Carry out the decision's iCheck part: each grant (node still idle and
  /// up, else skipped) and each reclaim in one write transaction with its
  /// event and the request left. Returns the node indices granted.
  std::vector<int> apply(State& st, const sched::Decision& d, const sched::Snapshot& snap,
                         const std::vector<int64_t>& node_ids, double now);

 private:
  proto::json refuse(const std::string& why);
  /// A refused REMOVE_NODES of node `name` (reason as the controller gave it).
  void backed_off(const std::string& name, const std::string& reason, double now);
  double status_timeout_;
  double backoff_, backoff_max_;
  /// Back-off of a node whose give-back the controller refused (in memory:
  /// a restarted mjsched asks at once, then backs off again).
  struct Backoff {
    double delay = 0, until = 0;
    std::string reason;
    int64_t job = 0;  ///< the waiting job the reclaim was for
    int refusals = 0;
  };
  std::map<std::string, Backoff> backoff_of_;
  std::map<std::string, int64_t> reclaim_job_;  ///< node -> job of its REMOVE_NODES in flight
  Log log_;
};

}  // namespace dynres::schedd
