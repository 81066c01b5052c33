// mjnoded's loop: the liveness signal of one node of a dynres cluster (the
// role of Slurm's slurmd towards slurmctld's pings). See mjnoded(8).
#pragma once
#include <string>

namespace dynres::schedd {

/// Connect to home's scheduler socket, say {"op":"node_hello","node":node},
/// then send {"op":"heartbeat"} every heartbeat period the scheduler names
/// (seconds) on that connection until SIGTERM/SIGINT. A scheduler that goes
/// away (restart) is reconnected every 0.5 s; the agent exits 0 when the
/// cluster's state file is gone (vcluster-down), 1 when the scheduler
/// refuses it (unknown node, not the cluster's owner), with the message on
/// stderr.
int run_node_agent(const std::string& home, const std::string& node);

}  // namespace dynres::schedd
