// icheckd — iCheck controller / manager daemon ([John24 §6.1.1.2]-3); see icheckd(8).
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "dynres/icheck/config.hpp"
#include "dynres/icheck/daemon.hpp"
#include "dynres/icheck/wire.hpp"

static std::atomic<bool> g_stop{false};

int main(int argc, char** argv) {
  CLI::App cli{"icheckd: iCheck controller (one per cluster) or manager (one per checkpoint node)"};
  std::string role, config, node, listen, agent_bin;
  bool standby = false, status = false;
  double mem_limit = 0;
  cli.add_option("--role", role, "controller|manager")->check(CLI::IsMember({"controller", "manager"}));
  cli.add_option("--config,-c", config, "static configuration (default $ICHECK_CONFIG or $DYNRES_HOME/icheck.yaml)");
  cli.add_flag("--standby", standby, "controller: take over when the primary stops renewing its lease");
  cli.add_option("--node", node, "manager: node label");
  cli.add_option("--listen", listen, "address to serve (overrides the configuration)");
  cli.add_option("--agent-bin", agent_bin, "manager: icagent executable");
  cli.add_option("--mem-limit-gb", mem_limit, "manager: memory this node offers for checkpoints (GB)");
  cli.add_flag("--status", status, "print the controller's status as JSON and exit");
  CLI11_PARSE(cli, argc, argv);
  std::signal(SIGTERM, [](int) { g_stop = true; });
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGPIPE, SIG_IGN);
  try {
    config = dynres::icheck::resolve_config_path(config.c_str());
    if (status) {
      auto cfg = dynres::icheck::load_static(config);
      for (auto& a : cfg.controllers) {
        try {
          auto s = dynres::icheck::connect_to(a, 1000);
          std::cout << dynres::icheck::request(s, {{"op", "status"}}, 5000).dump(2) << "\n";
          return 0;
        } catch (...) {
        }
      }
      std::cerr << "icheckd: no controller reachable\n";
      return 1;
    }
    if (role == "controller") return dynres::icheck::run_controller({config, standby, listen}, &g_stop);
    if (role == "manager") return dynres::icheck::run_manager({config, node, listen, agent_bin, mem_limit}, &g_stop);
    std::cerr << "icheckd: --role controller|manager required\n";
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "icheckd: %s\n", e.what());
    return 1;
  }
}
