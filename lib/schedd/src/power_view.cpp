// The live scheduler's view of power ([John24 Ch. 5, §5.2.1]: the corridor is
// re-read every scheduler pass): the corridor in force, the node power model
// and every job's modelled per-node draw go into the policy's snapshot, and
// a modelled reading of every node is recorded at every allocation or
// corridor change and once a second, so that pcorridor(1) shows the draw and
// counts the violations of the live run as mjsim counts the simulated one.
#include "power_view.hpp"

#include <map>

#include "dynres/corridor.hpp"
#include "dynres/db.hpp"
#include "dynres/forecast.hpp"
#include "dynres/paths.hpp"
#include "dynres/power_source.hpp"
#include "dynres/state.hpp"

namespace dynres::schedd {

PowerView::PowerView(const std::string& home) : model_(power::load_power_model(config_path(home))) {}

void PowerView::annotate(State& st, sched::Snapshot& snap, double now, const sched::PolicyConfig& pc, double tick) {
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
  // Event-driven samples (the shape of mjsim's series): the modelled draw
  // changes only when an allocation changes (start, end, resize commit) or
  // the corridor changes, so a sample is recorded when either differs from
  // the last sample, dated at the change (the latest allocation start/end,
  // or the corridor's effective time) -- plus one a second. Times strictly
  // increase (the totals are grouped by time).
  std::string sig = std::to_string(corridor->lower) + "-" + std::to_string(corridor->upper) + "/" +
                    std::to_string(draw.idle_nodes);
  for (auto& j : draw.jobs) sig += " " + std::to_string(j.id) + ":" + std::to_string(j.nodes);
  double t = now;
  const bool changed = sig != last_sig_;
  if (changed) {
    double at = -1e300;
    Stmt q(st.db(), "SELECT MAX(start_time), MAX(end_time) FROM allocations");
    if (q.step()) {
      if (!q.is_null(0)) at = std::max(at, q.f64(0));
      if (!q.is_null(1)) at = std::max(at, q.f64(1));
    }
    if (corridor->lower != last_lower_ || corridor->upper != last_upper_) at = std::max(at, corridor->effective_time);
    // the first sample of this scheduler is dated now (an allocation change
    // before it may predate the corridor or the scheduler)
    if (last_sample_ > -1e299 && at > last_sample_ && at <= now) t = at;
  }
  if (changed || now - last_sample_ >= 1.0) {
    t = std::max(t, last_sample_ + 1e-6);
    auto readings = power::modelled_readings(st, model_);
    power::record_samples(st, t, readings);
    last_total_ = 0;
    for (auto& r : readings) last_total_ += r.watts;
    last_sample_ = t;
    last_sig_ = sig;
    last_lower_ = corridor->lower;
    last_upper_ = corridor->upper;
  }
  snap.power.draw_min = snap.power.draw_max = -1;
  if (pc.power_mode == sched::PowerMode::reactive) {
    snap.power.draw_min = snap.power.draw_max = last_total_;
  } else if (pc.power_mode == sched::PowerMode::proactive) {
    const double iv = pc.power_forecast_interval;
    std::vector<power::DrawPoint> pts;
    for (auto& [ts, w] : power::sampled_totals(st.db(), now - (pc.power_forecast_window + 2) * iv - 10))
      pts.push_back({ts, w});
    if (auto f = power::forecast_next(pts, now, iv, pc.power_forecast_window, std::max(tick, 0.01))) {
      snap.power.draw_min = f->min;
      snap.power.draw_max = f->max;
    }
  }
}

}  // namespace dynres::schedd
