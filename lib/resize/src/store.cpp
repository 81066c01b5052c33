// The resize protocol's records in the state file (resize_store.hpp).
#include <sys/random.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "dynres/db.hpp"
#include "dynres/hostlist.hpp"
#include "dynres/paths.hpp"
#include "dynres/proto.hpp"
#include "dynres/resize_store.hpp"
#include "dynres/state.hpp"

namespace dynres::resize {

namespace {
const std::vector<std::string> kMigrations = {
    R"sql(
CREATE TABLE mj_jobs(
  job_id        INTEGER PRIMARY KEY REFERENCES jobs(id),
  secret        TEXT NOT NULL,
  phase         TEXT NOT NULL DEFAULT 'rigid' CHECK(phase IN ('rigid','accepting','closed')),
  mtct          REAL,
  perf_time     REAL,
  progress      REAL,
  last_resize   REAL,
  restart_count INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE resize_orders(
  id          INTEGER PRIMARY KEY,
  job_id      INTEGER NOT NULL REFERENCES jobs(id),
  kind        TEXT NOT NULL CHECK(kind IN ('expand','shrink')),
  nodes       TEXT NOT NULL DEFAULT '',
  count       INTEGER NOT NULL DEFAULT 0,
  from_nodes  INTEGER NOT NULL,
  to_nodes    INTEGER NOT NULL,
  sent        REAL NOT NULL,
  deadline    REAL NOT NULL,
  state       TEXT NOT NULL CHECK(state IN ('sent','begun','committed','rolled_back')),
  restart     INTEGER NOT NULL DEFAULT 0,
  relaunched  INTEGER NOT NULL DEFAULT 0,
  begun       REAL,
  settled     REAL,
  reason      TEXT NOT NULL DEFAULT '',
  released    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX resize_orders_by_job ON resize_orders(job_id, id);
CREATE INDEX resize_orders_by_state ON resize_orders(state);
)sql",
};

const char* phase_name(Phase p) { return p == Phase::adapting ? "accepting" : to_string(p); }
Phase phase_of(const std::string& s) {
  if (s == "accepting") return Phase::accepting;
  if (s == "closed") return Phase::closed;
  return Phase::rigid;
}

const char* kOrderCols =
    "o.id, o.job_id, o.kind, o.nodes, o.count, o.from_nodes, o.to_nodes, o.sent, o.deadline, o.state, o.restart, "
    "o.relaunched, o.begun, o.settled, o.reason, o.released";

OrderRecord order_from_row(const Stmt& s) {
  OrderRecord r;
  r.order.id = static_cast<uint64_t>(s.i64(0));
  r.order.job = s.i64(1);
  r.order.kind = s.text(2) == "expand" ? Kind::expand : Kind::shrink;
  r.order.nodes = s.text(3).empty() ? std::vector<std::string>{} : expand_hostlist(s.text(3));
  r.order.count = static_cast<int>(s.i64(4));
  r.from = static_cast<int>(s.i64(5));
  r.to = static_cast<int>(s.i64(6));
  r.order.sent = s.f64(7);
  r.order.deadline = s.f64(8);
  r.state = s.text(9);
  r.restart = s.i64(10) != 0;
  r.relaunched = s.i64(11) != 0;
  r.begun = s.opt_f64(12).value_or(-1);
  r.settled = s.opt_f64(13).value_or(-1);
  r.reason = s.text(14);
  r.released = s.text(15).empty() ? std::vector<std::string>{} : expand_hostlist(s.text(15));
  return r;
}

std::vector<OrderRecord> select_orders(State& st, const std::string& where, int64_t arg, bool bind) {
  std::vector<OrderRecord> out;
  Stmt s(st.db(), std::string("SELECT ") + kOrderCols + " FROM resize_orders o " + where);
  if (bind) s.bind(1, arg);
  while (s.step()) out.push_back(order_from_row(s));
  return out;
}

std::string fmt_s(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}
}  // namespace

const char* to_string(Kind k) { return k == Kind::expand ? "expand" : "shrink"; }

void migrate(State& st) { st.db().migrate("resize", kMigrations); }

std::string new_secret() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t r = ::getrandom(b + got, sizeof b - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(r);
  }
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

void admit(State& st, int64_t job, const std::string& secret) {
  Stmt s(st.db(), "INSERT OR REPLACE INTO mj_jobs(job_id, secret, phase) VALUES(?,?,'rigid')");
  s.bind(1, job).bind(2, secret).run();
}

namespace {
const char* kInfoCols = "m.job_id, m.secret, m.phase, m.mtct, m.perf_time, m.progress, m.last_resize, m.restart_count";
JobInfo info_from_row(const Stmt& s) {
  JobInfo i;
  i.job = s.i64(0);
  i.secret = s.text(1);
  i.phase = phase_of(s.text(2));
  i.mtct = s.opt_f64(3).value_or(-1);
  i.perf_time = s.opt_f64(4).value_or(-1);
  i.progress = s.opt_f64(5).value_or(-1);
  i.last_resize = s.opt_f64(6).value_or(-1);
  i.restart_count = static_cast<int>(s.i64(7));
  return i;
}
}  // namespace

std::optional<JobInfo> job_info(State& st, int64_t job) {
  Stmt s(st.db(), std::string("SELECT ") + kInfoCols + " FROM mj_jobs m WHERE m.job_id=?");
  s.bind(1, job);
  if (!s.step()) return std::nullopt;
  return info_from_row(s);
}

std::vector<JobInfo> running_infos(State& st) {
  std::vector<JobInfo> out;
  Stmt s(st.db(), std::string("SELECT ") + kInfoCols +
                      " FROM mj_jobs m JOIN jobs j ON j.id=m.job_id WHERE j.state='RUNNING' ORDER BY m.job_id");
  while (s.step()) out.push_back(info_from_row(s));
  return out;
}

void set_phase(State& st, int64_t job, Phase p, double now) {
  st.db().write_tx([&] {
    Stmt s(st.db(), "UPDATE mj_jobs SET phase=? WHERE job_id=?");
    s.bind(1, std::string(phase_name(p))).bind(2, job).run();
    st.event(now, job, p == Phase::closed ? "mj_deregister" : "mj_register", phase_name(p));
  });
}

void set_perf(State& st, int64_t job, double mtct, double now) {
  Stmt s(st.db(), "UPDATE mj_jobs SET mtct=?, perf_time=? WHERE job_id=?");
  s.bind(1, mtct).bind(2, now).bind(3, job).run();
}

void set_progress(State& st, int64_t job, double fraction) {
  Stmt s(st.db(), "UPDATE mj_jobs SET progress=? WHERE job_id=?");
  s.bind(1, fraction).bind(2, job).run();
}

void record_order(State& st, const Order& o, int from, int to) {
  st.db().write_tx([&] {
    Stmt s(st.db(),
           "INSERT INTO resize_orders(id, job_id, kind, nodes, count, from_nodes, to_nodes, sent, deadline, state) "
           "VALUES(?,?,?,?,?,?,?,?,?,'sent')");
    s.bind(1, static_cast<int64_t>(o.id)).bind(2, o.job).bind(3, std::string(to_string(o.kind)));
    s.bind(4, o.nodes.empty() ? std::string() : compress_hostlist(o.nodes)).bind(5, static_cast<int64_t>(o.count));
    s.bind(6, static_cast<int64_t>(from)).bind(7, static_cast<int64_t>(to)).bind(8, o.sent).bind(9, o.deadline).run();
    st.event(o.sent, o.job, "resize_order",
             std::string(to_string(o.kind)) + " order=" + std::to_string(o.id) + " from=" + std::to_string(from) +
                 " to=" + std::to_string(to) +
                 (o.nodes.empty() ? " count=" + std::to_string(o.count) : " nodes=" + compress_hostlist(o.nodes)));
  });
}

void record_begin(State& st, const Order& o, bool restart, double now) {
  st.db().write_tx([&] {
    Stmt s(st.db(),
           "UPDATE resize_orders SET state='begun', begun=?, restart=?, deadline=? WHERE id=? AND state IN "
           "('sent','begun')");
    s.bind(1, now).bind(2, static_cast<int64_t>(restart)).bind(3, o.deadline).bind(4, static_cast<int64_t>(o.id)).run();
    st.event(now, o.job, "adapt_begin",
             "order=" + std::to_string(o.id) + (restart ? " restart" : "") + " after=" + fmt_s(now - o.sent) + "s");
  });
}

bool relaunched_on_new_nodes(const OrderRecord& o) {
  return o.relaunched && (o.order.kind == Kind::expand || o.order.count == 0);
}

bool record_rollback(State& st, uint64_t id, const std::string& reason, double now, bool unless_relaunched) {
  bool done = false;
  st.db().write_tx([&] {
    auto o = order(st, id);
    if (!o || (o->state != "sent" && o->state != "begun")) return;
    if (unless_relaunched && relaunched_on_new_nodes(*o)) return;
    done = true;
    Stmt s(st.db(), "UPDATE resize_orders SET state='rolled_back', settled=?, reason=? WHERE id=?");
    s.bind(1, now).bind(2, reason).bind(3, static_cast<int64_t>(id)).run();
    st.event(now, o->order.job, "resize_rollback",
             std::string(to_string(o->order.kind)) + " order=" + std::to_string(id) + " after=" +
                 fmt_s(now - o->order.sent) + "s: " + reason);
  });
  return done;
}

bool commit(State& st, const Commit& c, double now) {
  bool ok = false;
  struct Abort {};
  const Order& o = c.order;
  try {
    st.db().write_tx([&] {
      auto rec = order(st, o.id);
      if (!rec || (rec->state != "sent" && rec->state != "begun")) return;
      Stmt js(st.db(), "SELECT state FROM jobs WHERE id=?");
      js.bind(1, o.job);
      if (!js.step() || js.text(0) != kRunning) return;
      if (o.kind == Kind::expand) {
        Stmt take(st.db(), "UPDATE nodes SET job_id=? WHERE name=? AND job_id IS NULL AND state='up'");
        for (auto& n : o.nodes) {
          take.bind(1, o.job).bind(2, n).run();
          if (st.db().changes() != 1) throw Abort{};
          take.reset();
        }
      } else {
        Stmt give(st.db(), "UPDATE nodes SET job_id=NULL WHERE name=? AND job_id=?");
        for (auto& n : c.released) {
          give.bind(1, n).bind(2, o.job).run();
          if (st.db().changes() != 1) throw Abort{};
          give.reset();
        }
      }
      std::vector<std::string> names;
      Stmt ns(st.db(), "SELECT name FROM nodes WHERE job_id=? ORDER BY id");
      ns.bind(1, o.job);
      while (ns.step()) names.push_back(ns.text(0));
      if (names.empty()) throw Abort{};
      std::string nl = compress_hostlist(names);
      Stmt prev(st.db(), "SELECT num_nodes FROM jobs WHERE id=?");
      prev.bind(1, o.job);
      int from = prev.step() ? static_cast<int>(prev.i64(0)) : 0;
      int to = static_cast<int>(names.size());
      Stmt up(st.db(), "UPDATE jobs SET num_nodes=?, nodelist=? WHERE id=?");
      up.bind(1, static_cast<int64_t>(to)).bind(2, nl).bind(3, o.job).run();
      Stmt close(st.db(), "UPDATE allocations SET end_time=? WHERE job_id=? AND end_time IS NULL");
      close.bind(1, now).bind(2, o.job).run();
      Stmt open(st.db(), "INSERT INTO allocations(job_id,nodelist,num_nodes,start_time) VALUES(?,?,?,?)");
      open.bind(1, o.job).bind(2, nl).bind(3, static_cast<int64_t>(to)).bind(4, now).run();
      Stmt ord(st.db(), "UPDATE resize_orders SET state='committed', settled=?, released=? WHERE id=?");
      ord.bind(1, now).bind(2, c.released.empty() ? std::string() : compress_hostlist(c.released));
      ord.bind(3, static_cast<int64_t>(o.id)).run();
      Stmt mj(st.db(), "UPDATE mj_jobs SET last_resize=? WHERE job_id=?");
      mj.bind(1, now).bind(2, o.job).run();
      st.event(now, o.job, to_string(o.kind),
               "from=" + std::to_string(from) + " to=" + std::to_string(to) + " order=" + std::to_string(o.id) +
                   " duration=" + fmt_s(now - o.sent) + "s nodes=" + nl);
      ok = true;
    });
  } catch (const Abort&) {
    return false;
  }
  return ok;
}

std::optional<OrderRecord> order(State& st, uint64_t id) {
  auto v = select_orders(st, "WHERE o.id=?", static_cast<int64_t>(id), true);
  if (v.empty()) return std::nullopt;
  return v.front();
}

std::vector<OrderRecord> outstanding(State& st) {
  return select_orders(st,
                       "JOIN jobs j ON j.id=o.job_id WHERE o.state IN ('sent','begun') AND j.state='RUNNING' "
                       "ORDER BY o.id",
                       0, false);
}

std::vector<OrderRecord> orders_of(State& st, int64_t job) {
  return select_orders(st, "WHERE o.job_id=? ORDER BY o.id", job, true);
}

uint64_t max_order_id(State& st) {
  Stmt s(st.db(), "SELECT COALESCE(MAX(id),0) FROM resize_orders");
  s.step();
  return static_cast<uint64_t>(s.i64(0));
}

std::optional<OrderRecord> pending_relaunch(State& st, int64_t job) {
  auto v = select_orders(st, "WHERE o.job_id=? AND o.restart=1 AND o.relaunched=0 ORDER BY o.id DESC LIMIT 1", job,
                         true);
  if (v.empty()) return std::nullopt;
  return v.front();
}

namespace {
void mark_relaunched_in_tx(State& st, uint64_t id) {
  auto o = order(st, id);
  if (!o || o->relaunched) return;
  Stmt s(st.db(), "UPDATE resize_orders SET relaunched=1 WHERE id=?");
  s.bind(1, static_cast<int64_t>(id)).run();
  Stmt m(st.db(), "UPDATE mj_jobs SET restart_count=restart_count+1 WHERE job_id=?");
  m.bind(1, o->order.job).run();
}
}  // namespace

void mark_relaunched(State& st, uint64_t id) {
  st.db().write_tx([&] { mark_relaunched_in_tx(st, id); });
}

std::optional<OrderRecord> take_relaunch(State& st, int64_t job) {
  std::optional<OrderRecord> r;
  st.db().write_tx([&] {
    r = pending_relaunch(st, job);
    if (r) mark_relaunched_in_tx(st, r->order.id);
  });
  return r;
}

std::string render_detail(State& st, int64_t job) {
  if (st.db().schema_version("resize") == 0) return "";  // read-only: never migrate here
  auto info = job_info(st, job);
  if (!info) return "";
  char b[512];
  std::string out;
  std::snprintf(b, sizeof b, "   Malleable=%s MTCT=%s Progress=%s Restarts=%d\n", to_string(info->phase),
                info->mtct >= 0 ? fmt_s(info->mtct).c_str() : "-",
                info->progress >= 0 ? (std::to_string(static_cast<int>(std::lround(info->progress * 100))) + "%").c_str()
                                    : "-",
                info->restart_count);
  out += b;
  for (auto& o : orders_of(st, job)) {
    std::string what = o.order.nodes.empty() ? "count=" + std::to_string(o.order.count) : compress_hostlist(o.order.nodes);
    std::string outcome;
    if (o.state == "committed") outcome = "committed after " + fmt_s(o.settled - o.order.sent) + " s";
    else if (o.state == "rolled_back") outcome = "rolled back after " + fmt_s(o.settled - o.order.sent) + " s: " + o.reason;
    else outcome = o.state;
    std::snprintf(b, sizeof b, "   Resize order=%llu %s %d->%d %s%s %s\n", static_cast<unsigned long long>(o.order.id),
                  to_string(o.order.kind), o.from, o.to, what.c_str(), o.restart ? " restart" : "", outcome.c_str());
    out += b;
  }
  return out;
}

nlohmann::json detail_json(State& st, int64_t job) {
  if (st.db().schema_version("resize") == 0) return nullptr;
  auto info = job_info(st, job);
  if (!info) return nullptr;
  auto opt = [](double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json orders = nlohmann::json::array();
  for (auto& o : orders_of(st, job))
    orders.push_back({{"order", o.order.id},
                      {"kind", to_string(o.order.kind)},
                      {"from", o.from},
                      {"to", o.to},
                      {"nodes", o.order.nodes},
                      {"count", o.order.count},
                      {"state", o.state},
                      {"restart", o.restart},
                      {"sent", o.order.sent},
                      {"settled", opt(o.settled)},
                      {"duration", o.settled >= 0 ? nlohmann::json(o.settled - o.order.sent) : nlohmann::json(nullptr)},
                      {"reason", o.reason}});
  return {{"phase", to_string(info->phase)}, {"mtct", opt(info->mtct)},
          {"progress", opt(info->progress)}, {"restart_count", info->restart_count},
          {"last_resize", opt(info->last_resize)}, {"orders", orders}};
}

uint64_t request_resize(const std::string& home, int64_t job, int nodes, bool by_count) {
  auto rep = proto::request(sched_socket(home), {{"op", "resize"}, {"job", job}, {"nodes", nodes}, {"by_count", by_count}},
                            10000);
  if (!rep) throw std::runtime_error("the scheduler of " + home + " does not answer (is mjsched running?)");
  if (rep->contains("error") && (*rep)["error"].is_string())
    throw std::runtime_error("job " + std::to_string(job) + ": " + (*rep)["error"].get<std::string>());
  if (!rep->contains("order") || !(*rep)["order"].is_number_unsigned())
    throw std::runtime_error("the scheduler's answer names no order");
  return (*rep)["order"].get<uint64_t>();
}

std::optional<OrderRecord> wait_settled(State& st, uint64_t id, double timeout_s) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    auto o = order(st, id);
    if (o && (o->state == "committed" || o->state == "rolled_back")) return o;
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace dynres::resize
