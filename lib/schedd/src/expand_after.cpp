// Expands that wait for an order to commit (expand_after.hpp).
#include "expand_after.hpp"

#include <algorithm>

#include "dynres/db.hpp"
#include "dynres/hostlist.hpp"
#include "dynres/resize_store.hpp"
#include "dynres/schedd.hpp"
#include "dynres/state.hpp"
#include "resize_server.hpp"

namespace dynres::schedd {

namespace {
const std::vector<std::string> kMigrations = {R"sql(
CREATE TABLE expand_after(
  job_id  INTEGER PRIMARY KEY REFERENCES jobs(id),
  after   INTEGER NOT NULL,
  node    TEXT NOT NULL,
  kind    TEXT NOT NULL CHECK(kind IN ('swap','replace')),
  from_node TEXT NOT NULL
);
)sql"};

std::string ev(const ExpandAfter::Pending& p, bool done) {
  return p.kind == "swap" ? (done ? "migrate_expand" : "migrate_note") : (done ? "replace_expand" : "replace_note");
}
}  // namespace

void ExpandAfter::load(State& st) {
  st.db().migrate("expand_after", kMigrations);
  jobs_.clear();
  Stmt s(st.db(), "SELECT job_id, after, node, kind, from_node FROM expand_after");
  while (s.step()) {
    if (s.i64(1) <= 0) continue;  // an order id is positive
    std::vector<std::string> nodes;
    try {
      nodes = expand_hostlist(s.text(2));
    } catch (const std::exception&) {
      continue;  // not a node list: nothing to keep
    }
    if (nodes.empty()) continue;
    jobs_[s.i64(0)] = {static_cast<uint64_t>(s.i64(1)), nodes, s.text(3), s.text(4)};
  }
  loaded_ = true;
}

void ExpandAfter::add(State& st, int64_t job, const Pending& p) {
  if (!loaded_) load(st);
  Stmt s(st.db(), "INSERT OR REPLACE INTO expand_after(job_id, after, node, kind, from_node) VALUES(?,?,?,?,?)");
  s.bind(1, job).bind(2, static_cast<int64_t>(p.after)).bind(3, compress_hostlist(p.nodes)).bind(4, p.kind).bind(5, p.from).run();
  jobs_[job] = p;
}

void ExpandAfter::annotate(sched::Snapshot& snap) const {
  for (auto& [id, p] : jobs_)
    for (auto& n : snap.nodes)
      if (n.job == 0 && std::find(p.nodes.begin(), p.nodes.end(), n.name) != p.nodes.end()) n.job = id;  // kept
}

void ExpandAfter::drop(State& st, int64_t job, double now, const std::string& why) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  const Pending p = it->second;
  jobs_.erase(it);
  Stmt s(st.db(), "DELETE FROM expand_after WHERE job_id=?");
  s.bind(1, job).run();
  if (why.empty()) return;
  const std::string to = compress_hostlist(p.nodes);
  const std::string what = p.kind == "swap" ? "swap " + p.from + " -> " + to : "replacement of " + p.from + " by " + to;
  log_("job " + std::to_string(job) + ": " + what + " not completed: " + why);
  st.event(now, job, ev(p, false),
           (p.kind == "swap" ? "swap to " : "replacement ") + to + " not " + (p.kind == "swap" ? "completed" : "taken") +
               ": " + why);
}

void ExpandAfter::pass(State& st, ResizeServer& rz, double now, double wait) {
  if (!loaded_) load(st);
  if (jobs_.empty()) return;
  std::map<int64_t, bool> running;
  for (auto& j : st.jobs({kRunning})) running[j.id] = true;
  std::map<std::string, bool> idle;
  for (auto& n : st.nodes()) idle[n.name] = n.state == "up" && !n.job_id;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const int64_t id = it->first;
    const Pending p = it->second;
    ++it;  // drop() erases the current entry
    if (!running.count(id)) {
      drop(st, id, now, "");  // the job ended: nothing to say
      continue;
    }
    auto rec = resize::order(st, p.after);
    if (!rec || rec->state == "rolled_back") {
      drop(st, id, now, "order " + std::to_string(p.after) + " was rolled back" + (rec ? ": " + rec->reason : ""));
      continue;
    }
    if (rec->state != "committed") continue;
    const std::string to = compress_hostlist(p.nodes);
    std::string busy;
    for (auto& n : p.nodes)
      if (!idle[n]) busy += (busy.empty() ? "" : ",") + n;
    if (!busy.empty()) {
      drop(st, id, now, "node " + busy + " is no longer idle");
      continue;
    }
    std::string why;
    if (auto oid = rz.expand_onto(st, id, p.nodes, now, &why)) {
      log_("job " + std::to_string(id) + ": " + (p.kind == "swap" ? "swap " + p.from + " -> " + to : "in place of " + p.from) +
           ": expand onto " + to + " (order " + std::to_string(*oid) + ")");
      st.event(now, id, ev(p, true), "node=" + to + " order=" + std::to_string(*oid));
      drop(st, id, now, "");
    } else if (now - rec->settled > wait) {
      drop(st, id, now, "the job took no expand order within " + std::to_string(static_cast<int>(wait)) + " s: " + why);
    }  // else: the relaunched job has not registered yet; next pass
  }
}

}  // namespace dynres::schedd
