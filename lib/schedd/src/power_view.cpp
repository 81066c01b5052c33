// The live scheduler's view of power (seed 000 Ch. 5, §5.2.1: the corridor is
// re-read every scheduler pass): the corridor in force, the node power model
// and every job's modelled per-node draw go into the policy's snapshot, and
// a modelled reading of every node is recorded (at most once a second) so
// that pcorridor(1) shows the draw and the violations of the live run.
#include "power_view.hpp"

#include <map>

#include "dynres/corridor.hpp"
#include "dynres/paths.hpp"
#include "dynres/power_source.hpp"
#include "dynres/state.hpp"

namespace dynres::schedd {

PowerView::PowerView(const std::string& home) : model_(power::load_power_model(config_path(home))) {}

void PowerView::annotate(State& st, sched::Snapshot& snap, double now) {
  // no schema: no corridor was ever set (pcorridor creates it); never create it here
  auto corridor = power::has_power_schema(st.db()) ? power::corridor_at(st.db(), now) : std::nullopt;
  if (!corridor) {
    snap.power = {};
    return;
  }
  snap.power.known = true;
  snap.power.lower = corridor->lower;
  snap.power.upper = corridor->upper;
  snap.power.idle_watts = model_.idle_watts;
  snap.power.node_max_watts = model_.node_max_watts;
  auto draw = power::current_draw(st, model_);
  std::map<int64_t, power::JobDraw> running;
  for (auto& j : draw.jobs) running[j.id] = j.draw;
  for (auto& r : snap.running) {
    auto it = running.find(r.id);
    if (it == running.end()) continue;
    r.min_power = it->second.min_watts;
    r.max_power = it->second.max_watts;
  }
  std::map<int64_t, JobRecord> pending;
  for (auto& j : st.jobs({kPending})) pending[j.id] = j;
  auto history = power::load_history(st.db());
  for (auto& w : snap.waiting) {
    auto it = pending.find(w.id);
    if (it == pending.end()) continue;
    auto d = power::job_draw(it->second.min_power, it->second.max_power, it->second.name, w.req_nodes, history, model_);
    w.min_power = d.min_watts;
    w.max_power = d.max_watts;
  }
  if (now - last_sample_ >= 1.0) {
    power::record_samples(st, now, power::modelled_readings(st, model_));
    last_sample_ = now;
  }
}

}  // namespace dynres::schedd
