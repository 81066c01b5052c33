// The live scheduler's view of power for the policies (power_view.cpp).
#pragma once
#include <string>

#include "dynres/power_source.hpp"
#include "dynres/sched.hpp"

namespace dynres {
class State;
}

namespace dynres::schedd {

class PowerView {
 public:
  /// Reads the power model (`power:` of home/dynres.yaml); throws
  /// std::runtime_error for a bad section (the daemon then refuses to start).
  explicit PowerView(const std::string& home);
  /// Fill snap.power (corridor in force at `now`, idle and maximum node
  /// watts) and every job's per-node min/max power (hints, history of the
  /// same name and size, or the model's range; §5.1.3); without a corridor
  /// snap.power stays unknown (the power schema is never created here).
  /// Records a modelled sample of every node while a corridor is in force:
  /// when the running jobs' sizes, the idle nodes or the corridor differ from
  /// the last sample (dated at the latest allocation start/end or the
  /// corridor's effective time, when after the last sample), and at least
  /// once a second; sample times strictly increase. Called by the daemon under the power policy only
  /// (other policies leave sampling to `pcorridor sample`).
  /// Then, by pc.power_mode (sched::PowerMode), the draw the policy plans
  /// on: reactive -- the last sample's total (the measurement) in
  /// draw_min = draw_max; proactive -- power::forecast_next over the sampled
  /// totals (pc.power_forecast_interval, _window; horizon: one tick), none
  /// while the history is too short; aware, runtime -- none (the model).
  void annotate(State& st, sched::Snapshot& snap, double now, const sched::PolicyConfig& pc, double tick);
  /// power.record_samples: record samples under the other policies too.
  bool record_samples() const { return model_.record_samples; }

 private:
  power::PowerModel model_;
  double last_sample_ = -1e300;
  std::string last_sig_;
  double last_lower_ = -1, last_upper_ = -1;
  double last_total_ = -1;  ///< total watts of the last sample (reactive mode's measurement)
};

}  // namespace dynres::schedd
