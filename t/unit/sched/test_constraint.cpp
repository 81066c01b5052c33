#include <catch2/catch.hpp>

#include <climits>

#include "dynres/sched.hpp"

using namespace dynres::sched;

namespace {
const Constraint kAll[] = {Constraint::none, Constraint::even,   Constraint::odd,
                           Constraint::pof2, Constraint::square, Constraint::cube};
}

TEST_CASE("constraint and policy names round-trip") {
  for (Constraint c : kAll) CHECK(parse_constraint(to_string(c)) == c);
  CHECK(parse_constraint("ncube") == Constraint::cube);
  CHECK_FALSE(parse_constraint("").has_value());
  CHECK_FALSE(parse_constraint("Even").has_value());
  CHECK_FALSE(parse_constraint("power-of-two").has_value());
  for (Policy p : {Policy::fcfs, Policy::backfill, Policy::easy, Policy::fpsma, Policy::egs, Policy::minagree,
                   Policy::perf})
    CHECK(parse_policy(to_string(p)) == p);
  CHECK(to_string(Policy::easy) == "easy");
  CHECK(to_string(Policy::minagree) == "minagree");
  CHECK(is_malleable_policy(Policy::perf));
  CHECK_FALSE(is_malleable_policy(Policy::easy));
  CHECK_FALSE(parse_policy("min-agree").has_value());
  CHECK_FALSE(parse_policy("EASY").has_value());
}

TEST_CASE("admissible on all six constraints") {
  for (Constraint c : kAll) {
    CHECK_FALSE(admissible(c, 0));
    CHECK_FALSE(admissible(c, -4));
  }
  CHECK(admissible(Constraint::none, 1));
  CHECK(admissible(Constraint::none, 37));
  CHECK(admissible(Constraint::even, 2));
  CHECK_FALSE(admissible(Constraint::even, 1));
  CHECK(admissible(Constraint::odd, 1));
  CHECK_FALSE(admissible(Constraint::odd, 34));
  CHECK(admissible(Constraint::pof2, 1));
  CHECK(admissible(Constraint::pof2, 1024));
  CHECK_FALSE(admissible(Constraint::pof2, 12));
  CHECK(admissible(Constraint::pof2, 1 << 30));
  CHECK(admissible(Constraint::square, 1));
  CHECK(admissible(Constraint::square, 49));
  CHECK_FALSE(admissible(Constraint::square, 50));
  CHECK(admissible(Constraint::square, 46340 * 46340));
  CHECK(admissible(Constraint::cube, 1));
  CHECK(admissible(Constraint::cube, 27));
  CHECK(admissible(Constraint::cube, 64));
  CHECK_FALSE(admissible(Constraint::cube, 63));
  CHECK_FALSE(admissible(Constraint::cube, 65));
  CHECK(admissible(Constraint::cube, 1290 * 1290 * 1290));
  CHECK_FALSE(admissible(Constraint::cube, INT_MAX));
}

TEST_CASE("largest and smallest admissible in a range") {
  using C = Constraint;
  CHECK(largest_admissible(C::none, 3, 9) == 9);
  CHECK(smallest_admissible(C::none, 3, 9) == 3);
  CHECK(largest_admissible(C::even, 3, 9) == 8);
  CHECK(smallest_admissible(C::even, 3, 9) == 4);
  CHECK(largest_admissible(C::odd, 3, 10) == 9);
  CHECK(smallest_admissible(C::odd, 4, 10) == 5);
  CHECK(largest_admissible(C::pof2, 3, 100) == 64);
  CHECK(smallest_admissible(C::pof2, 3, 100) == 4);
  CHECK(largest_admissible(C::square, 2, 99) == 81);
  CHECK(smallest_admissible(C::square, 2, 99) == 4);
  CHECK(largest_admissible(C::cube, 2, 200) == 125);
  CHECK(smallest_admissible(C::cube, 2, 200) == 8);

  SECTION("lo > hi gives 0") {
    for (Constraint c : kAll) {
      CHECK(largest_admissible(c, 5, 4) == 0);
      CHECK(smallest_admissible(c, 5, 4) == 0);
    }
  }
  SECTION("none admissible in range gives 0") {
    CHECK(largest_admissible(C::even, 3, 3) == 0);
    CHECK(smallest_admissible(C::odd, 4, 4) == 0);
    CHECK(largest_admissible(C::pof2, 5, 7) == 0);
    CHECK(smallest_admissible(C::pof2, 5, 7) == 0);
    CHECK(largest_admissible(C::square, 10, 15) == 0);
    CHECK(smallest_admissible(C::cube, 9, 26) == 0);
    CHECK(largest_admissible(C::none, -5, 0) == 0);
  }
  SECTION("lo below 1 is raised to 1") {
    CHECK(smallest_admissible(C::none, -3, 5) == 1);
    CHECK(smallest_admissible(C::even, 0, 5) == 2);
    CHECK(smallest_admissible(C::cube, 0, 5) == 1);
    CHECK(largest_admissible(C::odd, -7, 1) == 1);
  }
  SECTION("bounds equal to an admissible value") {
    CHECK(largest_admissible(C::cube, 27, 27) == 27);
    CHECK(smallest_admissible(C::square, 16, 16) == 16);
    CHECK(largest_admissible(C::pof2, 1, 1) == 1);
  }
  SECTION("no overflow at INT_MAX") {
    CHECK(largest_admissible(C::none, 1, INT_MAX) == INT_MAX);
    CHECK(largest_admissible(C::pof2, 1, INT_MAX) == (1 << 30));
    CHECK(smallest_admissible(C::pof2, (1 << 30) + 1, INT_MAX) == 0);
    CHECK(smallest_admissible(C::even, INT_MAX, INT_MAX) == 0);
    CHECK(largest_admissible(C::square, 1, INT_MAX) == 46340 * 46340);
    CHECK(smallest_admissible(C::square, 46340 * 46340 + 1, INT_MAX) == 0);
    CHECK(largest_admissible(C::cube, 1, INT_MAX) == 1290 * 1290 * 1290);
  }
  SECTION("agrees with a brute-force scan") {
    for (Constraint c : kAll)
      for (int lo = -2; lo <= 70; ++lo)
        for (int hi = lo - 3; hi <= 70; ++hi) {
          int big = 0, small = 0;
          for (int n = hi; n >= lo && n >= 1; --n)
            if (admissible(c, n)) { if (!big) big = n; small = n; }
          REQUIRE(largest_admissible(c, lo, hi) == big);
          REQUIRE(smallest_admissible(c, lo, hi) == small);
        }
  }
}

TEST_CASE("job sizes: min_size and start_size") {
  WaitingJob r;
  r.kind = JobKind::rigid;
  r.req_nodes = r.min_nodes = r.max_nodes = 4;
  CHECK(min_size(r) == 4);
  CHECK(start_size(r, 4) == 4);
  CHECK(start_size(r, 100) == 4);
  CHECK(start_size(r, 3) == 0);
  r.constraint = Constraint::odd;  // contradictory rigid request: never starts
  CHECK(min_size(r) == 0);
  CHECK(start_size(r, 100) == 0);

  WaitingJob m;
  m.kind = JobKind::moldable;
  m.req_nodes = 4;
  m.min_nodes = 3;
  m.max_nodes = 20;
  m.constraint = Constraint::square;
  CHECK(min_size(m) == 4);
  CHECK(start_size(m, 100) == 16);
  CHECK(start_size(m, 15) == 9);
  CHECK(start_size(m, 3) == 0);
  m.kind = JobKind::malleable;
  CHECK(start_size(m, 10) == 9);
  m.min_nodes = 10;
  m.max_nodes = 15;
  CHECK(min_size(m) == 0);  // no square in [10, 15]
}
