// RAPL reader on synthetic powercap trees (wrap, psys, unreadable counter,
// AMD zones) and the modelled per-job draw (§5.1.3).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "dynres/power_source.hpp"

using namespace dynres::power;
namespace fs = std::filesystem;

namespace {
struct Tree {
  fs::path root;
  Tree() {
    char t[] = "/tmp/unit_power_rapl_XXXXXX";
    root = ::mkdtemp(t);
  }
  ~Tree() { fs::remove_all(root); }
  void zone(const std::string& dir, const std::string& name, const std::string& energy, const std::string& max) {
    fs::create_directories(root / dir);
    put(dir + "/name", name);
    put(dir + "/energy_uj", energy);
    put(dir + "/max_energy_range_uj", max);
  }
  void put(const std::string& rel, const std::string& v) { std::ofstream(root / rel) << v << "\n"; }
};
}  // namespace

TEST_CASE("RAPL: package + dram summed, wrap handled, psys skipped, unreadable reported") {
  Tree t;
  t.zone("intel-rapl:0", "package-0", "1000000", "262143328850");
  t.zone("intel-rapl:0:0", "core", "500", "262143328850");
  t.zone("intel-rapl:0:1", "dram", "0", "65712999613");
  t.zone("intel-rapl:1", "package-1", "90000000", "100000000");
  t.zone("intel-rapl:2", "psys", "7", "262143328850");
  // a counter that cannot be read: energy_uj is a directory (EISDIR even for root)
  fs::create_directories(t.root / "intel-rapl:3" / "energy_uj");
  t.put("intel-rapl:3/name", "package-2");
  t.put("intel-rapl:3/max_energy_range_uj", "262143328850");
  auto a = rapl_read(t.root, 100.0);
  REQUIRE(a.zones.size() == 6);
  t.put("intel-rapl:0/energy_uj", "51000000");   // +50 J
  t.put("intel-rapl:0:0/energy_uj", "9000000");  // core: inside the package, not added
  t.put("intel-rapl:0:1/energy_uj", "10000000"); // +10 J
  t.put("intel-rapl:1/energy_uj", "30000000");   // wrapped: 10 J to the top + 30 J
  t.put("intel-rapl:2/energy_uj", "999999999");  // psys: skipped
  auto b = rapl_read(t.root, 102.0);
  auto p = rapl_power(a, b);
  CHECK(p.package_watts == Approx((50.0 + 40.0) / 2));
  CHECK(p.dram_watts == Approx(5.0));
  CHECK(p.watts == Approx(50.0));
  bool saw_psys = false, saw_bad = false;
  for (auto& s : p.skipped) {
    if (s.find("intel-rapl:2 (psys") != std::string::npos) saw_psys = true;
    if (s.find("intel-rapl:3/energy_uj") != std::string::npos) saw_bad = true;
  }
  CHECK(saw_psys);
  CHECK(saw_bad);
}

TEST_CASE("RAPL: nothing readable, bad values and missing trees fail clearly") {
  Tree t;
  t.zone("intel-rapl:0", "package-0", "12abc", "1000");
  auto a = rapl_read(t.root, 0);
  CHECK_THAT(a.zones[0].error, Catch::Contains("not a non-negative integer: '12abc'"));
  CHECK_THROWS_WITH(rapl_power(a, rapl_read(t.root, 1)), Catch::Contains("no readable RAPL package or dram counter"));
  t.put("intel-rapl:0/energy_uj", "2000");
  CHECK_THAT(rapl_read(t.root, 0).zones[0].error, Catch::Contains("exceeds max_energy_range_uj"));
  t.put("intel-rapl:0/energy_uj", "-5");
  CHECK_THAT(rapl_read(t.root, 0).zones[0].error, Catch::Contains("not a non-negative integer"));
  t.put("intel-rapl:0/energy_uj", "99999999999999999999999");  // > uint64
  CHECK_THAT(rapl_read(t.root, 0).zones[0].error, Catch::Contains("not a non-negative integer"));
  if (::geteuid() != 0) {  // permission bits do not stop root
    t.put("intel-rapl:0/energy_uj", "5");
    fs::permissions(t.root / "intel-rapl:0/energy_uj", fs::perms::none);
    CHECK_THAT(rapl_read(t.root, 0).zones[0].error, Catch::Contains("readable only by root"));
  }
  CHECK_THROWS_WITH(rapl_read((t.root / "nope").string(), 0), Catch::Contains("no RAPL support"));
  fs::create_directories(t.root / "empty");
  CHECK_THROWS_WITH(rapl_read((t.root / "empty").string(), 0), Catch::Contains("no intel-rapl"));
  CHECK_THROWS_AS(rapl_power(a, a), RaplError);  // same time
}

TEST_CASE("RAPL: AMD zones are recognised; delta arithmetic") {
  Tree t;
  t.zone("amd-rapl:0", "package-0", "0", "4294967295");
  auto a = rapl_read(t.root, 0);
  t.put("amd-rapl:0/energy_uj", "3000000");
  CHECK(rapl_power(a, rapl_read(t.root, 1.5)).watts == Approx(2.0));
  CHECK(rapl_delta_uj(10, 25, 100) == 15);
  CHECK(rapl_delta_uj(90, 5, 100) == 15);
  CHECK(rapl_delta_uj(UINT64_MAX - 1, 3, UINT64_MAX) == 4);  // no overflow at the top
  CHECK_THROWS_AS(rapl_delta_uj(101, 5, 100), RaplError);
  CHECK_THROWS_AS(rapl_delta_uj(1, 5, 0), RaplError);
  CHECK(rapl_delta_uj(42, 42, 100) == 0);  // an idle counter did not wrap
  CHECK(rapl_delta_uj(0, 100, 100) == 100);
}

TEST_CASE("RAPL: a counter whose range changed between the readings is skipped, not differenced") {
  Tree t;
  t.zone("intel-rapl:0", "package-0", "1000", "100000000");
  t.zone("intel-rapl:1", "package-1", "1000", "100000000");
  auto a = rapl_read(t.root, 10);
  t.put("intel-rapl:0/energy_uj", "2001000");    // +2 J in 1 s
  t.zone("intel-rapl:1", "package-1", "500", "200000000");  // another counter now (hotplug, driver reload)
  auto p = rapl_power(a, rapl_read(t.root, 11));
  CHECK(p.watts == Approx(2.0));
  REQUIRE(p.skipped.size() == 1);
  CHECK_THAT(p.skipped[0], Catch::Contains("intel-rapl:1: max_energy_range_uj changed"));
}

TEST_CASE("Modelled draw: hints, history of the same name and size, default") {
  PowerModel m;
  std::vector<HistoryRun> h = {{"heat", 4, 240}, {"heat", 4, 260}, {"heat", 2, 100}, {"pi", 4, 170}};
  auto d = job_draw(150.0, 200.0, "heat", 4, h, m);
  CHECK(d.source == "hint");
  CHECK(d.min_watts == 150);
  CHECK(d.max_watts == 200);
  d = job_draw(300.0, 120.0, "heat", 4, h, m);  // given the wrong way round: still a range
  CHECK(d.min_watts == 120);
  CHECK(d.max_watts == 300);
  d = job_draw(std::nullopt, 180.0, "x", 1, h, m);
  CHECK(d.min_watts == 180);
  CHECK(d.max_watts == 180);
  d = job_draw(std::nullopt, std::nullopt, "heat", 4, h, m);
  CHECK(d.source == "history");
  CHECK(d.min_watts == 240);
  CHECK(d.max_watts == 260);
  d = job_draw(std::nullopt, std::nullopt, "heat", 3, h, m);
  CHECK(d.source == "default");
  CHECK(d.min_watts == 71);
  CHECK(d.max_watts == 250);
}

TEST_CASE("power: section of dynres.yaml") {
  Tree t;
  t.put("a.yaml", "power:\n  idle_watts: 60\n  node_max_watts: 300\n");
  auto m = load_power_model((t.root / "a.yaml").string());
  CHECK(m.idle_watts == 60);
  CHECK(m.node_max_watts == 300);
  t.put("b.yaml", "power:\n  idle_watt: 60\n");
  CHECK_THROWS_WITH(load_power_model((t.root / "b.yaml").string()), Catch::Contains("unknown key power.idle_watt"));
  t.put("c.yaml", "power:\n  idle_watts: -1\n");
  CHECK_THROWS_WITH(load_power_model((t.root / "c.yaml").string()), Catch::Contains("power.idle_watts must be >= 0"));
  CHECK(load_power_model((t.root / "missing.yaml").string()).idle_watts == 71);
  t.put("f.yaml", "power:\n  idle_watts: 310\n  node_max_watts: 300\n");
  CHECK_THROWS_WITH(load_power_model((t.root / "f.yaml").string()), Catch::Contains("idle_watts must not exceed power.node_max_watts"));
  CHECK_FALSE(m.record_samples);
  t.put("d.yaml", "power:\n  record_samples: true\n");
  CHECK(load_power_model((t.root / "d.yaml").string()).record_samples);
  t.put("e.yaml", "power:\n  record_samples: often\n");
  CHECK_THROWS_WITH(load_power_model((t.root / "e.yaml").string()), Catch::Contains("power.record_samples must be true or false"));
}
