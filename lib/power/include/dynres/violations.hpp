// The one definition of a power-corridor violation, shared by mjsim (the
// simulated series, lib/sim) and the live side (pcorridor(1) over the
// modelled samples mjsched records, lib/power corridor.cpp). Pure
// computation: no I/O, no state file (library dynres_power_series).
//
// [John24 §5.2, §9.2]: the corridor [lower, upper] (total watts of the
// cluster) is violated while the draw is above upper or below lower.
#pragma once
#include <vector>

namespace dynres::power {

/// One point of the total draw, watts from time t (seconds, any origin) on.
struct DrawPoint {
  double t = 0, watts = 0;
};
/// The corridor [lower, upper] watts in force from time t on.
struct CorridorStep {
  double t = 0, lower = 0, upper = 0;
};

struct ViolationCount {
  /// Episodes: maximal spans of positive duration with the draw on the same
  /// side outside the corridor (leaving it starts one; so does crossing from
  /// above to below), counted only when longer than `grace` seconds outside.
  /// A stay inside of at most `grace` seconds does not split an episode (0:
  /// any positive-duration stay does): mjsim carries out an end and the start
  /// it allows at one instant, mjsched a pass later.
  int count = 0;
  /// Every point (draw change or corridor change) that takes the draw from
  /// inside to outside, also those corrected at the same instant or within
  /// the grace.
  int breaks = 0;
  /// Episodes of positive duration not longer than the grace (corrected in time).
  int corrected = 0;
  double above_ws = 0, below_ws = 0;  ///< watt-seconds above upper / below lower (all of them, grace or not)
  double outside_s = 0;               ///< seconds outside the corridor in total
};

/// Count violations of the step function `draw` (each point holds until the
/// next one; the last until `end`, ignored when end is before it) against
/// the step function `corridor` (none in force before its first step: never
/// outside). Both sorted by t; several points may share a time (only the
/// last one of an instant holds; the others still count as breaks); at one
/// instant corridor steps apply before draw points. Outside means
/// watts > upper + 1e-9 or watts < lower - 1e-9. grace >= 0 seconds: an
/// episode must last longer than it to count (0: any positive duration).
/// Before the first draw point nothing is counted. O(D + C).
ViolationCount count_violations(const std::vector<DrawPoint>& draw, const std::vector<CorridorStep>& corridor,
                                double end, double grace = 0);

}  // namespace dynres::power
