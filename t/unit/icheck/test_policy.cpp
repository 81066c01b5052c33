// Alg. 5 (agent count), Alg. 6 (placement) and the §6.3 metrics.
#include <catch2/catch.hpp>

#include "dynres/icheck/policy.hpp"

using namespace dynres::icheck;

TEST_CASE("Alg. 5: initial count is num_nodes, bounded", "[policy]") {
  DynamicConfig c;
  CHECK(initial_agent_count({4, 16, false}, c) == 4);
  CHECK(initial_agent_count({4, 2, false}, c) == 2);  // MR: bounded by processes
  CHECK(initial_agent_count({0, 0, false}, c) == 1);  // at least one agent
  c.init_agent_count = 8;
  CHECK(initial_agent_count({4, 16, false}, c) == 8);
  CHECK(initial_agent_count({4, 16, true}, c) == 4);  // SHMR: bounded by nodes
  c.max_agents_app = 3;
  CHECK(initial_agent_count({4, 16, false}, c) == 3);
}

TEST_CASE("Alg. 5: grow while commit time improves, back off when worse", "[policy]") {
  DynamicConfig c;
  AppShape a{2, 32, false};
  CountState s{2, -1, 0, false};
  s = next_agent_count(s, 10.0, a, c);  // first change: grow by factor
  CHECK(s.num_agents == 4);
  s = next_agent_count(s, 6.0, a, c);  // improved: grow again
  CHECK(s.num_agents == 8);
  s = next_agent_count(s, 9.0, a, c);  // worse: back off and freeze
  CHECK(s.num_agents == 4);
  CHECK(s.frozen);
  s = next_agent_count(s, 3.0, a, c);  // frozen: no more changes
  CHECK(s.num_agents == 4);
  // bounds: never above processes (MR) / nodes (SHMR)
  CountState t{4, -1, 0, false};
  CHECK(next_agent_count(t, 1.0, {2, 5, false}, c).num_agents == 5);
  CHECK(next_agent_count(t, 1.0, {2, 5, true}, c).num_agents == 2);
  // factor from the dynamic configuration
  c.factor = 3;
  CountState u{1, -1, 0, false};
  CHECK(next_agent_count(u, 1.0, {1, 9, false}, c).num_agents == 3);
  // unchanged time within tolerance: keep
  CountState w{4, 5.0, +1, false};
  CHECK(next_agent_count(w, 5.1, a, c).num_agents == 4);
}

TEST_CASE("Alg. 6: candidate selection strategies", "[policy]") {
  std::vector<NodeStatus> n = {{"n1", true, 10e9, 5e9, 30, 200, 2},
                               {"n2", true, 50e9, 1e9, 60, 100, 1},
                               {"n3", true, 30e9, 3e9, 10, 150, 0},
                               {"n4", false, 99e9, 0, 0, 50, 0}};
  CHECK(select_candidates(n, "memory", 5) == std::vector<std::string>{"n2", "n3", "n1"});
  CHECK(select_candidates(n, "bandwidth", 5) == std::vector<std::string>{"n2", "n3", "n1"});
  CHECK(select_candidates(n, "frequency", 5) == std::vector<std::string>{"n3", "n1", "n2"});
  CHECK(select_candidates(n, "power", 2) == std::vector<std::string>{"n2", "n3"});
}

TEST_CASE("Alg. 6: block, round robin and fill-to-completion", "[policy]") {
  std::vector<std::string> c = {"a", "b", "c"};
  CHECK(place_agents(5, c, {9, 9, 9}, "roundrobin", 0) == std::vector<std::string>{"a", "b", "c", "a", "b"});
  CHECK(place_agents(5, c, {9, 9, 9}, "block", 0) == std::vector<std::string>{"a", "a", "b", "b", "c"});
  CHECK(place_agents(5, c, {9, 9, 9}, "block", 3) == std::vector<std::string>{"a", "a", "a", "b", "b"});
  CHECK(place_agents(5, c, {2, 9, 9}, "fill", 0) == std::vector<std::string>{"a", "a", "b", "b", "b"});
  CHECK(place_agents(4, c, {0, 1, 1}, "roundrobin", 0) == std::vector<std::string>{"b", "c"});  // full nodes skipped
  CHECK(place_agents(3, {}, {}, "roundrobin", 0).empty());
}

TEST_CASE("§6.3 metrics: Eq. 6.5-6.12", "[policy]") {
  CHECK(memory_depletion_rate(100, 40, 10) == Approx(6));
  CHECK(memory_depletion_rate(100, 40, 0) == 0);
  CHECK(ncops_update(10, {1, 2, 3}) == 16);
  CHECK(cop_interval(5, 7.5) == Approx(2.5));
  CHECK(agent_bandwidth(100, 4) == Approx(25));
  CHECK(node_bandwidth({100, 50}, {4, 5}) == Approx(35));
  CHECK(agent_fill_rate(2, 8, 3) == Approx(2));
  // Eq. 6.11/6.12: t_probe = 2, t_old = 1, t_new = 0.5 -> ncops = 1.5, n = 4
  CHECK(probe_breakeven(2, 1, 0.5) == Approx(4));
}

TEST_CASE("Alg. 7: MA-RA keeps the agents, MA-MA keeps the N:M ratio", "[policy]") {
  using M = AgentsMode;
  CHECK(parse_agents_mode("ma-ra") == M::ma_ra);
  CHECK(parse_agents_mode("ma-ma") == M::ma_ma);
  CHECK(!parse_agents_mode("MA-MA"));
  CHECK(!parse_agents_mode(""));
  // MA-RA: the count stays whatever the job does, never above its processes
  CHECK(resize_agent_count(M::ma_ra, 1, 1, 8, 80) == 1);
  CHECK(resize_agent_count(M::ma_ra, 2, 4, 8, 80) == 2);
  CHECK(resize_agent_count(M::ma_ra, 4, 8, 2, 80) == 2);  // no idle agent
  // MA-MA 1:1 follows the job both ways
  CHECK(resize_agent_count(M::ma_ma, 1, 1, 8, 80) == 8);
  CHECK(resize_agent_count(M::ma_ma, 8, 8, 4, 80) == 4);
  CHECK(resize_agent_count(M::ma_ma, 4, 4, 2, 80) == 2);
  // MA-MA N/M:1 keeps the ratio (2:1 here); the remainder goes round-robin
  CHECK(resize_agent_count(M::ma_ma, 2, 4, 8, 80) == 4);
  CHECK(resize_agent_count(M::ma_ma, 4, 8, 4, 80) == 2);
  CHECK(resize_agent_count(M::ma_ma, 2, 4, 7, 80) == 3);
  CHECK(resize_agent_count(M::ma_ma, 2, 4, 1, 80) == 1);  // at least one
  // bounded by the upper bound (max_agents_app, processes)
  CHECK(resize_agent_count(M::ma_ma, 1, 1, 16, 5) == 5);
  CHECK(resize_agent_count(M::ma_ma, 0, 0, 0, 0) == 1);
}

TEST_CASE("§7.2: the N:M rule checked at initialisation", "[policy]") {
  using M = AgentsMode;
  CHECK(nm_ratio_problem(M::ma_ma, 8, 2).empty());
  CHECK(nm_ratio_problem(M::ma_ma, 4, 4).empty());
  CHECK(nm_ratio_problem(M::ma_ra, 3, 2).empty());  // MA-RA maps round-robin
  CHECK(nm_ratio_problem(M::ma_ma, 3, 2).find("multiple") != std::string::npos);
  CHECK(nm_ratio_problem(M::ma_ma, 2, 3).find("idle") != std::string::npos);
  CHECK(nm_ratio_problem(M::ma_ra, 2, 3).find("idle") != std::string::npos);
  CHECK(!nm_ratio_problem(M::ma_ra, 0, 1).empty());
}
