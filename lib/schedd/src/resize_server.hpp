// mjsched's end of the live resize protocol (mjsched(8) "RESIZE
// PROTOCOL"): the connections of running jobs' processes (libmj, mj(3)), the
// book of orders (dynres/resize.hpp) and their records in the state file
// (dynres/resize_store.hpp). Single-threaded: the daemon's poll loop calls
// it; nothing here blocks on a peer (connections are non-blocking, frames
// are read incrementally and capped at kMaxJobFrame bytes).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dynres/proto.hpp"
#include "dynres/resize.hpp"
#include "dynres/sched.hpp"
#include "dynres/slow_nodes.hpp"

namespace dynres {
class State;
}

namespace dynres::schedd {

/// Largest frame a job may send (bytes); orders and replies are far smaller.
constexpr std::size_t kMaxJobFrame = 64 * 1024;
/// Unread input a job connection may have buffered (bytes) before it is closed.
constexpr std::size_t kMaxUnread = 1024 * 1024;
/// At most this many job connections in all, and per job (the rest are refused).
constexpr std::size_t kMaxJobConnections = 1024;
constexpr std::size_t kMaxConnectionsPerJob = 256;

class ResizeServer {
 public:
  using Log = std::function<void(const std::string&)>;
  ResizeServer(resize::Options opt, Log log) : book_(opt), opt_(opt), log_(std::move(log)) {}
  /// Called just before an order goes out (job, nodes before, nodes
  /// after): the iCheck APP_INFO [John24 §7.3.1.1] is queued first.
  using OrderHook = std::function<void(State&, int64_t, int, int, double)>;
  void set_order_hook(OrderHook h) { order_hook_ = std::move(h); }
  ~ResizeServer();

  /// Rebuild the book from the state file after a (re)start: every RUNNING
  /// job with a protocol record is known again with its phase; orders left
  /// outstanding by a previous scheduler are rolled back ("scheduler
  /// restarted"): the job keeps its old nodes.
  void load(State& st, double now);

  /// A job was just started with `secret` (its record is in the state file).
  void admit(int64_t job, uint32_t uid, const std::string& secret, const std::vector<std::string>& nodes);

  /// A new connection whose first frame was {"op":"mj_hello",...}: the peer's
  /// uid/pid come from SO_PEERCRED. Answers the hello; keeps the connection
  /// when the peer is the job it claims (otherwise answers the error and
  /// closes fd). Takes ownership of fd.
  void adopt(State& st, int fd, const proto::json& hello);

  /// The connection fds to poll for input.
  std::vector<int> fds() const;
  /// fd is readable: read and handle its frames; closes it on EOF or a
  /// protocol violation (logged).
  void on_readable(State& st, int fd, double now);

  /// Once per pass: roll back orders past their deadline (telling the job),
  /// settle orders of jobs that ended, forget ended jobs.
  void tick(State& st, double now);

  /// Fill in what the policies need from the protocol: accepting, adapting,
  /// last_resize, MTCT per running job; nodes reserved by outstanding
  /// expand orders are marked busy (held by the expanding job) so nobody
  /// else gets them; snapshot.adapting = an order is outstanding.
  void annotate(sched::Snapshot& snap, double now) const;

  /// Send the orders of a decision (shrinks, then expands; an expand onto
  /// nodes a shrink of the same decision releases is left for a later pass,
  /// after that shrink committed); returns the
  /// node indices that must not be used by this pass's starts (nodes being
  /// released by a shrink are still the shrinking job's until it commits).
  std::vector<int> issue(State& st, const sched::Decision& d, const sched::Snapshot& snap, double now);

  /// mjcontrol resize: order job to `target` nodes (by uid: the owner or
  /// root). Picks idle nodes (expand) or the job's last nodes (shrink) from
  /// the snapshot. Returns the order id, or an error sentence in *why.
  /// Refused: not the owner, the job not running/registered/accepting, a
  /// target outside [min_nodes, max_nodes] or its node constraint, not
  /// enough idle nodes.
  /// by_count: a shrink names only how many nodes to give back and the job
  /// chooses which (Finnerty et al.'s preShrink).
  std::optional<uint64_t> admin_resize(State& st, uint32_t uid, int64_t job, int target, const sched::Snapshot& snap,
                                       double now, std::string* why, bool by_count = false);
  /// The request {"op":"resize","job":ID,"nodes":N[,"by_count":bool]} of
  /// peer uid (mjcontrol resize), every member checked; the reply to send:
  /// {"ok":true,"order":K} or {"error":...}.
  proto::json admin_request(State& st, uint32_t uid, const proto::json& m, const sched::Snapshot& snap, double now);
  /// Called with every accepted mj_perf report that names one of the job's
  /// nodes: (job, the reporting process's pid, node name, the report's
  /// seconds — compute_s, mpi_s, and cpu_s, delay_s or -1 when it has none;
  /// RankSample::node unset —, now). The slow-node watch (slow_watch.hpp)
  /// adds them up per window.
  using PerfListener = std::function<void(int64_t, pid_t, const std::string&, const sched::RankSample&, double)>;
  void set_perf_listener(PerfListener f) { on_perf_ = std::move(f); }
  /// Order job to take exactly `nodes` (names, idle): the second half of a
  /// slow-node swap. The order id, or std::nullopt with the reason in *why.
  std::optional<uint64_t> expand_onto(State& st, int64_t job, const std::vector<std::string>& nodes, double now,
                                      std::string* why) {
    return send_order(st, job, resize::Kind::expand, nodes, now, why);
  }
  /// Policy shrinks as counts (the job chooses its nodes; scheduler.resize.shrink_by_count).
  void set_shrink_by_count(bool b) { shrink_by_count_ = b; }

  bool adapting() const { return book_.any_adapting(); }
  /// Order job to give back exactly `nodes` (names; a node failure or a
  /// drain: the job cannot choose, whatever shrink_by_count says). Returns
  /// the order id, or std::nullopt with the reason in *why.
  std::optional<uint64_t> shrink_away(State& st, int64_t job, const std::vector<std::string>& nodes, double now,
                                      std::string* why) {
    return send_order(st, job, resize::Kind::shrink, nodes, now, why);
  }
  /// A registered job whose listener died with a node failure (its script
  /// ends or is stopped by the caller): a shrink away from `nodes`, begun on
  /// the job's behalf as a restart-based resize, so its supervisor runs the
  /// script again on the remaining nodes, where the job restores its last
  /// checkpoint and commits the order [John24 §7.4.4]. An order of the job
  /// still outstanding and not begun as a restart is rolled back first; one
  /// already begun as a restart is kept (*fresh = false: nothing new to do).
  /// Returns the order id, or std::nullopt with the reason in *why.
  std::optional<uint64_t> restart_away(State& st, int64_t job, const std::vector<std::string>& nodes, double now,
                                       bool* fresh, std::string* why);

 private:
  struct Conn {
    int fd = -1;
    uint32_t uid = 0;
    pid_t pid = 0;
    int64_t job = 0;
    std::string secret;
    bool registered = false;  ///< this connection registered the job: orders go here
    proto::FrameReader in{kMaxJobFrame};
    double mpi_s = 0, compute_s = 0;  ///< its latest performance report
    double last_write = -1e300;       ///< rate limit of perf/progress writes (1/s)
  };
  void handle(State& st, Conn& c, const proto::json& m, double now);
  void reply(Conn& c, proto::json body);
  void push(int64_t job, const proto::json& body);
  void close_conn(int fd, const std::string& why);
  std::optional<uint64_t> send_order(State& st, int64_t job, resize::Kind kind, std::vector<std::string> nodes,
                                     double now, std::string* why, int count = 0);
  bool has_listener(int64_t job) const;
  resize::Peer peer(const Conn& c) const { return {c.uid, c.job, c.secret}; }
  /// Settle an order its job did not commit in time (deadline passed, or the
  /// scheduler restarted): rolled back, unless the supervisor already
  /// relaunched a restart-based order on its new node list, or the order is
  /// a restart away from nodes that are all down (begun on the job's behalf
  /// after a node loss: its processes died with the node, and its
  /// supervisor relaunches it whatever the order's state, on the lost node
  /// after a rollback); that one is committed on the job's behalf and the
  /// job's later commit is acknowledged. Returns true when committed.
  /// The Book must no longer hold it as pending for a rollback to stick
  /// (callers drop it first: expire(), rollback(), or a fresh load()).
  bool settle_unacknowledged(State& st, const resize::Order& o, const std::string& reason, double now);

  PerfListener on_perf_;
  bool shrink_by_count_ = false;
  resize::Book book_;
  resize::Options opt_;
  Log log_;
  OrderHook order_hook_;
  std::map<int, Conn> conns_;
  std::map<int64_t, uint32_t> owner_;        ///< job -> uid (jobs in the book)
  std::map<int64_t, double> mtct_, last_resize_;
};

}  // namespace dynres::schedd
