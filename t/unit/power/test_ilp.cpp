// Eq. 5.3 ILP and the guarantees of Eq. 5.4/5.5 on hand-solved instances.
#include <catch2/catch.hpp>

#include <functional>
#include <random>

#include "dynres/power_ilp.hpp"

using namespace dynres::power;

namespace {
// N = 10 nodes, idle 71 W; job 1 at 200 W/node, job 2 at 100 W/node, 4 nodes
// each, both malleable in [1, 8]; 2 nodes idle (draw now 1342 W).
IlpInput two_jobs(double l, double u) {
  IlpInput in;
  in.nodes = 10;
  in.idle_watts = 71;
  in.lower = l;
  in.upper = u;
  in.running = {{1, 4, 1, 8, NodeConstraint::none, 200, 200}, {2, 4, 1, 8, NodeConstraint::none, 100, 100}};
  return in;
}
}  // namespace

TEST_CASE("ILP: no idle node, fewest moves among the minimal-idle plans") {
  // idle = 0: draw = 100 a + 1000 with a + b = 10; <= 1450 -> a <= 4, b <= 8 -> a >= 2.
  // (4, 6) moves 2, (3, 7) moves 4, (2, 8) moves 6 -> (4, 6).
  // phase 2 to the end: the default budget (half of phase 1's wall time) may
  // run out on a loaded machine before the fewest moves are proven
  auto in2 = two_jobs(1000, 1450);
  in2.adaptive_moves_budget = false;
  in2.moves_time_limit_s = 0.2;
  auto r = solve_corridor(in2);
  REQUIRE(r.status == IlpStatus::optimal);
  CHECK(r.k == std::vector<int>{4, 6});
  CHECK(r.idle == 0);
  CHECK(r.idle_power == 0);
  CHECK(r.moves == 2);
  CHECK(r.moves_optimal);
  CHECK(r.max_draw == Approx(1400));
  // without the second phase the idle power is the same, the moves may not be
  auto in = two_jobs(1000, 1450);
  in.fewest_moves = false;
  auto r1 = solve_corridor(in);
  REQUIRE(r1.status == IlpStatus::optimal);
  CHECK(r1.idle == 0);
  CHECK_FALSE(r1.moves_optimal);
}

TEST_CASE("ILP: upper violation is corrected by idling nodes") {
  // [500, 1000]: idle 0..3 cannot get below 1000 with a >= 1; idle 4, a + b = 6:
  // 100 a + 600 + 284 <= 1000 -> a = 1, b = 5 (984 W).
  auto r = solve_corridor(two_jobs(500, 1000));
  REQUIRE(r.status == IlpStatus::optimal);
  CHECK(r.k == std::vector<int>{1, 5});
  CHECK(r.idle == 4);
  CHECK(r.idle_power == Approx(284));
  CHECK(r.max_draw == Approx(984));
}

TEST_CASE("ILP: odd and even node constraints") {
  auto in = two_jobs(1000, 1450);
  in.running[0].constraint = NodeConstraint::odd;
  in.running[1].constraint = NodeConstraint::even;
  // odd + even = odd, so idle must be odd; idle 1: a + b = 9, 100 a + 971 <= 1450
  // -> a in {1, 3}: (3, 6) moves 3, (1, 8) moves 7 -> (3, 6, idle 1).
  auto r = solve_corridor(in);
  REQUIRE(r.status == IlpStatus::optimal);
  CHECK(r.k == std::vector<int>{3, 6});
  CHECK(r.idle == 1);
}

TEST_CASE("ILP: pof2, square and cube constraints through auxiliary variables") {
  IlpInput in;
  in.nodes = 12;
  in.idle_watts = 50;
  in.lower = 0;
  in.upper = 100000;
  // pof2 job in [1, 12] -> {1, 2, 4, 8}; square job in [1, 12] -> {1, 4, 9}.
  in.running = {{1, 2, 1, 12, NodeConstraint::pof2, 100, 100}, {2, 1, 1, 12, NodeConstraint::square, 100, 100}};
  // No idle: a + b = 12 with a in {1,2,4,8}, b in {1,4,9}: (8, 4) moves 6+3 = 9.
  auto r = solve_corridor(in);
  REQUIRE(r.status == IlpStatus::optimal);
  CHECK(r.k == std::vector<int>{8, 4});
  CHECK(r.idle == 0);
  // cube job in [1, 12] -> {1, 8}; with a pof2 job: 8+4 or 4+8 or ... (4, 8) vs (8, ...) no 4 cube;
  // a in {1,2,4,8}, c in {1,8}: sums 12 -> (4, 8). moves |4-2| + |8-1| = 9.
  in.running[1].constraint = NodeConstraint::cube;
  r = solve_corridor(in);
  REQUIRE(r.status == IlpStatus::optimal);
  CHECK(r.k == std::vector<int>{4, 8});
  CHECK(r.idle == 0);
}

TEST_CASE("ILP: a waiting candidate is started within the corridor") {
  auto in = two_jobs(1000, 1450);
  in.candidates = {{7, 2, 2, NodeConstraint::none, 150, 150}};
  // idle 0: a + b = 8, 100 a + 800 + 300 <= 1450 -> a <= 3 -> (3, 5) moves 2.
  auto r = solve_corridor(in);
  REQUIRE(r.status == IlpStatus::optimal);
  CHECK(r.k == std::vector<int>{3, 5});
  CHECK(r.m == std::vector<int>{2});
  CHECK(r.idle == 0);
  // two candidates: 2 nodes at 150 W and 1..3 nodes at 300 W
  in.candidates.push_back({8, 1, 3, NodeConstraint::none, 300, 300});
  r = solve_corridor(in);
  // idle 0, a + b + c = 8: 200a + 100b + 300c + 300 <= 1450 with b = 8-a-c:
  // 100a + 200c <= 350 -> a = 1, c = 1, b = 6 (moves 3+2 = 5).
  REQUIRE(r.status == IlpStatus::optimal);
  CHECK(r.k == std::vector<int>{1, 6});
  CHECK(r.m == std::vector<int>{2, 1});
  CHECK(r.idle == 0);
}

TEST_CASE("ILP: infeasible and invalid instances say why") {
  // upper 800: the jobs at one node each with 8 idle nodes draw 868 W > 800 -> Eq. 5.4 fails.
  auto r = solve_corridor(two_jobs(100, 800));
  CHECK(r.status == IlpStatus::infeasible);
  CHECK_THAT(r.reason, Catch::Contains("Eq. 5.4 fails"));
  // lower 3000: job 1 on 8 nodes + job 2 on 1 + 1 idle = 1771 W < 3000 -> Eq. 5.5 fails.
  r = solve_corridor(two_jobs(3000, 3500));
  CHECK(r.status == IlpStatus::infeasible);
  CHECK_THAT(r.reason, Catch::Contains("Eq. 5.5 fails"));
  auto in = two_jobs(1000, 1450);
  in.running[0].constraint = NodeConstraint::cube;
  in.running[0].min_nodes = 2;
  in.running[0].max_nodes = 7;
  r = solve_corridor(in);
  CHECK(r.status == IlpStatus::invalid);
  CHECK_THAT(r.reason, Catch::Contains("job 1: no node count in [2, 7] is cube"));
  in = two_jobs(1000, 1450);
  in.time_limit_s = 0;
  CHECK(solve_corridor(in).status == IlpStatus::invalid);
  r = solve_corridor(two_jobs(1450, 1000));
  CHECK(r.status == IlpStatus::invalid);
  CHECK_THAT(r.reason, Catch::Contains("not below the upper bound"));
  in = two_jobs(1000, 1450);
  in.running[1].min_nodes = 10;
  in.running[1].max_nodes = 10;
  r = solve_corridor(in);
  CHECK(r.status == IlpStatus::invalid);
  CHECK_THAT(r.reason, Catch::Contains("need 11 nodes"));
}

TEST_CASE("Guarantees of Eq. 5.4 and 5.5") {
  auto in = two_jobs(1000, 1450);
  auto g = guarantees(in);
  // Eq. 5.4: 200 + 100 + 8 * 71 = 868 <= 1450
  CHECK(g.upper_need == Approx(868));
  CHECK(g.upper);
  // Eq. 5.5: 100 (job 2 on one node) + 8 * 200 (job 1 capped at its max 8) + 71 (one idle) = 1771 >= 1000
  CHECK(g.lower_reach == Approx(1771));
  CHECK(g.lower);
  CHECK(g.hungriest == 1);
  CHECK_THAT(g.words, Catch::Contains("(Eq. 5.4 holds)"));
  in.upper = 800;
  in.lower = 2000;
  g = guarantees(in);
  CHECK_FALSE(g.upper);
  CHECK_FALSE(g.lower);
  CHECK_THAT(g.words, Catch::Contains("NOT guaranteed"));
}

TEST_CASE("node constraint helpers") {
  CHECK(satisfies(8, NodeConstraint::pof2));
  CHECK_FALSE(satisfies(6, NodeConstraint::pof2));
  CHECK(satisfies(27, NodeConstraint::cube));
  CHECK_FALSE(satisfies(26, NodeConstraint::cube));
  CHECK(satisfies(49, NodeConstraint::square));
  CHECK_FALSE(satisfies(50, NodeConstraint::square));
  CHECK(parse_constraint("odd") == NodeConstraint::odd);
  CHECK_THROWS_AS(parse_constraint("prime"), std::invalid_argument);
}

namespace {
// Least idle nodes by enumerating every size vector (small instances only); -1 = infeasible.
int brute_force_idle(const IlpInput& in) {
  int best = -1;
  std::vector<int> k(in.running.size() + in.candidates.size());
  std::function<void(size_t, int, double, double)> rec = [&](size_t i, int used, double lo, double hi) {
    if (used > in.nodes) return;
    if (i == k.size()) {
      int idle = in.nodes - used;
      double l = lo + idle * in.idle_watts, u = hi + idle * in.idle_watts;
      if (l >= in.lower - 1e-9 && u <= in.upper + 1e-9 && (best < 0 || idle < best)) best = idle;
      return;
    }
    bool run = i < in.running.size();
    int mn = run ? in.running[i].min_nodes : in.candidates[i - in.running.size()].min_nodes;
    int mx = run ? in.running[i].max_nodes : in.candidates[i - in.running.size()].max_nodes;
    auto c = run ? in.running[i].constraint : in.candidates[i - in.running.size()].constraint;
    double pl = run ? in.running[i].p_min : in.candidates[i - in.running.size()].p_min;
    double ph = run ? in.running[i].p_max : in.candidates[i - in.running.size()].p_max;
    for (int n = mn; n <= mx; ++n)
      if (satisfies(n, c)) rec(i + 1, used + n, lo + n * pl, hi + n * ph);
  };
  rec(0, 0, 0, 0);
  return best;
}
}  // namespace

TEST_CASE("ILP agrees with brute-force enumeration on 300 random small instances") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pw(80, 300), kind(0, 5), cnt(1, 3);
  const NodeConstraint cs[] = {NodeConstraint::none, NodeConstraint::even, NodeConstraint::odd,
                               NodeConstraint::pof2, NodeConstraint::square, NodeConstraint::none};
  int feasible = 0;
  for (int t = 0; t < 300; ++t) {
    IlpInput in;
    in.nodes = 6 + t % 7;
    in.idle_watts = 71;
    int K = cnt(rng);
    for (int i = 0; i < K; ++i) {
      IlpJob j{i + 1, 1, 1, 1 + (t + i) % 6, cs[kind(rng)], 0, 0};
      j.p_min = pw(rng);
      j.p_max = j.p_min + 15;
      in.running.push_back(j);
    }
    if (t % 3 == 0) in.candidates.push_back({100, 1, 2, NodeConstraint::none, 150, 170});
    double mid = in.nodes * 150.0;
    in.lower = mid * (0.5 + 0.1 * (t % 5));
    in.upper = in.lower + 150 + 50 * (t % 4);
    int expect = brute_force_idle(in);
    auto r = solve_corridor(in);
    INFO("instance " << t << " status " << to_string(r.status) << " reason " << r.reason);
    if (expect < 0) {
      CHECK((r.status == IlpStatus::infeasible || r.status == IlpStatus::invalid));
    } else {
      ++feasible;
      REQUIRE(r.status == IlpStatus::optimal);
      CHECK(r.idle == expect);
      CHECK(r.min_draw >= in.lower - 1e-6);
      CHECK(r.max_draw <= in.upper + 1e-6);
      for (size_t i = 0; i < r.k.size(); ++i) CHECK(satisfies(r.k[i], in.running[i].constraint));
    }
  }
  CHECK(feasible > 50);  // the comparison is not vacuous
}

namespace {
/// Least idle nodes, then fewest moves, by enumeration (small instances).
std::pair<int, int> brute_force(const IlpInput& in, bool& feasible) {
  std::vector<std::vector<int>> sizes;
  for (auto& j : in.running) {
    sizes.emplace_back();
    for (int n = j.min_nodes; n <= std::min(j.max_nodes, in.nodes); ++n)
      if (satisfies(n, j.constraint)) sizes.back().push_back(n);
  }
  for (auto& c : in.candidates) {
    sizes.emplace_back();
    for (int n = c.min_nodes; n <= std::min(c.max_nodes, in.nodes); ++n)
      if (satisfies(n, c.constraint)) sizes.back().push_back(n);
  }
  std::pair<int, int> best{1 << 30, 1 << 30};
  feasible = false;
  std::vector<size_t> at(sizes.size(), 0);
  for (auto& s : sizes)
    if (s.empty()) return best;
  while (true) {
    int used = 0, moves = 0;
    double lo = 0, hi = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      int n = sizes[i][at[i]];
      used += n;
      if (i < in.running.size()) {
        lo += n * in.running[i].p_min, hi += n * in.running[i].p_max;
        moves += std::abs(n - in.running[i].current);
      } else {
        auto& c = in.candidates[i - in.running.size()];
        lo += n * c.p_min, hi += n * c.p_max;
      }
    }
    int idle = in.nodes - used;
    if (idle >= 0 && lo + idle * in.idle_watts >= in.lower - 1e-9 && hi + idle * in.idle_watts <= in.upper + 1e-9) {
      feasible = true;
      best = std::min(best, std::make_pair(idle, moves));
    }
    size_t i = 0;
    while (i < at.size() && ++at[i] == sizes[i].size()) at[i++] = 0;
    if (i == at.size()) break;
  }
  return best;
}
}  // namespace

TEST_CASE("ILP: least idle nodes and fewest moves equal an enumeration (random small instances)") {
  std::mt19937_64 g(7);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); };
  int feasible_seen = 0;
  for (int rep = 0; rep < 1000; ++rep) {
    IlpInput in;
    in.nodes = uni(4, 16);
    in.idle_watts = uni(0, 2) * 40;
    in.time_limit_s = 5;
    in.moves_time_limit_s = 5;
    in.adaptive_moves_budget = false;  // phase 2 to the end: the fewest moves are proven
    int k = uni(1, 3), left = in.nodes;
    for (int i = 0; i < k && left > 0; ++i) {
      IlpJob j;
      j.id = i + 1;
      j.current = uni(1, std::min(left, 6));
      left -= j.current;
      j.min_nodes = uni(1, j.current);
      j.max_nodes = j.current + uni(0, in.nodes);
      j.constraint = static_cast<NodeConstraint>(uni(0, 5));
      j.p_min = uni(50, 300);
      j.p_max = j.p_min + uni(0, 40);
      in.running.push_back(j);
    }
    if (uni(0, 1)) in.candidates.push_back({99, uni(1, 2), uni(2, 5), static_cast<NodeConstraint>(uni(0, 2)), 120, 150});
    in.lower = uni(0, 30) * 100;
    in.upper = in.lower + uni(1, 20) * 100;
    bool feasible = false;
    auto want = brute_force(in, feasible);
    auto r = solve_corridor(in);
    INFO("rep " << rep);
    if (r.status == IlpStatus::invalid) continue;
    if (!feasible) {
      CHECK(r.status == IlpStatus::infeasible);
      continue;
    }
    ++feasible_seen;
    REQUIRE(r.status == IlpStatus::optimal);
    CHECK(r.idle == want.first);
    CHECK(r.moves_optimal);
    CHECK(r.moves == want.second);
    auto dflt = in;  // the adaptive phase 2 budget: same idle optimum, moves at most phase 1's
    dflt.adaptive_moves_budget = true;
    dflt.moves_time_limit_s = IlpInput{}.moves_time_limit_s;
    auto rd = solve_corridor(dflt);
    REQUIRE(rd.status == IlpStatus::optimal);
    CHECK(rd.idle == want.first);
    CHECK(rd.moves >= want.second);
    if (rd.moves_optimal) CHECK(rd.moves == want.second);
  }
  CHECK(feasible_seen > 50);
}
