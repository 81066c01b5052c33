// The live scheduler service behind mjsched(8): [John24 Alg. 1] (ABS
// iteration) on top of the pure policies of dynres/sched.hpp.
//
// A pass runs on every tick, on every submission and on every job end
// (wake-ups arrive over the Unix socket $DYNRES_HOME/mjsched.sock). A pass
// reads a snapshot from the state file, calls sched::decide(), and carries
// out the starts through mjstepd supervisors.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>

#include "dynres/config.hpp"
#include "dynres/proto.hpp"
#include "dynres/requests.hpp"
#include "dynres/sched.hpp"
#include "dynres/state.hpp"

namespace dynres::schedd {

class ResizeServer;
class PowerView;
class RateLimitedLog;
class NodeWatch;
class IcheckServer;
class SlowWatch;
class ExpandAfter;

/// A connection's first frame, complete: the peer's kernel identity and the
/// request. Whoever holds it owns fd.
struct Incoming {
  int fd;
  Peer peer;
  proto::json msg;
};

/// Build the policy's view of the cluster from the state file (one read
/// transaction). Held pending jobs and jobs whose begin time is later than
/// `now` are left out.
/// node_ids[i] is the state-file id of Snapshot::nodes[i].
/// Jobs whose --dependency is not met, and array tasks beyond the array's
/// %max (counting its running tasks), are left out too; their reason
/// (Dependency, DependencyNeverSatisfied, JobArrayTaskLimit) goes to
/// *blocked when given.
sched::Snapshot build_snapshot(State& st, double now, std::vector<int64_t>& node_ids,
                               std::map<int64_t, std::string>* blocked = nullptr);

/// Expected start times of the pending jobs (squeue --start): the policy is
/// replayed in model time from `snap` (one read of the state file, see
/// build_snapshot), assuming every job runs until its time limit
/// (policy.default_time_limit when unlimited; a job already past its limit
/// ends "now"). Jobs that could never start are absent. Pure.
std::map<int64_t, double> expected_starts(sched::Snapshot snap, const sched::PolicyConfig& policy);

/// sbatch --test-only: when `job` (not recorded) would start if it were
/// submitted now, at the end of the queue (expected_starts with the job
/// added), never before its begin time. nullopt for a held job, a job with
/// a dependency, or one that could never start.
std::optional<double> test_only_start(State& st, const JobRecord& job, const sched::PolicyConfig& policy);

struct Daemon {
  std::string home;
  Config cfg;
  std::string stepd_path;   ///< mjstepd executable
  std::atomic<bool> stop{false};

  /// Take the exclusive lock on home/mjsched.lock (kept across fork, so
  /// take it before daemonizing). Throws std::runtime_error naming the pid of
  /// the scheduler already running for this cluster.
  void lock();

  /// Serve until SIGTERM/SIGINT or stop. Holds an exclusive lock on
  /// home/mjsched.lock (a second daemon on the same cluster exits with an
  /// error naming the pid), writes home/mjsched.pid, listens on the socket.
  /// On start it reconciles: RUNNING jobs whose supervisor is gone are
  /// recorded FAILED ("supervisor lost"); live supervisors keep their jobs.
  /// Jobs keep running when the daemon stops. Returns an exit status.
  int run();

  /// One scheduling pass (Alg. 1 lines 2-4); returns jobs started. With a
  /// malleable policy the pass also sends the decision's shrink and expand
  /// orders to the running jobs over the resize protocol (mjsched(8)).
  int pass();

  Daemon();
  ~Daemon();

 private:
  std::unique_ptr<State> state_;  ///< one connection for the daemon's life
  std::unique_ptr<ResizeServer> resize_;  ///< the live resize protocol
  std::unique_ptr<PowerView> power_;      ///< corridor, power model, samples [John24 Ch. 5]
  std::unique_ptr<IcheckServer> icheck_;  ///< nodes lent to iCheck [John24 §7.3.2]
  bool power_warned_ = false;             ///< a bad power: section was logged once (other policies)
  std::vector<std::string> last_notes_;   ///< the policy's notes of the previous pass (logged on change)
  std::unique_ptr<NodeWatch> nodes_;     ///< node agents' liveness (mjnoded)
  std::map<int64_t, std::string> shrink_why_;  ///< why a drain's shrink was not ordered (logged once)
  std::unique_ptr<SlowWatch> slow_;      ///< migration off slow nodes [HoG14 §5.5]
  SlowWatch& slow_watch();
  std::unique_ptr<ExpandAfter> after_;   ///< swaps' second halves, lost nodes' replacements
  ExpandAfter& expand_after();
  State& state();
  ResizeServer& resizer();
  /// The request dispatcher: the first frame m of a connection from peer
  /// (SO_PEERCRED): the daemon's own ops (ping, wake, a job's mj_hello,
  /// mjcontrol's resize) here, the tools' requests through handle_request
  /// (dynres/requests.hpp). Returns true when the connection was handed over
  /// (a job's mj_hello) and must stay open.
  bool serve_request(int fd, const Peer& peer, const proto::json& m, bool& wake);
  /// handle_request for a tool's request, with unknown ops and refusals
  /// logged (rate-limited per uid); never throws.
  proto::json tool_reply(Ctx& ctx, const Peer& peer, const proto::json& m);
  /// A submission that is recorded in a group commit (not --test-only).
  static bool group_committed(const proto::json& m);
  /// The submissions that arrived together: recorded in one write
  /// transaction, then answered (only after the COMMIT) and closed. When the
  /// group's transaction fails, each is recorded and answered alone.
  void serve_submissions(std::vector<Incoming*>& group, bool& wake);
  /// Counters for ping's "stats": passes run, submissions served, the
  /// groups they were committed in and the largest group; seconds spent in
  /// passes and in recording and answering submissions (wall clock).
  struct Stats {
    int64_t passes = 0, submissions = 0, submit_groups = 0, largest_group = 0;
    double pass_seconds = 0, submit_seconds = 0;
  } stats_;
  /// Refused connections and messages, at most a few lines per peer per 10 s.
  std::unique_ptr<RateLimitedLog> refused_;
  void refused_log_(const std::string& key, const std::string& msg, double now);
  NodeWatch& node_watch();
  /// Node failures and drains, before the pass's reconcile: lost nodes set
  /// DOWN, then sched::react_to_nodes(): malleable jobs shrunk away from
  /// DOWN/DRAIN nodes, other jobs on DOWN nodes marked node-failed and
  /// stopped (their end is recorded as a requeue or NODE_FAIL).
  void react_to_nodes();
  /// serve_request's node ops: node_hello (an agent; kept open) and
  /// update_node (mjcontrol update node ... state=). Returns true when fd was
  /// handed over; *handled tells whether op was one of them.
  bool serve_node_request(int fd, const std::string& op, const proto::json& m, bool& wake, bool* handled);
  IcheckServer& icheck();
  /// A one-shot request on the scheduler socket from peer uid (after the
  /// first frame m): ping, wake, mjcontrol's resize. Returns true when the
  /// connection was handed over (a job's mj_hello) and must stay open.
  bool serve_request(int fd, const proto::json& m, bool& wake);
};

}  // namespace dynres::schedd
