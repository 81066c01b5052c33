// Forecasting [John24 §5.1.4]: Holt-Winters, ARIMA, seasonal naive.
#include "dynres/forecast.hpp"
#include "dynres/violations.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <functional>
#include <numeric>

namespace dynres::power {

double mape(const std::vector<double>& a, const std::vector<double>& p) {
  if (a.size() != p.size()) throw ForecastError("mape: actual and predicted differ in length");
  double s = 0;
  int n = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != 0) {
      s += std::fabs((a[i] - p[i]) / a[i]);
      ++n;
    }
  if (n == 0) throw ForecastError("mape: every actual value is 0 W");
  return 100.0 * s / n;
}

double mase(const std::vector<double>& a, const std::vector<double>& p, const std::vector<double>& train, int m) {
  if (a.size() != p.size() || a.empty()) throw ForecastError("mase: actual and predicted differ in length or are empty");
  if (m < 1 || train.size() <= static_cast<size_t>(m)) throw ForecastError("mase: training series shorter than one season + 1");
  double scale = 0;
  for (size_t t = m; t < train.size(); ++t) scale += std::fabs(train[t] - train[t - m]);
  scale /= static_cast<double>(train.size() - m);
  if (scale == 0) throw ForecastError("mase: the seasonal-naive error on the training series is 0 (constant series)");
  double mae = 0;
  for (size_t i = 0; i < a.size(); ++i) mae += std::fabs(a[i] - p[i]);
  return mae / static_cast<double>(a.size()) / scale;
}

// ------------------------------------------------------------ Holt-Winters

void HoltWinters::update(double y) {
  double& s = seasonal[t % season];
  double pred = level + trend + s;
  sse += (y - pred) * (y - pred);
  double nl = alpha * (y - s) + (1 - alpha) * (level + trend);
  trend = beta * (nl - level) + (1 - beta) * trend;
  s = gamma * (y - nl) + (1 - gamma) * s;
  level = nl;
  ++t;
}

double HoltWinters::forecast(int h) const { return level + h * trend + seasonal[(t + h - 1) % season]; }

namespace {
HoltWinters hw_init(const std::vector<double>& y, int m, double a, double b, double g) {
  HoltWinters hw;
  hw.alpha = a, hw.beta = b, hw.gamma = g, hw.season = m;
  double m1 = 0, m2 = 0;
  for (int i = 0; i < m; ++i) m1 += y[i], m2 += y[m + i];
  m1 /= m, m2 /= m;
  double tr = (m2 - m1) / m;
  double c = (m - 1) / 2.0;
  hw.trend = tr;
  hw.level = m1 + c * tr;
  hw.seasonal.resize(m);
  for (int i = 0; i < m; ++i) hw.seasonal[i] = y[i] - (m1 + (i - c) * tr);
  hw.t = m;
  return hw;
}
double hw_sse(const std::vector<double>& y, int m, double a, double b, double g) {
  auto hw = hw_init(y, m, a, b, g);
  for (size_t i = m; i < y.size(); ++i) hw.update(y[i]);
  return hw.sse;
}
}  // namespace

HoltWinters fit_holt_winters(const std::vector<double>& y, int m) {
  if (m < 1) throw ForecastError("holt-winters: season must be >= 1 sample");
  if (y.size() < static_cast<size_t>(2 * m + 1))
    throw ForecastError("holt-winters: needs at least 2 seasons + 1 samples (" + std::to_string(2 * m + 1) + "), got " +
                        std::to_string(y.size()));
  double best = std::numeric_limits<double>::infinity(), ba = 0.5, bb = 0.1, bg = 0.1;
  for (int i = 0; i <= 10; ++i)
    for (int j = 0; j <= 10; ++j)
      for (int k = 0; k <= (m > 1 ? 10 : 0); ++k) {
        double s = hw_sse(y, m, i / 10.0, j / 10.0, k / 10.0);
        if (s < best) best = s, ba = i / 10.0, bb = j / 10.0, bg = k / 10.0;
      }
  for (double step : {0.05, 0.02, 0.01}) {
    bool improved = true;
    while (improved) {
      improved = false;
      for (int dim = 0; dim < 3; ++dim)
        for (int sgn : {-1, 1}) {
          double a = ba, b = bb, g = bg;
          (dim == 0 ? a : dim == 1 ? b : g) += sgn * step;
          if (a < 0 || a > 1 || b < 0 || b > 1 || g < 0 || g > 1) continue;
          double s = hw_sse(y, m, a, b, g);
          if (s < best - 1e-12) best = s, ba = a, bb = b, bg = g, improved = true;
        }
    }
  }
  auto hw = hw_init(y, m, ba, bb, bg);
  for (size_t i = m; i < y.size(); ++i) hw.update(y[i]);
  return hw;
}

// ------------------------------------------------------------ ARIMA

namespace {
/// Least squares by normal equations with partial pivoting; ridge 1e-9 keeps
/// collinear designs solvable.
std::vector<double> ols(const std::vector<std::vector<double>>& X, const std::vector<double>& y) {
  size_t k = X.empty() ? 0 : X[0].size();
  std::vector<std::vector<double>> A(k, std::vector<double>(k + 1, 0));
  for (size_t r = 0; r < X.size(); ++r)
    for (size_t i = 0; i < k; ++i) {
      for (size_t j = 0; j < k; ++j) A[i][j] += X[r][i] * X[r][j];
      A[i][k] += X[r][i] * y[r];
    }
  for (size_t i = 0; i < k; ++i) A[i][i] += 1e-9;
  for (size_t c = 0; c < k; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < k; ++r)
      if (std::fabs(A[r][c]) > std::fabs(A[piv][c])) piv = r;
    std::swap(A[c], A[piv]);
    if (std::fabs(A[c][c]) < 1e-300) continue;
    for (size_t r = 0; r < k; ++r) {
      if (r == c) continue;
      double f = A[r][c] / A[c][c];
      for (size_t j = c; j <= k; ++j) A[r][j] -= f * A[c][j];
    }
  }
  std::vector<double> b(k, 0);
  for (size_t i = 0; i < k; ++i) b[i] = std::fabs(A[i][i]) < 1e-300 ? 0 : A[i][k] / A[i][i];
  return b;
}
double binom(int n, int k) {
  double r = 1;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}
/// d-th difference at the end of h (h.size() > d).
double diff_last(const std::vector<double>& h, int d) {
  double s = 0;
  size_t n = h.size();
  for (int k = 0; k <= d; ++k) s += ((k % 2) ? -1 : 1) * binom(d, k) * h[n - 1 - k];
  return s;
}
}  // namespace

void Arima::update(double y) {
  history.push_back(y);
  if (history.size() <= static_cast<size_t>(d)) return;
  double wn = diff_last(history, d);
  double pred = c;
  size_t n = w.size();
  for (int i = 1; i <= p; ++i) pred += (n >= static_cast<size_t>(i) ? phi[i - 1] * w[n - i] : 0);
  for (int j = 1; j <= q; ++j) pred += (e.size() >= static_cast<size_t>(j) ? theta[j - 1] * e[e.size() - j] : 0);
  w.push_back(wn);
  e.push_back(n >= static_cast<size_t>(std::max(p, q)) ? wn - pred : 0.0);
}

std::vector<double> Arima::forecast_path(int h) const {
  std::vector<double> ww = w, ee = e, hh = history, out;
  for (int s = 0; s < h; ++s) {
    size_t n = ww.size();
    double pred = c;
    for (int i = 1; i <= p; ++i) pred += (n >= static_cast<size_t>(i) ? phi[i - 1] * ww[n - i] : 0);
    for (int j = 1; j <= q; ++j) pred += (ee.size() >= static_cast<size_t>(j) ? theta[j - 1] * ee[ee.size() - j] : 0);
    ww.push_back(pred);
    ee.push_back(0);
    // undifference: y_t = w_t - sum_{k=1..d} (-1)^k C(d,k) y_{t-k}
    double yv = pred;
    size_t m = hh.size();
    for (int k = 1; k <= d; ++k) yv -= ((k % 2) ? -1 : 1) * binom(d, k) * hh[m - k];
    hh.push_back(yv);
    out.push_back(yv);
  }
  return out;
}

double Arima::forecast(int h) const { return forecast_path(h).back(); }

Arima fit_arima(const std::vector<double>& y, int p, int d, int q) {
  if (p < 0 || p > 3 || d < 0 || d > 2 || q < 0 || q > 3)
    throw ForecastError("arima: orders must be p, q in [0, 3] and d in [0, 2]");
  size_t need = static_cast<size_t>(std::max(p, q) + 8 + d);
  if (y.size() <= need)
    throw ForecastError("arima(" + std::to_string(p) + "," + std::to_string(d) + "," + std::to_string(q) +
                        "): needs more than " + std::to_string(need) + " samples, got " + std::to_string(y.size()));
  std::vector<double> w;
  {
    std::vector<double> h;
    for (double v : y) {
      h.push_back(v);
      if (h.size() > static_cast<size_t>(d)) w.push_back(diff_last(h, d));
    }
  }
  // innovations from a long AR fit (only needed for q > 0)
  std::vector<double> eh(w.size(), 0.0);
  int L = q > 0 ? std::max(p, q) + 3 : 0;
  if (q > 0) {
    std::vector<std::vector<double>> X;
    std::vector<double> Y;
    for (size_t t = L; t < w.size(); ++t) {
      std::vector<double> row{1.0};
      for (int i = 1; i <= L; ++i) row.push_back(w[t - i]);
      X.push_back(row);
      Y.push_back(w[t]);
    }
    auto b = ols(X, Y);
    for (size_t t = L; t < w.size(); ++t) {
      double pr = b[0];
      for (int i = 1; i <= L; ++i) pr += b[i] * w[t - i];
      eh[t] = w[t] - pr;
    }
  }
  size_t start = static_cast<size_t>(std::max(p, L + q));
  std::vector<std::vector<double>> X;
  std::vector<double> Y;
  for (size_t t = start; t < w.size(); ++t) {
    std::vector<double> row{1.0};
    for (int i = 1; i <= p; ++i) row.push_back(w[t - i]);
    for (int j = 1; j <= q; ++j) row.push_back(eh[t - j]);
    X.push_back(row);
    Y.push_back(w[t]);
  }
  auto b = ols(X, Y);
  Arima a;
  a.p = p, a.d = d, a.q = q;
  a.c = b[0];
  a.phi.assign(b.begin() + 1, b.begin() + 1 + p);
  a.theta.assign(b.begin() + 1 + p, b.end());
  for (double v : y) a.update(v);  // state: history, w, innovations
  return a;
}

// ------------------------------------------------------------ selection

Forecast forecast_draw(const std::vector<double>& y, int season, int holdout, int horizon) {
  if (season < 1) throw ForecastError("forecast: season must be >= 1 sample");
  if (holdout < 2) throw ForecastError("forecast: hold-out must be >= 2 samples");
  if (horizon < 1) throw ForecastError("forecast: horizon must be >= 1 sample");
  size_t need = static_cast<size_t>(2 * season + holdout + 4);
  if (y.size() < need)
    throw ForecastError("forecast: needs at least " + std::to_string(need) + " samples (2 seasons + hold-out + 4), got " +
                        std::to_string(y.size()));
  for (double v : y)
    if (!std::isfinite(v)) throw ForecastError("forecast: the series holds a non-finite value");
  std::vector<double> train(y.begin(), y.end() - holdout), test(y.end() - holdout, y.end());

  // every model as (name, fit on a series -> one-step predictor over test, path on full series)
  auto run_sn = [&](const std::vector<double>& tr, const std::vector<double>& te) {
    std::vector<double> h = tr, pred;
    for (double a : te) {
      pred.push_back(h[h.size() - season]);
      h.push_back(a);
    }
    return pred;
  };
  auto path_sn = [&](int hz) {
    std::vector<double> out;
    for (int h = 1; h <= hz; ++h) {
      int back = season * ((h + season - 1) / season);
      out.push_back(y[y.size() + h - 1 - back]);
    }
    return out;
  };
  auto run_hw = [&](const std::vector<double>& tr, const std::vector<double>& te) {
    auto m = fit_holt_winters(tr, season);
    std::vector<double> pred;
    for (double a : te) {
      pred.push_back(m.forecast(1));
      m.update(a);
    }
    return pred;
  };
  auto path_hw = [&](int hz) {
    auto m = fit_holt_winters(y, season);
    std::vector<double> out;
    for (int h = 1; h <= hz; ++h) out.push_back(m.forecast(h));
    return out;
  };
  struct Order {
    int p, d, q;
  };
  const Order orders[] = {{1, 0, 0}, {1, 1, 0}, {1, 1, 1}};

  Forecast f;
  auto score = [&](const std::string& name, const std::vector<double>& pred) {
    ModelScore s;
    s.model = name;
    s.predicted = pred;
    s.mape = mape(test, pred);
    try {
      s.mase = mase(test, pred, train, season);
    } catch (const ForecastError&) {
      s.mase = std::numeric_limits<double>::quiet_NaN();
    }
    f.scores.push_back(s);
  };
  score("seasonal-naive", run_sn(train, test));
  try {
    score("holt-winters", run_hw(train, test));
  } catch (const ForecastError&) {
  }
  for (auto o : orders) {
    try {
      auto m = fit_arima(train, o.p, o.d, o.q);
      std::vector<double> pred;
      for (double a : test) {
        pred.push_back(m.forecast(1));
        m.update(a);
      }
      bool ok = std::all_of(pred.begin(), pred.end(), [](double v) { return std::isfinite(v); });
      if (ok)
        score("arima(" + std::to_string(o.p) + "," + std::to_string(o.d) + "," + std::to_string(o.q) + ")", pred);
    } catch (const ForecastError&) {
    }
  }
  // lowest MAPE; a model must beat the baseline (first) strictly
  size_t best = 0;
  for (size_t i = 1; i < f.scores.size(); ++i)
    if (f.scores[i].mape < f.scores[best].mape - 1e-9) best = i;
  f.model = f.scores[best].model;
  f.mape = f.scores[best].mape;
  f.mase = f.scores[best].mase;
  if (f.model == "seasonal-naive") {
    f.path = path_sn(horizon);
  } else if (f.model == "holt-winters") {
    f.path = path_hw(horizon);
  } else {
    for (auto o : orders) {
      std::string n = "arima(" + std::to_string(o.p) + "," + std::to_string(o.d) + "," + std::to_string(o.q) + ")";
      if (n == f.model) f.path = fit_arima(y, o.p, o.d, o.q).forecast_path(horizon);
    }
  }
  f.min = *std::min_element(f.path.begin(), f.path.end());
  f.max = *std::max_element(f.path.begin(), f.path.end());
  return f;
}

std::optional<NextDraw> forecast_next(const std::vector<DrawPoint>& draw, double now, double interval, int window,
                                      double horizon_s) {
  if (draw.empty() || !(interval > 0) || window < 12 || !std::isfinite(now)) return std::nullopt;
  const double t0 = now - (window - 1) * interval;
  if (draw.front().t > t0) return std::nullopt;
  std::vector<double> y;
  y.reserve(window);
  // the point in force at each resampling time (the last one at or before it)
  size_t k = std::upper_bound(draw.begin(), draw.end(), t0, [](double t, const DrawPoint& p) { return t < p.t; }) -
             draw.begin() - 1;
  for (int i = 0; i < window; ++i) {
    double t = t0 + i * interval;
    while (k + 1 < draw.size() && draw[k + 1].t <= t) ++k;
    y.push_back(draw[k].watts);
  }
  int horizon = std::max(1, static_cast<int>(std::ceil(horizon_s / interval - 1e-9)));
  try {
    auto f = forecast_draw(y, 1, std::max(2, window / 5), horizon);
    return NextDraw{f.min, f.max, f.model, f.mape};
  } catch (const ForecastError&) {
    return std::nullopt;
  }
}

}  // namespace dynres::power
