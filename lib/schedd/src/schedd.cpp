#include "dynres/schedd.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <fstream>
#include <iostream>
#include <set>
#include <unordered_map>

#include "dynres/hostlist.hpp"
#include "dynres/jobspec.hpp"
#include "dynres/launch.hpp"
#include "dynres/paths.hpp"
#include "dynres/proto.hpp"
#include "dynres/resize_store.hpp"
#include "dynres/corridor.hpp"
#include "dynres/requests.hpp"
#include "intake.hpp"
#include "node_watch.hpp"
#include "icheck_server.hpp"
#include "power_view.hpp"
#include "resize_server.hpp"
#include "expand_after.hpp"
#include "slow_watch.hpp"

namespace dynres::schedd {

namespace {
sched::JobKind kind_of(const std::string& k) {
  if (k == "moldable") return sched::JobKind::moldable;
  if (k == "malleable") return sched::JobKind::malleable;
  return sched::JobKind::rigid;
}

void log(const std::string& msg) { daemon_log(msg); }
}  // namespace

namespace {
/// sbatch -w / -x of job j as node indices of snap (names not in the
/// snapshot are dropped from -x; a -w node that is gone leaves the job a
/// required index that is never idle, so it waits).
void restrict_nodes(sched::WaitingJob& w, const JobRecord& j, const sched::Snapshot& snap) {
  if (j.req_nodelist.empty() && j.exc_nodelist.empty()) return;
  auto index = [&](const std::string& name) {
    for (size_t i = 0; i < snap.nodes.size(); ++i)
      if (snap.nodes[i].name == name) return static_cast<int>(i);
    return -1;
  };
  try {
    for (auto& n : expand_hostlist(j.req_nodelist)) w.required.push_back(index(n));
    for (auto& n : expand_hostlist(j.exc_nodelist))
      if (int i = index(n); i >= 0) w.excluded.push_back(i);
  } catch (const std::exception&) {  // a malformed list in the state file: the job waits
    w.required = {-1};
  }
}
}  // namespace

sched::Snapshot build_snapshot(State& st, double now, std::vector<int64_t>& node_ids,
                               std::map<int64_t, std::string>* blocked) {
  sched::Snapshot s;
  s.now = now;
  std::unordered_map<int64_t, std::vector<int>> held;
  node_ids.clear();
  // Nodes and jobs from one read transaction: a job end committed between
  // the two reads would leave nodes held by a job that is not running.
  std::vector<NodeRecord> nodes;
  std::vector<JobRecord> jobs;
  std::map<int64_t, std::string> dep_block;
  std::set<int64_t> lent;  // nodes lent to iCheck: neither idle nor a job's
  st.db().read_tx([&] {
    nodes = st.nodes();
    lent = icheck_lent_ids(st);
    jobs = st.jobs({kRunning, kPending});
    for (auto& j : jobs) {  // dependencies, in the same snapshot
      if (j.state != kPending || j.dependency.empty()) continue;
      auto why = dependency_status(
          j.dependency, [&](int64_t id) { return st.job(id); },
          [&] {
            for (auto& o : jobs)
              if (o.id != j.id && o.uid == j.uid && o.name == j.name &&
                  (o.state == kRunning || (o.state == kPending && o.id < j.id)))
                return true;
            return false;
          });
      if (!why.empty()) dep_block[j.id] = why;
    }
    // --array ...%max: at most max tasks of an array run at once
    std::map<int64_t, int> room;
    for (auto& j : jobs)
      if (j.array_job_id && j.array_max > 0 && !room.count(*j.array_job_id)) room[*j.array_job_id] = j.array_max;
    if (!room.empty()) {
      for (auto& j : jobs)
        if (j.state == kRunning && j.array_job_id && room.count(*j.array_job_id)) --room[*j.array_job_id];
      for (auto& j : jobs) {
        if (j.state != kPending || !j.array_job_id || !room.count(*j.array_job_id) || dep_block.count(j.id) || j.held ||
            (j.begin_time && *j.begin_time > now))
          continue;
        if (room[*j.array_job_id] > 0) --room[*j.array_job_id];
        else dep_block[j.id] = "JobArrayTaskLimit";
      }
    }
  });
  if (blocked) *blocked = dep_block;
  for (auto& n : nodes) {
    int idx = static_cast<int>(s.nodes.size());
    s.nodes.push_back({n.name, n.state == "up", lent.count(n.id) ? sched::kIcheckJob : n.job_id});
    s.nodes.back().lost = n.state == "down";
    node_ids.push_back(n.id);
    if (n.job_id) held[n.job_id].push_back(idx);
  }
  for (auto& j : jobs) {
    // held jobs and jobs whose --begin time has not come are not the policy's to see
    if (j.state == kPending && (j.held || (j.begin_time && *j.begin_time > now) || dep_block.count(j.id))) continue;
    auto c = sched::parse_constraint(j.constraint).value_or(sched::Constraint::none);
    if (j.state == kRunning) {
      sched::RunningJob r;
      r.id = j.id;
      r.kind = kind_of(j.kind);
      r.nodes = held[j.id];
      r.req_nodes = j.req_nodes;
      r.min_nodes = j.min_nodes;
      r.max_nodes = j.max_nodes;
      r.constraint = c;
      r.start_time = j.start_time.value_or(now);
      r.time_limit = static_cast<double>(j.time_limit);
      s.running.push_back(std::move(r));
    } else {
      sched::WaitingJob w;
      w.id = j.id;
      w.kind = kind_of(j.kind);
      w.req_nodes = j.req_nodes;
      w.min_nodes = j.min_nodes;
      w.max_nodes = j.max_nodes;
      w.constraint = c;
      w.time_limit = static_cast<double>(j.time_limit);
      w.submit_time = j.submit_time;
      restrict_nodes(w, j, s);
      s.waiting.push_back(w);
    }
  }
  return s;
}

std::map<int64_t, double> expected_starts(sched::Snapshot snap, const sched::PolicyConfig& policy) {
  std::map<int64_t, double> out;
  auto limit = [&](double l) { return l > 0 ? l : policy.default_time_limit; };
  const size_t rounds = 2 * (snap.waiting.size() + snap.running.size()) + 4;
  for (size_t round = 0; round < rounds && !snap.waiting.empty(); ++round) {
    auto d = sched::decide(snap, policy);
    for (auto& s : d.starts) {
      auto w = std::find_if(snap.waiting.begin(), snap.waiting.end(), [&](auto& x) { return x.id == s.job; });
      if (w == snap.waiting.end()) continue;
      out[s.job] = snap.now;
      sched::RunningJob r;
      r.id = w->id;
      r.kind = w->kind;
      r.nodes = s.nodes;
      r.min_nodes = w->min_nodes;
      r.max_nodes = w->max_nodes;
      r.constraint = w->constraint;
      r.start_time = snap.now;
      r.time_limit = w->time_limit;
      for (int n : s.nodes) snap.nodes.at(n).job = w->id;
      snap.running.push_back(r);
      snap.waiting.erase(w);
    }
    if (snap.waiting.empty() || snap.running.empty()) break;
    // advance to the next end and release what ends then
    double next = INFINITY;
    for (auto& r : snap.running) next = std::min(next, std::max(snap.now, r.start_time + limit(r.time_limit)));
    snap.now = next;
    std::vector<sched::RunningJob> still;
    for (auto& r : snap.running) {
      if (std::max(r.start_time + limit(r.time_limit), 0.0) <= next) {
        for (int n : r.nodes) snap.nodes.at(n).job = 0;
      } else {
        still.push_back(r);
      }
    }
    snap.running.swap(still);
  }
  return out;
}

std::optional<double> test_only_start(State& st, const JobRecord& j, const sched::PolicyConfig& policy) {
  double now = now_seconds();
  if (j.held || !j.dependency.empty()) return std::nullopt;
  std::vector<int64_t> node_ids;
  auto snap = build_snapshot(st, now, node_ids);
  sched::WaitingJob w;
  w.id = -1;  // never a real id
  w.kind = kind_of(j.kind);
  w.req_nodes = j.req_nodes;
  w.min_nodes = j.min_nodes;
  w.max_nodes = j.max_nodes;
  w.constraint = sched::parse_constraint(j.constraint).value_or(sched::Constraint::none);
  w.time_limit = static_cast<double>(j.time_limit);
  w.submit_time = now;
  restrict_nodes(w, j, snap);
  snap.waiting.push_back(w);
  auto exp = expected_starts(snap, policy);
  auto it = exp.find(-1);
  if (it == exp.end()) return std::nullopt;
  return std::max(it->second, j.begin_time.value_or(0));
}

Daemon::Daemon() : refused_(std::make_unique<RateLimitedLog>([](const std::string& m) { log(m); })) {}

void Daemon::refused_log_(const std::string& key, const std::string& msg, double now) { (*refused_)(key, msg, now); }
Daemon::~Daemon() = default;

State& Daemon::state() {
  if (!state_) state_ = std::make_unique<State>(state_path(home));
  return *state_;
}

ResizeServer& Daemon::resizer() {
  if (!resize_) {
    resize::Options o;
    o.timeout = cfg.resize_timeout;
    o.backoff = cfg.resize_backoff;
    o.restart_timeout = cfg.resize_restart_timeout;
    // refusals come from the jobs' own messages: rate-limited per job and op
    resize_ = std::make_unique<ResizeServer>(o, [this](const std::string& m) {
      auto at = m.find("refused");
      if (at == std::string::npos) return log(m);
      refused_log_("job:" + m.substr(0, at), m, now_seconds());
    });
    resize_->set_shrink_by_count(cfg.resize_shrink_by_count);
    // a job registered with iCheck hears of its resize first (APP_INFO)
    resize_->set_order_hook([this](State& st, int64_t job, int from, int to, double now) {
      icheck().app_info(st, job, from, to, now);
    });
    resize_->set_perf_listener([this](int64_t job, pid_t pid, const std::string& node, const sched::RankSample& r,
                                      double t) { slow_watch().perf(job, pid, node, r, t); });
    resize_->load(state(), now_seconds());
  }
  return *resize_;
}

SlowWatch& Daemon::slow_watch() {
  if (!slow_) slow_ = std::make_unique<SlowWatch>(cfg.slow_nodes, expand_after(), [](const std::string& m) { log(m); });
  return *slow_;
}

ExpandAfter& Daemon::expand_after() {
  if (!after_) after_ = std::make_unique<ExpandAfter>([](const std::string& m) { log(m); });
  return *after_;
}

IcheckServer& Daemon::icheck() {
  if (!icheck_)
    icheck_ = std::make_unique<IcheckServer>(cfg.icheck_status_timeout, [](const std::string& m) { log(m); },
                                             cfg.icheck_reclaim_backoff, cfg.icheck_reclaim_backoff_max);
  return *icheck_;
}
namespace {
/// The state file and the cluster directory are the owner's alone: modes
/// opened up after the start (chmod by hand, an old recipe for sharing) are
/// closed again on every pass, and logged.
void keep_private(const std::string& home) {
  struct stat sb {};
  if (::stat(home.c_str(), &sb) == 0 && (sb.st_mode & 022)) {
    ::chmod(home.c_str(), sb.st_mode & 07755);
    log("the cluster directory " + home + " was writable by group or others: made it go-w again");
  }
  for (const char* f : {"/state.db", "/state.db-wal", "/state.db-shm"}) {
    std::string p = home + f;
    if (::stat(p.c_str(), &sb) == 0 && (sb.st_mode & 077)) {
      ::chmod(p.c_str(), 0600);
      log(p + " was open to group or others: made it 0600 again (the tools ask mjsched instead)");
    }
  }
}
}  // namespace

int Daemon::pass() {
  keep_private(home);
  State& st = state();
  react_to_nodes();  // node failures and drains first: a lost node's job is not "supervisor lost"
  // Reconcile: a RUNNING job needs a live supervisor. Suspects are confirmed
  // together after one short pause (no transient misread), so any number of
  // lost supervisors costs one pause, not one each.
  std::vector<JobRecord> suspects;
  for (auto& j : st.jobs({kRunning}))
    if (!launch::supervisor_alive(j.supervisor_pid.value_or(0), j.id)) suspects.push_back(j);
  if (!suspects.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    react_to_nodes();  // a supervisor that died with its node is a node failure (agent lost meanwhile)
    for (auto& j : suspects) {
      if (launch::supervisor_alive(j.supervisor_pid.value_or(0), j.id)) continue;
      // end time taken now, after the pause, and the record re-read (the
      // supervisor may have recorded the end meanwhile)
      if (launch::end_orphaned_job(st, home, j.id, kFailed, "supervisor lost", now_seconds())) {
        auto fresh = st.job(j.id);
        log("job " + std::to_string(j.id) + ": supervisor " + std::to_string(j.supervisor_pid.value_or(0)) +
            " is gone; recorded " + (fresh ? fresh->state + " (" + fresh->reason + ")" : std::string("?")));
      }
    }
  }
  double now = now_seconds();
  ResizeServer& rz = resizer();
  rz.tick(st, now);  // orders past their deadline are rolled back; ended jobs forgotten
  expand_after().pass(st, rz, now);  // swaps' second halves, lost nodes' replacements (expand_after.hpp)
  slow_watch().pass(st, rz, now);    // migration off slow nodes [HoG14 §5.5] (slow_watch.hpp)
  std::vector<int64_t> node_ids;
  std::map<int64_t, std::string> blocked;
  auto snap = build_snapshot(st, now, node_ids, &blocked);
  rz.annotate(snap, now);
  expand_after().annotate(snap);  // idle nodes kept for a swap or a replacement
  icheck().annotate(st, snap, node_ids, now);
  if (cfg.policy.policy == sched::Policy::power) {  // the corridor is re-read every pass (§5.2.1)
    if (!power_) power_ = std::make_unique<PowerView>(home);
    power_->annotate(st, snap, now, cfg.policy, cfg.tick);
  } else if (power::has_power_schema(st.db())) {
    // another policy with a corridor set and power.record_samples: only the
    // modelled samples, so that pcorridor counts its violations as mjsim does
    // (static backfill in bench/power/live.sh); the policy never reads snap.power
    try {
      if (!power_) power_ = std::make_unique<PowerView>(home);
      if (power_->record_samples()) power_->annotate(st, snap, now, cfg.policy, cfg.tick);
    } catch (const std::exception& e) {
      if (!power_warned_) log(std::string("power samples not recorded: ") + e.what());
      power_warned_ = true;
    }
  }
  if (!blocked.empty()) {  // Dependency / DependencyNeverSatisfied / JobArrayTaskLimit, written only where it changed
    std::vector<std::pair<int64_t, std::string>> changed;
    for (auto& j : st.jobs({kPending})) {
      auto it = blocked.find(j.id);
      if (it != blocked.end() && j.reason != it->second) changed.push_back(*it);
    }
    if (!changed.empty())
      st.db().write_tx([&] {
        for (auto& [id, why] : changed) st.set_reason(id, why);
      });
  }
  const bool malleable = sched::is_malleable_policy(cfg.policy.policy);
  if (snap.waiting.empty() && !malleable && !snap.icheck.present) return 0;
  auto d = sched::decide(snap, cfg.policy);
  icheck().apply(st, d, snap, node_ids, now);  // grants use idle nodes no start of d uses
  if (d.notes != last_notes_) {
    for (auto& n : d.notes) log("policy: " + n);
    last_notes_ = d.notes;
  }
  // Orders first (shrinks, then expands). A start that needs nodes a shrink
  // releases waits for a later pass: those nodes stay the shrinking job's
  // until it commits (the simulator releases them at once).
  std::vector<int> busy = rz.issue(st, d, snap, now);
  std::sort(busy.begin(), busy.end());
  int started = 0;
  std::map<int64_t, uint32_t> uid_of;
  for (auto& j : st.jobs({kPending})) uid_of[j.id] = static_cast<uint32_t>(j.uid);
  for (auto& s : d.starts) {
    if (std::any_of(s.nodes.begin(), s.nodes.end(), [&](int i) { return std::binary_search(busy.begin(), busy.end(), i); }))
      continue;
    std::vector<int64_t> ids;
    std::vector<std::string> names;
    for (int i : s.nodes) ids.push_back(node_ids.at(i)), names.push_back(snap.nodes.at(i).name);
    launch::StepConfig sc{home, s.job, cfg.launcher, cfg.kill_wait};
    auto sp = launch::spawn_supervisor(stepd_path, sc);
    bool ok = false;
    const std::string secret = resize::new_secret();
    try {
      ok = st.start_job(s.job, ids, sp.pid, now_seconds(), [&] { resize::admit(st, s.job, secret); });
    } catch (const std::exception& e) {
      log("job " + std::to_string(s.job) + ": start failed: " + e.what());
    }
    launch::release(sp);  // the supervisor runs the job only if the start committed
    if (ok) {
      ++started;
      rz.admit(s.job, uid_of.count(s.job) ? uid_of[s.job] : static_cast<uint32_t>(::getuid()), secret, names);
      log("job " + std::to_string(s.job) + " started on " + std::to_string(ids.size()) + " node(s)");
    }
  }
  // Record hold reasons (squeue's NODELIST(REASON)) only where they changed:
  // a write transaction per pass would stall concurrent mjsub processes.
  std::unordered_map<int64_t, std::string> old_reason;
  for (auto& j : st.jobs({kPending})) old_reason[j.id] = j.reason;
  std::vector<std::pair<int64_t, std::string>> changed;
  for (auto& [id, why] : d.holds) {
    auto it = old_reason.find(id);
    if (it != old_reason.end() && it->second != why) changed.push_back({id, why});
  }
  if (!changed.empty()) {
    st.db().write_tx([&] {
      for (auto& [id, why] : changed) st.set_reason(id, why);
    });
  }
  return started;
}

bool Daemon::serve_request(int c, const Peer& peer, const proto::json& m, bool& wake) {
  std::string op = m.is_object() && m.contains("op") && m["op"].is_string() ? m["op"].get<std::string>() : "";
  if (op == "ping") {
    proto::send_frame(c, {{"ok", true},
                          {"pid", ::getpid()},
                          {"policy", sched::to_string(cfg.policy.policy)},
                          {"launcher", cfg.launcher},
                          {"tick", cfg.tick},
                          {"min_interval", cfg.min_interval},
                          {"stats", {{"passes", stats_.passes},
                                     {"submissions", stats_.submissions},
                                     {"submit_groups", stats_.submit_groups},
                                     {"largest_group", stats_.largest_group},
                                     {"pass_seconds", stats_.pass_seconds},
                                     {"submit_seconds", stats_.submit_seconds}}}});
    return false;
  }
  if (op == "wake") {  // a job's supervisor, or a tool: run a pass soon
    wake = true;
    return false;
  }
  if (bool handled = false, kept = serve_node_request(c, op, m, wake, &handled); handled) return kept;
  if (op == "mj_hello") {  // a job's process (authenticated by its secret): the connection stays open
    resizer().adopt(state(), c, m);
    wake = true;
    return true;
  }
  if (op.rfind("ic_", 0) == 0) {  // the iCheck controller [John24 §7.3.1.1]
    ucred cr{};
    socklen_t len = sizeof cr;
    if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
      proto::send_frame(c, {{"error", "cannot identify the peer"}});
      return false;
    }
    auto a = icheck().serve(state(), static_cast<uint32_t>(cr.uid), m, now_seconds());
    wake = a.contains("ok") && op != "ic_query";
    proto::send_frame(c, a);
    return false;
  }
  if (op == "resize") {  // mjcontrol resize JOBID N: checked and answered by the resize server
    double now = now_seconds();
    std::vector<int64_t> node_ids;
    auto snap = build_snapshot(state(), now, node_ids);
    resizer().annotate(snap, now);
    proto::send_frame(c, resizer().admin_request(state(), peer.uid, m, snap, now));
    return false;
  }
  // the tools' requests (dynres/requests.hpp): submit, cancel, hold, ...
  Ctx ctx{state(), home, cfg, Authority{static_cast<uint32_t>(::geteuid())}};
  auto reply = tool_reply(ctx, peer, m);
  wake = wake || ctx.wake;
  proto::send_frame(c, reply);
  return false;
}

proto::json Daemon::tool_reply(Ctx& ctx, const Peer& peer, const proto::json& m) {
  auto reply = handle_request(ctx, peer, m);
  if (!reply) {
    const std::string op = m.value("op", std::string());
    refused_log_("op:" + std::to_string(peer.uid), "refused an unknown request '" + op.substr(0, 64) + "' of uid " +
                                                     std::to_string(peer.uid), now_seconds());
    reply = proto::json{{"error", "unknown request '" + op.substr(0, 64) + "'"}};
  }
  if (reply->contains("error"))
    refused_log_("bad:" + std::to_string(peer.uid), "refused a request of uid " + std::to_string(peer.uid) + ": " +
                     (*reply)["error"].dump(-1, ' ', false, proto::json::error_handler_t::replace).substr(0, 300),
                 now_seconds());
  return *reply;
}

bool Daemon::group_committed(const proto::json& m) {
  if (!m.is_object()) return false;
  auto op = m.find("op"), t = m.find("test_only");
  return op != m.end() && *op == "submit" && (t == m.end() || *t != true);
}

void Daemon::serve_submissions(std::vector<Incoming*>& group, bool& wake) {
  // Group commit: every submission that arrived together is recorded in one
  // write transaction (each in its own savepoint, so a refused one changes
  // nothing), and the answers go out only after the COMMIT: a job id a
  // client holds is in the state file whatever happens to mjsched next.
  const double t0 = now_seconds();
  State& st = state();
  Ctx ctx{st, home, cfg, Authority{static_cast<uint32_t>(::geteuid())}};
  std::vector<proto::json> replies(group.size());
  bool committed = false;
  try {
    st.db().write_tx([&] {
      for (size_t i = 0; i < group.size(); ++i) {
        if (!st.db().in_transaction()) throw DbError("the transaction ended early");
        replies[i] = tool_reply(ctx, group[i]->peer, group[i]->msg);
      }
      if (!st.db().in_transaction()) throw DbError("the transaction ended early");
    });
    committed = true;
  } catch (const std::exception& e) {  // nothing of the group was kept: each alone, answered with its own outcome
    log("group commit of " + std::to_string(group.size()) + " submission(s) failed (" + e.what() +
        "); recording them one by one");
  }
  if (!committed)
    for (size_t i = 0; i < group.size(); ++i) replies[i] = tool_reply(ctx, group[i]->peer, group[i]->msg);
  stats_.submit_groups += committed ? 1 : static_cast<int64_t>(group.size());
  stats_.submissions += static_cast<int64_t>(group.size());
  stats_.largest_group = std::max<int64_t>(stats_.largest_group, committed ? static_cast<int64_t>(group.size()) : 1);
  stats_.submit_seconds += now_seconds() - t0;
  wake = wake || ctx.wake;
  for (size_t i = 0; i < group.size(); ++i) {
    try {
      proto::send_frame(group[i]->fd, replies[i]);
    } catch (const std::exception& e) {  // the client left: its job is recorded all the same
      refused_log_("bad:" + std::to_string(group[i]->peer.uid), std::string("answer not delivered: ") + e.what(),
                   now_seconds());
    }
    ::close(group[i]->fd);
  }
}

namespace {
int g_lock_fd = -1;  // held for the daemon's lifetime
}

void Daemon::lock() {
  if (g_lock_fd >= 0) return;
  std::string lockp = home + "/mjsched.lock";
  int fd = ::open(lockp.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot open " + lockp + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    std::string pid;
    std::ifstream(home + "/mjsched.pid") >> pid;
    throw std::runtime_error("a scheduler is already running for " + home + (pid.empty() ? "" : " (pid " + pid + ")"));
  }
  g_lock_fd = fd;
}

int Daemon::run() {
  lock();
  {
    std::ofstream pf(home + "/mjsched.pid");
    pf << ::getpid() << "\n";
  }
  {
    State fresh(state_path(home), true);  // create / migrate
    resize::migrate(fresh);
    icheck_migrate(fresh);
  }
  resizer();  // rebuild the resize book; roll back orders a previous scheduler left
  int lfd = proto::listen_unix(sched_socket(home));
  // Anyone who can reach the directory may connect: every request is checked
  // against the peer's SO_PEERCRED identity (dynres/requests.hpp); the
  // directory's mode decides who reaches the socket.
  ::chmod(sched_socket(home).c_str(), 0666);
  ::fcntl(lfd, F_SETFL, ::fcntl(lfd, F_GETFL) | O_NONBLOCK);  // accept_all takes what is queued, never waits
  ::chmod(state_path(home).c_str(), 0600);

  ::signal(SIGCHLD, SIG_IGN);  // supervisors are reaped automatically
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  int sfd = ::signalfd(-1, &set, SFD_CLOEXEC);

  log("serving " + home + " policy=" + sched::to_string(cfg.policy.policy) + " launcher=" + cfg.launcher +
      " tick=" + std::to_string(cfg.tick) + "s");
  Intake intake(*refused_);
  bool wake = true;
  double next_tick = 0;
  // Pass coalescing: a wake-up (submission, job end, ...) runs a pass at once
  // when the previous one ended at least min_interval ago, and else when that
  // interval is over, so a burst of wake-ups is served by one pass. The
  // interval is stretched to the previous pass's own duration: in a storm on
  // a long queue, passes take at most half of the daemon's time.
  double woken_pass_at = 0;
  while (!stop) {
    double now = now_seconds();
    if (now >= next_tick || (wake && now >= woken_pass_at)) {
      try {
        pass();
      } catch (const std::exception& e) {
        log(std::string("pass failed: ") + e.what());
        state_.reset();  // reopen the state file on the next pass
      }
      ++stats_.passes;
      wake = false;
      const double end = now_seconds();
      stats_.pass_seconds += end - now;
      next_tick = end + cfg.tick;
      woken_pass_at = end + std::max(cfg.min_interval, std::min(end - now, cfg.tick));
    }
    std::vector<pollfd> p = {{lfd, POLLIN, 0}, {sfd, POLLIN, 0}};
    const std::vector<int> job_fds = resizer().fds(), node_fds = node_watch().fds(), new_fds = intake.fds();
    for (int fd : job_fds) p.push_back({fd, POLLIN, 0});
    for (int fd : node_fds) p.push_back({fd, POLLIN, 0});
    for (int fd : new_fds) p.push_back({fd, POLLIN, 0});
    const size_t agents = 2 + job_fds.size(), intake_at = agents + node_fds.size();
    const double until = wake ? std::min(next_tick, woken_pass_at) : next_tick;
    int timeout = std::max(1, std::min(1000, static_cast<int>(std::ceil((until - now_seconds()) * 1000))));
    if (::poll(p.data(), p.size(), timeout) < 0) continue;
    for (size_t k = agents; k < intake_at; ++k)  // a lost agent wakes a pass at once
      if ((p[k].revents & (POLLIN | POLLHUP | POLLERR)) && node_watch().on_readable(p[k].fd, now_seconds())) wake = true;
    for (size_t k = 2; k < agents; ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      try {
        resizer().on_readable(state(), p[k].fd, now_seconds());
      } catch (const std::exception& e) {
        refused_log_("job", std::string("job connection: ") + e.what(), now_seconds());
      }
      wake = true;  // a commit or registration changes what the policy sees
    }
    // Every request complete now is served in this round; the submissions
    // among them together (serve_submissions: one transaction, one pass).
    std::vector<Intake::Ready> ready;
    for (size_t k = intake_at; k < p.size(); ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (auto r = intake.on_readable(p[k].fd, now_seconds())) ready.push_back(std::move(*r));
    }
    intake.expire(now_seconds());
    if (p[0].revents & POLLIN)  // complete requests are served now; unfinished first frames wait in the intake
      intake.accept_all_into(lfd, now_seconds(), ready);
    std::vector<Incoming*> group;
    for (auto& r : ready) {
      if (group_committed(r.msg)) {
        group.push_back(&r);
        continue;
      }
      bool kept = false;
      try {
        kept = serve_request(r.fd, r.peer, r.msg, wake);
      } catch (const std::exception& e) {
        refused_log_("bad:" + std::to_string(r.peer.uid), std::string("bad message: ") + e.what(), now_seconds());
      }
      if (!kept) ::close(r.fd);
    }
    if (!group.empty()) serve_submissions(group, wake);
    if (p[1].revents & POLLIN) {
      signalfd_siginfo si;
      (void)!::read(sfd, &si, sizeof si);
      log("signal " + std::to_string(si.ssi_signo) + ": stopping (jobs keep running)");
      break;
    }
  }
  ::close(lfd);
  ::unlink(sched_socket(home).c_str());
  ::unlink((home + "/mjsched.pid").c_str());
  return 0;
}

}  // namespace dynres::schedd
