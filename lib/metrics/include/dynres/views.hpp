// Text and JSON views of jobs for mjstat(1): squeue-like queue, scontrol-like
// detail, metrics table and a one-line summary.
#pragma once
#include <string>
#include <vector>

#include "dynres/metrics.hpp"
#include "dynres/state.hpp"

namespace dynres {

/// Column names accepted by mjstat --format (comma separated), with headers.
/// jobid,name,state,nodes,time,timelimit,nodelist,reason,kind,minnodes,
/// maxnodes,constraint,submit,start,end,exitcode,wait
const std::vector<std::string>& queue_columns();
/// Default: jobid,name,state,nodes,time,timelimit,nodelist
const std::string& default_format();

/// Render jobs as an aligned table; NODELIST shows "(reason)" for pending
/// jobs like squeue. Throws std::invalid_argument naming an unknown column.
std::string render_table(const std::vector<JobRecord>& jobs, const std::string& format, double now);

/// key=value detail of one job, like `scontrol show job`.
std::string render_detail(const JobRecord& j, double now);

/// Metrics as an aligned two-column table with units.
std::string render_metrics(const Metrics& m, int nodes);

/// "230 jobs: 120 done, 12 running, 98 pending" (counts by state).
std::string render_summary(const std::vector<JobRecord>& jobs);

}  // namespace dynres
