// mjsched's end of the live resize protocol (resize_server.hpp).
//
// Messages (frames of dynres/proto.hpp, JSON objects):
//   job -> mjsched   {"op":"mj_hello","job":ID,"secret":S}   first frame of a connection
//                    {"op":"mj_register"} {"op":"mj_deregister"}
//                    {"op":"mj_begin","order":N,"restart":bool}
//                    {"op":"mj_commit","order":N,"released":[names]}
//                    {"op":"mj_status","order":N}
//                    {"op":"mj_perf","mpi_s":x,"compute_s":y[,"node":NAME][,"cpu_s":c,"delay_s":d]}
//                    {"op":"mj_progress","fraction":f}
//   mjsched -> job   replies {"re":OP,"ok":true,...} or {"re":OP,"error":"..."}
//                    pushed  {"op":"mj_order","order":N,"kind":"expand"|"shrink","nodes":[...],"count":k,
//                             "from":n,"to":m,"deadline":t}
//                            {"op":"mj_rollback","order":N,"reason":"..."}
#include "resize_server.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "dynres/hostlist.hpp"
#include "dynres/resize_store.hpp"
#include "dynres/state.hpp"

namespace dynres::schedd {

namespace {
using json = proto::json;
constexpr size_t kMaxOrderNodes = 4096;  // mj.h MJ_MAX_ORDER_NODES

/// A checked integer member: present, integral, within [lo, hi].
std::optional<int64_t> int_member(const json& m, const char* key, int64_t lo, int64_t hi) {
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  int64_t v;
  if (it->is_number_unsigned()) {
    uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    v = static_cast<int64_t>(u);
  } else if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else {
    return std::nullopt;
  }
  if (v < lo || v > hi) return std::nullopt;
  return v;
}
std::optional<double> num_member(const json& m, const char* key, double lo, double hi) {
  auto it = m.find(key);
  if (it == m.end() || !it->is_number()) return std::nullopt;
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) return std::nullopt;
  return v;
}
std::string str_member(const json& m, const char* key) {
  auto it = m.find(key);
  return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
}
json order_json(const resize::Order& o, int from, int to) {
  return {{"op", "mj_order"},    {"order", o.id}, {"kind", resize::to_string(o.kind)}, {"nodes", o.nodes},
          {"count", o.count},    {"from", from},  {"to", to},                          {"deadline", o.deadline}};
}
/// A restart-based shrink begun away from nodes that are all down: what
/// ResizeServer::restart_away orders after a node loss.
bool away_from_down_nodes(State& st, const resize::OrderRecord& r) {
  if (!r.restart || r.state != "begun" || r.order.kind != resize::Kind::shrink || r.order.nodes.empty()) return false;
  std::set<std::string> down;
  for (auto& n : st.nodes())
    if (n.state == "down") down.insert(n.name);
  return std::all_of(r.order.nodes.begin(), r.order.nodes.end(), [&](auto& n) { return down.count(n) != 0; });
}
int size_after(const resize::Order& o, int from) {
  int k = o.kind == resize::Kind::expand ? static_cast<int>(o.nodes.size())
                                         : (o.count > 0 ? o.count : static_cast<int>(o.nodes.size()));
  return o.kind == resize::Kind::expand ? from + k : from - k;
}
}  // namespace

ResizeServer::~ResizeServer() {
  for (auto& [fd, c] : conns_) ::close(fd);
}

void ResizeServer::load(State& st, double now) {
  resize::migrate(st);
  book_.set_next_id(resize::max_order_id(st) + 1);
  for (auto& o : resize::outstanding(st))
    if (!settle_unacknowledged(st, o.order, "scheduler restarted before the order was committed", now))
      log_("job " + std::to_string(o.order.job) + ": order " + std::to_string(o.order.id) +
           " rolled back (scheduler restarted)");
  // the node lists after those commits (a relaunched restart order committed
  // on the job's behalf changed them): read now, not before
  std::map<int64_t, JobRecord> running;
  for (auto& j : st.jobs({kRunning})) running[j.id] = j;
  for (auto& i : resize::running_infos(st)) {
    auto it = running.find(i.job);
    if (it == running.end()) continue;
    auto nodes = it->second.nodelist.empty() ? std::vector<std::string>{} : expand_hostlist(it->second.nodelist);
    admit(i.job, static_cast<uint32_t>(it->second.uid), i.secret, nodes);
    book_.restore(i.job, i.phase);
    if (i.mtct >= 0) mtct_[i.job] = i.mtct;
    if (i.last_resize >= 0) last_resize_[i.job] = i.last_resize;
  }
}

bool ResizeServer::settle_unacknowledged(State& st, const resize::Order& o, const std::string& reason, double now) {
  const std::string what = "job " + std::to_string(o.job) + ": " + resize::to_string(o.kind) + " order " + std::to_string(o.id);
  auto before = resize::order(st, o.id);
  const bool lost = before && away_from_down_nodes(st, *before);
  if (!lost && resize::record_rollback(st, o.id, reason, now, /*unless_relaunched=*/true)) return false;
  auto rec = resize::order(st, o.id);
  if (!rec || !(lost || resize::relaunched_on_new_nodes(*rec)) || (rec->state != "sent" && rec->state != "begun"))
    return false;
  resize::Commit cm{rec->order, rec->order.kind == resize::Kind::shrink ? rec->order.nodes : std::vector<std::string>{},
                    now - rec->order.sent};
  if (!resize::commit(st, cm, now)) {
    resize::record_rollback(st, o.id, reason + "; relaunched, but its nodes could not be given to the job", now);
    log_(what + " relaunched on nodes no longer available; rolled back");
    return false;
  }
  book_.adopt(o.job, rec->order);
  last_resize_[o.job] = now;
  log_(what + " committed on the job's behalf (" + reason +
       (lost ? "; its nodes are down: the supervisor relaunches the job on the rest)"
             : "; the supervisor had already relaunched the job on the new node list)"));
  return true;
}

void ResizeServer::admit(int64_t job, uint32_t uid, const std::string& secret, const std::vector<std::string>& nodes) {
  book_.admit(job, uid, secret, nodes);
  owner_[job] = uid;
}

void ResizeServer::close_conn(int fd, const std::string& why) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  if (!why.empty())
    log_("job " + std::to_string(it->second.job) + ": connection of pid " + std::to_string(it->second.pid) +
         " closed: " + why);
  ::close(fd);
  conns_.erase(it);
}

void ResizeServer::reply(Conn& c, json body) {
  try {
    proto::send_frame(c.fd, body);
  } catch (const std::exception& e) {
    // a peer that does not read (full buffer on a non-blocking socket) or is gone
    close_conn(c.fd, std::string("cannot answer: ") + e.what());
  }
}

void ResizeServer::push(int64_t job, const json& body) {
  std::vector<int> dead;
  for (auto& [fd, c] : conns_) {
    if (c.job != job || !c.registered) continue;
    try {
      proto::send_frame(fd, body);
    } catch (const std::exception&) {
      dead.push_back(fd);
    }
  }
  for (int fd : dead) close_conn(fd, "cannot deliver an order");
}

bool ResizeServer::has_listener(int64_t job) const {
  for (auto& [fd, c] : conns_)
    if (c.job == job && c.registered) return true;
  return false;
}

void ResizeServer::adopt(State& st, int fd, const json& hello) {
  ucred cr{};
  socklen_t len = sizeof cr;
  auto refuse = [&](const std::string& why) {
    try {
      proto::send_frame(fd, {{"re", "mj_hello"}, {"error", why}});
    } catch (...) {
    }
    log_("refused a job connection: " + why);
    ::close(fd);
  };
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return refuse("cannot identify the peer");
  auto job = int_member(hello, "job", 1, INT64_MAX);
  std::string secret = str_member(hello, "secret");
  if (!job || secret.empty() || secret.size() > 256) return refuse("mj_hello needs a job id and its secret");
  if (conns_.size() >= kMaxJobConnections) return refuse("too many job connections");
  size_t mine = 0;
  for (auto& [f, c] : conns_) mine += c.job == *job;
  if (mine >= kMaxConnectionsPerJob) return refuse("too many connections for job " + std::to_string(*job));
  // same checks as every later request: the job is known, uid and secret match
  auto r = book_.authenticate({static_cast<uint32_t>(cr.uid), *job, secret});
  if (!r.ok) return refuse(r.error);
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return refuse("cannot make the connection non-blocking");
  Conn c;
  c.fd = fd;
  c.uid = static_cast<uint32_t>(cr.uid);
  c.pid = cr.pid;
  c.job = *job;
  c.secret = secret;
  auto [it, ok] = conns_.emplace(fd, std::move(c));
  auto nodes = book_.nodes(*job);
  json rep = {{"re", "mj_hello"},
              {"ok", true},
              {"job", *job},
              {"phase", resize::to_string(book_.phase(*job))},
              {"nodes", nodes},
              {"nodelist", compress_hostlist(nodes)}};
  if (auto o = book_.outstanding(*job)) {
    int from = static_cast<int>(nodes.size());
    rep["order"] = order_json(*o, from, size_after(*o, from));
    auto rec = resize::order(st, o->id);
    rep["order"]["begun"] = rec && rec->state == "begun";
  }
  reply(it->second, rep);
}

std::vector<int> ResizeServer::fds() const {
  std::vector<int> out;
  for (auto& [fd, c] : conns_) out.push_back(fd);
  return out;
}

void ResizeServer::on_readable(State& st, int fd, double now) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  if (!it->second.in.fill(fd)) return close_conn(fd, "");  // orderly close: nothing to log
  // a peer sending faster than it is served (64 frames a wake-up) is cut off
  // before its unread input grows without bound
  if (it->second.in.pending() > kMaxUnread) return close_conn(fd, "too much unread input");
  for (int n = 0; n < 64; ++n) {  // bounded work per wake-up
    it = conns_.find(fd);
    if (it == conns_.end()) return;
    std::optional<json> m;
    try {
      m = it->second.in.next();
    } catch (const std::exception& e) {
      return close_conn(fd, e.what());
    }
    if (!m) return;
    try {
      handle(st, it->second, *m, now);
    } catch (const std::exception& e) {  // a state-file failure: answer, keep serving
      log_(std::string("job message failed: ") + e.what());
      if (conns_.count(fd)) reply(conns_.at(fd), {{"error", std::string("scheduler error: ") + e.what()}});
    }
  }
}

void ResizeServer::handle(State& st, Conn& c, const json& m, double now) {
  if (!m.is_object()) return close_conn(c.fd, "a message is not a JSON object");
  std::string op = str_member(m, "op");
  auto fail = [&](const std::string& why) {
    log_("job " + std::to_string(c.job) + ": " + op + " refused: " + why);
    reply(c, {{"re", op}, {"error", why}});
  };
  auto p = peer(c);
  if (op == "mj_register") {
    auto r = book_.register_job(p);
    if (!r.ok) return fail(r.error);
    c.registered = true;
    resize::set_phase(st, c.job, resize::Phase::accepting, now);
    return reply(c, {{"re", op}, {"ok", true}});
  }
  if (op == "mj_deregister") {
    std::vector<resize::Order> rb;
    auto r = book_.deregister(p, now, &rb);
    if (!r.ok) return fail(r.error);
    for (auto& o : rb) resize::record_rollback(st, o.id, "the job deregistered", now);
    resize::set_phase(st, c.job, resize::Phase::closed, now);
    return reply(c, {{"re", op}, {"ok", true}});
  }
  if (op == "mj_begin") {
    auto id = int_member(m, "order", 1, INT64_MAX);
    if (!id) return fail("mj_begin needs an order id");
    bool restart = m.contains("restart") && m["restart"].is_boolean() && m["restart"].get<bool>();
    resize::Order o;
    auto r = book_.begin(p, static_cast<uint64_t>(*id), restart, now, &o);
    if (!r.ok) return fail(r.error);
    resize::record_begin(st, o, restart, now);
    return reply(c, {{"re", op}, {"ok", true}, {"deadline", o.deadline}});
  }
  if (op == "mj_commit") {
    auto id = int_member(m, "order", 1, INT64_MAX);
    if (!id) return fail("mj_commit needs an order id");
    std::vector<std::string> released;
    if (m.contains("released")) {
      auto& r = m["released"];
      if (!r.is_array() || r.size() > kMaxOrderNodes) return fail("released must be an array of node names");
      for (auto& n : r) {
        if (!n.is_string() || n.get<std::string>().empty() || n.get<std::string>().size() > 255)
          return fail("released must be an array of node names");
        released.push_back(n.get<std::string>());
      }
    }
    resize::Book trial = book_;
    resize::Commit cm;
    auto r = trial.commit(p, static_cast<uint64_t>(*id), released, now, &cm);
    if (!r.ok) {
      // an order rolled back meanwhile: say so in words libmj recognises
      auto rec = resize::order(st, static_cast<uint64_t>(*id));
      if (rec && rec->order.job == c.job && rec->state == "rolled_back")
        return reply(c, {{"re", op}, {"error", "order rolled back: " + rec->reason}, {"rolled_back", true}});
      if (rec && rec->order.job == c.job && (rec->state == "sent" || rec->state == "begun") &&
          now > rec->order.deadline) {
        book_.rollback(c.job, now);
        if (!settle_unacknowledged(st, rec->order, "not committed before its deadline", now))
          return reply(c, {{"re", op}, {"error", "order rolled back: it timed out"}, {"rolled_back", true}});
        rec = resize::order(st, rec->order.id);
      }
      // committed without the job (a relaunched restart-based order, see
      // settle_unacknowledged): the job's commit is its acknowledgement
      if (rec && rec->order.job == c.job && rec->state == "committed") {
        auto nodes = book_.nodes(c.job);
        return reply(c, {{"re", op}, {"ok", true}, {"nodes", nodes}, {"nodelist", compress_hostlist(nodes)}});
      }
      return fail(r.error);
    }
    if (!resize::commit(st, cm, now)) {
      book_.rollback(c.job, now);
      resize::record_rollback(st, cm.order.id, "the nodes it adds are no longer available", now);
      return reply(c, {{"re", op}, {"error", "order rolled back: the nodes it adds are no longer available"},
                       {"rolled_back", true}});
    }
    book_ = std::move(trial);
    last_resize_[c.job] = now;
    auto nodes = book_.nodes(c.job);
    log_("job " + std::to_string(c.job) + ": " + resize::to_string(cm.order.kind) + " order " +
         std::to_string(cm.order.id) + " committed after " + std::to_string(cm.duration) + " s, now " +
         std::to_string(nodes.size()) + " node(s)");
    return reply(c, {{"re", op}, {"ok", true}, {"nodes", nodes}, {"nodelist", compress_hostlist(nodes)}});
  }
  if (op == "mj_status") {
    auto id = int_member(m, "order", 1, INT64_MAX);
    if (!id) return fail("mj_status needs an order id");
    // any process of the job may ask; the identity was checked at hello
    auto rec = resize::order(st, static_cast<uint64_t>(*id));
    if (!rec || rec->order.job != c.job) return fail("no order " + std::to_string(*id) + " for this job");
    return reply(c, {{"re", op}, {"ok", true}, {"state", rec->state}, {"reason", rec->reason}});
  }
  if (op == "mj_perf") {
    auto mpi = num_member(m, "mpi_s", 0, 1e9);
    auto comp = num_member(m, "compute_s", 0, 1e9);
    if (!mpi || !comp || *mpi + *comp <= 0) return fail("mj_perf needs mpi_s, compute_s >= 0 with a positive sum");
    c.mpi_s = *mpi;
    c.compute_s = *comp;
    double sm = 0, sc = 0;
    for (auto& [fd, o] : conns_)
      if (o.job == c.job) sm += o.mpi_s, sc += o.compute_s;
    double ratio = sc > 0 ? sm / sc : 1e9;
    mtct_[c.job] = ratio;
    // optional: the reporting thread's CPU seconds and run-queue wait (libmj)
    double cpu = -1, delay = -1;
    if (m.contains("cpu_s") || m.contains("delay_s")) {
      auto c_s = num_member(m, "cpu_s", 0, 1e9), d_s = num_member(m, "delay_s", 0, 1e9);
      if (!c_s || !d_s) return fail("mj_perf: cpu_s and delay_s must come together, each in [0, 1e9] seconds");
      cpu = *c_s, delay = *d_s;
    }
    if (auto node = str_member(m, "node"); on_perf_ && !node.empty()) {
      auto held = book_.nodes(c.job);  // a node the job does not hold is not attributed
      if (std::find(held.begin(), held.end(), node) != held.end())
        on_perf_(c.job, c.pid, node, {-1, *comp, *mpi, cpu, delay}, now);
    }
    if (now - c.last_write >= 1.0) {
      resize::set_perf(st, c.job, ratio, now);
      c.last_write = now;
    }
    return reply(c, {{"re", op}, {"ok", true}, {"mtct", ratio}});
  }
  if (op == "mj_progress") {
    auto f = num_member(m, "fraction", 0, 1);
    if (!f) return fail("mj_progress needs a fraction in [0, 1]");
    if (now - c.last_write >= 1.0 || *f >= 1) {
      resize::set_progress(st, c.job, *f);
      c.last_write = now;
    }
    return reply(c, {{"re", op}, {"ok", true}});
  }
  fail("unknown operation '" + op.substr(0, 64) + "'");
}

void ResizeServer::tick(State& st, double now) {
  for (auto& o : book_.expire(now)) {
    if (settle_unacknowledged(st, o, "not committed within its deadline", now)) continue;
    log_("job " + std::to_string(o.job) + ": " + resize::to_string(o.kind) + " order " + std::to_string(o.id) +
         " timed out after " + std::to_string(now - o.sent) + " s; rolled back (back-off " +
         std::to_string(opt_.backoff) + " s)");
    push(o.job, {{"op", "mj_rollback"}, {"order", o.id}, {"reason", "not committed within its deadline"}});
  }
  // jobs that ended: settle their orders, forget them
  std::set<int64_t> running;
  for (auto& j : st.jobs({kRunning})) running.insert(j.id);
  std::vector<int64_t> gone;
  for (auto& [job, uid] : owner_)
    if (!running.count(job)) gone.push_back(job);
  for (int64_t job : gone) {
    if (auto o = book_.outstanding(job)) resize::record_rollback(st, o->id, "the job ended", now);
    book_.forget(job);
    owner_.erase(job);
    mtct_.erase(job);
    last_resize_.erase(job);
  }
}

void ResizeServer::annotate(sched::Snapshot& snap, double now) const {
  std::map<std::string, int> index;
  for (size_t i = 0; i < snap.nodes.size(); ++i) index[snap.nodes[i].name] = static_cast<int>(i);
  for (auto& r : snap.running) {
    r.accepting = r.kind == sched::JobKind::malleable && book_.can_order(r.id, now) && has_listener(r.id);
    auto o = book_.outstanding(r.id);
    r.adapting = o.has_value();
    auto ph = book_.phase(r.id);
    r.restartable = r.kind == sched::JobKind::malleable &&
                    (ph == resize::Phase::accepting || ph == resize::Phase::adapting) && !has_listener(r.id);
    if (auto it = mtct_.find(r.id); it != mtct_.end()) r.mtct = it->second;
    if (auto it = last_resize_.find(r.id); it != last_resize_.end()) r.last_resize = it->second;
    if (o && o->kind == resize::Kind::expand)
      for (auto& n : o->nodes)
        if (auto it = index.find(n); it != index.end() && snap.nodes[it->second].job == 0)
          snap.nodes[it->second].job = r.id;  // reserved for the expanding job
    if (o) snap.adapting = true;
  }
}

std::optional<uint64_t> ResizeServer::restart_away(State& st, int64_t job, const std::vector<std::string>& nodes,
                                                   double now, bool* fresh, std::string* why) {
  *fresh = false;
  if (auto o = book_.outstanding(job)) {
    auto rec = resize::order(st, o->id);
    if (rec && rec->restart && rec->state == "begun") return o->id;  // the job began it before it died
    book_.rollback(job, now);
    resize::record_rollback(st, o->id, "a node of the job failed; restarted on the remaining nodes", now);
    log_("job " + std::to_string(job) + ": order " + std::to_string(o->id) + " rolled back (a node failed)");
  }
  book_.clear_backoff(job);
  auto info = resize::job_info(st, job);
  auto uid = owner_.find(job);
  if (!info || uid == owner_.end()) {
    if (why) *why = "job " + std::to_string(job) + " has no protocol record";
    return std::nullopt;
  }
  int from = static_cast<int>(book_.nodes(job).size());
  auto o = book_.order(job, resize::Kind::shrink, nodes, 0, now, why);
  if (!o) return std::nullopt;
  resize::record_order(st, *o, from, size_after(*o, from));
  resize::Order begun;
  if (auto r = book_.begin({uid->second, job, info->secret}, o->id, true, now, &begun); !r.ok) {
    if (why) *why = r.error;
    book_.rollback(job, now);
    resize::record_rollback(st, o->id, r.error, now);
    return std::nullopt;
  }
  resize::record_begin(st, begun, true, now);
  log_("job " + std::to_string(job) + ": restart order " + std::to_string(o->id) + " " + std::to_string(from) + " -> " +
       std::to_string(size_after(*o, from)) + " node(s), begun on the job's behalf");
  *fresh = true;
  return o->id;
}

std::optional<uint64_t> ResizeServer::send_order(State& st, int64_t job, resize::Kind kind,
                                                 std::vector<std::string> nodes, double now, std::string* why,
                                                 int count) {
  if (!has_listener(job)) {
    if (why) *why = "no process of the job is listening for orders";
    return std::nullopt;
  }
  int from = static_cast<int>(book_.nodes(job).size());
  auto o = book_.order(job, kind, std::move(nodes), count, now, why);
  if (!o) return std::nullopt;
  int to = size_after(*o, from);
  if (order_hook_) order_hook_(st, job, from, to, now);
  resize::record_order(st, *o, from, to);
  log_("job " + std::to_string(job) + ": " + resize::to_string(kind) + " order " + std::to_string(o->id) + " " +
       std::to_string(from) + " -> " + std::to_string(to) + " node(s)");
  push(job, order_json(*o, from, to));
  return o->id;
}

std::vector<int> ResizeServer::issue(State& st, const sched::Decision& d, const sched::Snapshot& snap, double now) {
  std::vector<int> blocked;
  auto names = [&](const std::vector<int>& idx) {
    std::vector<std::string> out;
    for (int i : idx) out.push_back(snap.nodes.at(i).name);
    return out;
  };
  for (auto s : d.shrinks) {
    // never release the job's first node: its batch script (and the
    // coordinator of an in-place job) runs there; give back another of its
    // nodes instead (the freed nodes only matter for the next pass's starts)
    auto r = std::find_if(snap.running.begin(), snap.running.end(), [&](auto& x) { return x.id == s.job; });
    if (r != snap.running.end() && !r->nodes.empty()) {
      int first = *std::min_element(r->nodes.begin(), r->nodes.end());
      auto it = std::find(s.nodes.begin(), s.nodes.end(), first);
      if (it != s.nodes.end()) {
        for (int cand : r->nodes)
          if (cand != first && std::find(s.nodes.begin(), s.nodes.end(), cand) == s.nodes.end()) {
            *it = cand;
            break;
          }
      }
    }
    blocked.insert(blocked.end(), s.nodes.begin(), s.nodes.end());
    std::string why;
    bool ok = shrink_by_count_
                  ? send_order(st, s.job, resize::Kind::shrink, {}, now, &why, static_cast<int>(s.nodes.size()))
                        .has_value()
                  : send_order(st, s.job, resize::Kind::shrink, names(s.nodes), now, &why).has_value();
    if (!ok)
      log_("job " + std::to_string(s.job) + ": shrink not ordered: " + why);
  }
  std::vector<int> shrinking = blocked;  // nodes the shrinks above give back, once committed
  std::sort(shrinking.begin(), shrinking.end());
  for (auto& e : d.expands) {
    // an expand onto nodes a shrink of this decision releases waits for a
    // later pass, like a start: until that shrink commits they are another
    // job's, and a commit racing it would be rolled back (the simulator
    // releases them at once; the policy plans again after the commit)
    if (std::any_of(e.nodes.begin(), e.nodes.end(),
                    [&](int n) { return std::binary_search(shrinking.begin(), shrinking.end(), n); })) {
      log_("job " + std::to_string(e.job) + ": expand waits for a shrink to release its nodes");
      continue;
    }
    blocked.insert(blocked.end(), e.nodes.begin(), e.nodes.end());
    std::string why;
    if (!send_order(st, e.job, resize::Kind::expand, names(e.nodes), now, &why))
      log_("job " + std::to_string(e.job) + ": expand not ordered: " + why);
  }
  return blocked;
}

json ResizeServer::admin_request(State& st, uint32_t uid, const json& m, const sched::Snapshot& snap, double now) {
  auto job = int_member(m, "job", 1, INT64_MAX);
  auto target = int_member(m, "nodes", 1, 1000000);
  if (!job || !target) return {{"error", "resize needs a job id and a node count in [1, 1000000]"}};
  bool by_count = m.contains("by_count") && m["by_count"].is_boolean() && m["by_count"].get<bool>();
  std::string why;
  auto id = admin_resize(st, uid, *job, static_cast<int>(*target), snap, now, &why, by_count);
  if (!id) return {{"error", why}};
  return {{"ok", true}, {"order", *id}};
}

std::optional<uint64_t> ResizeServer::admin_resize(State& st, uint32_t uid, int64_t job, int target,
                                                   const sched::Snapshot& snap, double now, std::string* why,
                                                   bool by_count) {
  auto no = [&](const std::string& w) -> std::optional<uint64_t> {
    if (why) *why = w;
    return std::nullopt;
  };
  auto own = owner_.find(job);
  if (own == owner_.end()) return no("job " + std::to_string(job) + " is not running under the resize protocol");
  if (uid != 0 && uid != own->second && uid != ::getuid())
    return no("job " + std::to_string(job) + " belongs to another user");
  auto r = std::find_if(snap.running.begin(), snap.running.end(), [&](auto& x) { return x.id == job; });
  if (r == snap.running.end()) return no("job " + std::to_string(job) + " is not running");
  if (r->kind != sched::JobKind::malleable) return no("job " + std::to_string(job) + " is not malleable");
  if (book_.phase(job) != resize::Phase::accepting)
    return no(std::string("job ") + std::to_string(job) + " does not accept orders (it is " +
              resize::to_string(book_.phase(job)) + ")");
  if (target < r->min_nodes || target > r->max_nodes)
    return no("the job may hold " + std::to_string(r->min_nodes) + " to " + std::to_string(r->max_nodes) +
              " nodes, not " + std::to_string(target));
  if (!sched::admissible(r->constraint, target)) return no(std::to_string(target) + " nodes break the job's constraint");
  int cur = static_cast<int>(r->nodes.size());
  if (target == cur) return no("the job already holds " + std::to_string(cur) + " node(s)");
  std::vector<std::string> pick;
  if (target > cur) {
    for (auto& n : snap.nodes)
      if (n.up && n.job == 0 && static_cast<int>(pick.size()) < target - cur) pick.push_back(n.name);
    if (static_cast<int>(pick.size()) < target - cur)
      return no("only " + std::to_string(pick.size()) + " idle node(s) for " + std::to_string(target - cur) +
                " more");
    return send_order(st, job, resize::Kind::expand, pick, now, why);
  }
  if (by_count) return send_order(st, job, resize::Kind::shrink, {}, now, why, cur - target);
  std::vector<int> held = r->nodes;
  std::sort(held.begin(), held.end());
  for (int k = 0; k < cur - target; ++k) pick.push_back(snap.nodes.at(held[held.size() - 1 - k]).name);
  return send_order(st, job, resize::Kind::shrink, pick, now, why);
}

}  // namespace dynres::schedd
