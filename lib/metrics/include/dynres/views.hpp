// Text and JSON views of jobs for mjstat(1): squeue-like queue, scontrol-like
// detail, metrics table and a one-line summary.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dynres/metrics.hpp"
#include "dynres/state.hpp"

namespace dynres {

/// Column names accepted by mjstat --format (comma separated), with headers.
/// jobid,name,user,state,st,nodes,time,timelimit,nodelist,reason,kind,
/// minnodes,maxnodes,constraint,submit,start,end,exitcode,wait
const std::vector<std::string>& queue_columns();
/// Default: jobid,name,state,nodes,time,timelimit,nodelist
const std::string& default_format();

/// squeue -l's columns.
const std::string& long_format();

/// Render jobs as an aligned table; NODELIST shows "(reason)" for pending
/// jobs like squeue. `format` is either column names (comma separated) or
/// an squeue format string with % codes: %i job id, %j name, %u user, %T
/// state, %t compact state, %M time used, %l time limit, %D nodes, %R
/// nodelist or (reason), %N nodelist, %r reason, %V submit, %S start, %e
/// end, %% a percent sign; an optional width (%10j; "-" for left alignment
/// is the default, "." as in %.10j right-aligns) pads or truncates like
/// squeue. Without a header line when header is false (squeue -h). Throws
/// std::invalid_argument naming an unknown column or code.
std::string render_table(const std::vector<JobRecord>& jobs, const std::string& format, double now,
                         bool header = true);

/// key=value detail of one job, like `scontrol show job`.
std::string render_detail(const JobRecord& j, double now);

/// sinfo's node state of n: idle, allocated, draining (drained, a job still
/// on it), drained, down.
std::string node_state_name(const NodeRecord& n);
/// The state mjstat -N shows for a node iCheck holds [John24 §7.3]: lending
/// (NEW_NODES sent, its manager not yet registered), icheck (the checkpoint
/// service's), returning (REMOVE_NODES sent, not yet answered); down when
/// the controller marked its manager down.
std::string icheck_state_name(const IcheckNodeInfo& i);
/// Nodes like `sinfo -N -l`: NODELIST STATE CPUS JOBID TIMESTAMP USER REASON
/// (TIMESTAMP and USER: when and by whom a node was set down or drained).
/// Nodes in `ic` (icheck_nodes_view) show their iCheck state, the time it
/// was entered and the reason "checkpoint node (iCheck), N agents"; iCheck's
/// boot nodes, outside the batch pool, follow the batch nodes (CPUS -).
std::string render_nodes(const std::vector<NodeRecord>& nodes, bool header = true,
                         const std::map<std::string, IcheckNodeInfo>& ic = {});
/// {"nodes":[{"name","state","base_state","partition" (batch|icheck),"cpus",
/// "job_id","reason","reason_time" (seconds since the epoch),"reason_uid",
/// "host", and for nodes iCheck holds "icheck":{"lent" (granting|held|
/// reclaiming|null for a boot node),"since","change","manager","agents"}}...]}.
nlohmann::json nodes_to_json(const std::vector<NodeRecord>& nodes,
                             const std::map<std::string, IcheckNodeInfo>& ic = {});

/// iCheck's events for mjstat --history: a header line, then one line per
/// event: TIME (local, YYYY-MM-DDTHH:MM:SS), EVENT (request, grant, node_up,
/// grant_failed, reclaim, node_returned, reclaim_refused) and DETAIL (the
/// nodes, or the urgency and node count of a request).
std::string render_icheck_events(const std::vector<IcheckEvent>& ev);

/// Metrics as an aligned two-column table with units.
std::string render_metrics(const Metrics& m, int nodes);

/// "230 jobs: 120 done, 12 running, 98 pending" (counts by state).
std::string render_summary(const std::vector<JobRecord>& jobs);

}  // namespace dynres
