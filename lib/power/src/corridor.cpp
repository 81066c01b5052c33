// Corridor records, samples and pcorridor's logic ([John24 §5.2.1, §5.1.3],
// Eq. 5.4/5.5).
#include "dynres/corridor.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "dynres/paths.hpp"
#include "dynres/forecast.hpp"
#include "dynres/proto.hpp"
#include "dynres/violations.hpp"

extern char** environ;

namespace dynres::power {

using json = nlohmann::json;

void migrate_power(Db& db) {
  db.migrate("power", {R"(
CREATE TABLE power_corridor(
  id INTEGER PRIMARY KEY,
  set_time REAL NOT NULL,
  effective_time REAL NOT NULL,
  lower REAL NOT NULL CHECK(lower >= 0),
  upper REAL NOT NULL CHECK(upper > lower),
  reason TEXT NOT NULL DEFAULT '',
  forced INTEGER NOT NULL DEFAULT 0);
CREATE INDEX power_corridor_eff ON power_corridor(effective_time);
CREATE TABLE power_samples(
  id INTEGER PRIMARY KEY,
  time REAL NOT NULL,
  node TEXT NOT NULL,
  job_id INTEGER,
  watts REAL NOT NULL,
  source TEXT NOT NULL CHECK(source IN ('modelled', 'rapl')));
CREATE INDEX power_samples_time ON power_samples(time);
CREATE TABLE power_job_history(
  job_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  nodes INTEGER NOT NULL,
  watts_per_node REAL NOT NULL,
  end_time REAL);
)"});
}

bool has_power_schema(Db& db) { return db.schema_version("power") >= 1; }

namespace {
const char* kRowCols = "id, set_time, effective_time, lower, upper, reason, forced";
CorridorRow row_of(Stmt& s) {
  return {s.i64(0), s.f64(1), s.f64(2), s.f64(3), s.f64(4), s.text(5), s.i64(6) != 0};
}
std::string fmt_time(double t) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm);
  return b;
}
std::string fw(double w) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(0) << w << " W";
  return o.str();
}
}  // namespace

std::optional<CorridorRow> corridor_at(Db& db, double t) {
  if (!has_power_schema(db)) return std::nullopt;
  Stmt s(db, std::string("SELECT ") + kRowCols +
                 " FROM power_corridor WHERE effective_time <= ? ORDER BY effective_time DESC, id DESC LIMIT 1");
  s.bind(1, t);
  if (s.step()) return row_of(s);
  return std::nullopt;
}

std::optional<CorridorRow> corridor_next(Db& db, double t) {
  if (!has_power_schema(db)) return std::nullopt;
  Stmt s(db, std::string("SELECT ") + kRowCols +
                 " FROM power_corridor WHERE effective_time > ? ORDER BY effective_time, id DESC LIMIT 1");
  s.bind(1, t);
  if (s.step()) return row_of(s);
  return std::nullopt;
}

std::vector<CorridorRow> corridor_history(Db& db, double since) {
  std::vector<CorridorRow> out;
  if (!has_power_schema(db)) return out;
  Stmt s(db, std::string("SELECT ") + kRowCols + " FROM power_corridor WHERE effective_time >= ? ORDER BY effective_time, id");
  s.bind(1, since);
  while (s.step()) out.push_back(row_of(s));
  return out;
}

Limits cluster_limits(State& st, const PowerModel& m) {
  Limits l;
  l.nodes = st.usable_node_count();
  l.idle_floor = l.nodes * m.idle_watts;
  l.max_draw = l.nodes * m.node_max_watts;
  return l;
}

double parse_watts(const std::string& text, const std::string& what) {
  const char* b = text.c_str();
  char* e = nullptr;
  errno = 0;
  double v = std::strtod(b, &e);
  // decimal only: strtod would also take "0x1f4" (500), "inf" and "nan"
  if (text.empty() || e == b || *e != '\0' || errno == ERANGE || !std::isfinite(v) ||
      text.find_first_not_of("0123456789.eE+-") != std::string::npos)
    throw InputError(what + ": '" + text + "' is not a number of watts (a decimal number, e.g. 500 or 1.2e3)");
  return v;
}

double parse_time(const std::string& text, double now) {
  if (text == "now") return now;
  auto bad = [&]() { return InputError("time '" + text + "': expected now, epoch seconds, +N[s|m|h|d] or YYYY-MM-DD HH:MM[:SS]"); };
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    std::string num = text.substr(1);
    double mult = 1;
    if (!num.empty() && std::strchr("smhd", num.back())) {
      mult = num.back() == 's' ? 1 : num.back() == 'm' ? 60 : num.back() == 'h' ? 3600 : 86400;
      num.pop_back();
    }
    if (num.empty() || num.find_first_not_of("0123456789.") != std::string::npos) throw bad();
    double v = std::strtod(num.c_str(), nullptr);
    if (!std::isfinite(v) || v > 1e9) throw bad();
    return now + (text[0] == '+' ? 1 : -1) * v * mult;
  }
  if (!text.empty() && text.find_first_not_of("0123456789.") == std::string::npos) {
    double v = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(v) || v > 1e11) throw bad();
    return v;
  }
  std::tm tm{};
  for (const char* f : {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"}) {
    tm = std::tm{};
    const char* end = strptime(text.c_str(), f, &tm);
    if (end && *end == '\0') {
      tm.tm_isdst = -1;
      std::time_t t = std::mktime(&tm);
      if (t == static_cast<std::time_t>(-1)) throw bad();
      return static_cast<double>(t);
    }
  }
  throw bad();
}

SetOutcome set_corridor(State& st, const PowerModel& m, const SetRequest& r) {
  if (!std::isfinite(r.lower) || !std::isfinite(r.upper)) throw InputError("corridor bounds must be finite numbers of watts");
  if (r.lower < 0) throw InputError("lower bound " + fw(r.lower) + " is negative");
  if (!(r.lower < r.upper)) throw InputError("lower bound " + fw(r.lower) + " must be below the upper bound " + fw(r.upper));
  auto lim = cluster_limits(st, m);
  if (r.upper > lim.max_draw)
    throw InputError("upper bound " + fw(r.upper) + " is above the most the cluster can draw: " + std::to_string(lim.nodes) +
                     " nodes x " + fw(m.node_max_watts) + " = " + fw(lim.max_draw) + " (power.node_max_watts)");
  if (r.lower < lim.idle_floor && !r.force)
    throw InputError("lower bound " + fw(r.lower) + " is below the idle floor: " + std::to_string(lim.nodes) + " nodes x " +
                     fw(m.idle_watts) + " = " + fw(lim.idle_floor) + " (the cluster never draws less; use --force to record it anyway)");
  double eff = r.at.value_or(r.now);
  if (eff < r.now - 1) throw InputError("--at " + fmt_time(eff) + " is in the past");
  SetOutcome out;
  // idempotent: nothing to record when the same corridor already applies at
  // eff (in force now, or scheduled for then by an earlier call)
  auto cur = corridor_at(st.db(), eff);
  if (cur && cur->lower == r.lower && cur->upper == r.upper) {
    out.row = *cur;
    return out;
  }
  migrate_power(st.db());
  st.db().write_tx([&] {
    Stmt s(st.db(), "INSERT INTO power_corridor(set_time, effective_time, lower, upper, reason, forced) VALUES(?,?,?,?,?,?)");
    s.bind(1, r.now).bind(2, eff).bind(3, r.lower).bind(4, r.upper).bind(5, r.reason).bind(6, r.force ? 1 : 0).run();
    out.row = {st.db().last_insert_id(), r.now, eff, r.lower, r.upper, r.reason, r.force};
  });
  out.changed = true;
  return out;
}

bool wake_scheduler(const std::string& home) {
  return proto::notify(sched_socket(home), {{"op", "wake"}, {"why", "corridor"}});
}

std::vector<HistoryRun> load_history(Db& db) {
  std::vector<HistoryRun> h;
  if (!has_power_schema(db)) return h;
  Stmt s(db, "SELECT name, nodes, watts_per_node FROM power_job_history");
  while (s.step()) h.push_back({s.text(0), static_cast<int>(s.i64(1)), s.f64(2)});
  return h;
}

DrawNow current_draw(State& st, const PowerModel& m) {
  DrawNow d;
  auto hist = load_history(st.db());
  int busy = 0;
  for (auto& j : st.jobs({kRunning})) {
    JobPower jp;
    jp.id = j.id;
    jp.name = j.name;
    jp.kind = j.kind;
    jp.nodes = j.num_nodes;
    jp.min_nodes = j.min_nodes;
    jp.max_nodes = j.max_nodes;
    jp.constraint = j.constraint;
    jp.draw = job_draw(j.min_power, j.max_power, j.name, j.num_nodes, hist, m);
    busy += j.num_nodes;
    d.min += j.num_nodes * jp.draw.min_watts;
    d.max += j.num_nodes * jp.draw.max_watts;
    d.modelled += j.num_nodes * (jp.draw.min_watts + jp.draw.max_watts) / 2;
    d.jobs.push_back(jp);
  }
  d.idle_nodes = std::max(0, st.usable_node_count() - busy);
  d.min += d.idle_nodes * m.idle_watts;
  d.max += d.idle_nodes * m.idle_watts;
  d.modelled += d.idle_nodes * m.idle_watts;
  return d;
}

IlpInput ilp_input(const DrawNow& d, const Limits& lim, const PowerModel& m, double lower, double upper) {
  IlpInput in;
  in.nodes = lim.nodes;
  in.idle_watts = m.idle_watts;
  in.lower = lower;
  in.upper = upper;
  for (auto& j : d.jobs) {
    IlpJob k;
    k.id = j.id;
    k.current = j.nodes;
    bool mall = j.kind == "malleable";
    k.min_nodes = mall ? std::min(j.min_nodes, j.nodes) : j.nodes;
    k.max_nodes = mall ? std::max(j.max_nodes, j.nodes) : j.nodes;
    try {
      k.constraint = parse_constraint(j.constraint);
    } catch (const std::invalid_argument&) {
      k.constraint = NodeConstraint::none;
    }
    k.p_min = j.draw.min_watts;
    k.p_max = j.draw.max_watts;
    in.running.push_back(k);
  }
  return in;
}

std::vector<std::pair<double, double>> sampled_totals(Db& db, double since) {
  std::vector<std::pair<double, double>> out;
  if (!has_power_schema(db)) return out;
  Stmt s(db, "SELECT time, SUM(watts) FROM power_samples WHERE time >= ? AND source = 'modelled' GROUP BY time ORDER BY time");
  s.bind(1, since);
  while (s.step()) out.emplace_back(s.f64(0), s.f64(1));
  return out;
}

Violations violations(Db& db, double since, double until, double grace) {
  Violations v;
  if (!has_power_schema(db) || !(until >= since)) return v;
  double from = since;
  {  // the draw in force at `since`: the last sample at or before it
    Stmt s(db, "SELECT MAX(time) FROM power_samples WHERE time <= ? AND source = 'modelled'");
    s.bind(1, since);
    if (s.step() && !s.is_null(0)) from = s.f64(0);
  }
  std::vector<DrawPoint> draw;
  for (auto& [t, w] : sampled_totals(db, from)) {
    if (t > until) break;
    draw.push_back({std::max(t, since), w});
    if (t >= since) ++v.samples;
  }
  if (draw.empty()) return v;
  std::vector<CorridorStep> corr;
  if (auto c = corridor_at(db, since)) corr.push_back({since, c->lower, c->upper});
  for (auto& c : corridor_history(db, since))
    if (c.effective_time > since && c.effective_time <= until) corr.push_back({c.effective_time, c.lower, c.upper});
  auto r = count_violations(draw, corr, std::min(until, draw.back().t), grace);
  v.count = r.count;
  v.breaks = r.breaks;
  v.corrected = r.corrected;
  v.above_ws = r.above_ws;
  v.below_ws = r.below_ws;
  v.outside_s = r.outside_s;
  return v;
}

json show(State& st, const PowerModel& m, double now, const ViolationWindow& vw) {
  json j;
  auto lim = cluster_limits(st, m);
  auto d = current_draw(st, m);
  j["time"] = now;
  j["nodes"] = lim.nodes;
  j["idle_watts"] = m.idle_watts;
  j["node_max_watts"] = m.node_max_watts;
  j["idle_floor"] = lim.idle_floor;
  j["max_draw"] = lim.max_draw;
  j["draw"] = {{"source", "modelled"}, {"min", d.min}, {"max", d.max}, {"modelled", d.modelled}, {"idle_nodes", d.idle_nodes}};
  json jobs = json::array();
  for (auto& p : d.jobs)
    jobs.push_back({{"id", p.id}, {"name", p.name}, {"kind", p.kind}, {"nodes", p.nodes}, {"min_nodes", p.min_nodes},
                    {"max_nodes", p.max_nodes}, {"watts_per_node_min", p.draw.min_watts},
                    {"watts_per_node_max", p.draw.max_watts}, {"power_source", p.draw.source}});
  j["jobs"] = jobs;
  // sampled history: violations so far and the forecast (§5.1.4)
  auto hs = sampled_totals(st.db());
  {
    auto v = violations(st.db(), vw.since, vw.until, vw.grace);
    j["violations"] = {{"count", v.count}, {"breaks", v.breaks}, {"corrected", v.corrected},
                       {"above_watt_seconds", v.above_ws}, {"below_watt_seconds", v.below_ws},
                       {"outside_seconds", v.outside_s}, {"samples", v.samples}, {"grace_s", vw.grace},
                       {"since", vw.since}, {"until", vw.until < 1e299 ? json(vw.until) : json(nullptr)}};
  }
  j["forecast"] = nullptr;
  if (hs.size() >= 10) {
    std::vector<double> y;
    for (auto& [t, w] : hs) y.push_back(w);
    int hold = std::max(2, static_cast<int>(y.size()) / 5);
    try {
      auto f = forecast_draw(y, 1, hold, 5);
      j["forecast"] = {{"model", f.model}, {"mape", f.mape}, {"mase", std::isfinite(f.mase) ? json(f.mase) : json(nullptr)},
                       {"min", f.min}, {"max", f.max}, {"horizon_samples", 5}};
    } catch (const ForecastError& e) {
      j["forecast_error"] = e.what();
    }
  }
  auto c = corridor_at(st.db(), now);
  auto nx = corridor_next(st.db(), now);
  j["corridor"] = nullptr;
  if (nx) j["next"] = {{"lower", nx->lower}, {"upper", nx->upper}, {"effective_time", nx->effective_time}, {"reason", nx->reason}};
  if (!c) return j;
  j["corridor"] = {{"lower", c->lower}, {"upper", c->upper}, {"effective_time", c->effective_time},
                   {"set_time", c->set_time}, {"reason", c->reason}, {"forced", c->forced}};
  j["headroom"] = {{"upper", c->upper - d.max}, {"lower", d.min - c->lower}};
  j["within"] = d.min >= c->lower && d.max <= c->upper;
  auto g = guarantees(ilp_input(d, lim, m, c->lower, c->upper));
  j["guarantees"] = {{"upper", g.upper}, {"upper_need", g.upper_need}, {"lower", g.lower},
                     {"lower_reach", g.lower_reach}, {"words", g.words}};
  return j;
}

std::string show_text(const json& j) {
  std::ostringstream o;
  auto d = j["draw"];
  if (j["corridor"].is_null()) {
    o << "corridor:  none set (pcorridor set LOWER UPPER)\n";
  } else {
    auto c = j["corridor"];
    o << "corridor:  " << fw(c["lower"]) << " - " << fw(c["upper"]) << "  since " << fmt_time(c["effective_time"]);
    if (!c["reason"].get<std::string>().empty()) o << "  (" << c["reason"].get<std::string>() << ")";
    o << "\n";
  }
  if (j.contains("next"))
    o << "next:      " << fw(j["next"]["lower"]) << " - " << fw(j["next"]["upper"]) << "  from "
      << fmt_time(j["next"]["effective_time"]) << "\n";
  o << "draw:      " << fw(d["modelled"]) << " modelled (between " << fw(d["min"]) << " and " << fw(d["max"]) << "), "
    << j["jobs"].size() << " running job(s), " << d["idle_nodes"].get<int>() << " idle node(s) at " << fw(j["idle_watts"])
    << "\n";
  for (auto& p : j["jobs"])
    o << "  job " << p["id"].get<int64_t>() << " " << p["name"].get<std::string>() << ": " << p["nodes"].get<int>()
      << " node(s) x " << fw(p["watts_per_node_min"]) << "-" << fw(p["watts_per_node_max"]) << " ("
      << p["power_source"].get<std::string>() << ", modelled)\n";
  o << "cluster:   " << j["nodes"].get<int>() << " nodes, idle floor " << fw(j["idle_floor"]) << ", at most "
    << fw(j["max_draw"]) << "\n";
  if (j["forecast"].is_object())
    o << "forecast:  " << fw(j["forecast"]["min"]) << " - " << fw(j["forecast"]["max"]) << " over the next "
      << j["forecast"]["horizon_samples"].get<int>() << " samples (" << j["forecast"]["model"].get<std::string>()
      << ", MAPE " << std::fixed << std::setprecision(1) << j["forecast"]["mape"].get<double>() << " %, modelled samples)\n";
  {
    auto v = j["violations"];
    o << "violations: " << v["count"].get<int>() << " so far in " << v["samples"].get<size_t>() << " samples ("
      << fw(v["above_watt_seconds"]) << "s above, " << fw(v["below_watt_seconds"]) << "s below";
    if (v["grace_s"].get<double>() > 0)
      o << "; episodes up to " << v["grace_s"].get<double>() << " s not counted: " << v["corrected"].get<int>();
    o << ")\n";
  }
  if (!j["corridor"].is_null()) {
    auto h = j["headroom"];
    o << "headroom:  " << fw(h["upper"]) << " below the upper bound, " << fw(h["lower"]) << " above the lower bound"
      << (j["within"].get<bool>() ? "" : "  -- OUTSIDE THE CORRIDOR") << "\n";
    o << "guarantee: " << j["guarantees"]["words"].get<std::string>() << "\n";
  }
  return o.str();
}

std::vector<NodeReading> modelled_readings(State& st, const PowerModel& m) {
  auto hist = load_history(st.db());
  std::map<int64_t, JobDraw> draws;
  for (auto& j : st.jobs({kRunning})) draws[j.id] = job_draw(j.min_power, j.max_power, j.name, j.num_nodes, hist, m);
  std::vector<NodeReading> out;
  for (auto& n : st.nodes()) {
    if (n.state == "down") continue;
    NodeReading r;
    r.node = n.name;
    r.source = "modelled";
    auto it = n.job_id ? draws.find(n.job_id) : draws.end();
    if (it != draws.end()) {
      r.job_id = n.job_id;
      r.watts = (it->second.min_watts + it->second.max_watts) / 2;
    } else {
      r.watts = m.idle_watts;
    }
    out.push_back(r);
  }
  return out;
}

void record_samples(State& st, double t, const std::vector<NodeReading>& rs) {
  migrate_power(st.db());
  st.db().write_tx([&] {
    Stmt s(st.db(), "INSERT INTO power_samples(time, node, job_id, watts, source) VALUES(?,?,?,?,?)");
    for (auto& r : rs) {
      s.reset();
      s.bind(1, t).bind(2, r.node);
      if (r.job_id) s.bind(3, r.job_id); else s.bind_null(3);
      s.bind(4, r.watts).bind(5, r.source).run();
    }
    // §5.1.3: finished jobs' average per-node draw, kept for later runs of the same name and size
    st.db().exec(
        "INSERT OR IGNORE INTO power_job_history(job_id, name, nodes, watts_per_node, end_time) "
        "SELECT j.id, j.name, j.num_nodes, AVG(s.watts), j.end_time FROM jobs j JOIN power_samples s ON s.job_id = j.id "
        "WHERE j.state = 'COMPLETED' GROUP BY j.id");
  });
}

void plot(State& st, const std::string& output, double since, double now) {
  if (output.empty() || output.find_first_of("\n\r") != std::string::npos)
    throw InputError("--output: a file name without newlines is required");
  namespace fs = std::filesystem;
  auto parent = fs::path(output).parent_path();
  if (!parent.empty() && !fs::is_directory(parent)) throw InputError("--output: directory " + parent.string() + " does not exist");
  if (!has_power_schema(st.db())) throw InputError("no power samples recorded yet (run pcorridor sample)");
  auto total = sampled_totals(st.db(), since);
  if (total.empty()) throw InputError("no power samples recorded in that period (run pcorridor sample)");
  double t0 = total.front().first, t1 = std::max(total.back().first, now);
  char tmpl[] = "/tmp/pcorridor-plot-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  fs::path dir = tmpl;
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  {
    std::ofstream f(dir / "draw.dat");
    for (auto& [t, w] : total) f << std::setprecision(15) << (t - t0) << " " << w << "\n";
  }
  {
    std::ofstream f(dir / "corridor.dat");
    auto c0 = corridor_at(st.db(), t0);
    if (c0) f << std::setprecision(15) << 0 << " " << c0->lower << " " << c0->upper << "\n";
    for (auto& c : corridor_history(st.db(), t0))
      if (c.effective_time <= t1) f << std::setprecision(15) << (c.effective_time - t0) << " " << c.lower << " " << c.upper << "\n";
    auto cl = corridor_at(st.db(), t1);
    if (cl) f << std::setprecision(15) << (t1 - t0) << " " << cl->lower << " " << cl->upper << "\n";
  }
  auto q = [](const std::string& s) {  // gnuplot single-quoted string
    std::string o = "'";
    for (char c : s) o += (c == '\'') ? std::string("''") : std::string(1, c);
    return o + "'";
  };
  auto out_abs = fs::absolute(output).string();
  {
    std::ofstream f(dir / "plot.gp");
    f << "set terminal pngcairo size 1000,500\n"
      << "set output " << q(out_abs) << "\n"
      << "set xlabel 'time since first sample (s)'\nset ylabel 'power (W)'\nset key outside below\n"
      << "set title 'cluster power draw (modelled) and corridor'\n"
      << "plot " << q((dir / "draw.dat").string()) << " using 1:2 with linespoints title 'total draw (modelled)', \\\n"
      << "     " << q((dir / "corridor.dat").string()) << " using 1:2 with steps lw 2 title 'lower bound', \\\n"
      << "     " << q((dir / "corridor.dat").string()) << " using 1:3 with steps lw 2 title 'upper bound'\n";
  }
  std::string script = (dir / "plot.gp").string(), errf = (dir / "gnuplot.err").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, errf.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  char* argv[] = {const_cast<char*>("gnuplot"), const_cast<char*>(script.c_str()), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "gnuplot", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error(std::string("cannot run gnuplot (Debian: gnuplot-nox): ") + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fs::exists(out_abs)) {
    std::ifstream e(errf);
    std::stringstream ss;
    ss << e.rdbuf();
    throw std::runtime_error("gnuplot failed: " + ss.str());
  }
}

}  // namespace dynres::power
