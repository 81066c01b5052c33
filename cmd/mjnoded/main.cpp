// mjnoded — the liveness signal of one node of a dynres cluster (mjnoded(8)).
#include <CLI/CLI.hpp>
#include <iostream>

#include "dynres/node_agent.hpp"
#include "dynres/paths.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Node agent of a dynres cluster: keeps a connection to mjsched and sends heartbeats.", "mjnoded"};
  std::string home, node;
  app.add_option("--home", home, "cluster directory (default: $DYNRES_HOME)");
  app.add_option("--node", node, "this agent's node name, e.g. n3")->required();
  bool outer = false;
  double period = 2.0;
  app.add_flag("--outer-slurm", outer, "also report the outer Slurm's state of this node (sinfo); inside an allocation");
  app.add_option("--outer-period", period, "seconds between two outer Slurm queries (default 2)")->check(CLI::Range(0.2, 3600.0));
  CLI11_PARSE(app, argc, argv);
  try {
    return dynres::schedd::run_node_agent(dynres::cluster_home(home), node, outer, period);
  } catch (const std::exception& e) {
    std::cerr << "mjnoded: error: " << e.what() << "\n";
    return 1;
  }
}
