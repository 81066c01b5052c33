// Selecting jobs the way squeue(1) and scancel(1) users do: state lists
// (PD,R or PENDING,RUNNING), job id lists, users by name or uid, signal
// names. Used by mjstat(1) and mjcancel(1).
#pragma once
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "dynres/state.hpp"

namespace dynres {

/// Parse a comma-separated state list: long names (PENDING, RUNNING,
/// COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL), squeue's compact codes
/// (PD, R, CD, F, CA, TO, NF) or "all"; case-insensitive. Returns long
/// names. Throws std::invalid_argument naming an unknown state.
std::vector<std::string> parse_state_list(const std::string& list);

/// squeue's compact state code (PD, R, CD, F, CA, TO, NF).
std::string compact_state(const std::string& state);

/// Parse a comma-separated job id list ("12,13,20"). Throws
/// std::invalid_argument naming the bad element.
std::vector<int64_t> parse_id_list(const std::string& list);

/// Job ids as squeue/scancel take them: "12" (a job; for an array, every
/// task of it), "12_3" (task 3 of array 12), "12_[1-4,7]" (those tasks),
/// comma separated. Unknown plain ids are returned as they are (callers
/// report them); an unknown single array task, or a bracket range that
/// names no task, is an error (indices of a range that are no task are
/// skipped). Throws
/// std::invalid_argument naming the bad element.
std::vector<int64_t> resolve_job_refs(State& st, const std::string& list);

/// A user name or numeric uid to a uid. Throws std::invalid_argument for an
/// unknown user.
int64_t parse_user(const std::string& user);
/// Comma-separated users to uids (see parse_user).
std::vector<int64_t> parse_user_list(const std::string& list);

/// The user name of uid, or the number when it has none.
std::string user_name(int64_t uid);

/// A signal by name (TERM, SIGTERM, KILL, USR1 ...) or number. Throws
/// std::invalid_argument for an unknown one.
int parse_signal(const std::string& sig);

/// Jobs matching every non-empty criterion.
struct JobFilter {
  std::set<int64_t> ids, uids;
  std::set<std::string> states, names;
  bool matches(const JobRecord& j) const;
};

/// The jobs of the state file that match f, in queue order (submission time,
/// id). Without a state criterion: only PENDING and RUNNING jobs, as squeue,
/// unless ids are given or all_states is set (then any state).
std::vector<JobRecord> select_jobs(State& st, const JobFilter& f, bool all_states = false);

}  // namespace dynres
