// The scheduler's side of the iCheck protocol [John24 §7.3.1.1, §7.3.2];
// see icheck_server.hpp and mjsched(8) "iCheck protocol".
#include "icheck_server.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace dynres::schedd {

namespace {
using proto::json;

// Schema of module "icsched". Append migrations; never edit a released one.
//   icheck_link          the controller's last Status and pending request
//   icheck_lent          nodes of the batch pool lent to iCheck:
//                        granting (NEW_NODES sent, not answered), held,
//                        reclaiming (REMOVE_NODES sent, not answered)
//   icheck_lent_history  one row per lending, for mjstat --gantt
const std::vector<std::string> kMigrations = {R"sql(
CREATE TABLE icheck_link(
  id            INTEGER PRIMARY KEY CHECK(id = 1),
  status        TEXT NOT NULL DEFAULT '[]',
  status_time   REAL,
  min_nodes     INTEGER NOT NULL DEFAULT 1,
  max_nodes     INTEGER NOT NULL DEFAULT 1,
  fixed_nodes   INTEGER NOT NULL DEFAULT 0,
  request_nodes INTEGER NOT NULL DEFAULT 0,
  urgency       TEXT NOT NULL DEFAULT 'LOW' CHECK(urgency IN ('LOW','HIGH')),
  next_change   INTEGER NOT NULL DEFAULT 1
);
INSERT INTO icheck_link(id) VALUES(1);
CREATE TABLE icheck_lent(
  node_id   INTEGER PRIMARY KEY REFERENCES nodes(id),
  state     TEXT NOT NULL CHECK(state IN ('granting','held','reclaiming')),
  change_id INTEGER NOT NULL,
  since     REAL NOT NULL
);
CREATE TABLE icheck_lent_history(
  id         INTEGER PRIMARY KEY,
  node       TEXT NOT NULL,
  start_time REAL NOT NULL,
  end_time   REAL
);
)sql",
    // 2: App info [John24 §7.3.1.1]: the controller's Status lists the
    // applications registered with iCheck by their batch job (apps); before a
    // resize order goes to such a job an APP_INFO is queued (pending until
    // the controller answers it: done or refused).
    R"sql(
ALTER TABLE icheck_link ADD COLUMN apps TEXT NOT NULL DEFAULT '[]';
CREATE TABLE icheck_app_info(
  change_id  INTEGER PRIMARY KEY,
  job_id     INTEGER NOT NULL,
  from_nodes INTEGER NOT NULL,
  to_nodes   INTEGER NOT NULL,
  sent       REAL NOT NULL,
  state      TEXT NOT NULL CHECK(state IN ('pending','done','refused'))
);
)sql"};

bool is_int(const json& v, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) return false;
  int64_t x = v.get<int64_t>();
  return x >= lo && x <= hi;
}
bool is_num(const json& v, double lo, double hi) {
  if (!v.is_number()) return false;
  double x = v.get<double>();
  return std::isfinite(x) && x >= lo && x <= hi;
}
bool is_name(const json& v) {
  if (!v.is_string()) return false;
  const auto& s = v.get_ref<const std::string&>();
  return !s.empty() && s.size() <= kIcMaxName &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; });
}

struct Lent {
  int64_t node_id;
  std::string name, host, state;
  int64_t change;
};

std::vector<Lent> lent_nodes(State& st) {
  std::vector<Lent> v;
  Stmt s(st.db(),
         "SELECT l.node_id, n.name, n.host, l.state, l.change_id FROM icheck_lent l JOIN nodes n ON n.id = l.node_id "
         "ORDER BY l.change_id, n.id");
  while (s.step()) v.push_back({s.i64(0), s.text(1), s.text(2), s.text(3), s.i64(4)});
  return v;
}

/// The lent nodes a controller's request names (json array of node names,
/// already checked by bad_node_list), read inside the caller's write
/// transaction: each, once, in request order, or the first refusal that
/// `why_not(name, record or nullptr)` gives (then nothing is selected).
template <class WhyNot>
std::string select_lent(State& st, const json& nodes, WhyNot why_not, std::vector<Lent>& out) {
  std::map<std::string, Lent> lent;
  for (auto& l : lent_nodes(st)) lent[l.name] = l;
  out.clear();
  for (const auto& n : nodes) {
    const std::string name = n;
    auto it = lent.find(name);
    if (std::string why = why_not(name, it == lent.end() ? nullptr : &it->second); !why.empty()) {
      out.clear();
      return why;
    }
    if (std::none_of(out.begin(), out.end(), [&](const Lent& l) { return l.name == name; })) out.push_back(it->second);
  }
  return "";
}

int64_t next_change(State& st) {
  Stmt s(st.db(), "SELECT next_change FROM icheck_link WHERE id = 1");
  int64_t c = s.step() ? s.i64(0) : 1;
  Stmt u(st.db(), "UPDATE icheck_link SET next_change = next_change + 1 WHERE id = 1");
  u.run();
  return c;
}

/// "" when m's nodes is a non-empty array of at most kIcMaxNodes valid node
/// names, else why not (for op's refusal).
std::string bad_node_list(const json& m, const std::string& op) {
  const json& nodes = m.contains("nodes") ? m["nodes"] : json();
  if (!nodes.is_array() || nodes.empty() || nodes.size() > static_cast<size_t>(kIcMaxNodes))
    return op + ": nodes must be a non-empty array of at most " + std::to_string(kIcMaxNodes) + " node names";
  for (const auto& n : nodes)
    if (!is_name(n)) return op + ": a node name must be 1-255 letters, digits, '-', '_' or '.'";
  return "";
}

/// Lent node `id` (`name`) goes back to the batch pool: no longer lent, its
/// lending's Gantt bar ends at `now`. Inside the caller's write transaction.
void back_to_pool(State& st, int64_t id, const std::string& name, double now) {
  Stmt d(st.db(), "DELETE FROM icheck_lent WHERE node_id = ?");
  d.bind(1, id).run();
  Stmt h(st.db(), "UPDATE icheck_lent_history SET end_time = ? WHERE node = ? AND end_time IS NULL");
  h.bind(1, now).bind(2, name).run();
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}
}  // namespace

void icheck_migrate(State& st) { st.db().migrate("icsched", kMigrations); }

std::set<int64_t> icheck_lent_ids(State& st) {
  std::set<int64_t> ids;
  Stmt t(st.db(), "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'icheck_lent'");
  if (!t.step()) return ids;
  Stmt s(st.db(), "SELECT node_id FROM icheck_lent");
  while (s.step()) ids.insert(s.i64(0));
  return ids;
}

json IcheckServer::refuse(const std::string& why) {
  log_("iCheck: refused: " + why);
  return {{"error", why}};
}

json IcheckServer::serve(State& st, uint32_t peer_uid, const json& m, double now) {
  const std::string op = m.value("op", std::string());
  if (peer_uid != static_cast<uint32_t>(::getuid()))
    return refuse(op + " from uid " + std::to_string(peer_uid) + ": only the cluster owner's iCheck controller (uid " +
                  std::to_string(::getuid()) + ") may speak the iCheck protocol");
  if (m.size() > 16) return refuse(op + ": too many fields");

  if (op == "ic_status") {
    const json& nodes = m.contains("nodes") ? m["nodes"] : json();
    if (!nodes.is_array() || nodes.size() > static_cast<size_t>(kIcMaxNodes))
      return refuse("ic_status: nodes must be an array of at most " + std::to_string(kIcMaxNodes) + " entries");
    for (const auto& i : {"min_nodes", "max_nodes", "fixed_nodes"})
      if (!m.contains(i) || !is_int(m[i], 0, kIcMaxNodes))
        return refuse(std::string("ic_status: ") + i + " must be an integer in [0, " + std::to_string(kIcMaxNodes) + "]");
    const int mn = m["min_nodes"].get<int>(), mx = m["max_nodes"].get<int>(), fx = m["fixed_nodes"].get<int>();
    if (mn < 1 || mx < mn) return refuse("ic_status: need 1 <= min_nodes <= max_nodes");
    if (fx > mx) return refuse("ic_status: fixed_nodes above max_nodes");
    json clean = json::array();
    std::set<std::string> seen;
    for (const auto& n : nodes) {
      if (!n.is_object() || !n.contains("name") || !is_name(n["name"]))
        return refuse("ic_status: every node needs a name of 1-255 letters, digits, '-', '_' or '.'");
      const std::string name = n["name"];
      if (!seen.insert(name).second) return refuse("ic_status: node " + name + " listed twice");
      if (!n.contains("total_mem") || !is_num(n["total_mem"], 0, kIcMaxMem) || !n.contains("avail_mem") ||
          !is_num(n["avail_mem"], 0, n["total_mem"].get<double>()))
        return refuse("ic_status: node " + name + ": need 0 <= avail_mem <= total_mem <= 2^50 bytes");
      if (!n.contains("agents") || !is_int(n["agents"], 0, kIcMaxAgents))
        return refuse("ic_status: node " + name + ": agents must be an integer in [0, " + std::to_string(kIcMaxAgents) + "]");
      const bool up = !n.contains("up") || (n["up"].is_boolean() && n["up"].get<bool>());
      clean.push_back({{"name", name}, {"total_mem", n["total_mem"]}, {"avail_mem", n["avail_mem"]},
                       {"agents", n["agents"]}, {"up", up}});
    }
    // the applications registered with iCheck, by batch job (APP_INFO goes to these)
    json apps = json::array();
    if (m.contains("apps")) {
      const json& a = m["apps"];
      if (!a.is_array() || a.size() > static_cast<size_t>(kIcMaxNodes))
        return refuse("ic_status: apps must be an array of at most " + std::to_string(kIcMaxNodes) + " entries");
      for (const auto& x : a) {
        if (!x.is_object() || !x.contains("job") || !is_int(x["job"], 1, int64_t{1} << 62))
          return refuse("ic_status: every app needs a job id in [1, 2^62]");
        if (!x.contains("agents") || !is_int(x["agents"], 0, kIcMaxAgents))
          return refuse("ic_status: app of job " + std::to_string(x["job"].get<int64_t>()) + ": agents must be an integer in [0, " +
                        std::to_string(kIcMaxAgents) + "]");
        const std::string mode = x.contains("mode") && x["mode"].is_string() ? x["mode"].get<std::string>() : "";
        if (mode != "ma-ra" && mode != "ma-ma")
          return refuse("ic_status: app of job " + std::to_string(x["job"].get<int64_t>()) + ": mode must be ma-ra or ma-ma");
        apps.push_back({{"job", x["job"]}, {"agents", x["agents"]}, {"mode", mode}});
      }
    }
    json changes = json::array(), held = json::array();
    st.db().write_tx([&] {
      Stmt u(st.db(),
             "UPDATE icheck_link SET status = ?, status_time = ?, min_nodes = ?, max_nodes = ?, fixed_nodes = ?, apps = ? "
             "WHERE id = 1");
      u.bind(1, clean.dump()).bind(2, now).bind(3, mn).bind(4, mx).bind(5, fx).bind(6, apps.dump()).run();
      std::map<int64_t, json> by_change;
      for (auto& l : lent_nodes(st)) {
        if (l.state == "held") {
          held.push_back(l.name);
          continue;
        }
        json& c = by_change[l.change];
        if (c.is_null())
          c = {{"change", l.change}, {"kind", l.state == "granting" ? "NEW_NODES" : "REMOVE_NODES"}, {"nodes", json::array()}};
        c["nodes"].push_back({{"name", l.name}, {"host", l.host}});
      }
      for (auto& [id, c] : by_change) changes.push_back(c);
      Stmt ai(st.db(), "SELECT change_id, job_id, from_nodes, to_nodes FROM icheck_app_info WHERE state = 'pending' "
                       "ORDER BY change_id");
      while (ai.step())
        changes.push_back({{"change", ai.i64(0)}, {"kind", "APP_INFO"}, {"job", ai.i64(1)}, {"from", ai.i64(2)},
                           {"to", ai.i64(3)}});
    });
    return {{"ok", true}, {"changes", changes}, {"lent", held}};
  }

  if (op == "ic_release") {  // the controller gave held nodes back on its own (Alg. 8, scale-down side)
    if (auto why = bad_node_list(m, "ic_release"); !why.empty()) return refuse(why);
    const json& nodes = m["nodes"];
    std::string bad;
    std::vector<std::string> names;
    st.db().write_tx([&] {
      std::vector<Lent> sel;
      bad = select_lent(st, nodes, [](const std::string& name, const Lent* l) -> std::string {
        if (!l) return "ic_release: node " + name + " is not lent to iCheck";
        if (l->state != "held") return "ic_release: node " + name + " is " + l->state + ", not held (its exchange decides)";
        return "";
      }, sel);
      if (!bad.empty()) return;  // nothing written
      for (const auto& l : sel) back_to_pool(st, l.node_id, l.name, now), names.push_back(l.name);
      st.event(now, 0, "icheck_node_released", join(names));
    });
    if (!bad.empty()) return refuse(bad);
    for (const auto& name : names) backoff_of_.erase(name), reclaim_job_.erase(name);
    log_("iCheck: the controller gave back " + join(names) + " (idle): back to the batch pool");
    return {{"ok", true}};
  }

  if (op == "ic_query") {  // Response: the idle nodes of the batch pool
    int idle = 0;
    st.db().read_tx([&] {
      Stmt s(st.db(),
             "SELECT COUNT(*) FROM nodes WHERE state = 'up' AND job_id IS NULL AND id NOT IN "
             "(SELECT node_id FROM icheck_lent)");
      if (s.step()) idle = static_cast<int>(s.i64(0));
    });
    return {{"ok", true}, {"idle_nodes", idle}};
  }

  if (op == "ic_request") {
    const std::string u = m.contains("urgency") && m["urgency"].is_string() ? m["urgency"].get<std::string>() : "";
    if (u != "HIGH" && u != "LOW") return refuse("ic_request: urgency must be HIGH or LOW");
    int total = 0;
    {
      Stmt s(st.db(), "SELECT COUNT(*) FROM nodes");
      if (s.step()) total = static_cast<int>(s.i64(0));
    }
    if (!m.contains("nodes") || !is_int(m["nodes"], 1, std::max(1, total)) || total == 0)
      return refuse("ic_request: nodes must be an integer in [1, " + std::to_string(total) +
                    "] (the nodes of the cluster)");
    const int n = m["nodes"].get<int>();
    st.db().write_tx([&] {
      Stmt s(st.db(), "UPDATE icheck_link SET request_nodes = ?, urgency = ? WHERE id = 1");
      s.bind(1, n).bind(2, u).run();
      st.event(now, 0, "icheck_request", u + " " + std::to_string(n) + " node(s)");
    });
    log_("iCheck: resource request " + u + " for " + std::to_string(n) + " node(s)");
    return {{"ok", true}};
  }

  if (op == "ic_response") {
    if (!m.contains("change") || !is_int(m["change"], 1, int64_t{1} << 62))
      return refuse("ic_response: change must be a positive integer");
    const std::string kind = m.contains("kind") && m["kind"].is_string() ? m["kind"].get<std::string>() : "";
    if (kind == "APP_INFO") {  // the controller prepared (ok) or refused the announced resize
      if (!m.contains("ok") || !m["ok"].is_boolean()) return refuse("ic_response: ok must be true or false");
      const int64_t change = m["change"].get<int64_t>();
      const bool ok = m["ok"].get<bool>();
      std::string bad;
      int64_t job = 0;
      st.db().write_tx([&] {
        Stmt q(st.db(), "SELECT job_id, state FROM icheck_app_info WHERE change_id = ?");
        q.bind(1, change);
        if (!q.step() || q.text(1) != "pending") {
          bad = "ic_response: no pending APP_INFO change " + std::to_string(change);
          return;
        }
        job = q.i64(0);
        Stmt u(st.db(), "UPDATE icheck_app_info SET state = ? WHERE change_id = ?");
        u.bind(1, ok ? "done" : "refused").bind(2, change).run();
        st.event(now, job, ok ? "icheck_app_info_done" : "icheck_app_info_refused", "change " + std::to_string(change));
      });
      if (!bad.empty()) return refuse(bad);
      log_("iCheck: APP_INFO change " + std::to_string(change) + " for job " + std::to_string(job) +
           (ok ? ": agents prepared" : ": refused by the controller"));
      return {{"ok", true}};
    }
    if (kind != "NEW_NODES" && kind != "REMOVE_NODES") return refuse("ic_response: kind must be NEW_NODES or REMOVE_NODES");
    if (!m.contains("ok") || !m["ok"].is_boolean()) return refuse("ic_response: ok must be true or false");
    if (auto why = bad_node_list(m, "ic_response"); !why.empty()) return refuse(why);
    const json& nodes = m["nodes"];
    std::string reason;
    if (m.contains("reason")) {
      if (!m["reason"].is_string() || m["reason"].get_ref<const std::string&>().size() > kIcMaxReason)
        return refuse("ic_response: reason must be a string of at most " + std::to_string(kIcMaxReason) + " bytes");
      reason = m["reason"].get<std::string>();
      if (!std::all_of(reason.begin(), reason.end(), [](char c) { return c >= 0x20 && c < 0x7f; }))
        return refuse("ic_response: reason must be printable ASCII");
    }
    const int64_t change = m["change"].get<int64_t>();
    const bool ok = m["ok"].get<bool>();
    const std::string want = kind == "NEW_NODES" ? "granting" : "reclaiming";
    std::string bad;
    std::vector<std::string> names;
    st.db().write_tx([&] {
      std::vector<Lent> sel;
      bad = select_lent(st, nodes, [&](const std::string& name, const Lent* l) -> std::string {
        if (l && l->state == want && l->change == change) return "";
        return "ic_response: node " + name + " is not in " + kind + " change " + std::to_string(change) +
               (!l ? " (iCheck does not hold it)" : " (it is " + l->state + ")");
      }, sel);
      if (!bad.empty()) return;  // nothing written
      for (const auto& l : sel) {
        const std::string& name = l.name;
        names.push_back(name);
        const int64_t id = l.node_id;
        if (kind == "NEW_NODES" && ok) {
          Stmt u(st.db(), "UPDATE icheck_lent SET state = 'held', since = ? WHERE node_id = ?");
          u.bind(1, now).bind(2, id).run();
          Stmt h(st.db(), "INSERT INTO icheck_lent_history(node, start_time) VALUES(?, ?)");
          h.bind(1, name).bind(2, now).run();
        } else if (kind == "REMOVE_NODES" && !ok) {  // the controller keeps it
          Stmt u(st.db(), "UPDATE icheck_lent SET state = 'held', since = ? WHERE node_id = ?");
          u.bind(1, now).bind(2, id).run();
        } else {  // returned (or never taken): back to the batch pool
          back_to_pool(st, id, name, now);
        }
      }
      const char* ev = kind == "NEW_NODES" ? (ok ? "icheck_node_up" : "icheck_grant_failed")
                                           : (ok ? "icheck_node_returned" : "icheck_reclaim_refused");
      st.event(now, 0, ev, join(names) + (reason.empty() ? "" : " (" + reason + ")"));
    });
    if (!bad.empty()) return refuse(bad);
    if (kind == "REMOVE_NODES" && !ok) {  // logged once per reason (backed_off), not at every refusal
      for (const auto& name : names) backed_off(name, reason, now);
      return {{"ok", true}};
    }
    for (const auto& name : names) backoff_of_.erase(name), reclaim_job_.erase(name);
    log_("iCheck: " + kind + " change " + std::to_string(change) + (ok ? " done: " : " failed: ") + join(names));
    return {{"ok", true}};
  }
  return refuse("unknown iCheck op '" + op + "'");
}

void IcheckServer::backed_off(const std::string& name, const std::string& reason, double now) {
  Backoff& b = backoff_of_[name];
  const bool same = b.refusals > 0 && b.reason == reason;
  b.delay = same ? std::min(2 * b.delay, backoff_max_) : backoff_;
  b.until = now + b.delay;
  b.reason = reason;
  b.refusals = same ? b.refusals + 1 : 1;
  auto j = reclaim_job_.find(name);
  if (j != reclaim_job_.end()) b.job = j->second, reclaim_job_.erase(j);
  if (same) return;
  char buf[160];
  std::snprintf(buf, sizeof buf, "): asking again in %.1f s, the wait doubling up to %.0f s while it refuses", b.delay,
                backoff_max_);
  log_("iCheck: REMOVE_NODES " + name + " refused by the controller (" + (reason.empty() ? "no reason given" : reason) +
       buf);
}

bool IcheckServer::app_info(State& st, int64_t job, int from, int to, double now) {
  if (st.db().schema_version("icsched") < 2) return false;
  bool sent = false;
  st.db().write_tx([&] {
    Stmt l(st.db(), "SELECT apps, status_time FROM icheck_link WHERE id = 1");
    if (!l.step()) return;
    const double t = l.opt_f64(1).value_or(-1);
    if (t < 0 || now - t > status_timeout_) return;  // no controller listening
    const json apps = json::parse(l.text(0), nullptr, false);
    if (!apps.is_array()) return;
    bool known = false;
    for (const auto& a : apps) known |= a.is_object() && a.contains("job") && a["job"].is_number_integer() && a["job"].get<int64_t>() == job;
    if (!known) return;
    const int64_t change = next_change(st);
    Stmt i(st.db(), "INSERT INTO icheck_app_info(change_id, job_id, from_nodes, to_nodes, sent, state) "
                    "VALUES(?, ?, ?, ?, ?, 'pending')");
    i.bind(1, change).bind(2, job).bind(3, from).bind(4, to).bind(5, now).run();
    // older announcements of the job are superseded
    Stmt d(st.db(), "UPDATE icheck_app_info SET state = 'refused' WHERE job_id = ? AND change_id < ? AND state = 'pending'");
    d.bind(1, job).bind(2, change).run();
    st.event(now, job, "icheck_app_info", std::to_string(from) + " -> " + std::to_string(to) + " node(s)");
    sent = true;
  });
  if (sent)
    log_("iCheck: APP_INFO job " + std::to_string(job) + ": " + std::to_string(from) + " -> " + std::to_string(to) +
         " node(s)");
  return sent;
}

void IcheckServer::annotate(State& st, sched::Snapshot& snap, const std::vector<int64_t>& node_ids, double now) {
  if (st.db().schema_version("icsched") == 0) return;
  std::map<int64_t, std::string> state_of;
  json status;
  double status_time = -1;
  sched::IcheckView& ic = snap.icheck;
  st.db().read_tx([&] {
    Stmt s(st.db(), "SELECT node_id, state FROM icheck_lent");
    while (s.step()) state_of[s.i64(0)] = s.text(1);
    Stmt l(st.db(),
           "SELECT status, status_time, min_nodes, max_nodes, fixed_nodes, request_nodes, urgency FROM icheck_link "
           "WHERE id = 1");
    if (l.step()) {
      status = json::parse(l.text(0), nullptr, false);
      status_time = l.opt_f64(1).value_or(-1);
      ic.min_nodes = static_cast<int>(l.i64(2));
      ic.max_nodes = static_cast<int>(l.i64(3));
      ic.fixed_nodes = static_cast<int>(l.i64(4));
      ic.request_nodes = static_cast<int>(l.i64(5));
      ic.request_urgency = l.text(6) == "HIGH" ? sched::Urgency::high : sched::Urgency::low;
    }
  });
  std::map<std::string, const json*> reported;
  if (status.is_array())
    for (const auto& n : status)
      if (n.is_object() && n.contains("name") && n["name"].is_string()) {
        reported[n["name"].get<std::string>()] = &n;
        if (n.value("up", true) && n.contains("total_mem") && n["total_mem"].is_number() && n.contains("avail_mem") &&
            n["avail_mem"].is_number()) {  // range-checked when the Status was taken
          ic.total_mem += n["total_mem"].get<double>();
          ic.used_mem += n["total_mem"].get<double>() - n["avail_mem"].get<double>();
        }
      }
  // a back-off ends with the job it was for: another job asks afresh
  for (auto b = backoff_of_.begin(); b != backoff_of_.end();) {
    const bool waits = std::any_of(snap.waiting.begin(), snap.waiting.end(),
                                   [&](const sched::WaitingJob& w) { return w.id == b->second.job; });
    if (waits) {
      ++b;
      continue;
    }
    log_("iCheck: REMOVE_NODES back-off of " + b->first + " ends: job " + std::to_string(b->second.job) +
         " no longer waits (" + std::to_string(b->second.refusals) + " refusal(s))");
    b = backoff_of_.erase(b);
  }
  for (size_t i = 0; i < snap.nodes.size() && i < node_ids.size(); ++i) {
    auto it = state_of.find(node_ids[i]);
    if (it == state_of.end()) continue;
    snap.nodes[i].job = sched::kIcheckJob;
    if (it->second != "held") {
      ++ic.in_flight;
      continue;
    }
    sched::IcheckNode n;
    n.node = static_cast<int>(i);
    auto b = backoff_of_.find(snap.nodes[i].name);
    n.reclaim_wait = b != backoff_of_.end() && now < b->second.until;
    auto r = reported.find(snap.nodes[i].name);
    if (r != reported.end()) {  // a node the controller has not reported yet is never reclaimed (avail 0)
      n.total_mem = (*r->second)["total_mem"].get<double>();
      n.avail_mem = (*r->second)["avail_mem"].get<double>();
      n.agents = (*r->second)["agents"].get<int>();
    }
    ic.nodes.push_back(n);
  }
  ic.present = status_time >= 0 && now - status_time <= status_timeout_;
}

std::vector<int> IcheckServer::apply(State& st, const sched::Decision& d, const sched::Snapshot& snap,
                                     const std::vector<int64_t>& node_ids, double now) {
  std::vector<int> granted;
  if (!snap.icheck.present) return granted;
  const int request_left = std::max(0, d.icheck_request_left);
  const bool request_changes = request_left != snap.icheck.request_nodes;
  if (d.icheck_grants.empty() && d.icheck_reclaims.empty() && !request_changes) return granted;
  std::vector<std::string> g, r;
  st.db().write_tx([&] {
    const int64_t change = next_change(st);
    for (int i : d.icheck_grants) {
      if (i < 0 || i >= static_cast<int>(node_ids.size())) continue;
      // still idle and up, and not lent (a job may have started meanwhile)
      Stmt c(st.db(),
             "SELECT 1 FROM nodes WHERE id = ? AND state = 'up' AND job_id IS NULL AND id NOT IN "
             "(SELECT node_id FROM icheck_lent)");
      c.bind(1, node_ids[i]);
      if (!c.step()) continue;
      Stmt ins(st.db(), "INSERT INTO icheck_lent(node_id, state, change_id, since) VALUES(?, 'granting', ?, ?)");
      ins.bind(1, node_ids[i]).bind(2, change).bind(3, now).run();
      granted.push_back(i);
      g.push_back(snap.nodes[i].name);
    }
    const int64_t rchange = d.icheck_reclaims.empty() ? 0 : next_change(st);
    for (int i : d.icheck_reclaims) {
      if (i < 0 || i >= static_cast<int>(node_ids.size())) continue;
      Stmt u(st.db(), "UPDATE icheck_lent SET state = 'reclaiming', change_id = ?, since = ? WHERE node_id = ? AND state = 'held'");
      u.bind(1, rchange).bind(2, now).bind(3, node_ids[i]).run();
      if (st.db().changes() > 0) r.push_back(snap.nodes[i].name);
    }
    for (const auto& name : r) reclaim_job_[name] = d.icheck_reclaim_job;
    Stmt q(st.db(), "UPDATE icheck_link SET request_nodes = ? WHERE id = 1");
    q.bind(1, request_left).run();
    if (!g.empty()) st.event(now, 0, "icheck_grant", join(g));
    if (!r.empty()) st.event(now, 0, "icheck_reclaim", join(r));
  });
  if (!g.empty()) log_("iCheck: NEW_NODES " + join(g));
  std::vector<std::string> first;  // a node asked again after a refusal was logged with it
  for (const auto& name : r)
    if (!backoff_of_.count(name)) first.push_back(name);
  if (!first.empty()) log_("iCheck: REMOVE_NODES " + join(first));
  return granted;
}

}  // namespace dynres::schedd
