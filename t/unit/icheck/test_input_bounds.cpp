// Input a peer or a configuration file controls, checked with a clear
// message: a peer's fabric address (the agent once answered "stoi" to a
// malformed one) and the counts of the dynamic configuration (NaN, negative
// and absurd values were taken as given).
#include <catch2/catch.hpp>
#include <fstream>
#include <vector>

#include "../testutil.hpp"
#include "dynres/icheck/config.hpp"
#include "dynres/icheck/fabric.hpp"

using namespace dynres::icheck;
using Catch::Matchers::Contains;

TEST_CASE("a malformed peer address is refused with a message, never 'stoi'", "[icheck][fabric]") {
  FabricOptions o;
  o.provider = "tcp;ofi_rxm";
  o.node = "127.0.0.1";
  Fabric f(o);
  for (const std::string& bad : std::vector<std::string>{"zz", "+1", " f", "0x", "abc", "", std::string(2000, 'a')}) {
    INFO("address '" << bad.substr(0, 20) << "'");
    CHECK_THROWS_WITH(f.add_peer(bad), Contains("add_peer: malformed address"));
  }
  // the fabric's own address is still accepted
  CHECK_NOTHROW(f.add_peer(f.address_hex()));
}

TEST_CASE("the dynamic configuration's counts are range-checked, naming the file and key", "[icheck][config]") {
  dynres::test::TempDir d("icdyn");
  auto load = [&](const std::string& text) { return load_dynamic(d.write("dyn.yaml", text)); };
  CHECK(load("read_interval: 5\n").max_agents_user == 32);  // default
  CHECK(load("max_agents_user: 3\n").max_agents_user == 3);
  CHECK(load("init_agent_count: 4\n").init_agent_count == 4);
  CHECK(load("init_agent_count: num_nodes\n").init_agent_count == 0);
  const std::pair<const char*, const char*> bad[] = {
      {"max_agents_node: -1\n", "max_agents_node must be in [1, 100000]"},
      {"max_agents_app: 0\n", "max_agents_app must be in [1, 100000]"},
      {"max_agents_user: 1000000000\n", "max_agents_user must be in [1, 100000]"},
      {"factor: .nan\n", "factor must be in [1, 1000]"},
      {"read_interval: -3\n", "read_interval must be in"},
      {"chunk_mb: .inf\n", "chunk_mb must be in"},
      {"init_agent_count: x\n", "init_agent_count must be num_nodes or an integer"},
      {"init_agent_count: 99999999999\n", "init_agent_count must be num_nodes or an integer"},
  };
  for (auto [text, why] : bad) {
    INFO(text);
    CHECK_THROWS_WITH(load(text), Contains(d.file("dyn.yaml")) && Contains(why));
  }
}
