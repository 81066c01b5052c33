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
  /// Records a modelled sample of every node at most once a second while a
  /// corridor is in force. Called by the daemon under the power policy only
  /// (other policies leave sampling to `pcorridor sample`).
  void annotate(State& st, sched::Snapshot& snap, double now);

 private:
  power::PowerModel model_;
  double last_sample_ = -1e300;
};

}  // namespace dynres::schedd
