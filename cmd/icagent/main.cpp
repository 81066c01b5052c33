// icagent — iCheck checkpoint agent [John24 §6.1.1.1]; see icagent(8).
// Normally started by `icheckd --role manager`; can be run by hand to serve
// one application directly (static config `agents:`).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "dynres/icheck/agent.hpp"

static std::atomic<bool> g_stop{false};

int main(int argc, char** argv) {
  CLI::App cli{"icagent: iCheck checkpoint agent (RMA transfers, in-memory versions, second level)"};
  dynres::icheck::AgentOptions o;
  o.uid = uint32_t(::geteuid());
  cli.add_option("--listen", o.listen, "control address: unix:/path or host:port (port 0 = any)")->required();
  cli.add_option("--app", o.app, "application name served")->required();
  cli.add_option("--uid", o.uid, "uid owning the application (default: own uid)");
  cli.add_option("--id", o.id, "agent id");
  cli.add_option("--pfs-dir", o.pfs_dir, "second-level directory (empty: none)");
  cli.add_option("--provider", o.provider, "libfabric provider: auto|shm|tcp;ofi_rxm|tcp");
  cli.add_option("--fabric-node", o.fabric_node, "source address for tcp (e.g. 127.0.0.1)");
  cli.add_option("--pfs-every", o.pfs_every, "write every k-th version to the second level");
  cli.add_option("--compress-threshold-mb", o.compress_threshold_mb, "zstd-compress regions larger than this (MiB)");
  cli.add_option("--keep", o.keep_versions, "second-level versions kept");
  cli.add_flag("--no-multi-level{false}", o.multi_level, "do not write the second level");
  cli.add_flag("--exit-with-parent", o.exit_with_parent, "stop when the starting process (manager) exits");
  cli.add_flag("--no-recycle{false}", o.recycle,
               "free superseded versions at once instead of reusing their buffers (less memory, slower commits)");
  cli.add_option("--max-bytes", o.max_bytes,
                 "largest checkpoint piece (bytes) one commit may place on this agent; 0 = node memory only");
  cli.add_option("--node-budget-file", o.node_budget_file,
                 "file holding the node's checkpoint memory left (bytes), written by the manager");
  cli.add_option("--ready-file", o.ready_file, "write the bound address here when ready");
  CLI11_PARSE(cli, argc, argv);
  std::signal(SIGTERM, [](int) { g_stop = true; });
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return dynres::icheck::run_agent(o, &g_stop);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "icagent: %s\n", e.what());
    return 1;
  }
}
