// The discrete-event loop of mjsim (sim.hpp). State is kept in a
// sched::Snapshot that is updated in place, so a pass costs what decide()
// costs; no SQLite, no I/O.
//
// Work is measured in "seconds at the requested size with the nominal serial
// fraction" (req-seconds): a job of runtime T at req_nodes has T of them, and
// at n nodes in phase p it does 1 / g_p(n) per second, g_p(n) = f_p(n) /
// f(req_nodes) (f = time_factor). A single-phase job at its requested size
// has g = 1 exactly, so rigid jobs end at start + runtime to the bit.
#include <algorithm>
#include <iterator>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "dynres/hostlist.hpp"
#include "dynres/sim.hpp"
#include "dynres/forecast.hpp"
#include "dynres/violations.hpp"

namespace dynres::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-6;  // events closer than this are one instant

const char* kind_name(sched::JobKind k) {
  switch (k) {
    case sched::JobKind::rigid: return "rigid";
    case sched::JobKind::moldable: return "moldable";
    case sched::JobKind::malleable: return "malleable";
  }
  return "rigid";
}

struct Job {
  const SimJob* spec = nullptr;
  std::vector<double> phase_end;   ///< cumulative req-seconds at each phase's end
  std::vector<double> phase_serial;
  double base_f = 1;               ///< f(req_nodes) with the nominal serial fraction
  double est = kInf;               ///< estimated req-seconds (from the time limit)
  // dynamic
  enum { future, waiting, running, done } st = future;
  size_t phase = 0;
  double work_done = 0;
  double last = 0;                 ///< time work_done refers to
  double pause_until = -kInf;
  int pause_n = 0;                 ///< size the job computes with until pause_until (0: stalled)
  int n = 0;
  uint64_t version = 0;
  double start = 0, end = 0;
  int start_nodes = 0, expands = 0, shrinks = 0;
  int run_pos = -1;                ///< index in snap.running
  size_t alloc = 0;                ///< open allocation record
  bool adapting = false;
};

struct Event {
  double t;
  uint64_t version;
  int job;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : job > o.job; }
};

class Engine {
 public:
  Engine(std::vector<SimJob> jobs, const SimOptions& o) : specs_(std::move(jobs)), o_(o) {}
  SimResult run();

 private:
  double g(const Job& j, int n, size_t phase) const {  // time factor relative to the requested size
    const SimJob& s = *j.spec;
    if (n == s.req_nodes && j.phase_end.size() == 1) return 1.0;
    return time_factor(o_.model, j.phase_serial[phase], n, o_.downey_sigma) / j.base_f;
  }
  double g_nominal(const Job& j, int n) const {
    if (n == j.spec->req_nodes) return 1.0;
    return time_factor(o_.model, j.spec->serial, n, o_.downey_sigma) / j.base_f;
  }
  void advance(Job& j, double t);
  void release(std::vector<int> nodes);  ///< keep snap_.idle: nodes became idle
  void acquire(std::vector<int> nodes);  ///< keep snap_.idle: nodes were taken
  void schedule_event(int k, double t);
  void finish(int k, double t);
  void open_alloc(int k, double t);
  void close_alloc(int k, double t);
  void pass(double t);
  void refresh(double t);
  /// Power: per-node [min, max] of a job (hints or the defaults), the
  /// modelled draw now, and one point of the series (power_tracked only).
  std::pair<double, double> job_power(const SimJob& s) const;
  double draw_now() const;
  void record(double t);
  void set_corridor(size_t i);

  std::vector<SimJob> specs_;
  SimOptions o_;
  std::vector<Job> jobs_;
  std::unordered_map<int64_t, int> index_;
  sched::Snapshot snap_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> heap_;
  SimResult r_;
  int idle_ = 0;
  int min_need_ = 0;               ///< smallest min_size() among waiting jobs (0: recompute)
  size_t done_ = 0;
  bool resized_since_pass_ = false;
  // power
  size_t next_corr_ = 0;           ///< next change in o_.corridor
  bool draw_seen_ = false;
  std::vector<power::DrawPoint> points_;  ///< the draw series (one point per instant) for the forecast
};

std::pair<double, double> Engine::job_power(const SimJob& s) const {
  double mn = s.min_power, mx = s.max_power;
  if (!(mn >= 0) && !(mx >= 0)) return {o_.idle_watts, std::max(o_.idle_watts, o_.node_max_watts)};
  if (!(mn >= 0)) mn = mx;
  if (!(mx >= 0)) mx = mn;
  return {std::min(mn, mx), std::max(mn, mx)};
}

double Engine::draw_now() const {
  double d = idle_ * o_.idle_watts;
  for (auto& r : snap_.running) {
    auto [mn, mx] = job_power(*jobs_[index_.at(r.id)].spec);
    d += static_cast<double>(r.nodes.size()) * (mn + mx) / 2;
  }
  return d;
}

void Engine::set_corridor(size_t i) {
  const auto& c = o_.corridor[i];
  snap_.power.known = true;
  snap_.power.lower = c.lower;
  snap_.power.upper = c.upper;
}

void Engine::record(double t) {
  if (!r_.power_tracked || !snap_.power.known) return;
  PowerSample p{t, draw_now(), snap_.power.lower, snap_.power.upper};
  if (!r_.power.empty()) {
    const PowerSample& q = r_.power.back();
    if (q.draw == p.draw && q.lower == p.lower && q.upper == p.upper) return;  // sizes may differ: same draw
  }
  if (!snap_.running.empty()) {
    r_.max_draw = draw_seen_ ? std::max(r_.max_draw, p.draw) : p.draw;
    r_.min_draw = draw_seen_ ? std::min(r_.min_draw, p.draw) : p.draw;
    draw_seen_ = true;
  }
  r_.power.push_back(p);
  if (!points_.empty() && points_.back().t == p.t) points_.back().watts = p.draw;
  else points_.push_back({p.t, p.draw});
  std::vector<std::pair<int64_t, size_t>> sz;
  for (auto& r : snap_.running) sz.emplace_back(r.id, r.nodes.size());
  std::sort(sz.begin(), sz.end());
  std::string js;
  for (auto& [id, n] : sz) js += (js.empty() ? "" : " ") + std::to_string(id) + ":" + std::to_string(n);
  r_.power_jobs.push_back(std::move(js));
}

void Engine::release(std::vector<int> nodes) {
  if (!std::is_sorted(nodes.begin(), nodes.end())) std::sort(nodes.begin(), nodes.end());
  std::vector<int> merged;
  merged.reserve(snap_.idle.size() + nodes.size());
  std::merge(snap_.idle.begin(), snap_.idle.end(), nodes.begin(), nodes.end(), std::back_inserter(merged));
  snap_.idle.swap(merged);
}

void Engine::acquire(std::vector<int> nodes) {
  if (!std::is_sorted(nodes.begin(), nodes.end())) std::sort(nodes.begin(), nodes.end());
  std::vector<int> left;
  left.reserve(snap_.idle.size());
  std::set_difference(snap_.idle.begin(), snap_.idle.end(), nodes.begin(), nodes.end(), std::back_inserter(left));
  snap_.idle.swap(left);
}

void Engine::advance(Job& j, double t) {
  double from = j.last;
  if (j.pause_until > from) {  // in a pause: stalled, or on at the old size (overlap)
    double e = std::min(t, j.pause_until);
    if (j.pause_n > 0 && e > from) j.work_done += (e - from) / g(j, j.pause_n, j.phase);
    from = j.pause_until;
  }
  if (t > from) j.work_done += (t - from) / g(j, j.n, j.phase);
  j.last = std::max(j.last, t);
}

void Engine::schedule_event(int k, double t) {
  Job& j = jobs_[k];
  ++j.version;
  double at;
  if (j.pause_until > t) {
    at = j.pause_until;
    if (j.pause_n > 0)  // overlap: the phase (or the job) may end during the pause
      at = std::min(at, t + std::max(0.0, j.phase_end[j.phase] - j.work_done) * g(j, j.pause_n, j.phase));
  } else {
    double left = std::max(0.0, j.phase_end[j.phase] - j.work_done);
    // exact for a rigid job: start + runtime
    at = (j.work_done == 0 && j.phase_end.size() == 1 && g(j, j.n, 0) == 1.0) ? j.start + j.phase_end[0]
                                                                               : t + left * g(j, j.n, j.phase);
  }
  heap_.push({at, j.version, k});
}

void Engine::open_alloc(int k, double t) {
  Job& j = jobs_[k];
  AllocationRecord a;
  a.job_id = j.spec->id;
  a.num_nodes = j.n;
  a.start_time = t;
  if (o_.keep_nodelists) {
    std::vector<std::string> names;
    for (int x : snap_.running[j.run_pos].nodes) names.push_back(snap_.nodes[x].name);
    a.nodelist = compress_hostlist(names);
  }
  j.alloc = r_.allocs.size();
  r_.allocs.push_back(std::move(a));
}

void Engine::close_alloc(int k, double t) {
  auto& a = r_.allocs[jobs_[k].alloc];
  a.end_time = t;
  r_.work += (t - a.start_time) * a.num_nodes;
}

void Engine::finish(int k, double t) {
  Job& j = jobs_[k];
  close_alloc(k, t);
  j.st = Job::done;
  j.end = t;
  auto& run = snap_.running;
  for (int x : run[j.run_pos].nodes) snap_.nodes[x].job = 0;
  release(run[j.run_pos].nodes);
  idle_ += j.n;
  int pos = j.run_pos;
  if (pos != static_cast<int>(run.size()) - 1) {
    run[pos] = std::move(run.back());
    jobs_[index_[run[pos].id]].run_pos = pos;
  }
  run.pop_back();
  j.run_pos = -1;
  ++done_;
  if (o_.progress && (done_ % std::max<size_t>(1, jobs_.size() / 50) == 0 || done_ == jobs_.size()))
    o_.progress(done_, jobs_.size(), t);
}

/// Per-pass fields of running malleable jobs: predicted end at the current
/// size (the time limit scaled by the nominal model), MTCT, adapting.
void Engine::refresh(double t) {
  for (auto& r : snap_.running) {
    if (r.kind != sched::JobKind::malleable) continue;
    Job& j = jobs_[index_[r.id]];
    advance(j, t);
    if (std::isfinite(j.est)) {
      double left = std::max(0.0, j.est - j.work_done) * g_nominal(j, j.n);
      r.predicted_end = std::max(t, j.pause_until) + left;
    }
    r.mtct = mtct_of(j.phase_serial[j.phase], j.n);
    r.adapting = j.adapting;
  }
}

void Engine::pass(double t) {
  snap_.now = t;
  const bool malleable = sched::is_malleable_policy(o_.policy.policy);
  const bool power = o_.policy.policy == sched::Policy::power;
  if (snap_.waiting.empty() && (idle_ == 0 || !malleable) && !(power && snap_.power.known && !snap_.running.empty()))
    return;
  if (!malleable) {  // a rigid pass can only start a job that fits in the idle nodes
    if (min_need_ == 0) {
      min_need_ = std::numeric_limits<int>::max();
      for (auto& w : snap_.waiting)
        if (int m = sched::min_size(w)) min_need_ = std::min(min_need_, m);
    }
    if (idle_ < min_need_) return;
  }
  if (malleable) refresh(t);
  if (power && snap_.power.known) {  // what the mode plans on (sched::PowerMode)
    snap_.power.draw_min = snap_.power.draw_max = -1;
    if (o_.policy.power_mode == sched::PowerMode::reactive) {
      snap_.power.draw_min = snap_.power.draw_max = draw_now();  // the measurement: the modelled draw now
    } else if (o_.policy.power_mode == sched::PowerMode::proactive) {
      double iv = o_.policy.power_forecast_interval;
      if (auto f = power::forecast_next(points_, t, iv, o_.policy.power_forecast_window, o_.tick > 0 ? o_.tick : iv)) {
        snap_.power.draw_min = f->min;
        snap_.power.draw_max = f->max;
      }
    }
  }
  ++r_.passes;
  sched::Decision d = sched::decide(snap_, o_.policy);
  if (o_.on_note)
    for (auto& n : d.notes) o_.on_note(t, n);
  auto bad = [&](const std::string& what) {
    throw std::logic_error("policy " + sched::to_string(o_.policy.policy) + " produced an invalid decision at t=" +
                           std::to_string(t) + ": " + what);
  };
  auto resize = [&](const sched::Resize& rz, bool grow) {
    auto it = index_.find(rz.job);
    if (it == index_.end() || jobs_[it->second].st != Job::running) bad("resize of a job that is not running");
    int k = it->second;
    Job& j = jobs_[k];
    advance(j, t);
    auto& nodes = snap_.running[j.run_pos].nodes;  // ascending (Snapshot::idle_known)
    for (int x : rz.nodes) {
      if (x < 0 || x >= static_cast<int>(snap_.nodes.size())) bad("node index out of range");
      if (grow) {
        if (snap_.nodes[x].job != 0) bad("expand onto a busy node");
        snap_.nodes[x].job = rz.job;
      } else {
        if (snap_.nodes[x].job != rz.job) bad("shrink of a node the job does not hold");
        snap_.nodes[x].job = 0;
      }
    }
    std::vector<int> moved = rz.nodes, now;
    if (!std::is_sorted(moved.begin(), moved.end())) std::sort(moved.begin(), moved.end());
    now.reserve(nodes.size() + (grow ? moved.size() : 0));
    if (grow) std::merge(nodes.begin(), nodes.end(), moved.begin(), moved.end(), std::back_inserter(now));
    else std::set_difference(nodes.begin(), nodes.end(), moved.begin(), moved.end(), std::back_inserter(now));
    nodes.swap(now);
    if (grow) acquire(std::move(moved));
    else release(std::move(moved));
    int from = j.n;
    j.n = static_cast<int>(nodes.size());
    idle_ += grow ? -static_cast<int>(rz.nodes.size()) : static_cast<int>(rz.nodes.size());
    (grow ? j.expands : j.shrinks)++;
    j.pause_until = t + (grow ? o_.grow_cost : o_.shrink_cost);
    // overlap: during an expand's pause the job computes on its `from` nodes
    j.pause_n = grow && o_.resize_model == ResizeModel::overlap ? from : 0;
    j.adapting = j.pause_until > t;
    auto& rj = snap_.running[j.run_pos];
    rj.last_resize = t;
    rj.adapting = j.adapting;
    close_alloc(k, t);
    open_alloc(k, t);
    r_.resizes.push_back({rz.job, t, grow, from, j.n});
    schedule_event(k, t);
  };
  for (auto& s : d.shrinks) resize(s, false);
  for (auto& e : d.expands) resize(e, true);
  if (!d.starts.empty()) {
    for (auto& s : d.starts) {
      auto it = index_.find(s.job);
      if (it == index_.end() || jobs_[it->second].st != Job::waiting) bad("start of a job that is not waiting");
      int k = it->second;
      Job& j = jobs_[k];
      for (int x : s.nodes) {
        if (x < 0 || x >= static_cast<int>(snap_.nodes.size()) || snap_.nodes[x].job != 0)
          bad("start on a busy node");
        snap_.nodes[x].job = s.job;
      }
      acquire(s.nodes);
      const SimJob& sp = *j.spec;
      j.st = Job::running;
      j.start = j.last = t;
      j.n = j.start_nodes = static_cast<int>(s.nodes.size());
      idle_ -= j.n;
      sched::RunningJob rj;
      rj.id = sp.id;
      rj.kind = sp.kind;
      rj.nodes = s.nodes;
      if (!std::is_sorted(rj.nodes.begin(), rj.nodes.end())) std::sort(rj.nodes.begin(), rj.nodes.end());
      rj.req_nodes = sp.req_nodes;
      rj.min_nodes = sp.min_nodes;
      rj.max_nodes = sp.max_nodes;
      rj.constraint = sp.constraint;
      rj.start_time = t;
      rj.time_limit = sp.time_limit;
      rj.accepting = sp.kind == sched::JobKind::malleable;  // registers at start
      rj.min_power = sp.min_power;  // the hints as given (< 0: unknown, the policy's rule)
      rj.max_power = sp.max_power;
      j.run_pos = static_cast<int>(snap_.running.size());
      snap_.running.push_back(std::move(rj));
      open_alloc(k, t);
      schedule_event(k, t);
    }
    std::erase_if(snap_.waiting, [&](const sched::WaitingJob& w) { return jobs_[index_[w.id]].st != Job::waiting; });
    min_need_ = 0;
  }
  record(t);
}

SimResult Engine::run() {
  if (o_.nodes < 1) throw std::invalid_argument("the cluster needs at least one node");
  // proactive power: passes also every forecast interval, as mjsched's tick
  // re-plans on the updated forecast (a forecast alone is no event)
  if (o_.policy.policy == sched::Policy::power && o_.policy.power_mode == sched::PowerMode::proactive &&
      !o_.corridor.empty() && !(o_.tick > 0))
    o_.tick = std::max(0.1, o_.policy.power_forecast_interval);
  std::stable_sort(specs_.begin(), specs_.end(), submitted_before);
  jobs_.resize(specs_.size());
  index_.reserve(specs_.size());
  for (size_t i = 0; i < specs_.size(); ++i) {
    const SimJob& s = specs_[i];
    if (!index_.emplace(s.id, static_cast<int>(i)).second)
      throw std::invalid_argument("duplicate job id " + std::to_string(s.id));
    if (!(s.submit >= 0) || !(s.runtime >= 0))
      throw std::invalid_argument("job " + std::to_string(s.id) + ": negative submit time or runtime");
    if (s.submit > kMaxSimTime || s.runtime > kMaxSimTime || s.time_limit > kMaxSimTime)
      throw std::invalid_argument("job " + std::to_string(s.id) + ": submit time, runtime or time limit above " +
                                  std::to_string(static_cast<int64_t>(kMaxSimTime)) +
                                  " s, beyond what the simulator can represent");
    sched::WaitingJob w{s.id, s.kind, s.req_nodes, s.min_nodes, s.max_nodes, s.constraint, s.time_limit, s.submit};
    if (sched::min_size(w) == 0 || s.req_nodes < 1)
      throw std::invalid_argument("job " + std::to_string(s.id) + ": no admissible size");
    Job& j = jobs_[i];
    j.spec = &s;
    j.base_f = time_factor(o_.model, s.serial, s.req_nodes, o_.downey_sigma);
    if (s.phases.empty()) {
      j.phase_end = {s.runtime};
      j.phase_serial = {s.serial};
    } else {
      // scale the work so that the runtime at req_nodes, phases included, is s.runtime
      double prev = 0, t_req = 0;
      for (auto& p : s.phases) {
        t_req += (p.until - prev) * time_factor(o_.model, p.serial, s.req_nodes, o_.downey_sigma) / j.base_f;
        prev = p.until;
      }
      double W = t_req > 0 ? s.runtime / t_req : s.runtime;
      for (auto& p : s.phases) {
        j.phase_end.push_back(p.until * W);
        j.phase_serial.push_back(p.serial);
      }
      j.phase_end.back() = W;
    }
    if (s.time_limit >= 0) {
      double gl = s.limit_nodes == s.req_nodes
                      ? 1.0
                      : time_factor(o_.model, s.serial, s.limit_nodes, o_.downey_sigma) / j.base_f;
      j.est = s.time_limit / gl;
    }
  }
  {  // makespan lower bound (sim.hpp SimResult::lower_bound)
    double work = 0, last = 0, first = kInf;
    for (auto& j : jobs_) {
      const SimJob& s = *j.spec;
      auto runtime = [&](int n) {
        double t = 0, prev = 0;
        for (size_t p = 0; p < j.phase_end.size(); ++p) {
          t += (j.phase_end[p] - prev) * g(j, n, p);
          prev = j.phase_end[p];
        }
        return t;
      };
      sched::WaitingJob w{s.id, s.kind, s.req_nodes, s.min_nodes, s.max_nodes, s.constraint, s.time_limit, s.submit};
      int lo = sched::min_size(w);
      int hi = s.kind == sched::JobKind::rigid ? lo : sched::largest_admissible(s.constraint, s.min_nodes, std::min(s.max_nodes, o_.nodes));
      work += runtime(lo) * lo;
      last = std::max(last, s.submit + runtime(std::max(hi, lo)));
      first = std::min(first, s.submit);
    }
    if (!jobs_.empty()) r_.lower_bound = std::max(work / o_.nodes, last - first);
    r_.lower_bound_work = work / o_.nodes;
  }
  snap_.nodes.reserve(o_.nodes);
  for (int i = 0; i < o_.nodes; ++i) snap_.nodes.push_back({"n" + std::to_string(i + 1), true, 0});
  idle_ = o_.nodes;
  snap_.idle_known = true;
  snap_.up_count = o_.nodes;
  for (int i = 0; i < o_.nodes; ++i) snap_.idle.push_back(i);
  snap_.power.idle_watts = o_.idle_watts;
  snap_.power.node_max_watts = o_.node_max_watts;
  r_.power_tracked = !o_.corridor.empty();

  size_t next_arrival = 0;
  double next_tick = o_.tick > 0 ? 0 : kInf;
  while (true) {
    while (!heap_.empty() && heap_.top().version != jobs_[heap_.top().job].version) heap_.pop();
    double t_arr = next_arrival < jobs_.size() ? jobs_[next_arrival].spec->submit : kInf;
    double t_ev = heap_.empty() ? kInf : heap_.top().t;
    double t_tick = (!snap_.running.empty() && o_.tick > 0) ? next_tick : kInf;
    // corridor changes matter while jobs wait, run or are still to come
    const bool active = next_arrival < jobs_.size() || !snap_.running.empty() || !snap_.waiting.empty();
    double t_corr = next_corr_ < o_.corridor.size() && active ? o_.corridor[next_corr_].t : kInf;
    double t = std::min({t_arr, t_ev, t_tick, t_corr});
    if (!std::isfinite(t)) break;
    bool changed = false;
    // 0. corridor changes of this instant ([John24 §5.2.1]: re-read every pass)
    while (next_corr_ < o_.corridor.size() && o_.corridor[next_corr_].t <= t + kEps) {
      set_corridor(next_corr_++);
      changed = true;
    }
    // 1. job events of this instant: ends, phase changes, ends of resize pauses
    while (!heap_.empty() && heap_.top().t <= t + kEps) {
      Event e = heap_.top();
      heap_.pop();
      if (e.version != jobs_[e.job].version) continue;
      Job& j = jobs_[e.job];
      advance(j, e.t);
      if (j.adapting && e.t >= j.pause_until) {
        j.adapting = false;
        snap_.running[j.run_pos].adapting = false;
        changed = true;
      }
      const double tol = 1e-9 * std::max(1.0, j.phase_end.back());
      if (j.phase + 1 == j.phase_end.size() && j.work_done >= j.phase_end.back() - tol) {
        finish(e.job, e.t);
        changed = true;
        continue;
      }
      while (j.phase + 1 < j.phase_end.size() && j.work_done >= j.phase_end[j.phase] - tol) ++j.phase;
      schedule_event(e.job, e.t);
    }
    // 2. arrivals of this instant, in (submit, id) order
    while (next_arrival < jobs_.size() && jobs_[next_arrival].spec->submit <= t + kEps) {
      Job& j = jobs_[next_arrival++];
      const SimJob& s = *j.spec;
      j.st = Job::waiting;
      snap_.waiting.push_back({s.id, s.kind, s.req_nodes, s.min_nodes, s.max_nodes, s.constraint, s.time_limit, s.submit});
      snap_.waiting.back().min_power = s.min_power;
      snap_.waiting.back().max_power = s.max_power;
      if (min_need_ > 0)
        if (int m = sched::min_size(snap_.waiting.back())) min_need_ = std::min(min_need_, m);
      changed = true;
    }
    // 3. one scheduling pass
    if (t >= next_tick) {
      changed = true;
      next_tick = t + o_.tick;
    }
    if (changed) {
      record(t);  // the state the pass sees (a break it may correct at once)
      // a malleable policy sees the jobs it just started (or resized) only in
      // the next pass: run it at the same instant, as mjsched's next tick would
      size_t before = r_.passes, started = done_ + snap_.running.size();
      pass(t);
      if (sched::is_malleable_policy(o_.policy.policy) && r_.passes > before &&
          done_ + snap_.running.size() != started)
        pass(t);
    }
    record(t);  // also changes without a pass (an end, a corridor change)
  }

  if (r_.power_tracked && !r_.power.empty()) {  // the one violation count (lib/power violations.hpp)
    std::vector<power::DrawPoint> draw;
    std::vector<power::CorridorStep> corr;
    for (auto& p : r_.power) {
      draw.push_back({p.t, p.draw});
      if (corr.empty() || corr.back().lower != p.lower || corr.back().upper != p.upper)
        corr.push_back({p.t, p.lower, p.upper});
    }
    auto v = power::count_violations(draw, corr, r_.power.back().t, o_.grace);
    r_.violations = v.count;
    r_.breaks = v.breaks;
    r_.corrected = v.corrected;
    r_.above_ws = v.above_ws;
    r_.below_ws = v.below_ws;
  }
  r_.never_started = snap_.waiting.size();
  r_.jobs.reserve(jobs_.size());
  for (auto& j : jobs_) {
    const SimJob& s = *j.spec;
    JobRecord rec;
    rec.id = s.id;
    rec.name = s.name;
    rec.kind = kind_name(s.kind);
    rec.req_nodes = s.req_nodes;
    rec.min_nodes = s.min_nodes;
    rec.max_nodes = s.max_nodes;
    rec.constraint = sched::to_string(s.constraint);
    rec.time_limit = s.time_limit < 0 ? -1 : static_cast<int64_t>(std::ceil(s.time_limit));
    rec.submit_time = s.submit;
    if (j.st == Job::done) {
      rec.state = kCompleted;
      rec.start_time = j.start;
      rec.end_time = j.end;
      rec.num_nodes = j.n;
      rec.exit_code = 0;
    } else {
      rec.state = kPending;
      rec.reason = "Resources";
    }
    r_.jobs.push_back(std::move(rec));
  }
  r_.metrics = compute_metrics(r_.jobs, r_.allocs, o_.nodes, o_.tau, r_.resizes);
  return std::move(r_);
}

}  // namespace

SimResult simulate(std::vector<SimJob> jobs, const SimOptions& opts) { return Engine(std::move(jobs), opts).run(); }

}  // namespace dynres::sim
