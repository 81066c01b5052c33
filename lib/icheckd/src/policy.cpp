#include "dynres/icheck/policy.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace dynres::icheck {

int agent_upper_bound(const AppShape& a, const DynamicConfig& c) {
  int b = a.shmr ? a.num_nodes : a.num_procs;
  b = std::min(b, c.max_agents_app);
  return std::max(1, b);
}

int initial_agent_count(const AppShape& a, const DynamicConfig& c) {
  int n = c.init_agent_count > 0 ? c.init_agent_count : a.num_nodes;
  return std::clamp(n, 1, agent_upper_bound(a, c));
}

CountState next_agent_count(CountState s, double tsync, const AppShape& a, const DynamicConfig& c,
                            double tolerance) {
  const int hi = agent_upper_bound(a, c);
  const double f = c.factor > 1 ? c.factor : 2;
  if (tsync < 0) {  // no measurement: nothing to compare
    s.num_agents = std::clamp(s.num_agents, 1, hi);
    return s;
  }
  if (!s.frozen) {
    if (s.old_tsync < 0) {  // first agent change: grow by factor (Alg. 5 l. 6)
      int n = std::min(int(std::lround(s.num_agents * f)), hi);
      if (n != s.num_agents) s.last_change = +1;
      s.num_agents = n;
    } else if (tsync > s.old_tsync * (1 + tolerance)) {  // slower: back off (l. 3-4)
      if (s.last_change > 0) {
        s.num_agents = std::max(int(std::lround(s.num_agents / f)), 1);
        s.last_change = -1;
      }
      s.frozen = true;
    } else if (tsync < s.old_tsync * (1 - tolerance) && s.last_change >= 0) {  // faster: grow (l. 5-8)
      int n = std::min(int(std::lround(s.num_agents * f)), hi);
      s.last_change = n != s.num_agents ? +1 : 0;
      s.num_agents = n;
    }
  }
  s.num_agents = std::clamp(s.num_agents, 1, hi);
  s.old_tsync = tsync;  // Alg. 5 l. 25
  return s;
}

std::optional<AgentsMode> parse_agents_mode(const std::string& s) {
  if (s == "ma-ra") return AgentsMode::ma_ra;
  if (s == "ma-ma") return AgentsMode::ma_ma;
  return std::nullopt;
}

int resize_agent_count(AgentsMode mode, int cur_agents, int cur_res, int new_res, int upper) {
  cur_agents = std::max(1, cur_agents), cur_res = std::max(1, cur_res), new_res = std::max(1, new_res);
  upper = std::max(1, upper);
  int n;
  if (mode == AgentsMode::ma_ra) {
    n = std::min(cur_agents, new_res);  // Alg. 7 l. 3-4 (no idle agent, §7.2.1)
  } else if (cur_agents == cur_res) {
    n = new_res;  // l. 6-7: 1:1 stays 1:1
  } else {
    const int ratio = std::max(1, cur_res / cur_agents);  // N/M : 1 (N divisible by M at init)
    n = std::max(1, new_res / ratio);                     // l. 9; the remainder goes round-robin
  }
  return std::clamp(n, 1, upper);
}

std::string nm_ratio_problem(AgentsMode mode, int resources, int agents) {
  if (resources < 1 || agents < 1)
    return "need at least one process/node and one agent (got " + std::to_string(resources) + ":" +
           std::to_string(agents) + ")";
  if (agents > resources)
    return std::to_string(agents) + " agents for " + std::to_string(resources) +
           " processes/nodes would leave agents idle (M must not exceed N)";
  if (mode == AgentsMode::ma_ma && resources % agents != 0)
    return "MA-MA keeps the N:M ratio, so N must be a multiple of M: " + std::to_string(resources) +
           " processes/nodes are not a multiple of " + std::to_string(agents) +
           " agents (set init_agent_count to a divisor of N, or malleability mode ma-ra)";
  return "";
}

std::vector<std::string> select_candidates(std::vector<NodeStatus> nodes, const std::string& strategy,
                                           int candidate_num) {
  nodes.erase(std::remove_if(nodes.begin(), nodes.end(), [](const NodeStatus& n) { return !n.up; }),
              nodes.end());
  auto key = [&](const NodeStatus& n) {
    double k;
    if (strategy == "bandwidth" || strategy == "BW") k = n.bandwidth;
    else if (strategy == "frequency" || strategy == "CP") k = n.ncops_per_min;
    else if (strategy == "power") k = n.power;
    else k = -n.avail_mem;  // memory (default): most available first
    return std::make_tuple(k, n.agents, n.node);
  };
  std::stable_sort(nodes.begin(), nodes.end(), [&](const auto& x, const auto& y) { return key(x) < key(y); });
  std::vector<std::string> out;
  for (auto& n : nodes) out.push_back(n.node);
  if (candidate_num > 0 && int(out.size()) > candidate_num) out.resize(candidate_num);
  return out;
}

std::vector<std::string> place_agents(int num_agents, const std::vector<std::string>& cand,
                                      const std::vector<int>& capacity, const std::string& dist,
                                      int block_size) {
  std::vector<std::string> out;
  if (cand.empty() || num_agents <= 0) return out;
  std::vector<int> cap(cand.size());
  for (size_t i = 0; i < cand.size(); ++i) cap[i] = i < capacity.size() ? capacity[i] : 1 << 30;
  const int c = int(cand.size());
  if (dist == "fill" || dist == "filltocompletion") {
    for (int i = 0; i < c && int(out.size()) < num_agents; ++i)
      while (cap[i] > 0 && int(out.size()) < num_agents) out.push_back(cand[i]), cap[i]--;
    return out;
  }
  if (dist == "block" || dist == "BLK" || dist == "EQ") {
    int b = block_size > 0 ? block_size : (num_agents + c - 1) / c;
    int i = 0, in_block = 0, stuck = 0;
    while (int(out.size()) < num_agents && stuck < c) {
      if (cap[i] > 0 && in_block < b) {
        out.push_back(cand[i]), cap[i]--, in_block++, stuck = 0;
      } else {
        i = (i + 1) % c, in_block = 0, stuck++;
      }
    }
    return out;
  }
  // round robin (default)
  int i = 0, stuck = 0;
  while (int(out.size()) < num_agents && stuck < c) {
    if (cap[i] > 0) out.push_back(cand[i]), cap[i]--, stuck = 0;
    else stuck++;
    i = (i + 1) % c;
  }
  return out;
}

double memory_depletion_rate(double a0, double a1, double i) { return i > 0 ? (a0 - a1) / i : 0; }
long long ncops_update(long long ncops, const std::vector<long long>& x) {
  for (auto v : x) ncops += v;
  return ncops;
}
double cop_interval(double a, double b) { return b - a; }
double agent_bandwidth(double size, double t) { return t > 0 ? size / t : 0; }
double node_bandwidth(const std::vector<double>& s, const std::vector<double>& t) {
  double bw = 0;
  for (size_t i = 0; i < s.size() && i < t.size(); ++i) bw += agent_bandwidth(s[i], t[i]);
  return bw;
}
double agent_fill_rate(int a0, int a1, double dt) { return dt > 0 ? (a1 - a0) / dt : 0; }
double probe_breakeven(double t_probe, double t_old, double t_new) {
  if (t_old <= 0 || t_new <= 0) return 0;
  double ncops = (t_probe + t_new) / t_old - 1;  // Eq. 6.11
  return ncops * t_old / t_new + 1;              // Eq. 6.12
}

}  // namespace dynres::icheck
