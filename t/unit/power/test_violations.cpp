// The one violation count shared by mjsim and pcorridor (violations.hpp) and
// the proactive forecast of the next interval (forecast.hpp forecast_next).
#include <catch2/catch.hpp>

#include "dynres/forecast.hpp"
#include "dynres/violations.hpp"

using namespace dynres::power;

TEST_CASE("violations: episodes of positive duration, watt-seconds, breaks", "[power][violations]") {
  std::vector<CorridorStep> c{{0, 100, 200}};
  // inside, above 2 s (+50 W), inside, below 1 s (-20 W), then above again
  std::vector<DrawPoint> d{{0, 150}, {10, 250}, {12, 150}, {20, 80}, {21, 150}, {30, 300}};
  auto v = count_violations(d, c, 31);
  CHECK(v.count == 3);
  CHECK(v.breaks == 3);
  CHECK(v.corrected == 0);
  CHECK(v.above_ws == Approx(50 * 2 + 100 * 1));
  CHECK(v.below_ws == Approx(20 * 1));
  CHECK(v.outside_s == Approx(4));
  // the series ends at the last point when `end` is before it
  CHECK(count_violations(d, c, 0).count == 2);
}

TEST_CASE("violations: a break corrected at the same instant is no violation", "[power][violations]") {
  std::vector<CorridorStep> c{{0, 100, 200}};
  std::vector<DrawPoint> d{{0, 150}, {5, 250}, {5, 150}, {9, 150}};  // mjsim: two points at one time
  auto v = count_violations(d, c, 9);
  CHECK(v.count == 0);
  CHECK(v.breaks == 1);
  CHECK(v.above_ws == 0);
}

TEST_CASE("violations: above then below without a stay inside is two episodes", "[power][violations]") {
  std::vector<CorridorStep> c{{0, 100, 200}};
  std::vector<DrawPoint> d{{0, 250}, {3, 150}, {3, 50}, {5, 150}};
  auto v = count_violations(d, c, 5);
  CHECK(v.count == 2);
  CHECK(v.breaks == 2);
  // a zero-duration stay inside between two stretches above does not split them
  std::vector<DrawPoint> e{{0, 250}, {3, 150}, {3, 260}, {5, 150}};
  CHECK(count_violations(e, c, 5).count == 1);
}

TEST_CASE("violations: corridor changes; none before the first; grace", "[power][violations]") {
  // no corridor before t = 10; the draw 500 W is then above [100, 400]
  std::vector<CorridorStep> c{{10, 100, 400}, {20, 600, 900}};
  std::vector<DrawPoint> d{{0, 500}, {12, 300}, {20.5, 700}};
  auto v = count_violations(d, c, 30);
  // 10-12 above (100 W x 2 s), 20-20.5 below (300 W x 0.5 s)
  CHECK(v.count == 2);
  CHECK(v.above_ws == Approx(200));
  CHECK(v.below_ws == Approx(150));
  auto g = count_violations(d, c, 30, 1.0);  // 2 s counts, 0.5 s is within the grace
  CHECK(g.count == 1);
  CHECK(g.corrected == 1);
  CHECK(g.above_ws == Approx(200));  // watt-seconds count every episode
  CHECK(count_violations(d, c, 30, 2.0).count == 0);  // not longer than the grace
  // a stay inside within the grace does not split an episode; a longer one does
  std::vector<CorridorStep> c2{{0, 100, 200}};
  std::vector<DrawPoint> split{{0, 250}, {5, 150}, {5.5, 250}, {10, 150}};
  CHECK(count_violations(split, c2, 12).count == 2);
  CHECK(count_violations(split, c2, 12, 1.0).count == 1);
  CHECK(count_violations(split, c2, 12, 1.0).outside_s == Approx(9.5));
  CHECK(count_violations(split, c2, 12, 0.4).count == 2);
  // the stay inside is several samples, each shorter than the grace, that
  // together are longer: the gap accumulates and the episode splits
  std::vector<DrawPoint> steps{{0, 250}, {5, 150}, {5.6, 160}, {6.2, 170}, {6.8, 180}, {7.4, 250}, {12, 150}};
  auto st = count_violations(steps, c2, 14, 1.0);  // 2.4 s inside > 1 s grace
  CHECK(st.count == 2);
  CHECK(count_violations(steps, c2, 14, 3.0).count == 1);  // 2.4 s inside <= 3 s grace
  CHECK(count_violations({}, c, 30).count == 0);
  // a corridor scheduled after the end of the series does not extend it
  std::vector<CorridorStep> later{{0, 100, 400}, {3600, 1000, 2000}};
  auto f = count_violations({{0, 300}, {10, 300}}, later, 10);
  CHECK(f.count == 0);
  CHECK(f.below_ws == 0);
}

TEST_CASE("forecast_next: a steady draw is forecast; too short a history gives none", "[power][forecast]") {
  std::vector<DrawPoint> d{{0, 1000}, {50, 1200}};
  auto f = forecast_next(d, 100, 1.0, 30, 1.0);
  REQUIRE(f);
  CHECK(f->min == Approx(1200).margin(1));
  CHECK(f->max == Approx(1200).margin(1));
  CHECK_FALSE(forecast_next(d, 20, 1.0, 30, 1.0));  // the window reaches before the first point
  CHECK_FALSE(forecast_next({}, 100, 1.0, 30, 1.0));
  // a rising ramp is extrapolated upwards over a 5 s horizon
  std::vector<DrawPoint> r;
  for (int i = 0; i <= 60; ++i) r.push_back({double(i), 1000.0 + 10 * i});
  auto fr = forecast_next(r, 60, 1.0, 30, 5.0);
  REQUIRE(fr);
  CHECK(fr->max > 1600);
}
