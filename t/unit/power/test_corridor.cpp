// Corridor records in a real SQLite state file: validation, idempotence,
// scheduled changes, violations; time and watt parsing.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "dynres/corridor.hpp"

using namespace dynres::power;
namespace fs = std::filesystem;

namespace {
struct TmpState {
  fs::path dir;
  TmpState() {
    char t[] = "/tmp/unit_power_state_XXXXXX";
    dir = ::mkdtemp(t);
  }
  ~TmpState() { fs::remove_all(dir); }
  std::string path() const { return (dir / "state.db").string(); }
};
int corridor_rows(dynres::Db& db) {
  if (!has_power_schema(db)) return 0;
  dynres::Stmt s(db, "SELECT COUNT(*) FROM power_corridor");
  s.step();
  return static_cast<int>(s.i64(0));
}
}  // namespace

TEST_CASE("parse_time and parse_watts") {
  CHECK(parse_time("now", 1000) == 1000);
  CHECK(parse_time("+90", 1000) == 1090);
  CHECK(parse_time("+5m", 1000) == 1300);
  CHECK(parse_time("-2h", 10000) == 10000 - 7200);
  CHECK(parse_time("1764000000.5", 0) == 1764000000.5);
  CHECK_THROWS_WITH(parse_time("tomorrow", 0), Catch::Contains("time 'tomorrow'"));
  CHECK_THROWS_AS(parse_time("+", 0), InputError);
  CHECK_THROWS_AS(parse_time("+1e999", 0), InputError);
  CHECK(parse_time("+1000000000", 0) == 1e9);  // the largest offset: about 31 years
  CHECK_THROWS_AS(parse_time("+1000000001", 0), InputError);
  CHECK_THROWS_AS(parse_time("-99999999999d", 0), InputError);
  CHECK_THROWS_AS(parse_time("2026-13-45 99:99", 0), InputError);
  CHECK(parse_watts("1500.5", "x") == 1500.5);
  CHECK_THROWS_WITH(parse_watts("15OO", "lower bound"), Catch::Contains("lower bound: '15OO' is not a number of watts"));
  CHECK_THROWS_AS(parse_watts("nan", "x"), InputError);
  CHECK_THROWS_AS(parse_watts("1e400", "x"), InputError);
  CHECK_THROWS_AS(parse_watts("", "x"), InputError);
}

TEST_CASE("set_corridor: validation leaves the file alone; idempotent; scheduled changes") {
  TmpState t;
  dynres::State st(t.path(), true);
  st.register_nodes({{"n1", "n1"}, {"n2", "n2"}, {"n3", "n3"}, {"n4", "n4"}});
  PowerModel m;  // 4 nodes: idle floor 284 W, max 1000 W
  SetRequest r;
  r.now = 1000;
  r.lower = 300, r.upper = 1001;
  CHECK_THROWS_WITH(set_corridor(st, m, r), Catch::Contains("= 1000 W"));
  r.lower = 283, r.upper = 900;
  CHECK_THROWS_WITH(set_corridor(st, m, r), Catch::Contains("idle floor"));
  r.lower = 900, r.upper = 900;
  CHECK_THROWS_WITH(set_corridor(st, m, r), Catch::Contains("must be below"));
  r.lower = -5, r.upper = 900, r.force = true;  // --force waives the idle floor, never the sign
  CHECK_THROWS_WITH(set_corridor(st, m, r), Catch::Contains("is negative"));
  r.force = false;
  r.lower = 300, r.upper = 900, r.at = 500;
  CHECK_THROWS_WITH(set_corridor(st, m, r), Catch::Contains("in the past"));
  CHECK_FALSE(has_power_schema(st.db()));  // nothing written, not even the schema
  r.at.reset();
  CHECK(set_corridor(st, m, r).changed);
  CHECK_FALSE(set_corridor(st, m, r).changed);
  {
    auto later = r;  // the same corridor scheduled for later: already applies then
    later.at = 1500;
    CHECK_FALSE(set_corridor(st, m, later).changed);
  }
  CHECK(corridor_rows(st.db()) == 1);
  r.lower = 100, r.force = true;
  CHECK(set_corridor(st, m, r).changed);
  r.force = false, r.lower = 400, r.upper = 950, r.at = 2000;
  CHECK(set_corridor(st, m, r).changed);
  CHECK_FALSE(set_corridor(st, m, r).changed);  // same scheduled change again
  CHECK(corridor_rows(st.db()) == 3);
  CHECK(corridor_at(st.db(), 1500)->lower == 100);
  CHECK(corridor_at(st.db(), 2000)->lower == 400);
  CHECK(corridor_next(st.db(), 1500)->effective_time == 2000);
  CHECK_FALSE(corridor_at(st.db(), 999).has_value());
  CHECK(corridor_history(st.db(), 1500).size() == 1);
  {
    // a cron job that keeps the lower bound and moves only the upper one
    auto up_only = r;
    up_only.upper = 980;
    CHECK(set_corridor(st, m, up_only).changed);
    CHECK(corridor_rows(st.db()) == 4);
    CHECK(corridor_at(st.db(), 2000)->upper == 980);
    auto low_only = up_only;  // and the other way round
    low_only.lower = 450;
    CHECK(set_corridor(st, m, low_only).changed);
    CHECK(corridor_at(st.db(), 2000)->lower == 450);
    CHECK(corridor_at(st.db(), 2000)->upper == 980);
    CHECK(corridor_rows(st.db()) == 5);
  }
}

TEST_CASE("violations over sampled totals") {
  TmpState t;
  dynres::State st(t.path(), true);
  st.register_nodes({{"n1", "n1"}, {"n2", "n2"}});
  PowerModel m;  // 2 idle nodes: 142 W modelled
  SetRequest r;
  r.now = 100, r.lower = 150, r.upper = 400;
  set_corridor(st, m, r);
  auto rs = modelled_readings(st, m);
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].watts == 71);
  CHECK(rs[0].source == "modelled");
  record_samples(st, 110, rs);
  record_samples(st, 112, rs);  // 8 W below 150 W for 2 s
  rs[0].watts = rs[1].watts = 100;
  record_samples(st, 113, rs);  // back inside
  rs[0].watts = rs[1].watts = 250;
  record_samples(st, 114, rs);  // 100 W above 400 W for 1 s
  record_samples(st, 115, rs);
  auto tot = sampled_totals(st.db());
  REQUIRE(tot.size() == 5);
  auto v = violations(st.db());
  CHECK(v.count == 2);
  CHECK(v.below_ws == Approx(8 * 2 + 8 * 1));
  CHECK(v.above_ws == Approx(100 * 1));
}
