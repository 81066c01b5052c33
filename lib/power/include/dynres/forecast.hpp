// Forecasting of power draw [John24 §5.1.4]: additive Holt-Winters, a small
// ARIMA(p,d,q) fitted by least squares, and a seasonal-naive baseline; rolling
// one-step-ahead evaluation with MAPE and MASE; the model with the lowest MAPE
// predicts the minimum and maximum draw over the next interval.
// Series values are watts at equally spaced samples; horizons count samples.
// Pure functions, no I/O.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dynres/violations.hpp"

namespace dynres::power {

/// Too short a series, bad season or order: what() says which and why.
class ForecastError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Mean absolute percentage error in percent over pairs with actual != 0.
/// Throws ForecastError when sizes differ or no actual is non-zero.
double mape(const std::vector<double>& actual, const std::vector<double>& predicted);
/// Mean absolute scaled error: MAE of the predictions divided by the in-sample
/// MAE of the seasonal-naive forecast (lag `season`) on `train`.
/// Throws ForecastError when train has <= season points or that MAE is 0.
double mase(const std::vector<double>& actual, const std::vector<double>& predicted,
            const std::vector<double>& train, int season);

/// Additive Holt-Winters (level, trend, season of length m >= 1).
struct HoltWinters {
  double alpha = 0.5, beta = 0.1, gamma = 0.1;
  int season = 1;
  double level = 0, trend = 0;
  std::vector<double> seasonal;  ///< m components, index t mod m
  double sse = 0;                ///< in-sample squared one-step errors
  int t = 0;                     ///< samples consumed
  /// Fold in one new observation (watts).
  void update(double y);
  /// Forecast h >= 1 steps ahead.
  double forecast(int h) const;
};
/// Fit alpha, beta, gamma in [0, 1] minimising the in-sample squared
/// one-step-ahead error (grid then coordinate refinement). Needs >= 2 m points.
/// Initial state: level/trend from the first two seasons' means, seasonal
/// components from the first season's deviations from that line (a linear
/// series is then forecast exactly).
HoltWinters fit_holt_winters(const std::vector<double>& y, int season);

/// ARIMA(p, d, q) with a constant, fitted by least squares (Hannan-Rissanen:
/// a long AR fit estimates the innovations, then one regression of the
/// differenced series on its p lags and q lagged innovations).
struct Arima {
  int p = 1, d = 0, q = 0;
  double c = 0;
  std::vector<double> phi, theta;
  std::vector<double> history;  ///< the undifferenced series seen so far
  std::vector<double> w;        ///< the differenced series
  std::vector<double> e;        ///< innovations (one-step errors on w)
  void update(double y);
  /// Forecast h >= 1 steps ahead (undifferenced).
  double forecast(int h) const;
  std::vector<double> forecast_path(int h) const;
};
/// Throws ForecastError for p, d, q out of [0, 3] or too short a series
/// (needs > max(p, q) + 8 + d points).
Arima fit_arima(const std::vector<double>& y, int p, int d, int q);

/// One model's rolling one-step-ahead evaluation and its forecast.
struct ModelScore {
  std::string model;           ///< "holt-winters", "arima(p,d,q)", "seasonal-naive"
  double mape = 0, mase = 0;   ///< on the hold-out part
  std::vector<double> predicted;  ///< one-step predictions of the hold-out part
};

struct Forecast {
  std::string model;           ///< the chosen one (lowest MAPE)
  double mape = 0, mase = 0;
  std::vector<ModelScore> scores;  ///< every model tried
  std::vector<double> path;    ///< forecast for the next `horizon` samples, watts
  double min = 0, max = 0;     ///< min / max of path: the draw bounds for the LP (§5.1.4)
};

/// Fit every model on the first n - holdout points, predict the last holdout
/// points one step ahead (models updated with each actual, parameters kept),
/// choose the lowest MAPE, refit it on the whole series and forecast
/// `horizon` samples. season >= 1 (1 = no seasonality). Throws ForecastError
/// for a series too short (< 2 * season + holdout + 4 points), holdout < 2 or
/// horizon < 1.
Forecast forecast_draw(const std::vector<double>& y, int season, int holdout, int horizon);

/// Proactive mode ([John24 §5.1.4]; the power policy's PowerMode::proactive):
/// the min/max draw forecast for the next `horizon_s` seconds from the
/// step series `draw` (violations.hpp DrawPoint: each point holds until the
/// next), resampled every `interval` s at the `window` times ending at `now`
/// (window >= 12, no seasonality, the last fifth held out for the rolling
/// one-step evaluation; horizon ceil(horizon_s / interval) samples, >= 1).
/// nullopt while the series does not reach back to the first of those times,
/// or when no model can be fitted. mjsched and mjsim both call it.
struct NextDraw {
  double min = 0, max = 0;
  std::string model;
  double mape = 0;
};
std::optional<NextDraw> forecast_next(const std::vector<DrawPoint>& draw, double now, double interval, int window,
                                      double horizon_s);

}  // namespace dynres::power
