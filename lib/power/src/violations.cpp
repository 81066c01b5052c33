// count_violations (violations.hpp): one pass over the merged change points.
#include "dynres/violations.hpp"

#include <algorithm>
#include <cmath>

namespace dynres::power {

ViolationCount count_violations(const std::vector<DrawPoint>& draw, const std::vector<CorridorStep>& corridor,
                                double end, double grace) {
  ViolationCount v;
  if (!(grace >= 0)) grace = 0;
  bool have_draw = false, have_c = false;
  double w = 0, lo = 0, up = 0;
  auto state = [&] {
    if (!have_draw || !have_c) return 0;
    return w > up + 1e-9 ? 1 : w < lo - 1e-9 ? -1 : 0;
  };
  int run_state = 0;     // side of the open episode (0: none)
  double run_len = 0;    // seconds outside in it so far
  double gap = 0;        // seconds inside since its last stretch outside
  auto close_run = [&] {
    if (run_state != 0 && run_len > 0) (run_len > grace ? v.count : v.corrected)++;
    run_state = 0;
    run_len = gap = 0;
  };
  // a segment of dt > 0 seconds with the current draw and corridor; a stay
  // inside of at most `grace` seconds does not end an episode (the latency
  // of a start after an end, which mjsim carries out at one instant)
  auto segment = [&](double dt) {
    if (!(dt > 0) || !have_draw) return;
    int st = state();
    if (st > 0) v.above_ws += (w - up) * dt;
    if (st < 0) v.below_ws += (lo - w) * dt;
    if (st == 0) {
      if (run_state != 0 && (gap += dt) > grace) close_run();
      return;
    }
    v.outside_s += dt;
    if (st == run_state) {
      run_len += dt;
      gap = 0;
      return;
    }
    close_run();
    run_state = st, run_len = dt;
  };
  if (draw.empty()) return v;
  // the series ends at `end` (at its last point when end is before it):
  // corridor changes after that are not counted
  const double stop = std::max(end, draw.back().t);
  size_t i = 0, k = 0;
  double t_prev = 0;
  bool started = false;
  while (i < draw.size() || (k < corridor.size() && corridor[k].t <= stop)) {
    // corridor steps first at one instant
    bool take_c = k < corridor.size() && corridor[k].t <= stop && (i >= draw.size() || corridor[k].t <= draw[i].t);
    double t = take_c ? corridor[k].t : draw[i].t;
    if (started) segment(t - t_prev);
    int before = state();
    if (take_c) {
      lo = corridor[k].lower, up = corridor[k].upper, have_c = true;
      ++k;
    } else {
      w = draw[i].watts, have_draw = true;
      ++i;
    }
    int after = state();
    if (after != 0 && before == 0) ++v.breaks;
    t_prev = t;
    started = true;
  }
  if (started && stop > t_prev) segment(stop - t_prev);
  close_run();
  return v;
}

}  // namespace dynres::power
