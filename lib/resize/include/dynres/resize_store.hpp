// The resize protocol's records in the state file (schema module "resize"):
// per running malleable job its secret, protocol phase, last reported
// performance (MTCT) and progress; every order with its outcome. The book
// (resize.hpp) decides; this module makes each decision durable, and a
// commit changes the job's nodes, allocation and events in ONE transaction
// (node states change only when the job acknowledges, so a job that dies
// mid-resize never loses nodes it still holds).
//
// Order states: sent -> begun -> committed | rolled_back (sent may go
// straight to committed or rolled_back). An order is outstanding while it is
// sent or begun and its job is RUNNING. `restart` marks a restart-based
// resize [John24 §7.4.4]: the supervisor runs the job script again on the
// new node list when the script ends, once (`relaunched`).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dynres/resize.hpp"

namespace dynres {
class State;
}

namespace dynres::resize {

/// Per-job protocol record (absent for jobs that never ran under mjsched
/// with the protocol, e.g. started before the schema existed).
struct JobInfo {
  int64_t job = 0;
  std::string secret;        ///< the per-job secret (MJ_SECRET)
  Phase phase = Phase::rigid;  ///< rigid | accepting | closed (never adapting here)
  double mtct = -1;          ///< last MPI-time/compute-time ratio [John24 §4.1]; < 0: none
  double perf_time = -1;     ///< when it was reported (seconds, Unix time)
  double progress = -1;      ///< fraction of work done in [0,1]; < 0: none
  double last_resize = -1;   ///< time of the last committed resize; < 0: never
  int restart_count = 0;     ///< times the script was run again for a resize
};

struct OrderRecord {
  Order order;
  std::string state;   ///< sent | begun | committed | rolled_back
  bool restart = false;
  bool relaunched = false;
  int from = 0, to = 0;  ///< node counts before / after
  double begun = -1, settled = -1;
  std::string reason;  ///< why it was rolled back
  std::vector<std::string> released;  ///< shrink: nodes given back
};

/// Bring the "resize" schema up to date (idempotent; every function below
/// calls it once per State object is not assumed: call it before use).
void migrate(State& st);

/// Fresh 128-bit secret as 32 hex digits (getrandom(2)). Throws
/// std::runtime_error when the kernel has no randomness to give.
std::string new_secret();

/// Insert the job's protocol record (phase rigid). Meant to run inside the
/// transaction that starts the job (State::start_job's `also`).
void admit(State& st, int64_t job, const std::string& secret);

std::optional<JobInfo> job_info(State& st, int64_t job);
/// Records of the RUNNING jobs.
std::vector<JobInfo> running_infos(State& st);

/// Record a registration/deregistration (phase accepting/closed) with an
/// event (mj_register / mj_deregister).
void set_phase(State& st, int64_t job, Phase p, double now);
/// Record a performance report: MTCT = mpi_s / compute_s over the job's
/// reporters (the caller aggregates). Rejects nothing: the caller checked.
void set_perf(State& st, int64_t job, double mtct, double now);
void set_progress(State& st, int64_t job, double fraction);

/// Record an order just issued (state sent) with an event resize_order.
void record_order(State& st, const Order& o, int from, int to);
/// Record the adapt-begin (state begun; restart flag; new deadline).
void record_begin(State& st, const Order& o, bool restart, double now);
/// Roll an order back (state rolled_back) with an event resize_rollback
/// naming the reason and how long it was outstanding. No-op when it is no
/// longer outstanding. With unless_relaunched, a restart-based order the
/// supervisor already relaunched on its new node list (and whose node list
/// is known: an expand, or a shrink naming its nodes) is left outstanding,
/// read and decided in the same transaction as the supervisor's
/// take_relaunch(): rolling it back would leave the job's processes on nodes
/// the state file no longer gives it. Returns whether the order was rolled
/// back by this call.
bool record_rollback(State& st, uint64_t order_id, const std::string& reason, double now,
                     bool unless_relaunched = false);

/// Carry out a committed order in one transaction: the nodes added are
/// taken (they must be up and idle) or the nodes released are freed, the
/// job's node count/list change, its allocation is closed and a new one
/// opened (so mjstat --gantt shows the new height), the order becomes
/// committed, and an event expand/shrink "from=N to=M order=ID
/// duration=S" is written (lib/metrics counts resizes from it). Returns
/// false and changes nothing when the job is not RUNNING, the order is not
/// outstanding, or an added node is no longer up and idle (the caller then
/// rolls the order back).
bool commit(State& st, const Commit& c, double now);

std::optional<OrderRecord> order(State& st, uint64_t id);
/// Orders still outstanding (sent/begun) of RUNNING jobs.
std::vector<OrderRecord> outstanding(State& st);
/// All orders of a job, oldest first (mjstat -j).
std::vector<OrderRecord> orders_of(State& st, int64_t job);
/// Highest order id ever recorded (0 when none).
uint64_t max_order_id(State& st);

/// The supervisor's question when the job script ended: the job's
/// restart-based order not yet relaunched, if any (whatever its state: a
/// rolled-back one is relaunched on the old nodes).
std::optional<OrderRecord> pending_relaunch(State& st, int64_t job);
/// The supervisor relaunched for order `id` (once): relaunched = 1 and the
/// job's restart_count incremented, in one transaction.
void mark_relaunched(State& st, uint64_t id);
/// pending_relaunch() and mark_relaunched() in one transaction, so the
/// scheduler's rollback (record_rollback with unless_relaunched) sees the
/// order either still unrelaunched (rolled back: the record returned says
/// rolled_back and the script runs again on the old nodes) or relaunched
/// (never rolled back: committed on the job's behalf if need be).
std::optional<OrderRecord> take_relaunch(State& st, int64_t job);
/// Whether the supervisor relaunched `o` on the node list it names: a
/// restart-based expand, or shrink naming its nodes (a shrink by count is
/// relaunched on the old node list until the job says which nodes it left).
bool relaunched_on_new_nodes(const OrderRecord& o);

/// mjcontrol resize: ask the scheduler of cluster `home` to order job to
/// `nodes` nodes (by_count: a shrink names only the count). Returns the
/// order id; throws std::runtime_error with the scheduler's refusal, or when
/// no scheduler answers within 10 s.
uint64_t request_resize(const std::string& home, int64_t job, int nodes, bool by_count);

/// Poll the state file (every 20 ms) until order `id` is committed or rolled
/// back, at most timeout_s seconds. std::nullopt when still outstanding (or
/// unknown) at the end.
std::optional<OrderRecord> wait_settled(State& st, uint64_t id, double timeout_s);

const char* to_string(Kind k);

/// mjstat -j: the job's protocol record and its orders, as lines to append
/// to the detail view ("" when the job never ran under the protocol):
///   Malleable=accepting MTCT=0.120 Progress=45% Restarts=1
///   Resize order=3 expand 3->5 n[4-5] committed after 0.005 s
std::string render_detail(State& st, int64_t job);
/// The same as JSON: {"phase","mtct","progress","restart_count","last_resize",
/// "orders":[{"order","kind","from","to","nodes","state","sent","settled",
/// "duration","reason","restart"}]}; null when the job has no record.
nlohmann::json detail_json(State& st, int64_t job);

}  // namespace dynres::resize
