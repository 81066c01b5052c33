// Forecasting (§5.1.4) on synthetic series with known answers.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include "dynres/forecast.hpp"

using namespace dynres::power;

namespace {
// deterministic noise in [-1, 1]
struct Lcg {
  uint64_t s = 12345;
  double next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(s >> 11) / static_cast<double>(1ULL << 53) * 2 - 1;
  }
};
}  // namespace

TEST_CASE("MAPE and MASE by hand") {
  CHECK(mape({100, 200}, {110, 180}) == Approx(10.0));
  CHECK(mape({0, 200}, {5, 150}) == Approx(25.0));  // zero actuals skipped
  // scale: mean |train_t - train_{t-1}| = 1; MAE (1 + 0) / 2 = 0.5
  CHECK(mase({5, 6}, {6, 6}, {1, 2, 3, 4}, 1) == Approx(0.5));
  CHECK_THROWS_AS(mase({5}, {5}, {3, 3, 3}, 1), ForecastError);
  CHECK_THROWS_AS(mape({1, 2}, {1}), ForecastError);
}

TEST_CASE("Holt-Winters forecasts a linear series exactly") {
  std::vector<double> y;
  for (int t = 0; t < 30; ++t) y.push_back(10 + 2 * t);
  auto hw = fit_holt_winters(y, 4);
  CHECK(hw.forecast(1) == Approx(70).margin(1e-6));
  CHECK(hw.forecast(3) == Approx(74).margin(1e-6));
  CHECK(hw.sse == Approx(0).margin(1e-9));
}

TEST_CASE("ARIMA: an AR(1) series gives back its coefficient, a linear series its slope") {
  Lcg r;
  std::vector<double> y{100};
  for (int t = 1; t < 600; ++t) y.push_back(30 + 0.7 * y.back() + 5 * r.next());
  auto a = fit_arima(y, 1, 0, 0);
  REQUIRE(a.phi.size() == 1);
  CHECK(a.phi[0] == Approx(0.7).margin(0.05));
  CHECK(a.c / (1 - a.phi[0]) == Approx(100).margin(2));
  std::vector<double> lin;
  for (int t = 0; t < 40; ++t) lin.push_back(500 + 3 * t);
  auto b = fit_arima(lin, 1, 1, 0);
  CHECK(b.forecast(1) == Approx(620).margin(1e-3));
  CHECK(b.forecast(5) == Approx(632).margin(1e-3));
  CHECK_THROWS_WITH(fit_arima(lin, 4, 0, 0), Catch::Contains("orders"));
  CHECK_THROWS_WITH(fit_arima({1, 2, 3}, 1, 0, 0), Catch::Contains("needs more than"));
}

TEST_CASE("Selection: a periodic draw is predicted exactly; min and max of the next interval") {
  const double season[] = {100, 150, 200, 250, 200, 150};
  std::vector<double> y;
  for (int k = 0; k < 8; ++k)
    for (double v : season) y.push_back(v);
  auto f = forecast_draw(y, 6, 12, 6);
  CHECK(f.mape == Approx(0).margin(1e-6));
  CHECK(f.min == Approx(100).margin(1e-6));
  CHECK(f.max == Approx(250).margin(1e-6));
  REQUIRE(f.path.size() == 6);
  CHECK(f.path[3] == Approx(250).margin(1e-6));
  CHECK(f.scores.size() >= 3);
}

TEST_CASE("Selection: trend plus season is won by Holt-Winters over the seasonal-naive baseline") {
  Lcg r;
  std::vector<double> y;
  const double pi = std::acos(-1.0);
  for (int t = 0; t < 120; ++t) y.push_back(1000 + 5 * t + 50 * std::sin(2 * pi * t / 6) + 2 * r.next());
  auto f = forecast_draw(y, 6, 24, 6);
  CHECK(f.model == "holt-winters");
  double baseline = -1;
  for (auto& s : f.scores)
    if (s.model == "seasonal-naive") baseline = s.mape;
  CHECK(f.mape < baseline / 3);
  CHECK(f.mase < 0.5);  // far better than the naive forecast's own error
  // next six samples: t = 120..125, 1000 + 5t +- 50
  CHECK(f.max == Approx(1000 + 5 * 121.5 + 50).margin(12));
  CHECK(f.min == Approx(1000 + 5 * 123.5 - 50).margin(12));
}

TEST_CASE("Forecast input errors name the problem") {
  CHECK_THROWS_WITH(forecast_draw({1, 2, 3}, 1, 2, 1), Catch::Contains("needs at least"));
  CHECK_THROWS_WITH(forecast_draw(std::vector<double>(40, 5.0), 0, 2, 1), Catch::Contains("season"));
  CHECK_THROWS_WITH(forecast_draw(std::vector<double>(40, 5.0), 1, 2, 0), Catch::Contains("horizon"));
  auto y = std::vector<double>(40, 5.0);
  y[3] = NAN;
  CHECK_THROWS_WITH(forecast_draw(y, 1, 2, 1), Catch::Contains("non-finite"));
}
