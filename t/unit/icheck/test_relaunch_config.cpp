// Manager relaunch settings of the static configuration ([John24 §6.5.2],
// icheck.yaml(5) MANAGER RELAUNCH): parsing, defaults, errors, and the
// command template, whose substituted words must reach the command intact
// through /bin/sh.
#include <catch2/catch.hpp>
#include <stdio.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "dynres/icheck/config.hpp"
#include "testutil.hpp"

using namespace dynres::icheck;
using dynres::test::TempDir;

namespace {
/// Output of `cmd` run by /bin/sh.
std::string sh_output(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[256];
  size_t n;
  while ((n = ::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  REQUIRE(::pclose(p) == 0);
  return out;
}
}  // namespace

TEST_CASE("relaunch: keys, defaults and errors", "[config][relaunch]") {
  TempDir d("icheck-relaunch");
  StaticConfig none = load_static(d.write("plain.yaml", "heartbeat_interval: 1\n"));
  CHECK(none.manager_launch.empty());
  CHECK(none.manager_relaunch_attempts == 2);
  CHECK(none.manager_relaunch_reset == 60);
  CHECK(manager_launch_command(none, "n1").empty());

  StaticConfig c = load_static(d.write("r.yaml",
                                       "manager_launch: \"icheckd --role manager --node {node} --config {config}\"\n"
                                       "manager_relaunch_attempts: 5\nmanager_relaunch_reset: 7.5\n"));
  CHECK(c.manager_relaunch_attempts == 5);
  CHECK(c.manager_relaunch_reset == 7.5);
  CHECK(manager_launch_command(c, "n1") ==
        "icheckd --role manager --node 'n1' --config '" + d.file("r.yaml") + "'");

  CHECK_THROWS_WITH(load_static(d.write("neg.yaml", "manager_relaunch_attempts: -1\n")),
                    Catch::Contains("manager_relaunch_attempts must be >= 0"));
  CHECK_THROWS_WITH(load_static(d.write("hb.yaml", "heartbeat_misses: 0\n")), Catch::Contains("heartbeat_misses >= 1"));
}

TEST_CASE("relaunch: substituted words survive the shell", "[config][relaunch]") {
  TempDir d("icheck-relaunch");
  // a config path with a space, a quote and shell metacharacters
  std::filesystem::create_directories(d.path / "it's a $dir; &");
  std::string cfg = (d.path / "it's a $dir; &" / "c.yaml").string();
  StaticConfig c = load_static(d.write("it's a $dir; &/c.yaml", "manager_launch: \"printf '%s|' {node} {config} {node}\"\n"));
  REQUIRE(c.path == cfg);
  std::string node = "n'1 $(echo x)";
  CHECK(sh_output(manager_launch_command(c, node)) == node + "|" + cfg + "|" + node + "|");
}

TEST_CASE("relaunch: the sample etc/icheck.yaml parses and enables relaunch", "[config][relaunch]") {
  const char* src = std::getenv("DYNRES_SRC");
  if (!src) {
    WARN("DYNRES_SRC is not set (ctest sets it): sample file not checked");
    return;
  }
  StaticConfig c = load_static(std::string(src) + "/etc/icheck.yaml");
  CHECK(c.manager_launch == "icheckd --role manager --node {node} --config {config}");
  CHECK(c.manager_relaunch_attempts == 2);
  CHECK(c.manager_relaunch_reset == 60);
}

TEST_CASE("malleability: agent mode per application, errors named", "[config][malleability]") {
  TempDir d("icheck-malleability");
  StaticConfig none = load_static(d.write("plain.yaml", "heartbeat_interval: 1\n"));
  CHECK(none.agents_mode == "ma-ra");
  CHECK(agents_mode_of(none, "synth") == "ma-ra");
  StaticConfig c = load_static(
      d.write("m.yaml", "malleability:\n  agents: ma-ma\n  applications:\n    heat: ma-ra\n    \"job-*\": ma-ra\n"));
  CHECK(agents_mode_of(c, "synth") == "ma-ma");
  CHECK(agents_mode_of(c, "heat") == "ma-ra");
  CHECK(agents_mode_of(c, "job-42") == "ma-ra");  // shell pattern
  CHECK(agents_mode_of(c, "heat-42") == "ma-ma");
  CHECK_THROWS_WITH(load_static(d.write("bad.yaml", "malleability:\n  agents: mama\n")),
                    Catch::Contains("malleability.agents must be ma-ra or ma-ma, not 'mama'"));
  CHECK_THROWS_WITH(load_static(d.write("bad2.yaml", "malleability:\n  applications:\n    heat: rigid\n")),
                    Catch::Contains("malleability.applications.heat must be ma-ra or ma-ma"));
  CHECK_THROWS_WITH(load_static(d.write("bad3.yaml", "malleability:\n  applications: [heat]\n")),
                    Catch::Contains("malleability.applications must map"));
}
