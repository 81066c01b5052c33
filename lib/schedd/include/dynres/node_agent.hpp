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
///
/// outer_slurm (a cluster inside a Slurm allocation, where node is an
/// outer node name): every outer_period seconds the agent also asks the
/// outer Slurm for its node's state (`sinfo -h -N -n NODE -o %t`, at most
/// 5 s); a state Slurm marks not responding (a trailing '*') or down, fail
/// or failing is sent as {"op":"heartbeat","outer":STATE}, and mjsched
/// takes the node as lost (its outer slurmd died, SlurmdTimeout).
int run_node_agent(const std::string& home, const std::string& node, bool outer_slurm = false,
                   double outer_period = 2.0);

/// Whether an outer Slurm node state (sinfo %t: idle, alloc*, down, ...)
/// says the node is lost: not responding ('*'), down, fail or failing
/// (drain only stops new work, as in dynres).
bool outer_state_lost(const std::string& state);

}  // namespace dynres::schedd
