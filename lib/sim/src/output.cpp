// CSV and JSON views of a simulator run.
#include <cstdio>
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
  return j;
}

}  // namespace dynres::sim
