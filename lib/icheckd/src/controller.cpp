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

namespace fs = std::filesystem;

namespace dynres::icheck {

namespace {
double wall() { return now_seconds(); }

/// Schema of the controller metadata (module "icheck" of the state file).
const std::vector<std::string> kMigrations = {
    R"(CREATE TABLE icheck_apps(
         id INTEGER PRIMARY KEY, name TEXT NOT NULL, uid INTEGER NOT NULL,
         nodes INTEGER, procs INTEGER, strategy TEXT, num_agents INTEGER,
         old_tsync REAL, last_change INTEGER DEFAULT 0, frozen INTEGER DEFAULT 0,
         is_active INTEGER DEFAULT 1, needs_change INTEGER DEFAULT 0,
         version INTEGER DEFAULT 0, bytes INTEGER DEFAULT 0, updated REAL,
         UNIQUE(name, uid));
       CREATE TABLE icheck_agents(
         id TEXT PRIMARY KEY, app_id INTEGER NOT NULL REFERENCES icheck_apps(id),
         node TEXT, address TEXT, host TEXT, pid INTEGER, state TEXT, started REAL);
       CREATE TABLE icheck_versions(
         app_id INTEGER NOT NULL, version INTEGER NOT NULL, bytes INTEGER,
         tsync REAL, mode TEXT, time REAL, PRIMARY KEY(app_id, version));
       CREATE TABLE icheck_nodes(
         node TEXT PRIMARY KEY, address TEXT, state TEXT, last_heartbeat REAL, metrics TEXT);
       CREATE TABLE icheck_controller(
         id INTEGER PRIMARY KEY CHECK(id = 1), address TEXT, pid INTEGER, heartbeat REAL);)",
    // 2: manager relaunch (§6.5.2-6.5.3). epoch = incarnation of the manager
    // serving the node (heartbeats of an older one are refused: superseded);
    // pid/host of that manager; up_since = when it last came up; relaunches =
    // attempts since the node was last healthy; relaunch_at / relaunch_pid =
    // the attempt in flight (state 'relaunching').
    R"(ALTER TABLE icheck_nodes ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
       ALTER TABLE icheck_nodes ADD COLUMN pid INTEGER;
       ALTER TABLE icheck_nodes ADD COLUMN host TEXT;
       ALTER TABLE icheck_nodes ADD COLUMN up_since REAL;
       ALTER TABLE icheck_nodes ADD COLUMN relaunches INTEGER NOT NULL DEFAULT 0;
       ALTER TABLE icheck_nodes ADD COLUMN relaunch_at REAL;
       ALTER TABLE icheck_nodes ADD COLUMN relaunch_pid INTEGER;)",
    // 3: controller epoch (issue 11 item 12): every controller that becomes
    // active takes the next epoch; the lease is renewed only while the row
    // still holds this controller's epoch, so a primary that was stalled
    // past its lease finds itself fenced instead of acting beside the
    // standby that took over.
    R"(ALTER TABLE icheck_controller ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;)",
    // 4: application token (issue 11 item 8): 128 random bits handed out at
    // registration; every later message about the application must carry
    // it (app ids are small sequential integers, easy to guess).
    R"(ALTER TABLE icheck_apps ADD COLUMN token TEXT;)"};

/// 128 random bits as 32 hex digits (getrandom). Throws when none can be had.
std::string random_token() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t r = ::getrandom(b + got, sizeof b - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    got += size_t(r);
  }
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) s += hex[c >> 4], s += hex[c & 15];
  return s;
}

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
pid_t spawn_detached(const std::string& command, const std::string& log, const std::shared_ptr<Reaped>& reaped) {
  const std::string script = "exec " + command;
  const char* argv[] = {"/bin/sh", "-c", script.c_str(), nullptr};
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {  // async-signal-safe calls only from here on
    ::setsid();
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in >= 0) ::dup2(in, 0);
    if (out >= 0) ::dup2(out, 1), ::dup2(out, 2);
    ::close_range(3, ~0U, 0);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv("/bin/sh", const_cast<char* const*>(argv));
    ::_exit(127);
  }
  std::thread([pid, reaped] {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    std::lock_guard<std::mutex> g(reaped->mu);
    reaped->done.emplace_back(pid, st);
  }).detach();
  return pid;
}

/// Seconds for log messages ("6 s", "1.5 s").
std::string secs(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%g s", s);
  return b;
}

/// "exit status N" / "killed by signal N" for a waitpid status.
std::string describe_status(int st) {
  if (WIFEXITED(st)) return "exit status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "killed by signal " + std::to_string(WTERMSIG(st));
  return "wait status " + std::to_string(st);
}

/// A state change refused because a newer controller epoch holds the state
/// file (Controller::tx).
struct Fenced : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Controller {
 public:
  Controller(const ControllerOptions& o) : opt_(o), cfg_(load_static(o.config)) {
    if (cfg_.state_file.empty()) throw std::runtime_error("controller: no state_file configured");
    db_ = std::make_unique<Db>(cfg_.state_file, true);
    db_->migrate("icheck", kMigrations);
    ::chmod(cfg_.state_file.c_str(), 0600);
    sqlite3_set_authorizer(db_->handle(), &Controller::authorize, nullptr);  // writes only in tx()
    dyn_ = cfg_.dyn;
    if (!opt_.listen.empty()) addr_ = opt_.listen;
    else if (opt_.standby && cfg_.controllers.size() > 1) addr_ = cfg_.controllers[1];
    else if (!cfg_.controllers.empty()) addr_ = cfg_.controllers[0];
    else throw std::runtime_error("controller: no controller address configured");
  }

  int run(std::atomic<bool>* stop) {
    stop_ = stop;
    require_safe_tcp_auth(addr_);  // before waiting as a standby: fail at start
    const double lease = cfg_.heartbeat_interval * cfg_.heartbeat_misses;
    if (opt_.standby) {
      std::fprintf(stderr, "icheckd controller: standby, watching the primary's lease\n");
      while (!*stop) {
        Stmt q(*db_, "SELECT pid, heartbeat FROM icheck_controller WHERE id = 1");
        double hb = q.step() ? q.f64(1) : 0;
        if (wall() - hb > lease) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(int(cfg_.heartbeat_interval * 500)));
      }
      if (*stop) return 0;
      std::fprintf(stderr, "icheckd controller: primary lease expired, taking over on %s\n", addr_.c_str());
    }
    take_lease(opt_.standby);
    lease_db_ = std::make_unique<Db>(cfg_.state_file, false);
    std::thread lease_th([&] { lease_loop(stop); });
    if (is_unix_address(addr_)) fs::create_directories(fs::path(addr_.substr(5)).parent_path());
    Socket l = listen_on(addr_);
    std::printf("READY %s\n", bound_address(l, addr_).c_str());
    std::fflush(stdout);
    std::thread mon([&] { monitor(stop); });
    // Connections are authenticated on their own thread (a slow or hostile
    // TCP peer never stalls this loop), at most kMaxPerPeer at a time per
    // peer host and kMaxConnections in all.
    while (!*stop) {
      Socket c = accept_unauthenticated(l, 200);
      if (!c.valid()) continue;
      const std::string host = peer_host(c);
      bool over = active_ >= kMaxConnections;
      if (!over && !host.empty()) {
        std::lock_guard<std::mutex> g(peers_mu_);
        if (per_peer_[host] >= kMaxPerPeer) over = true;
        else per_peer_[host]++;
      }
      if (over) {
        std::fprintf(stderr, "icheckd controller: refused a connection from %s: too many connections\n",
                     host.empty() ? "a local peer" : host.c_str());
        try { send_msg(c, {{"error", "busy: too many connections to the controller from " + host}}); } catch (...) {}
        continue;
      }
      auto sp = std::make_shared<Socket>(std::move(c));
      active_++;
      std::thread([this, sp, host] {
        if (authenticate_accepted(*sp)) serve(*sp);
        if (!host.empty()) {
          std::lock_guard<std::mutex> g(peers_mu_);
          if (--per_peer_[host] <= 0) per_peer_.erase(host);
        }
        active_--;
      }).detach();
    }
    mon.join();
    lease_th.join();
    // the per-connection threads use this object: wait for them (each ends
    // within its 10 s receive timeout plus its request)
    while (active_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (fenced_) std::fprintf(stderr, "icheckd controller: stopped (fenced by epoch %lld)\n", (long long)fenced_by_);
    return fenced_ ? 3 : 0;
  }

 private:
  /// Become the active controller: take the next controller epoch. A
  /// standby taking over also gives the nodes a fresh grace period (their
  /// managers must find it first), and relaunches in flight too (their first
  /// heartbeat must find it), in the same transaction.
  void take_lease(bool takeover) {
    std::lock_guard<std::mutex> g(mu_);
    db_->write_tx([&] {
      TxDepth depth;
      if (takeover) {
        Stmt(*db_, "UPDATE icheck_nodes SET last_heartbeat = ? WHERE state = 'up'").bind(1, wall()).run();
        Stmt(*db_, "UPDATE icheck_nodes SET relaunch_at = ? WHERE state = 'relaunching'").bind(1, wall()).run();
      }
      int64_t cur = 0;
      {
        Stmt q(*db_, "SELECT epoch FROM icheck_controller WHERE id = 1");
        if (q.step()) cur = q.i64(0);
      }
      epoch_ = cur + 1;
      Stmt(*db_, "INSERT INTO icheck_controller(id, address, pid, heartbeat, epoch) VALUES(1, ?, ?, ?, ?) "
                 "ON CONFLICT(id) DO UPDATE SET address = excluded.address, pid = excluded.pid, "
                 "heartbeat = excluded.heartbeat, epoch = excluded.epoch")
          .bind(1, addr_).bind(2, int64_t(::getpid())).bind(3, wall()).bind(4, epoch_).run();
    });
    std::fprintf(stderr, "icheckd controller: active with epoch %lld\n", (long long)epoch_);
  }

  /// Renew the lease every half heartbeat interval on its own connection,
  /// never waiting for mu_ (requests that start agents hold it for long).
  /// The row must still carry our epoch: otherwise a standby took over
  /// while we were stalled, and we stop (fenced).
  void lease_loop(std::atomic<bool>* stop) {
    while (!*stop) {
      try {
        Stmt(*lease_db_, "UPDATE icheck_controller SET heartbeat = ? WHERE id = 1 AND epoch = ?")
            .bind(1, wall()).bind(2, epoch_).run();
        if (lease_db_->changes() == 0) fence("the lease");
      } catch (const std::exception& e) {
        std::fprintf(stderr, "icheckd controller: lease: %s\n", e.what());
      }
      for (int i = 0; i < int(cfg_.heartbeat_interval * 5) && !*stop; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  /// A newer controller epoch holds the state file: stop acting at once.
  void fence(const char* where) {
    int64_t cur = -1;
    try {
      Stmt q(*lease_db_, "SELECT epoch FROM icheck_controller WHERE id = 1");
      if (q.step()) cur = q.i64(0);
    } catch (...) {
    }
    if (!fenced_.exchange(true))
      std::fprintf(stderr, "icheckd controller: fenced (%s): epoch %lld holds the state file, this one has %lld; stopping\n",
                   where, (long long)cur, (long long)epoch_);
    fenced_by_ = cur;
    if (stop_) *stop_ = true;
  }

  /// Every request and every supervision pass first checks that this
  /// controller still holds the state file (caller holds mu_).
  void check_epoch() {
    if (fenced_) throw std::runtime_error("fenced: this controller was superseded by a newer one");
    Stmt q(*db_, "SELECT epoch FROM icheck_controller WHERE id = 1");
    if (q.step() && q.i64(0) == epoch_) return;
    fence("a request");
    throw std::runtime_error("fenced: this controller was superseded by a newer one");
  }

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
  void tx(const std::function<void()>& fn) {
    if (tx_depth_ > 0) {
      fn();
      return;
    }
    db_->write_tx([&] {
      if (fenced_) throw Fenced("fenced: this controller was superseded by a newer one");
      int64_t cur = -1;
      {
        Stmt q(*db_, "SELECT epoch FROM icheck_controller WHERE id = 1");
        if (q.step()) cur = q.i64(0);
      }
      if (cur != epoch_) {
        fence("a state write");
        throw Fenced("fenced: controller epoch " + std::to_string(cur) + " holds the state file, this one has " +
                     std::to_string(epoch_) + "; change refused");
      }
      TxDepth depth;
      fn();
    });
  }
  struct TxDepth {
    TxDepth() { ++tx_depth_; }
    ~TxDepth() { --tx_depth_; }
  };
  /// SQLite authorizer of db_: row changes only inside tx() (or take_lease).
  static int authorize(void*, int action, const char*, const char*, const char*, const char*) {
    if ((action == SQLITE_INSERT || action == SQLITE_UPDATE || action == SQLITE_DELETE) && tx_depth_ == 0)
      return SQLITE_DENY;
    return SQLITE_OK;
  }

  void monitor(std::atomic<bool>* stop) {
    double last_dyn = wall();
    while (!*stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(int(cfg_.heartbeat_interval * 500)));
      try {
        std::lock_guard<std::mutex> g(mu_);
        check_epoch();
        check_nodes();
        if (wall() - last_dyn > dyn_.read_interval) {  // Listing 6.2 readInterval
          dyn_ = load_dynamic(cfg_.dynamic_file, cfg_.dyn);
          last_dyn = wall();
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "icheckd controller: monitor: %s\n", e.what());
      }
    }
  }

  std::vector<std::string> nodes_where(const std::string& cond, double t) {
    Stmt q(*db_, "SELECT node FROM icheck_nodes WHERE " + cond);
    q.bind(1, t);
    std::vector<std::string> out;
    while (q.step()) out.push_back(q.text(0));
    return out;
  }

  /// Node supervision (§6.5.2), every half heartbeat interval: an up node
  /// silent for heartbeat_misses x heartbeat_interval s is lost; a relaunch
  /// whose command failed, or whose manager sent no heartbeat within that
  /// window, is retried or ends with the node down; a node up for
  /// manager_relaunch_reset s gets its relaunch attempts back.
  void check_nodes() {
    const double now = wall(), window = cfg_.heartbeat_interval * cfg_.heartbeat_misses;
    for (auto& n : nodes_where("state = 'up' AND last_heartbeat < ?", now - window))
      node_lost(n, "no heartbeat for " + secs(window));
    std::vector<std::pair<pid_t, int>> done;
    {
      std::lock_guard<std::mutex> g(reaped_->mu);
      done.swap(reaped_->done);
    }
    for (auto& [pid, st] : done) {
      children_.erase(pid);
      if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;  // a launcher that forked the manager off
      Stmt q(*db_, "SELECT node FROM icheck_nodes WHERE state = 'relaunching' AND relaunch_pid = ?");
      q.bind(1, int64_t(pid));
      if (!q.step()) continue;  // not (or no longer) the attempt in flight
      std::string n = q.text(0);
      q.reset();
      relaunch_failed(n, "the launch command (pid " + std::to_string(pid) + ") ended with " + describe_status(st));
    }
    for (auto& n : nodes_where("state = 'relaunching' AND relaunch_at < ?", now - window)) {
      abandon_attempt(n);
      relaunch_failed(n, "no heartbeat from the new manager within " + secs(window));
    }
    tx([&] {
      Stmt(*db_, "UPDATE icheck_nodes SET relaunches = 0 WHERE state = 'up' AND relaunches > 0 AND up_since < ?")
          .bind(1, now - cfg_.manager_relaunch_reset).run();
    });
  }

  /// A relaunch attempt of node n timed out: SIGKILL the process group of its
  /// launch command (its own session), so that a hung launcher or a manager
  /// that would register late does not race the next attempt. Only children
  /// of this controller not yet reaped are signalled (no recycled pid is hit).
  void abandon_attempt(const std::string& n) {
    Stmt q(*db_, "SELECT relaunch_pid FROM icheck_nodes WHERE node = ?");
    q.bind(1, n);
    if (!q.step()) return;
    const pid_t pid = pid_t(q.i64(0));
    if (pid > 1 && children_.count(pid)) ::kill(-pid, SIGKILL);
  }

  /// The agents of node n are gone (they exit with their manager): their
  /// applications are marked for agent change (new agents at the next probe).
  void lose_agents(const std::string& n) {
    tx([&] {
      Stmt(*db_, "UPDATE icheck_apps SET needs_change = 1 WHERE id IN "
                 "(SELECT app_id FROM icheck_agents WHERE node = ? AND state = 'up')")
          .bind(1, n).run();
      Stmt(*db_, "UPDATE icheck_agents SET state = 'lost' WHERE node = ? AND state = 'up'").bind(1, n).run();
    });
  }

  /// Node n's manager is alive but failed a request: down until its next heartbeat.
  void mark_node_down(const std::string& n) {
    std::fprintf(stderr, "icheckd controller: node %s: down\n", n.c_str());
    tx([&] {
      Stmt(*db_, "UPDATE icheck_nodes SET state = 'down' WHERE node = ?").bind(1, n).run();
      lose_agents(n);
    });
  }

  /// §6.5.2 "Manager Failure": node n's manager is lost (missed heartbeats,
  /// or unreachable). Its applications get new agents at their next probe,
  /// and the controller relaunches the manager, or marks the node down.
  void node_lost(const std::string& n, const std::string& why) {
    std::fprintf(stderr, "icheckd controller: node %s: manager lost (%s)\n", n.c_str(), why.c_str());
    lose_agents(n);
    relaunch_or_down(n);
  }

  void relaunch_failed(const std::string& n, const std::string& why) {
    std::fprintf(stderr, "icheckd controller: node %s: relaunch failed: %s\n", n.c_str(), why.c_str());
    relaunch_or_down(n);
  }

  /// Start the next relaunch of node n's manager with manager_launch
  /// (detached; output appended to run_dir/manager-<n>.log, pid appended to
  /// run_dir/pids for icheck-down) and mark the node 'relaunching': its first
  /// heartbeat is awaited for heartbeat_misses x heartbeat_interval s. Marks
  /// the node 'down' instead when manager_launch is empty or the node has
  /// used its manager_relaunch_attempts ("if it fails, it indicates that the
  /// node is down", §6.5.2).
  void relaunch_or_down(const std::string& n) {
    const std::string cmd = manager_launch_command(cfg_, n);
    int used = 0;
    {
      Stmt q(*db_, "SELECT relaunches FROM icheck_nodes WHERE node = ?");
      q.bind(1, n);
      if (q.step()) used = int(q.i64(0));
    }
    const int max = cfg_.manager_relaunch_attempts;
    while (!cmd.empty() && used < max) {
      ++used;
      try {
        pid_t pid = spawn_detached(cmd, (fs::path(cfg_.run_dir) / ("manager-" + n + ".log")).string(), reaped_);
        children_.insert(pid);
        record_pid("manager-" + n, pid);
        tx([&] {
          Stmt(*db_, "UPDATE icheck_nodes SET state = 'relaunching', relaunches = ?, relaunch_at = ?, relaunch_pid = ? "
                     "WHERE node = ?")
              .bind(1, used).bind(2, wall()).bind(3, int64_t(pid)).bind(4, n).run();
        });
        std::fprintf(stderr, "icheckd controller: node %s: relaunching its manager (attempt %d of %d, pid %d): %s\n",
                     n.c_str(), used, max, int(pid), cmd.c_str());
        return;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "icheckd controller: node %s: relaunch attempt %d of %d: %s\n", n.c_str(), used, max,
                     e.what());
      }
    }
    tx([&] {
      Stmt(*db_, "UPDATE icheck_nodes SET state = 'down', relaunches = ?, relaunch_at = NULL, relaunch_pid = NULL "
                 "WHERE node = ?")
          .bind(1, used).bind(2, n).run();
    });
    std::fprintf(stderr, "icheckd controller: node %s: down (%s)\n", n.c_str(),
                 cmd.empty() ? "relaunch disabled: manager_launch is empty"
                             : ("after " + std::to_string(used) + " relaunch attempt(s)").c_str());
  }

  /// Append "<name> <pid>" to run_dir/pids, the list icheck-down stops.
  void record_pid(const std::string& name, pid_t pid) {
    const std::string line = name + " " + std::to_string(pid) + "\n";
    const std::string path = (fs::path(cfg_.run_dir) / "pids").string();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0 || ::write(fd, line.data(), line.size()) != ssize_t(line.size()))
      std::fprintf(stderr, "icheckd controller: cannot record %s in %s: %s\n", line.c_str(), path.c_str(),
                   std::strerror(errno));
    if (fd >= 0) ::close(fd);
  }

  void serve(Socket& s) {
    try {
      json m = recv_msg(s, 10000);
      json r;
      try {
        r = handle(m, peer_uid(s));
      } catch (const std::exception& e) {
        r = {{"error", e.what()}};
      }
      send_msg(s, r);
    } catch (...) {
    }
  }

  /// Run f without the controller lock when the calling request holds it
  /// (handle()); relocked afterwards, also when f throws. For network calls
  /// (issue 11 item 12): a slow manager must not starve heartbeats, the
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
  int64_t owned_app(const json& m, long uid, const std::string& op) {
    auto it = m.find("app_id");
    if (it == m.end() || !it->is_number_integer() || it->get<int64_t>() < 0)
      throw std::runtime_error("invalid: " + op + " needs a non-negative integer app_id");
    const int64_t app = it->get<int64_t>();
    Stmt q(*db_, "SELECT uid, token FROM icheck_apps WHERE id = ?");
    q.bind(1, app);
    if (!q.step()) throw std::runtime_error("noent: unknown application " + std::to_string(app));
    const long owner = long(q.i64(0));
    const std::string token = q.is_null(1) ? "" : q.text(1);
    q.reset();
    // Anybody but the service also needs the application's token (the
    // only check when the peer's identity is unknown: ICHECK_TCP_AUTH=none).
    if (!(uid >= 0 && is_service(uid))) {
      auto t = m.find("app_token");
      if (token.empty() || t == m.end() || !t->is_string() || t->get<std::string>() != token) {
        std::fprintf(stderr, "icheckd controller: refused %s of application %lld: wrong or missing app_token\n",
                     op.c_str(), (long long)app);
        throw std::runtime_error("perm: " + op + " of application " + std::to_string(app) +
                                 " without its app_token (given at registration)");
      }
    }
    if (uid >= 0 && !is_service(uid) && owner != uid) {
      std::fprintf(stderr, "icheckd controller: refused %s of application %lld (uid %ld) from uid %ld\n", op.c_str(),
                   (long long)app, owner, uid);
      throw std::runtime_error("perm: application " + std::to_string(app) + " belongs to another user");
    }
    return app;
  }

  json handle(const json& m, long uid) {
    if (!m.is_object()) throw std::runtime_error("invalid: a request must be a JSON object");
    std::string op = m.value("op", "");
    if (uid >= 0 && m.contains("uid") && !is_service(uid) &&
        (!m["uid"].is_number_integer() || m["uid"].get<long>() != uid))
      throw std::runtime_error("perm: uid mismatch");
    if (op == "heartbeat" && uid >= 0 && !is_service(uid)) {
      std::fprintf(stderr, "icheckd controller: refused heartbeat from uid %ld: only managers (uid %ld) may send it\n",
                   uid, long(::geteuid()));
      throw std::runtime_error("perm: only the iCheck managers (uid " + std::to_string(::geteuid()) +
                               ") may send heartbeat");
    }
    std::unique_lock<std::mutex> g(mu_);
    tl_lock_ = &g;  // network calls of this request release it (unlocked())
    struct Clear {
      ~Clear() { tl_lock_ = nullptr; }
    } clear;
    check_epoch();
    if (op == "heartbeat") return heartbeat(m);
    if (op == "register") return reg(m, uid);
    if (op == "probe") {
      AppBusy busy(*this, owned_app(m, uid, op));
      return probe(m);
    }
    if (op == "status") return status(uid);
    const int64_t app_id = owned_app(m, uid, op);
    if (op == "version") {
      const int64_t app = app_id;
      auto vj = m.find("v");
      if (vj == m.end() || !vj->is_number_integer() || vj->get<int64_t>() < 1)
        throw std::runtime_error("invalid: version needs an integer v >= 1");
      const int64_t v = vj->get<int64_t>();
      tx([&] {
        Stmt(*db_, "INSERT OR REPLACE INTO icheck_versions VALUES(?,?,?,?,?,?)")
            .bind(1, app).bind(2, v).bind(3, m.value("bytes", int64_t(0))).bind(4, m.value("tsync", 0.0))
            .bind(5, m.value("mode", "")).bind(6, wall()).run();
        Stmt(*db_, "UPDATE icheck_apps SET version = ?, bytes = ?, updated = ? WHERE id = ?")
            .bind(1, v).bind(2, m.value("bytes", int64_t(0))).bind(3, wall()).bind(4, app).run();
      });
      return {{"ok", true}};
    }
    if (op == "agent_failed") {
      tx([&] { Stmt(*db_, "UPDATE icheck_apps SET needs_change = 1 WHERE id = ?").bind(1, app_id).run(); });
      return {{"ok", true}};
    }
    if (op == "finalize") {
      const int64_t app = app_id;
      AppBusy busy(*this, app);
      tx([&] { Stmt(*db_, "UPDATE icheck_apps SET is_active = 0 WHERE id = ?").bind(1, app).run(); });
      if (m.value("persist", false)) return {{"ok", true}};
      // Stop the agents only once the whole set's newest version is on the
      // second level; otherwise they keep it in memory (a rerun restarts
      // from them) rather than lose it.
      if (!flush_set(app)) {
        std::fprintf(stderr, "icheckd controller: application %lld: keeping its agents (newest version not durable)\n",
                     (long long)app);
        return {{"ok", true}, {"kept_agents", true}};
      }
      stop_agents(app, false);
      return {{"ok", true}};
    }
    throw std::runtime_error("invalid: unknown op '" + op + "'");
  }

  /// Manager heartbeat (§6.3 metrics, §6.5.2 availability). epoch 0 is a
  /// registration: the manager gets the node's next incarnation number, and
  /// the agents of any previous manager of the node are lost. A heartbeat
  /// with an epoch older than the node's is refused with {"superseded":
  /// true}: that manager was replaced (e.g. it was stopped and relaunched)
  /// and must exit with its agents.
  json heartbeat(const json& m) {
    const std::string node = m.at("node");
    const int64_t e = m.value("epoch", int64_t(0));
    int64_t cur = 0;
    std::string state;
    {
      Stmt q(*db_, "SELECT epoch, state FROM icheck_nodes WHERE node = ?");
      q.bind(1, node);
      if (q.step()) cur = q.i64(0), state = q.text(1);
    }
    if (e > 0 && e < cur)
      return {{"error", "superseded: node " + node + " is served by a newer manager (epoch " + std::to_string(cur) +
                            ", this one has epoch " + std::to_string(e) + ")"},
              {"superseded", true},
              {"epoch", cur}};
    const bool registering = e == 0;
    const int64_t epoch = registering ? cur + 1 : e;
    const int64_t pid = m.value("pid", int64_t(0));
    tx([&] {
      if (registering && cur > 0) lose_agents(node);  // the previous manager's agents exit with it
      Stmt(*db_, "INSERT INTO icheck_nodes(node, address, state, last_heartbeat, metrics, epoch, pid, host, up_since) "
                 "VALUES(?1, ?2, 'up', ?3, ?4, ?5, ?6, ?7, ?3) "
                 "ON CONFLICT(node) DO UPDATE SET address = excluded.address, state = 'up', "
                 "last_heartbeat = excluded.last_heartbeat, metrics = excluded.metrics, epoch = excluded.epoch, "
                 "pid = excluded.pid, host = excluded.host, relaunch_at = NULL, relaunch_pid = NULL, "
                 "up_since = CASE WHEN icheck_nodes.state = 'up' AND icheck_nodes.epoch = excluded.epoch "
                 "THEN COALESCE(icheck_nodes.up_since, excluded.up_since) ELSE excluded.up_since END")
          .bind(1, node).bind(2, m.value("address", "")).bind(3, wall()).bind(4, m.value("metrics", json::object()).dump())
          .bind(5, epoch).bind(6, pid).bind(7, m.value("host", ""))
          .run();
      for (auto& a : m.value("dead_agents", json::array())) {
        std::string id = a;
        Stmt(*db_, "UPDATE icheck_apps SET needs_change = 1 WHERE id = (SELECT app_id FROM icheck_agents WHERE id = ?)")
            .bind(1, id).run();
        Stmt(*db_, "UPDATE icheck_agents SET state = 'lost' WHERE id = ?").bind(1, id).run();
      }
    });
    if (registering || state != "up")
      std::fprintf(stderr, "icheckd controller: node %s: manager pid %lld %s (epoch %lld)%s\n", node.c_str(),
                   (long long)pid, registering ? "registered" : "is back", (long long)epoch,
                   state == "relaunching" ? ", relaunch done" : "");
    // Agents the manager still runs that this controller no longer counts
    // on (declared lost while the manager was unreachable, or stopped): the
    // manager stops them, so they do not hold their memory for nothing.
    // Ids the controller does not know yet (a start in flight) are left alone.
    json stop_ids = json::array();
    for (auto& a : m.value("agents", json::array())) {
      if (!a.is_string()) continue;
      Stmt q(*db_, "SELECT state FROM icheck_agents WHERE id = ? AND node = ?");
      q.bind(1, a.get<std::string>()).bind(2, node);
      if (q.step() && q.text(0) != "up") stop_ids.push_back(a);
    }
    if (!stop_ids.empty())
      std::fprintf(stderr, "icheckd controller: node %s: asking the manager to stop %zu agent(s) no longer in use\n",
                   node.c_str(), stop_ids.size());
    return {{"ok", true}, {"heartbeat_interval", cfg_.heartbeat_interval}, {"epoch", epoch}, {"stop_agents", stop_ids}};
  }

  std::vector<NodeStatus> nodes() {
    std::vector<NodeStatus> out;
    Stmt q(*db_, "SELECT n.node, n.state, n.metrics, (SELECT COUNT(*) FROM icheck_agents a WHERE a.node = n.node AND a.state = 'up') "
                 "FROM icheck_nodes n");
    while (q.step()) {
      NodeStatus s;
      s.node = q.text(0);
      s.up = q.text(1) == "up";
      json mt = json::parse(q.text(2), nullptr, false);
      if (mt.is_object()) {
        s.avail_mem = mt.value("avail_mem", 0.0);
        s.bandwidth = mt.value("bandwidth", 0.0);
        s.ncops_per_min = mt.value("ncops_per_min", 0.0);
        s.power = mt.value("power", 0.0);
      }
      s.agents = int(q.i64(3));
      out.push_back(s);
    }
    return out;
  }

  std::string node_address(const std::string& n) {
    Stmt q(*db_, "SELECT address FROM icheck_nodes WHERE node = ?");
    q.bind(1, n);
    return q.step() ? q.text(0) : "";
  }

  /// Alg. 6: place `count` agents for app and start them through the managers.
  json start_agents(int64_t app, const std::string& name, uint32_t uid, int count) {
    std::set<std::string> excluded;  // nodes whose manager refused this start
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto ns = nodes();
      std::erase_if(ns, [&](const NodeStatus& n) { return excluded.count(n.node) > 0; });
      auto cand = select_candidates(ns, dyn_.node_selection, dyn_.candidate_count);
      if (cand.empty()) throw std::runtime_error("no checkpoint node is up");
      std::vector<int> cap;
      for (auto& c : cand)
        for (auto& n : ns)
          if (n.node == c) cap.push_back(std::max(0, dyn_.max_agents_node - n.agents));
      auto placed = place_agents(count, cand, cap, dyn_.distribution, dyn_.block_size);
      if (placed.empty()) throw std::runtime_error("every checkpoint node is full");
      std::map<std::string, int> per;
      for (auto& p : placed) per[p]++;
      json agents = json::array();
      bool failed = false;
      for (auto& [node, k] : per) {
        try {
          const std::string address = node_address(node);
          std::vector<std::string> ids;
          for (int i = 0; i < k; ++i) {
            std::string id = "a";  // built by appending: GCC 12 warns falsely (-Wrestrict) on "a" + ...
            id += std::to_string(app) + "-" + std::to_string(++seq_) + "-" + std::to_string(int64_t(wall()) % 100000);
            ids.push_back(id);
          }
          const json req = {{"op", "start"}, {"app", name}, {"uid", uid}, {"ids", ids},
                            {"pfs_every", dyn_.pfs_every}, {"multi_level", dyn_.enable_multi_level},
                            {"compress_threshold_mb", dyn_.compress_threshold_mb}, {"keep", dyn_.keep_versions},
                            {"max_bytes", uint64_t(std::max(0.0, dyn_.max_mem_node_gb) * 1e9)}};
          // the manager may take up to request_timeout_ms: without the lock
          // (heartbeats and other applications' requests go on meanwhile)
          json r = unlocked([&] {
            Socket s = connect_to(address, 2000);
            send_msg(s, req);
            return recv_msg(s, cfg_.request_timeout_ms);
          });
          if (r.contains("error")) throw std::runtime_error("refused: " + r["error"].get<std::string>());
          try {
            tx([&] {
              for (auto& a : r.at("agents"))
                Stmt(*db_, "INSERT OR REPLACE INTO icheck_agents VALUES(?,?,?,?,?,?, 'up', ?)")
                    .bind(1, a.at("id").get<std::string>()).bind(2, app).bind(3, node)
                    .bind(4, a.at("address").get<std::string>()).bind(5, a.value("host", ""))
                    .bind(6, a.value("pid", int64_t(0))).bind(7, wall()).run();
            });
          } catch (const Fenced&) {
            // superseded while the manager started them: nobody will count
            // on these agents, so they must not hold their memory
            unlocked([&] {
              try {
                Socket s = connect_to(address, 1000);
                request(s, {{"op", "stop"}, {"ids", ids}, {"flush", false}}, 30000);
              } catch (const std::exception& e) {
                std::fprintf(stderr, "icheckd controller: stopping agents started while fenced: %s\n", e.what());
              }
              return 0;
            });
            throw;
          }
          for (auto& a : r.at("agents")) {
            json x = a;
            x["node"] = node;
            agents.push_back(x);
          }
        } catch (const Fenced&) {
          throw;
        } catch (const WireError& e) {  // no answer: the manager is lost (§6.5.3)
          node_lost(node, std::string("unreachable: ") + e.what());
          failed = true;
        } catch (const std::exception& e) {  // it answers, but could not start these agents:
          // the node and its other agents stay up; this start avoids it
          std::fprintf(stderr, "icheckd controller: manager of %s: %s (node left out of this placement)\n",
                       node.c_str(), e.what());
          excluded.insert(node);
          failed = true;
        }
      }
      if (!failed) return agents;
      // roll back the partial set and retry without the failed node
      std::vector<std::string> ids;
      for (auto& a : agents) ids.push_back(a.at("id").get<std::string>());
      stop_agent_ids(ids, false);
    }
    throw std::runtime_error("could not start agents");
  }

  /// Send one request per node to that node's manager, all nodes at once and
  /// without the lock; `make` builds the request from the node's agent ids.
  /// Returns (node, error) for every node whose manager did not answer or
  /// reported flush errors.
  std::vector<std::pair<std::string, std::string>> ask_managers(
      const std::map<std::string, std::vector<std::string>>& per_node,
      const std::function<json(const std::vector<std::string>&)>& make) {
    std::vector<std::pair<std::string, std::string>> jobs;  // node, address
    for (auto& [node, v] : per_node) jobs.emplace_back(node, node_address(node));
    std::vector<std::string> errs(jobs.size());
    unlocked([&] {
      std::vector<std::thread> th;
      for (size_t i = 0; i < jobs.size(); ++i)
        th.emplace_back([&, i] {
          try {
            Socket s = connect_to(jobs[i].second, 1000);
            json r = request(s, make(per_node.at(jobs[i].first)), 65000);
            for (auto& e : r.value("flush_errors", json::array()))
              errs[i] += (errs[i].empty() ? "" : "; ") + e.value("id", std::string("?")) + ": " +
                         e.value("error", std::string("?"));
          } catch (const std::exception& e) {
            errs[i] = std::string("manager unreachable: ") + e.what();
          }
        });
      for (auto& t : th) t.join();
      return 0;
    });
    std::vector<std::pair<std::string, std::string>> failed;
    for (size_t i = 0; i < jobs.size(); ++i)
      if (!errs[i].empty()) failed.emplace_back(jobs[i].first, errs[i]);
    return failed;
  }

  /// Stop agents `ids` through their managers, all nodes at once (one
  /// request per node, concurrently): with `flush` every agent of the set
  /// flushes at the same time, so agent 0 gets every part and writes the
  /// manifest (stopping one by one would stop agent 0 before the others'
  /// parts reach it). Flush failures are logged. Returns false when some
  /// flush failed or a manager did not answer.
  bool stop_agent_ids(const std::vector<std::string>& ids, bool flush) {
    std::map<std::string, std::vector<std::string>> per_node;
    for (auto& id : ids) {
      Stmt q(*db_, "SELECT node FROM icheck_agents WHERE id = ?");
      q.bind(1, id);
      if (q.step()) per_node[q.text(0)].push_back(id);
    }
    auto failed = ask_managers(per_node, [&](const std::vector<std::string>& v) {
      return json{{"op", "stop"}, {"ids", v}, {"flush", flush}};
    });
    for (auto& [node, err] : failed)
      std::fprintf(stderr, "icheckd controller: node %s: stopping agents%s: %s\n", node.c_str(),
                   flush ? " with flush" : "", err.c_str());
    tx([&] {
      for (auto& id : ids) Stmt(*db_, "UPDATE icheck_agents SET state = 'stopped' WHERE id = ?").bind(1, id).run();
    });
    return failed.empty();
  }
  /// Flush the up agents of `app` through their managers, all nodes at once,
  /// without the lock. true when every agent reported its newest version
  /// durable (manifest written); failures are logged. The agents keep
  /// running either way.
  bool flush_set(int64_t app) {
    std::map<std::string, std::vector<std::string>> per_node;
    {
      Stmt q(*db_, "SELECT id, node FROM icheck_agents WHERE app_id = ? AND state = 'up'");
      q.bind(1, app);
      while (q.step()) per_node[q.text(1)].push_back(q.text(0));
    }
    if (per_node.empty()) return true;
    auto failed = ask_managers(per_node, [](const std::vector<std::string>& v) {
      return json{{"op", "flush"}, {"ids", v}, {"timeout_ms", 50000}};
    });
    for (auto& [node, err] : failed)
      std::fprintf(stderr, "icheckd controller: application %lld: flush on node %s failed: %s\n", (long long)app,
                   node.c_str(), err.c_str());
    return failed.empty();
  }

  bool stop_agents(int64_t app, bool flush) {
    std::vector<std::string> ids;
    Stmt q(*db_, "SELECT id FROM icheck_agents WHERE app_id = ? AND state = 'up'");
    q.bind(1, app);
    while (q.step()) ids.push_back(q.text(0));
    q.reset();  // see reg()
    const bool ok = stop_agent_ids(ids, flush);
    tx([&] { Stmt(*db_, "UPDATE icheck_agents SET state = 'gone' WHERE app_id = ? AND state = 'lost'").bind(1, app).run(); });
    return ok;
  }

  json agents_of(int64_t app, bool* all_up) {
    json out = json::array();
    *all_up = true;
    Stmt q(*db_, "SELECT a.id, a.address, a.host, a.node, a.state, n.state FROM icheck_agents a "
                 "LEFT JOIN icheck_nodes n ON n.node = a.node WHERE a.app_id = ? AND a.state IN ('up','lost') ORDER BY a.rowid");
    q.bind(1, app);
    while (q.step()) {
      if (q.text(4) != "up" || q.text(5) != "up") *all_up = false;
      out.push_back({{"id", q.text(0)}, {"address", q.text(1)}, {"host", q.text(2)}, {"node", q.text(3)}});
    }
    if (out.empty()) *all_up = false;
    return out;
  }

  /// The per-application transfer settings of the dynamic configuration
  /// (Listing 6.2; §6.2) that the library applies at run time: transfer
  /// (pull|push), strategy (mr|shmr), chunk_mb and buffer_mb (MiB), zero_copy.
  /// Sent with the registration reply and with every probe reply, so that a
  /// changed dynamic file reaches running applications at their next probe.
  json params() const {
    return {{"transfer", dyn_.transfer}, {"strategy", dyn_.strategy}, {"chunk_mb", dyn_.chunk_mb},
            {"buffer_mb", dyn_.buffer_mb}, {"zero_copy", dyn_.zero_copy}};
  }

  // Alg. 5 agent_selection, on icheck_init.
  json reg(const json& m, long peer) {
    std::string name = m.at("app");
    // the application is bound to the authenticated uid (the claimed one
    // only from the service, or when the identity is unknown)
    if (!m.contains("uid") || !m["uid"].is_number_unsigned() || m["uid"].get<uint64_t>() > UINT32_MAX)
      throw std::runtime_error("invalid: register needs the uid");
    uint32_t uid = m["uid"].get<uint32_t>();
    if (peer >= 0 && !is_service(peer) && long(uid) != peer) throw std::runtime_error("perm: uid mismatch");
    AppShape shape{m.value("nodes", 1), m.value("procs", 1), m.value("strategy", "mr") == "shmr"};
    Stmt q(*db_, "SELECT id, num_agents, version, token FROM icheck_apps WHERE name = ? AND uid = ?");
    q.bind(1, name).bind(2, int64_t(uid));
    int64_t id = -1, version = 0;
    int num = 0;
    std::string token;
    if (q.step()) id = q.i64(0), num = int(q.i64(1)), version = q.i64(2), token = q.is_null(3) ? "" : q.text(3);
    q.reset();  // end the read: a statement kept open would pin a stale snapshot
                // and make this connection's writes fail "database is locked"
                // once the lease thread (own connection) has written
    std::optional<AppBusy> busy;
    if (id >= 0) busy.emplace(*this, id);
    if (id >= 0 && token.empty()) {  // registered before tokens existed
      token = random_token();
      tx([&] { Stmt(*db_, "UPDATE icheck_apps SET token = ? WHERE id = ?").bind(1, token).bind(2, id).run(); });
    }
    if (id >= 0) {
      bool up = false;
      json agents = agents_of(id, &up);
      tx([&] {
        Stmt(*db_, "UPDATE icheck_apps SET is_active = 1, nodes = ?, procs = ?, updated = ? WHERE id = ?")
            .bind(1, shape.num_nodes).bind(2, shape.num_procs).bind(3, wall()).bind(4, id).run();
      });
      if (up && int(agents.size()) <= agent_upper_bound(shape, dyn_))  // restart: same agents (l. 17-19)
        return {{"app_id", id}, {"app_token", token}, {"agents", agents}, {"version", version}, {"params", params()}};
      if (up && !flush_set(id)) {  // the set must not go before its newest version is durable
        std::fprintf(stderr, "icheckd controller: application %lld: keeping its agents (newest version not durable)\n",
                     (long long)id);
        return {{"app_id", id}, {"app_token", token}, {"agents", agents}, {"version", version}, {"params", params()}};
      }
      stop_agents(id, false);
      num = std::clamp(num, 1, agent_upper_bound(shape, dyn_));
    } else {
      num = initial_agent_count(shape, dyn_);  // l. 15-16
      token = random_token();
      tx([&] {
        Stmt(*db_, "INSERT INTO icheck_apps(name, uid, nodes, procs, strategy, num_agents, old_tsync, updated, token) "
                   "VALUES(?,?,?,?,?,?,-1,?,?)")
            .bind(1, name).bind(2, int64_t(uid)).bind(3, shape.num_nodes).bind(4, shape.num_procs)
            .bind(5, shape.shmr ? "shmr" : "mr").bind(6, num).bind(7, wall()).bind(8, token).run();
        id = db_->last_insert_id();
      });
      busy.emplace(*this, id);
    }
    json agents = start_agents(id, name, uid, num);
    tx([&] {
      Stmt(*db_, "UPDATE icheck_apps SET num_agents = ?, needs_change = 0 WHERE id = ?")
          .bind(1, int(agents.size())).bind(2, id).run();
    });
    return {{"app_id", id}, {"app_token", token}, {"agents", agents}, {"version", version}, {"params", params()}};
  }

  // Alg. 5 get_num_agents on icheck_probe_agents, and failure recovery (§6.5.2).
  json probe(const json& m) {
    int64_t id = m.at("app_id");
    Stmt q(*db_, "SELECT name, uid, num_agents, old_tsync, last_change, frozen, needs_change, nodes, procs, strategy FROM icheck_apps WHERE id = ?");
    q.bind(1, id);
    if (!q.step()) throw std::runtime_error("noent: unknown application");
    std::string name = q.text(0);
    uint32_t uid = uint32_t(q.i64(1));
    CountState cs{int(q.i64(2)), q.f64(3), int(q.i64(4)), q.i64(5) != 0};
    bool needs = q.i64(6) != 0 || m.value("failed", false);
    AppShape shape{m.value("nodes", int(q.i64(7))), m.value("procs", int(q.i64(8))), q.text(9) == "shmr"};
    q.reset();  // see reg()
    bool up = false;
    json cur = agents_of(id, &up);
    if (!up) needs = true;
    CountState next = cs;
    if (dyn_.is_dynamic_as && !needs) next = next_agent_count(cs, m.value("tsync", -1.0), shape, dyn_);
    if (needs) next.num_agents = std::clamp(cs.num_agents, 1, agent_upper_bound(shape, dyn_));
    bool change = needs || next.num_agents != cs.num_agents;
    tx([&] {
      Stmt(*db_, "UPDATE icheck_apps SET old_tsync = ?, last_change = ?, frozen = ?, nodes = ?, procs = ? WHERE id = ?")
          .bind(1, next.old_tsync).bind(2, next.last_change).bind(3, int(next.frozen)).bind(4, shape.num_nodes)
          .bind(5, shape.num_procs).bind(6, id).run();
    });
    if (!change) return {{"changed", false}, {"num_agents", cs.num_agents}, {"params", params()}};
    // The old agents go only once their newest version is on the second
    // level (all of them up: a flush failure keeps them, the change waits
    // for a later probe); with agents lost, what they held is gone anyway.
    if (up && !flush_set(id)) {
      std::fprintf(stderr, "icheckd controller: application %lld: agent change postponed (newest version not durable)\n",
                   (long long)id);
      return {{"changed", false}, {"num_agents", cs.num_agents}, {"params", params()}};
    }
    stop_agents(id, false);
    json agents = start_agents(id, name, uid, next.num_agents);
    tx([&] {
      Stmt(*db_, "UPDATE icheck_apps SET num_agents = ?, needs_change = 0 WHERE id = ?")
          .bind(1, int(agents.size())).bind(2, id).run();
    });
    return {{"changed", true}, {"agents", agents}, {"num_agents", agents.size()}, {"params", params()}};
  }

  /// Status for `uid`: everything for the service; an ordinary user sees
  /// the nodes and only their own applications.
  json status(long uid = 0) {
    json out = {{"controller", addr_}, {"pid", ::getpid()}, {"nodes", json::array()}, {"apps", json::array()}};
    Stmt n(*db_, "SELECT node, address, state, last_heartbeat, metrics, epoch, pid, host, relaunches, relaunch_pid "
                 "FROM icheck_nodes ORDER BY node");
    while (n.step())
      out["nodes"].push_back({{"node", n.text(0)}, {"address", n.text(1)}, {"state", n.text(2)},
                              {"last_heartbeat", n.f64(3)}, {"metrics", json::parse(n.text(4), nullptr, false)},
                              {"epoch", n.i64(5)}, {"manager_pid", n.i64(6)}, {"host", n.text(7)},
                              {"relaunches", n.i64(8)}, {"relaunch_pid", n.i64(9)}});
    Stmt a(*db_, "SELECT id, name, uid, num_agents, version, is_active, needs_change FROM icheck_apps ORDER BY id");
    while (a.step()) {
      if (uid >= 0 && !is_service(uid) && a.i64(2) != uid) continue;
      bool up;
      out["apps"].push_back({{"id", a.i64(0)}, {"name", a.text(1)}, {"uid", a.i64(2)}, {"num_agents", a.i64(3)},
                             {"version", a.i64(4)}, {"active", a.i64(5) != 0}, {"needs_change", a.i64(6) != 0},
                             {"agents", agents_of(a.i64(0), &up)}});
    }
    return out;
  }

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
  static constexpr int kMaxPerPeer = 32;
  static inline thread_local std::unique_lock<std::mutex>* tl_lock_ = nullptr;  ///< lock held by this request thread
  std::set<int64_t> busy_apps_;     ///< applications with an agent change in progress (under mu_)
  std::condition_variable busy_cv_;  ///< connections at once from one TCP peer host
  std::mutex peers_mu_;
  std::map<std::string, int> per_peer_;
};
}  // namespace

int run_controller(const ControllerOptions& o, std::atomic<bool>* stop) {
  Controller c(o);
  return c.run(stop);
}

}  // namespace dynres::icheck
