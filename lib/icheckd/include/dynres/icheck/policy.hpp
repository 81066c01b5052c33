// Pure decision functions of the iCheck controller and the monitoring
// formulas of the managers (no I/O; unit-tested in t/unit/icheck).
//   Agent count selection: [John24 §7.1.1, Alg. 5].
//   Agent placement:       [John24 §7.1.2, Alg. 6].
//   Agents of a resized application (MA-RA, MA-MA): [John24 §7.2, Alg. 7].
//   Monitoring metrics:    [John24 §6.3, Eq. 6.5-6.10]; probe benefit [John24 Eq. 6.11-6.12].
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "dynres/icheck/config.hpp"

namespace dynres::icheck {

/// What the controller knows of an application for Alg. 5.
struct AppShape {
  int num_nodes = 1;  ///< compute nodes of the application
  int num_procs = 1;  ///< processes of the application
  bool shmr = false;  ///< SHMR layout (one region per node) instead of MR
};

/// Upper bound of agents: processes for MR, nodes for SHMR (Alg. 5 l. 6-8),
/// and max_agents_app; never below 1.
int agent_upper_bound(const AppShape& a, const DynamicConfig& c);

/// Alg. 5 line 16: initial count = num_nodes (or init_agent_count when set),
/// clamped to [1, agent_upper_bound].
int initial_agent_count(const AppShape& a, const DynamicConfig& c);

/// Per-application state of Alg. 5 kept by the controller.
struct CountState {
  int num_agents = 1;
  double old_tsync = -1;  ///< s; <0 = no previous measurement
  int last_change = 0;    ///< +1 grew, -1 shrank, 0 none yet
  bool frozen = false;    ///< backed off once: keep the count (see below)
};

/// Alg. 5 get_num_agents on a probe with the latest commit time `tsync` (s).
/// First probe (no previous time): grow by `factor`. Later probes: if the
/// commit got slower than before (by > `tolerance`, relative) divide by
/// factor (>= 1) and freeze; if faster and the last change was a growth,
/// grow again; otherwise keep. A frozen count changes only when the shape
/// (nodes/procs) changes (malleable application, §6.4.2). The result is
/// always within [1, agent_upper_bound]. Updates old_tsync (Alg. 5 l. 25).
CountState next_agent_count(CountState s, double tsync, const AppShape& a, const DynamicConfig& c,
                            double tolerance = 0.05);

/// Agents of a resized application [John24 §7.2]: MA-RA (rigid agents)
/// or MA-MA (malleable agents).
enum class AgentsMode { ma_ra, ma_ma };
/// "ma-ra" | "ma-ma" (exact), else std::nullopt.
std::optional<AgentsMode> parse_agents_mode(const std::string& s);

/// Alg. 7 get_agent_count: the agent count of an application whose
/// resources (processes for MR, nodes for SHMR) change from `cur_res` to
/// `new_res` while it holds `cur_agents` agents.
///   MA-RA: cur_agents — the new processes/nodes are re-mapped round-robin
///     (slot s to agent s mod M) — but never more than new_res (an agent
///     without a slot would sit idle, which §7.2.1 rules out).
///   MA-MA: 1:1 stays 1:1 (new_res); otherwise the ratio r = cur_res /
///     cur_agents is kept: floor(new_res / r) agents, the (new_res mod r)
///     extra slots going to the agents round-robin (line 9).
/// The result is clamped to [1, upper] (upper = agent_upper_bound). Inputs
/// below 1 count as 1. Never throws.
int resize_agent_count(AgentsMode mode, int cur_agents, int cur_res, int new_res, int upper);

/// §7.2.2 "iCheck ensures that N is fully divisible by M during the
/// initialisation": "" when `agents` agents may serve `resources`
/// processes/nodes in `mode`, else the reason (MA-MA: resources not a
/// multiple of agents; both modes: agents above resources, or either < 1).
std::string nm_ratio_problem(AgentsMode mode, int resources, int agents);

/// Monitoring data of one checkpoint node as the controller sees it (§6.3).
struct NodeStatus {
  std::string node;
  bool up = true;
  double avail_mem = 0;     ///< bytes (6.3.1)
  double bandwidth = 0;     ///< bytes/s in use by agents (Eq. 6.9)
  double ncops_per_min = 0; ///< checkpoint operations per minute (6.3.2)
  double power = 0;         ///< W (6.3.5)
  int agents = 0;           ///< agents running there now
};

/// Alg. 6 candidate_selection + candidate_count: the up nodes sorted by the
/// strategy ("memory": most available memory first; "bandwidth": least
/// traffic; "frequency": fewest ops/min; "power": lowest power), ties broken
/// by fewer agents then name, cut to `candidate_num` (<=0: all).
std::vector<std::string> select_candidates(std::vector<NodeStatus> nodes, const std::string& strategy,
                                           int candidate_num);

/// Alg. 6 distribution: node of each of `num_agents` agents over
/// `candidates` by "block" (blocks of block_size, 0 = even split),
/// "roundrobin", or "fill" (fill each node to its capacity first).
/// capacity[i] = agents still allowed on candidates[i] (max_agents_node
/// minus running); nodes at capacity are skipped. The result may be shorter
/// than num_agents when every candidate is full.
std::vector<std::string> place_agents(int num_agents, const std::vector<std::string>& candidates,
                                      const std::vector<int>& capacity, const std::string& distribution,
                                      int block_size);

// ---- §6.3 metrics (all times in seconds, sizes in bytes) ----
/// Eq. 6.5: (avail_t - avail_{t+i}) / i; 0 when i <= 0.
double memory_depletion_rate(double avail_t, double avail_t_plus_i, double i);
/// Eq. 6.6: sum of the agents' new operation counts plus the running total.
long long ncops_update(long long ncops, const std::vector<long long>& per_agent_new);
/// Eq. 6.7: interval between consecutive checkpoint operations.
double cop_interval(double cop_i, double cop_next);
/// Eq. 6.8: size / t; 0 when t <= 0.
double agent_bandwidth(double size, double t);
/// Eq. 6.9: sum of size_n / t_n over the agents of a node.
double node_bandwidth(const std::vector<double>& sizes, const std::vector<double>& times);
/// Eq. 6.10: (#agents(t+dt) - #agents(t)) / dt.
double agent_fill_rate(int agents_t, int agents_t_dt, double dt);
/// Eq. 6.11/6.12: index n of the first checkpoint after which an agent
/// change pays off.
double probe_breakeven(double t_probe, double t_old, double t_new);

}  // namespace dynres::icheck
