// Private to the iCheck daemons: the controller [John24 §6.1.1, §6.5]
// and its helpers. Its member functions live by concern: controller.cpp
// (construction, the accept loop, request dispatch, registration and
// probe, Alg. 5), controller_schema.cpp (the state-file schema),
// controller_lease.cpp (the controller lease, epochs and fenced
// transactions), controller_nodes.cpp (node liveness, heartbeats,
// manager relaunch) and controller_spawn.cpp (starting and stopping
// agents through the managers). Agent placement is policy.cpp.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <sqlite3.h>

#include "dynres/db.hpp"
#include "dynres/paths.hpp"
#include "dynres/icheck/config.hpp"
#include "dynres/icheck/daemon.hpp"
#include "dynres/icheck/policy.hpp"
#include "dynres/icheck/wire.hpp"

namespace dynres::icheck::ctl {

namespace fs = std::filesystem;

inline double wall() { return now_seconds(); }

/// Schema of the controller metadata (module "icheck" of the state file).
extern const std::vector<std::string> kMigrations;

/// 128 random bits as 32 hex digits (getrandom). Throws when none can be had.
std::string random_token();

/// Wait statuses of detached children, recorded by their reaper threads and
/// drained by the controller's monitor. Shared, so that a reaper finishing
/// after the controller is gone touches only this.
struct Reaped {
  std::mutex mu;
  std::vector<std::pair<pid_t, int>> done;  ///< (pid, waitpid status)
};

/// Run `command` with /bin/sh -c in a new session (its own process group, so
/// signals meant for the controller's group do not reach it), stdin from
/// /dev/null, stdout and stderr appended to `log`, no descriptor of the
/// controller inherited. A detached thread waits for it (no zombie is left)
/// and records its wait status in `reaped`. Never blocks on the child.
/// Returns its pid; throws std::runtime_error when fork fails.
pid_t spawn_detached(const std::string& command, const std::string& log, const std::shared_ptr<Reaped>& reaped);

/// Seconds for log messages ("6 s", "1.5 s").
std::string secs(double s);

/// "exit status N" / "killed by signal N" for a waitpid status.
std::string describe_status(int st);

/// A state change refused because a newer controller epoch holds the state
/// file (Controller::tx).
struct Fenced : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Controller {
 public:
  Controller(const ControllerOptions& o);

  int run(std::atomic<bool>* stop);

 private:
  /// Become the active controller: take the next controller epoch. A
  /// standby taking over also gives the nodes a fresh grace period (their
  /// managers must find it first), and relaunches in flight too (their first
  /// heartbeat must find it), in the same transaction.
  void take_lease(bool takeover);

  /// Renew the lease every half heartbeat interval on its own connection,
  /// never waiting for mu_ (requests that start agents hold it for long).
  /// The row must still carry our epoch: otherwise a standby took over
  /// while we were stalled, and we stop (fenced).
  void lease_loop(std::atomic<bool>* stop);

  /// A newer controller epoch holds the state file: stop acting at once.
  void fence(const char* where);

  /// Every request and every supervision pass first checks that this
  /// controller still holds the state file (caller holds mu_).
  void check_epoch();

  /// Every change of the state file goes through tx(): one write
  /// transaction (BEGIN IMMEDIATE: SQLite's write lock) that first checks
  /// that the controller epoch in the file is still this controller's. A
  /// standby's takeover (take_lease) is a write transaction too, so either
  /// a change commits before it or it sees the newer epoch and is refused
  /// (Fenced; this controller then stops): a stale controller never writes
  /// after a newer one took over, even when it was stalled between its
  /// request's check_epoch() and the write (e.g. waiting for a manager).
  /// Nested calls join the outer transaction. The authorizer installed by
  /// the constructor refuses INSERT/UPDATE/DELETE outside tx(), so a write
  /// that bypasses the check fails loudly instead of landing.
  void tx(const std::function<void()>& fn);
  struct TxDepth {
    TxDepth() { ++tx_depth_; }
    ~TxDepth() { --tx_depth_; }
  };
  /// SQLite authorizer of db_: row changes only inside tx() (or take_lease).
  static int authorize(void*, int action, const char*, const char*, const char*, const char*);

  void monitor(std::atomic<bool>* stop);

  /// The link to the batch scheduler (cfg_.scheduler_socket non-empty;
  /// controller_sched.cpp) [John24 §7.3.1]: Status every status_interval,
  /// the reactive scaler (Alg. 9) for the changes its answers carry — NEW_NODES
  /// start managers there (answered once registered, or failed when the
  /// node ends down), REMOVE_NODES release nodes without agents (their
  /// manager is superseded) and move the agents off nodes that hold some
  /// first — and the proactive scaler (Alg. 8) every scaler_interval, which
  /// also gives back borrowed nodes idle for scheduler.release_after s
  /// (sched::icheck::idle_release, give_back, ic_release).
  void scheduler_link(std::atomic<bool>* stop);

  std::vector<std::string> nodes_where(const std::string& cond, double t);

  /// Node supervision (§6.5.2), every half heartbeat interval: an up node
  /// silent for heartbeat_misses x heartbeat_interval s is lost; a relaunch
  /// whose command failed, or whose manager sent no heartbeat within that
  /// window, is retried or ends with the node down; a node up for
  /// manager_relaunch_reset s gets its relaunch attempts back.
  /// may_lose = false: this round only relaunches and resets, no node is
  /// declared lost (the monitor itself ran late, see monitor()).
  void check_nodes(bool may_lose = true);

  /// A relaunch attempt of node n timed out: SIGKILL the process group of its
  /// launch command (its own session), so that a hung launcher or a manager
  /// that would register late does not race the next attempt. Only children
  /// of this controller not yet reaped are signalled (no recycled pid is hit).
  void abandon_attempt(const std::string& n);

  /// The agents of node n are gone (they exit with their manager): their
  /// applications are marked for agent change (new agents at the next probe).
  void lose_agents(const std::string& n);

  /// Node n's manager is alive but failed a request: down until its next heartbeat.
  void mark_node_down(const std::string& n);

  /// §6.5.2 "Manager Failure": node n's manager is lost (missed heartbeats,
  /// or unreachable). Its applications get new agents at their next probe,
  /// and the controller relaunches the manager, or marks the node down.
  void node_lost(const std::string& n, const std::string& why);

  void relaunch_failed(const std::string& n, const std::string& why);

  /// Start the next relaunch of node n's manager with manager_launch
  /// (detached; output appended to run_dir/manager-<n>.log, pid appended to
  /// run_dir/pids for icheck-down) and mark the node 'relaunching': its first
  /// heartbeat is awaited for heartbeat_misses x heartbeat_interval s. Marks
  /// the node 'down' instead when manager_launch is empty or the node has
  /// used its manager_relaunch_attempts ("if it fails, it indicates that the
  /// node is down", §6.5.2).
  void relaunch_or_down(const std::string& n);

  /// Append "<name> <pid>" to run_dir/pids, the list icheck-down stops.
  void record_pid(const std::string& name, pid_t pid);

  void serve(Socket& s);
  /// Answer a connection over a cap with {"error": "busy: <why>"}; logged at most once a second.
  void refuse_busy(Socket& c, const std::string& why);

  /// Run f without the controller lock when the calling request holds it
  /// (handle()); relocked afterwards, also when f throws. For network calls
  /// (no peer may stall the daemon): a slow manager must not starve heartbeats, the
  /// monitor or other applications.
  template <class F>
  auto unlocked(F&& f) {
    std::unique_lock<std::mutex>* lk = tl_lock_;
    if (!lk || !lk->owns_lock()) return f();
    lk->unlock();
    struct Relock {
      std::unique_lock<std::mutex>* lk;
      ~Relock() { lk->lock(); }
    } relock{lk};
    return f();
  }

  /// One agent change per application at a time: requests that start or
  /// stop an application's agents (register, probe, finalize) wait for one
  /// in progress (its network calls run without the lock). Caller holds mu_
  /// through tl_lock_.
  struct AppBusy {
    Controller& c;
    int64_t app;
    AppBusy(Controller& ctl, int64_t a) : c(ctl), app(a) {
      if (c.tl_lock_) c.busy_cv_.wait(*c.tl_lock_, [&] { return !c.busy_apps_.count(app); });
      c.busy_apps_.insert(app);
    }
    ~AppBusy() {
      c.busy_apps_.erase(app);
      c.busy_cv_.notify_all();
    }
    AppBusy(const AppBusy&) = delete;
    AppBusy& operator=(const AppBusy&) = delete;
  };

  /// The iCheck service itself: root, or the uid the daemons run as
  /// (managers heartbeat, the controller commands managers). -1 = identity
  /// unknown (TCP with ICHECK_TCP_AUTH=none, allowed only on loopback).
  static bool is_service(long uid) { return uid == 0 || uid == long(::geteuid()); }

  /// The application `app_id` of the message, which the peer must own
  /// (registered under the peer's authenticated uid) unless it is the
  /// service. Throws "perm: ..." / "noent: ...". Caller holds mu_.
  int64_t owned_app(const json& m, long uid, const std::string& op);

  /// Integer member `key` of request m: absent -> dflt; otherwise an integer
  /// in [lo, hi], else throws "invalid: OP: KEY must be an integer in [lo, hi]".
  static int64_t int_in(const json& m, const char* key, int64_t dflt, int64_t lo, int64_t hi, const std::string& op);
  /// Agents up for user uid's applications other than app. Caller holds mu_.
  int agents_of_user(uint32_t uid, int64_t app);
  /// Agents user uid may still get for application app: max_agents_user
  /// less agents_of_user(). Throws "busy: ..." when there is no room left.
  int user_room(uint32_t uid, int64_t app);

  json handle(const json& m, long uid);

  /// Manager heartbeat (§6.3 metrics, §6.5.2 availability). epoch 0 is a
  /// registration: the manager gets the node's next incarnation number, and
  /// the agents of any previous manager of the node are lost. A heartbeat
  /// with an epoch older than the node's is refused with {"superseded":
  /// true}: that manager was replaced (e.g. it was stopped and relaunched)
  /// and must exit with its agents.
  json heartbeat(const json& m);

  std::vector<NodeStatus> nodes();

  std::string node_address(const std::string& n);

  /// Alg. 6: place `count` agents for app and start them through the managers.
  /// Started agents are recorded in `state` ('up', or 'prepared' for an APP_INFO).
  json start_agents(int64_t app, const std::string& name, uint32_t uid, int count, const char* state = "up");

  // ---- agents that follow a resized job (controller_malleable.cpp) [John24 §7.2, §7.3.1]

  /// New agent layout of application `app` (agents all up) whose resources
  /// (processes for MR, nodes for SHMR) change from cur_res to new_res, in
  /// its icheck.yaml malleability mode (Alg. 7, resize_agent_count). More
  /// agents: the APP_INFO-prepared ones first, then new ones appended (the
  /// old agents stay, with what they hold). Fewer: the agents past the new
  /// count become 'retiring' — listed as readers, so that the new ranks
  /// restore the old ranks' pieces from them, never committed to — and stop
  /// once the application commits a newer version (retire_superseded).
  /// Returns {agents, readers, num_agents}. Caller holds mu_ (AppBusy).
  json follow_job(int64_t app, const std::string& name, uint32_t uid, int cur_res, int new_res, const AppShape& shape);
  /// Agents of `app` in state 'retiring' (address list for the restore).
  json readers_of(int64_t app);
  /// Monitor: stop the retiring agents of applications that committed a
  /// version newer than retire_after, and prepared agents nobody took
  /// within kPreparedTtl s. Caller holds mu_ through tl_lock_.
  void retire_superseded();
  /// APP_INFO [John24 §7.3.1.1, Alg. 9 lines 40-42]: job `job` is about to
  /// be resized from `from` to `to` nodes; prepare the application's agent
  /// layout (start the agents MA-MA will add). Every field range-checked;
  /// an unknown job is refused ("noent: ...") and nothing changes.
  json app_info(const json& m);
  static constexpr double kPreparedTtl = 120;  ///< s an APP_INFO-prepared agent waits for its job

  // ---- REMOVE_NODES with agents (controller_sched.cpp) [John24 Alg. 9 lines 1-16]

  /// Move every agent off node n: flag it draining (no placement there),
  /// and for each application with agents there: fence those agents
  /// ("retire": no new commit on them; a commit in flight falls back to the
  /// second level), flush the whole set, check that the second level holds
  /// the newest version the application committed, start replacements on
  /// the other nodes and mark the application for an agent change (its next
  /// probe); then stop the fenced agents. false (+why) when a version could
  /// not be made durable: the node is kept (draining cleared, fence lifted).
  /// `code` (optional) gets a short reason that stays the same while the
  /// cause does ("agents unreachable", "newest version not durable"): sent
  /// to the scheduler with a refusal, whose back-off restarts when it changes.
  bool drain_node(const std::string& n, std::string* why, std::string* code = nullptr);

  /// Alg. 8's scale-down side: give borrowed node n back on the controller's
  /// own initiative. Only an up node; its agents move off first (drain_node:
  /// the same durability rule as REMOVE_NODES); then the node is marked
  /// removed and its manager superseded. false (+why, code) when the node is
  /// kept. The caller then tells the scheduler (ic_release). Takes mu_.
  bool give_back(const std::string& n, std::string* why, std::string* code);

  /// Send one request per node to that node's manager, all nodes at once and
  /// without the lock; `make` builds the request from the node's agent ids.
  /// Returns (node, error) for every node whose manager did not answer or
  /// reported flush errors.
  std::vector<std::pair<std::string, std::string>> ask_managers(
      const std::map<std::string, std::vector<std::string>>& per_node,
      const std::function<json(const std::vector<std::string>&)>& make);

  /// Stop agents `ids` through their managers, all nodes at once (one
  /// request per node, concurrently): with `flush` every agent of the set
  /// flushes at the same time, so agent 0 gets every part and writes the
  /// manifest (stopping one by one would stop agent 0 before the others'
  /// parts reach it). Flush failures are logged. Returns false when some
  /// flush failed or a manager did not answer.
  bool stop_agent_ids(const std::vector<std::string>& ids, bool flush);
  /// Flush the up agents of `app` through their managers, all nodes at once,
  /// without the lock. true when every agent reported its newest version
  /// durable (manifest written); failures are logged. The agents keep
  /// running either way.
  bool flush_set(int64_t app);
  /// The newest version application `app` committed is on the second level:
  /// flush_set() succeeded, or (it failed) the second level holds a valid
  /// version at least as new as the one the controller recorded (the
  /// library wrote it itself after an agent failed). Caller holds mu_.
  bool newest_durable(int64_t app);

  bool stop_agents(int64_t app, bool flush);

  json agents_of(int64_t app, bool* all_up);

  /// The per-application transfer settings of the dynamic configuration
  /// (Listing 6.2; §6.2) that the library applies at run time: transfer
  /// (pull|push), strategy (mr|shmr), chunk_mb and buffer_mb (MiB), zero_copy.
  /// Sent with the registration reply and with every probe reply, so that a
  /// changed dynamic file reaches running applications at their next probe.
  json params() const;

  // Alg. 5 agent_selection, on icheck_init.
  json reg(const json& m, long peer);

  // Alg. 5 get_num_agents on icheck_probe_agents, and failure recovery (§6.5.2).
  json probe(const json& m);

  /// Status for `uid`: everything for the service; an ordinary user sees
  /// the nodes and only their own applications.
  json status(long uid = 0);

  ControllerOptions opt_;
  StaticConfig cfg_;
  DynamicConfig dyn_;
  std::string addr_;
  std::unique_ptr<Db> db_;
  std::mutex mu_;
  int seq_ = 0;
  std::shared_ptr<Reaped> reaped_ = std::make_shared<Reaped>();
  std::set<pid_t> children_;  ///< launch commands started here and not yet reaped (under mu_)
  int64_t epoch_ = 0;                ///< controller epoch held (take_lease)
  static inline thread_local int tx_depth_ = 0;  ///< tx() nesting of this thread
  std::unique_ptr<Db> lease_db_;     ///< the lease thread's own connection
  std::atomic<bool> fenced_{false};
  std::atomic<int64_t> fenced_by_{0};
  std::atomic<bool>* stop_ = nullptr;
  std::atomic<int> active_{0};       ///< connection threads running
  static constexpr int kMaxConnections = 256;
  static constexpr int kMaxAuthPerHost = 64;  ///< connections still authenticating, per TCP peer host
  static constexpr int kMaxPerUid = 32;       ///< authenticated connections per uid (service uid: no cap)
  /// Largest request frame, bytes: requests are small JSON objects (a
  /// heartbeat's metrics are the largest, a few KiB); a larger announced
  /// length is refused before any of it is read.
  static constexpr std::size_t kMaxRequest = std::size_t{1} << 20;
  /// Largest application a register or probe may describe (nodes, processes).
  static constexpr int64_t kMaxAppNodes = 65536, kMaxAppProcs = int64_t{1} << 24;
  static inline thread_local std::unique_lock<std::mutex>* tl_lock_ = nullptr;  ///< lock held by this request thread
  std::set<int64_t> busy_apps_;     ///< applications with an agent change in progress (under mu_)
  std::condition_variable busy_cv_;
  /// Heartbeats received but perhaps not yet served (they wait for mu_):
  /// node -> {arrival, wall s; the manager's epoch}. check_nodes never
  /// declares a node lost whose current manager's heartbeat arrived within
  /// the window: a heartbeat queued behind a slow request is no missed one.
  std::mutex arrived_mu_;
  std::map<std::string, std::pair<double, int64_t>> arrived_;
  std::mutex peers_mu_;
  std::map<std::string, int> authenticating_;  ///< connections authenticating, per TCP peer host (peers_mu_)
  std::map<long, int> per_uid_;                ///< connections served, per non-service uid (peers_mu_)
};

}  // namespace dynres::icheck::ctl
