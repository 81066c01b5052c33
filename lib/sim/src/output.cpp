// CSV and JSON views of a simulator run.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <fstream>
#include <stdexcept>
#include <unordered_map>

#include "dynres/sim.hpp"

namespace dynres::sim {

void write_jobs_csv(const std::string& path, const SimResult& r) {
  std::ofstream o(path);
  if (!o) throw std::runtime_error(path + ": cannot write");
  std::unordered_map<int64_t, std::pair<int, int>> rs;
  std::unordered_map<int64_t, int> first;
  for (auto& a : r.allocs)
    if (!first.count(a.job_id)) first[a.job_id] = a.num_nodes;
  for (auto& z : r.resizes) (z.expand ? rs[z.job_id].first : rs[z.job_id].second)++;
  o << "id,name,kind,submit,start,end,wait,response,nodes_start,nodes_end,min,max,expands,shrinks\n";
  char b[512];
  for (auto& j : r.jobs) {
    std::string name = j.name;
    for (char& c : name)
      if (c == ',' || c == '"' || c == '\n') c = ' ';
    if (j.start_time && j.end_time) {
      std::snprintf(b, sizeof b, "%lld,%s,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%d,%d,%d,%d,%d\n",
                    static_cast<long long>(j.id), name.c_str(), j.kind.c_str(), j.submit_time, *j.start_time,
                    *j.end_time, *j.start_time - j.submit_time, *j.end_time - j.submit_time, first[j.id],
                    j.num_nodes, j.min_nodes, j.max_nodes, rs[j.id].first, rs[j.id].second);
    } else {
      std::snprintf(b, sizeof b, "%lld,%s,%s,%.3f,,,,,,,%d,%d,0,0\n", static_cast<long long>(j.id), name.c_str(),
                    j.kind.c_str(), j.submit_time, j.min_nodes, j.max_nodes);
    }
    o << b;
  }
  if (!o.flush()) throw std::runtime_error(path + ": write failed");
}

nlohmann::json to_json(const SimResult& r) {
  nlohmann::json j = dynres::to_json(r.metrics);
  j["node_seconds"] = r.work;
  j["passes"] = r.passes;
  j["never_started"] = r.never_started;
  j["makespan_lower_bound_s"] = r.lower_bound;
  j["makespan_lower_bound_work_s"] = r.lower_bound_work;
  if (r.power_tracked) {
    j["power"] = {{"violations", r.violations},   {"breaks", r.breaks}, {"corrected", r.corrected},
                  {"above_ws", r.above_ws},       {"below_ws", r.below_ws},
                  {"max_draw_w", r.max_draw},     {"min_draw_w", r.min_draw},
                  {"samples", r.power.size()},    {"modelled", true}};
  }
  return j;
}

void write_power_csv(const std::string& path, const SimResult& r) {
  std::ofstream o(path);
  if (!o) throw std::runtime_error(path + ": cannot write");
  o << "t,draw_w,lower_w,upper_w,state,jobs\n";
  char b[160];
  for (size_t i = 0; i < r.power.size(); ++i) {
    const auto& p = r.power[i];
    const char* st = p.draw > p.upper + 1e-9 ? "above" : p.draw < p.lower - 1e-9 ? "below" : "in";
    std::snprintf(b, sizeof b, "%.3f,%.1f,%.1f,%.1f,%s,", p.t, p.draw, p.lower, p.upper, st);
    o << b << (i < r.power_jobs.size() ? r.power_jobs[i] : "") << "\n";
  }
  if (!o.flush()) throw std::runtime_error(path + ": write failed");
}

std::vector<CorridorChange> read_corridor(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot read the corridor file");
  std::vector<CorridorChange> out;
  std::string line;
  size_t no = 0;
  auto fail = [&](const std::string& why) { throw std::runtime_error(path + ":" + std::to_string(no) + ": " + why); };
  auto number = [&](const std::string& tok, const char* what, bool time) {
    double mult = 1;
    std::string t = tok;
    if (time && !t.empty() && std::string("smh").find(t.back()) != std::string::npos) {
      mult = t.back() == 's' ? 1 : t.back() == 'm' ? 60 : 3600;
      t.pop_back();
    }
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (t.empty() || used != t.size() || !std::isfinite(v)) fail(std::string(what) + " '" + tok + "' is not a number");
    return v * mult;
  };
  while (std::getline(in, line)) {
    ++no;
    if (line.size() > 4096) fail("line longer than 4096 bytes");
    if (no > 100000) fail("more than 100000 lines");
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ls(line);
    std::vector<std::string> tok;
    for (std::string w; ls >> w;) tok.push_back(w);
    if (tok.empty()) continue;
    if (tok.size() != 3) fail("expected TIME LOWER UPPER (3 fields), got " + std::to_string(tok.size()));
    CorridorChange c{number(tok[0], "TIME", true), number(tok[1], "LOWER", false), number(tok[2], "UPPER", false)};
    if (c.t < 0) fail("TIME must be >= 0 s");
    if (c.lower < 0) fail("LOWER must be >= 0 W");
    if (!(c.lower < c.upper)) fail("LOWER must be below UPPER");
    if (!out.empty() && !(c.t > out.back().t)) fail("times must increase from line to line");
    out.push_back(c);
  }
  if (in.bad()) throw std::runtime_error(path + ": read error");
  if (out.empty()) throw std::runtime_error(path + ": no corridor change (expected lines TIME LOWER UPPER)");
  return out;
}

}  // namespace dynres::sim
