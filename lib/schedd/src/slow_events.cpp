#include "dynres/slow_events.hpp"

#include <cstdio>
#include <ctime>

#include "dynres/db.hpp"

namespace dynres {

std::vector<MigrationEvent> migration_events(State& st, const std::set<int64_t>& jobs) {
  std::vector<MigrationEvent> out;
  Stmt s(st.db(),
         "SELECT time, job_id, kind, detail FROM events WHERE kind IN ('slow_node','migrate','migrate_expand','replace',"
         "'replace_expand','replace_note','migrate_note') ORDER BY time, id");
  while (s.step()) {
    MigrationEvent e{s.f64(0), s.i64(1), s.text(2), s.text(3)};
    if (jobs.empty() || jobs.count(e.job)) out.push_back(std::move(e));
  }
  return out;
}

std::string render_migration_events(const std::vector<MigrationEvent>& ev) {
  if (ev.empty()) return "";
  std::string out = "\nSLOW NODES AND MIGRATIONS\n";
  char b[96];
  std::snprintf(b, sizeof b, "%-19s %8s %-14s %s\n", "TIME", "JOBID", "EVENT", "DETAIL");
  out += b;
  for (auto& e : ev) {
    time_t t = static_cast<time_t>(e.time);
    char ts[32];
    std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", std::localtime(&t));
    std::snprintf(b, sizeof b, "%-19s %8lld %-14s ", ts, static_cast<long long>(e.job), e.kind.c_str());
    out += b + e.detail + "\n";
  }
  return out;
}

nlohmann::json migration_events_json(const std::vector<MigrationEvent>& ev) {
  auto a = nlohmann::json::array();
  for (auto& e : ev) a.push_back({{"time", e.time}, {"job_id", e.job}, {"event", e.kind}, {"detail", e.detail}});
  return a;
}

}  // namespace dynres
