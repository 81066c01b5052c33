// The scheduler's side of the resize protocol between mjsched and running
// malleable jobs, as a pure state machine (no I/O, no clock): who may speak
// for a job, which orders are outstanding, when an order times out and is
// rolled back, and the back-off after a rollback.
//
// Source: [Finnerty24 §"Batch Job Scheduler Interactions"] (a job registers its
// malleable handler, may deregister in its shutdown phase and never
// re-register; shrink orders name a count and the job chooses the nodes, or
// name the nodes); [John24 Alg. 3] (IS_ADAPTING: no new decision while an
// order is outstanding); §2.2.2.1 (adapt-begin / adapt-commit).
//
// The daemon feeds it authenticated peers (uid from SO_PEERCRED plus the
// per-job secret the job received in its environment) and the current time;
// it carries out what the book decides (node states change only on commit).
// Times are seconds on the caller's clock.
#pragma once
#include <cstdint>
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dynres::resize {

enum class Kind { expand, shrink };

/// An order sent to a job. For expand, `nodes` are the nodes added; for
/// shrink, either `nodes` (chosen by the scheduler) or `count` > 0 (the job
/// chooses which to release, Finnerty et al.'s preShrink).
struct Order {
  uint64_t id = 0;
  int64_t job = 0;
  Kind kind = Kind::expand;
  std::vector<std::string> nodes;
  int count = 0;
  double sent = 0;      ///< when it was issued
  double deadline = 0;  ///< rolled back if not committed by then
};

/// Where a job stands in the protocol.
enum class Phase {
  rigid,      ///< admitted, never registered: treated as rigid
  accepting,  ///< registered: may receive orders
  adapting,   ///< an order is outstanding
  closed,     ///< deregistered (or gone): never receives orders again
};
const char* to_string(Phase p);

/// Who is speaking: the connection's uid (SO_PEERCRED / MUNGE) and the job id
/// and secret it claims.
struct Peer {
  uint32_t uid = 0;
  int64_t job = 0;
  std::string secret;
};

/// Outcome of a request from a job; `error` says why it was refused.
struct Result {
  bool ok = false;
  std::string error;  ///< "" when ok; otherwise a sentence naming the problem
  static Result yes() { return {true, ""}; }
  static Result no(std::string why) { return {false, std::move(why)}; }
};

struct Options {
  double timeout = 30;   ///< seconds an order may stay uncommitted
  double backoff = 120;  ///< seconds without new orders after a rollback
  /// seconds a restart-based resize (checkpoint, exit, relaunch, restore)
  /// may take from its adapt-begin to its commit
  double restart_timeout = 600;
};

/// What the commit of an order changes (the daemon applies it in one
/// transaction): the job's nodes after the change.
struct Commit {
  Order order;
  std::vector<std::string> released;  ///< shrink: the nodes the job gave back
  double duration = 0;                ///< seconds from sent to committed
};

class Book {
 public:
  explicit Book(Options o = {}) : opt_(o) {}

  /// The scheduler started job `job` for user `uid` on `nodes` with `secret`
  /// (given to the job in its environment). A job already known is replaced.
  void admit(int64_t job, uint32_t uid, std::string secret, std::vector<std::string> nodes);
  /// The job ended: forget it and any outstanding order.
  void forget(int64_t job);

  /// Is p the job it claims (known job, owner's uid, right secret)?
  Result authenticate(const Peer& p) const;

  /// The job's process registers as malleable. Refused for an unknown job, a
  /// uid other than the job's owner, a wrong secret, and after deregistration
  /// ([Finnerty24]: no re-registration). Registering twice is accepted.
  Result register_job(const Peer& p);
  /// The job leaves malleability (its shutdown phase). An outstanding order
  /// is rolled back first (returned in `rolled_back`).
  Result deregister(const Peer& p, double now, std::vector<Order>* rolled_back = nullptr);

  /// Issue an order (scheduler side). std::nullopt when the job is not
  /// accepting (unknown, rigid, adapting, closed), is in back-off, or the
  /// order is malformed (expand without nodes; shrink naming nodes the job
  /// does not hold, or neither nodes nor a count, or releasing every node;
  /// expand naming a node it already holds). `why` gets the reason.
  std::optional<Order> order(int64_t job, Kind kind, std::vector<std::string> nodes, int count, double now,
                             std::string* why = nullptr);

  /// The job acknowledges order `order_id` as done (adapt-commit). For a
  /// count-shrink, `released` names the nodes it gave back (exactly `count`
  /// of its nodes); otherwise it must be empty or equal the order's nodes.
  /// Refused: foreign peer, unknown or already settled order, a commit after
  /// the deadline (left for expire() to roll back and report), bad `released`.
  Result commit(const Peer& p, uint64_t order_id, std::vector<std::string> released, double now,
                Commit* out = nullptr);

  /// The job opened the adaptation window of its outstanding order
  /// (adapt-begin). With restart (a restart-based resize) the deadline moves
  /// to now + restart_timeout when that is later. Refused like commit().
  Result begin(const Peer& p, uint64_t order_id, bool restart, double now, Order* out = nullptr);

  /// Roll back job's outstanding order now (the scheduler gives up on it,
  /// e.g. the nodes it adds went down); the job gets a back-off. Returns the
  /// order, or std::nullopt when none was outstanding.
  std::optional<Order> rollback(int64_t job, double now);
  /// End job's back-off now (a node failure's restart order may not wait
  /// for the back-off of an order rolled back before). No-op for an unknown job.
  void clear_backoff(int64_t job);
  /// Record `o` as carried out without the job's commit (a restart-based
  /// order the supervisor already relaunched on its new node list; see
  /// record_rollback in resize_store.hpp): the job's nodes change as a
  /// commit would change them and any outstanding order is dropped. No-op
  /// for an unknown job.
  void adopt(int64_t job, const Order& o);

  /// Rebuilding the book from the state file after a scheduler restart:
  /// set a known job's phase (rigid, accepting or closed; orders are never
  /// restored: they were rolled back) and the next order id (one above the
  /// highest ever recorded).
  void restore(int64_t job, Phase p);
  void set_next_id(uint64_t id) { next_id_ = std::max(next_id_, id); }

  /// Roll back every order whose deadline has passed; each rolled-back job
  /// gets a back-off. Returns the rolled-back orders (their added nodes must
  /// be cleaned up by the daemon).
  std::vector<Order> expire(double now);

  /// [John24 Alg. 3] IS_ADAPTING: some order is outstanding.
  bool any_adapting() const;
  /// The job may receive an order now (accepting, not adapting, not in back-off).
  bool can_order(int64_t job, double now) const;
  Phase phase(int64_t job) const;
  /// Nodes the job holds according to the book (after committed orders).
  std::vector<std::string> nodes(int64_t job) const;
  std::optional<Order> outstanding(int64_t job) const;

 private:
  struct Job {
    uint32_t uid = 0;
    std::string secret;
    std::vector<std::string> nodes;  ///< sorted
    Phase phase = Phase::rigid;
    std::optional<Order> pending;
    double backoff_until = -1;
  };
  Result check(const Peer& p, Job** j);
  Options opt_;
  std::map<int64_t, Job> jobs_;
  uint64_t next_id_ = 1;
};

}  // namespace dynres::resize
