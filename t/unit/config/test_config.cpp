// dynres.yaml: defaults, valid files, and every rejected key or value.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "../testutil.hpp"
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "dynres/config.hpp"

using namespace dynres;
using Catch::Matchers::Contains;

namespace {

struct TempDir : dynres::test::TempDir {
  TempDir() : dynres::test::TempDir("config") {}
  std::string write(const std::string& text) const { return dynres::test::TempDir::write("dynres.yaml", text); }
};

}  // namespace

TEST_CASE("config: a missing file gives the defaults", "[config]") {
  TempDir d;
  auto c = load_config((d.path / "nope.yaml").string());
  CHECK(c.policy.policy == sched::Policy::easy);
  CHECK(c.policy.default_time_limit == Approx(3600));
  CHECK(c.tick == Approx(1.0));
  CHECK(c.min_interval == Approx(0.05));
  CHECK(c.kill_wait == Approx(5.0));
  CHECK(c.launcher == "local");
}

TEST_CASE("config: an empty file gives the defaults", "[config]") {
  TempDir d;
  for (const char* text : {"", "# only a comment\n", "---\n"}) {
    INFO(text);
    auto c = load_config(d.write(text));
    CHECK(c.policy.policy == sched::Policy::easy);
    CHECK(c.tick == Approx(1.0));
    CHECK(c.launcher == "local");
  }
}

TEST_CASE("config: values are read", "[config]") {
  TempDir d;
  auto c = load_config(d.write(
      "scheduler:\n  policy: fcfs\n  tick: 0.2\n  min_interval: 0.3\n  default_time_limit: 60\n  kill_wait: 0\n"
      "launcher:\n  type: srun\n"
      "power:\n  anything: 1\n"
      "icheck:\n  whatever: [1, 2]\n"));
  CHECK(c.policy.policy == sched::Policy::fcfs);
  CHECK(c.tick == Approx(0.2));
  CHECK(c.min_interval == Approx(0.3));
  CHECK(c.policy.default_time_limit == Approx(60));
  CHECK(c.kill_wait == Approx(0));
  CHECK(c.launcher == "srun");
  CHECK(load_config(d.write("scheduler:\n  policy: backfill\n")).policy.policy == sched::Policy::backfill);
}

TEST_CASE("config: scheduler.power is read (the power policy)", "[config]") {
  TempDir d;
  auto c = load_config(d.write("scheduler:\n  policy: power\n  power:\n    mode: runtime\n    favour_malleable: true\n"
                               "    max_tries: 3\n    ilp_jobs: 12\n    ilp_steps: 5000\n"));
  CHECK(c.policy.policy == sched::Policy::power);
  CHECK(c.policy.power_mode == dynres::sched::PowerMode::runtime);
  CHECK(c.policy.power_favour_malleable);
  CHECK(c.policy.power_max_tries == 3);
  CHECK(c.policy.power_ilp_jobs == 12);
  CHECK(c.policy.power_ilp_steps == 5000);
  auto dflt = load_config(d.write("scheduler:\n  policy: power\n"));
  CHECK(dflt.policy.power_mode == dynres::sched::PowerMode::aware);
  CHECK_FALSE(dflt.policy.power_favour_malleable);
  CHECK(dflt.policy.power_max_tries == 8);
  auto pro = load_config(d.write("scheduler:\n  power:\n    mode: proactive\n    forecast_interval: 0.5\n"
                                 "    forecast_window: 40\n"));
  CHECK(pro.policy.power_mode == dynres::sched::PowerMode::proactive);
  CHECK(pro.policy.power_forecast_interval == Approx(0.5));
  CHECK(pro.policy.power_forecast_window == 40);
  CHECK(pro.policy.power_pass_steps == 100000);
  CHECK(load_config(d.write("scheduler:\n  power:\n    pass_steps: 1500\n")).policy.power_pass_steps == 1500);
  CHECK(load_config(d.write("scheduler:\n  power:\n    mode: reactive\n")).policy.power_mode ==
        dynres::sched::PowerMode::reactive);
  CHECK_THROWS_WITH(load_config(d.write("scheduler:\n  power:\n    mode: predictive\n")),
                    Catch::Contains("mode must be aware, runtime, proactive or reactive"));
  CHECK_THROWS_WITH(load_config(d.write("scheduler:\n  power:\n    forecast_window: 5\n")),
                    Catch::Contains("forecast_window"));
}

TEST_CASE("config: scheduler.malleable.grow_at_start (default true)", "[config]") {
  TempDir d;
  CHECK(load_config(d.write("scheduler:\n  policy: minagree\n")).policy.grow_at_start);
  CHECK_FALSE(load_config(d.write("scheduler:\n  malleable:\n    grow_at_start: false\n")).policy.grow_at_start);
  CHECK(load_config(d.write("scheduler:\n  malleable:\n    grow_at_start: true\n")).policy.grow_at_start);
}

TEST_CASE("config: the shipped etc/dynres.yaml loads", "[config]") {
  const char* src = std::getenv("DYNRES_SRC");
  if (!src) return;  // run outside ctest
  auto c = load_config(std::string(src) + "/etc/dynres.yaml");
  CHECK(c.policy.policy == sched::Policy::easy);
  CHECK(c.launcher == "local");
  CHECK(c.tick == Approx(1.0));
  CHECK(c.kill_wait == Approx(5));
}

TEST_CASE("config: bad keys and values are rejected naming the key", "[config]") {
  TempDir d;
  struct Case {
    const char* text;
    std::vector<const char*> needles;
  };
  std::vector<Case> cases = {
      {"bogus: 1\n", {"unknown key", "bogus"}},
      {"scheduler:\n  polcy: easy\n", {"unknown key", "scheduler.polcy"}},
      {"launcher:\n  type: local\n  nodes: 4\n", {"unknown key", "launcher.nodes"}},
      {"scheduler:\n  policy: sjf\n", {"scheduler.policy", "sjf"}},
      {"scheduler:\n  policy: [fcfs]\n", {"scheduler.policy"}},
      {"scheduler:\n  tick: 0\n", {"scheduler.tick"}},
      {"scheduler:\n  tick: -1\n", {"scheduler.tick"}},
      {"scheduler:\n  tick: fast\n", {"scheduler.tick"}},
      {"scheduler:\n  kill_wait: -2\n", {"scheduler.kill_wait"}},
      {"scheduler:\n  min_interval: -0.1\n", {"scheduler.min_interval"}},
      {"scheduler:\n  min_interval: 61\n", {"scheduler.min_interval"}},
      {"scheduler:\n  kill_wait: soon\n", {"scheduler.kill_wait"}},
      {"scheduler:\n  default_time_limit: 0\n", {"scheduler.default_time_limit"}},
      {"scheduler:\n  default_time_limit: -60\n", {"scheduler.default_time_limit"}},
      {"scheduler:\n  default_time_limit: 1h\n", {"scheduler.default_time_limit"}},
      {"launcher:\n  type: ssh\n", {"launcher.type", "ssh"}},
      {"scheduler: 5\n", {"scheduler", "mapping"}},
      {"launcher: [local]\n", {"launcher", "mapping"}},
      {"- a\n- b\n", {"top level", "mapping"}},
      {"scheduler:\n  policy: easy\n tick: 1\n", {"dynres.yaml"}},  // malformed YAML
      {"scheduler:\n  power:\n    mode: sometimes\n", {"scheduler.power.mode", "aware, runtime, proactive or reactive"}},
      {"scheduler:\n  power:\n    max_tries: 0\n", {"scheduler.power.max_tries"}},
      {"scheduler:\n  power:\n    ilp_time_limit: 0.05\n", {"scheduler.power.ilp_time_limit", "no longer read"}},
      {"scheduler:\n  power:\n    pass_budget: 0.2\n", {"scheduler.power.pass_budget", "not seconds"}},
      {"scheduler:\n  power:\n    ilp_jobs: 0\n", {"scheduler.power.ilp_jobs"}},
      {"scheduler:\n  power:\n    ilp_steps: 10\n", {"scheduler.power.ilp_steps"}},
      {"scheduler:\n  power:\n    pass_steps: -1\n", {"scheduler.power.pass_steps"}},
      {"scheduler:\n  power:\n    favour_malleable: maybe\n", {"scheduler.power.favour_malleable"}},
      {"scheduler:\n  power:\n    corridor: 5\n", {"unknown key", "scheduler.power.corridor"}},
      {"scheduler:\n  malleable:\n    grow_at_start: maybe\n", {"scheduler.malleable.grow_at_start"}},
  };
  for (auto& c : cases) {
    INFO("config text:\n" << c.text);
    auto path = d.write(c.text);
    try {
      load_config(path);
      FAIL("accepted");
    } catch (const ConfigError& e) {
      std::string msg = e.what();
      INFO("message: " << msg);
      CHECK_THAT(msg, Contains(path));
      for (auto n : c.needles) CHECK_THAT(msg, Contains(n));
    }
  }
}

TEST_CASE("config: scheduler.icheck (iCheck-aware scheduling)", "[config]") {
  TempDir d;
  auto dflt = load_config(d.write("scheduler:\n  policy: perf\n"));
  CHECK(dflt.policy.icheck_favour == sched::IcheckFavour::icheck);
  CHECK(dflt.policy.icheck_reclaim_free == Approx(0.9));
  CHECK(dflt.icheck_status_timeout == Approx(30));
  auto c = load_config(d.write("scheduler:\n  icheck:\n    favour: applications\n    reclaim_free: 0.75\n"
                               "    status_timeout: 12\n"));
  CHECK(c.policy.icheck_favour == sched::IcheckFavour::applications);
  CHECK(c.policy.icheck_reclaim_free == Approx(0.75));
  CHECK(c.icheck_status_timeout == Approx(12));
  CHECK_THROWS_WITH(load_config(d.write("scheduler:\n  icheck:\n    favour: apps\n")),
                    Contains("unknown scheduler.icheck.favour 'apps' (icheck|applications)"));
  CHECK_THROWS_WITH(load_config(d.write("scheduler:\n  icheck:\n    reclaim_free: 1\n")),
                    Contains("scheduler.icheck.reclaim_free must be a fraction in [0, 1)"));
  CHECK_THROWS_WITH(load_config(d.write("scheduler:\n  icheck:\n    status_timeout: 0\n")),
                    Contains("scheduler.icheck.status_timeout must be in (0, 86400] seconds"));
  CHECK_THROWS_WITH(load_config(d.write("scheduler:\n  icheck:\n    favor: icheck\n")),
                    Contains("unknown key 'scheduler.icheck.favor'"));
  CHECK(dflt.icheck_reclaim_backoff == Approx(2));
  CHECK(dflt.icheck_reclaim_backoff_max == Approx(60));
  c = load_config(d.write("scheduler:\n  icheck:\n    reclaim_backoff: 0.5\n    reclaim_backoff_max: 8\n"));
  CHECK(c.icheck_reclaim_backoff == Approx(0.5));
  CHECK(c.icheck_reclaim_backoff_max == Approx(8));
  CHECK_THROWS_WITH(load_config(d.write("scheduler:\n  icheck:\n    reclaim_backoff: 10\n    reclaim_backoff_max: 8\n")),
                    Contains("need 0 < scheduler.icheck.reclaim_backoff <= scheduler.icheck.reclaim_backoff_max <= 86400 seconds"));
  CHECK_THROWS_WITH(load_config(d.write("scheduler:\n  icheck:\n    reclaim_backoff: 0\n")),
                    Contains("reclaim_backoff"));
}

TEST_CASE("config: scheduler.slow_nodes (migration off slow nodes)", "[config]") {
  TempDir d;
  auto dflt = load_config(d.write("scheduler:\n  policy: easy\n"));
  CHECK(dflt.slow_nodes.enabled);
  CHECK(dflt.slow_nodes.factor == Approx(1.5));
  CHECK(dflt.slow_nodes.windows == 3);
  auto c = load_config(d.write("scheduler:\n  slow_nodes:\n    enabled: false\n    factor: 2.5\n    windows: 4\n"
                               "    window: 0.5\n    cooldown: 30\n    restart_cost: 3.5\n"));
  CHECK_FALSE(c.slow_nodes.enabled);
  CHECK(c.slow_nodes.factor == Approx(2.5));
  CHECK(c.slow_nodes.windows == 4);
  CHECK(c.slow_nodes.window == Approx(0.5));
  CHECK(c.slow_nodes.cooldown == Approx(30));
  CHECK(c.slow_nodes.restart_cost == Approx(3.5));
  for (const char* bad : {"factor: 1", "factor: 0.5", "factor: .nan", "windows: 0", "windows: 2.5", "window: 0",
                          "window: -1", "cooldown: -1", "restart_cost: -3", "enabled: perhaps", "periods: 3"}) {
    INFO(bad);
    auto path = d.write(std::string("scheduler:\n  slow_nodes:\n    ") + bad + "\n");
    try {
      load_config(path);
      FAIL("accepted");
    } catch (const ConfigError& e) {
      CHECK_THAT(std::string(e.what()), Contains("scheduler.slow_nodes." + std::string(bad).substr(0, std::string(bad).find(':'))));
    }
  }
}
