// The slow-node migration events of the state file (mjsched(8) SLOW NODES,
// [HoG14 §5.5]) as mjstat --history shows them.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dynres/state.hpp"

namespace dynres {

struct MigrationEvent {
  double time = 0;  ///< seconds, Unix time
  int64_t job = 0;
  std::string kind;    ///< slow_node | migrate | migrate_expand | migrate_note
  std::string detail;  ///< as recorded (see mjsched(8))
};

/// The events of these jobs (all when `jobs` is empty), oldest first.
std::vector<MigrationEvent> migration_events(State& st, const std::set<int64_t>& jobs = {});
/// A table TIME JOBID EVENT DETAIL (empty string when there is no event).
std::string render_migration_events(const std::vector<MigrationEvent>& ev);
nlohmann::json migration_events_json(const std::vector<MigrationEvent>& ev);

}  // namespace dynres
