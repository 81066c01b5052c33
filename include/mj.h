/* mj.h — the application side of malleability (libmj, C API).
 *
 * A job started by mjsched(8) can grow and shrink while it runs. Its
 * processes talk to the scheduler over the cluster's socket (MJ_SOCKET),
 * authenticated by their uid (SO_PEERCRED) and the per-job secret the
 * supervisor put in their environment (MJ_JOB_ID, MJ_SECRET): a process can
 * speak neither for another job nor for another user.
 *
 * Modelled on the four iMPI calls of [John24 §2.2.2.1] (MPI_Init_adapt,
 * MPI_Probe_adapt, MPI_Comm_adapt_begin, MPI_Comm_adapt_commit) and on
 * Finnerty et al.'s registration of a malleable handler:
 *
 *   mj_status st;  mj_init_adapt(&st);      NEW, JOINING or RESUMED
 *   mj_register();                          from now on orders may arrive
 *   loop:
 *     mj_probe_adapt(&pending, &role, &order);
 *     if (pending) {
 *       mj_adapt_begin(&order, 0);           start the adaptation window
 *       ... start processes on order.nodes (expand) / drain them (shrink) ...
 *       mj_adapt_commit(&order, NULL, 0);   the scheduler records the change
 *     }
 *   mj_deregister();                        shutdown phase: no more orders
 *   mj_finalize();
 *
 * A job is rigid until it registers and rigid again once it deregisters; it
 * cannot register again after deregistering [Finnerty24]. Node states change in
 * the state file only when the commit is accepted. An order that is not
 * committed within the scheduler's timeout (mjsched(8), resize.timeout) is
 * rolled back: the job keeps its old nodes, mj_probe_adapt reports the
 * rollback and mj_adapt_commit returns MJ_ERR_ROLLED_BACK; the application
 * then stops whatever it started on the added nodes.
 *
 * Restart-based resizing (MPI jobs, [John24 §7.4.4]): mj_adapt_begin with
 * MJ_ADAPT_RESTART tells the supervisor that the job will checkpoint and exit;
 * when the job script ends, the supervisor runs it again on the new node list
 * (MJ_JOB_NODELIST, MJ_JOB_NUM_NODES, MJ_NODEFILE updated, MJ_RESTART_COUNT
 * incremented). There mj_init_adapt reports MJ_RESUMED with the old and new
 * node counts; after restoring (icheck_restore redistributes the data) the
 * application calls mj_adapt_commit on st.order.
 *
 * Every call returns MJ_OK (0) or a negative MJ_ERR_* code; none aborts or
 * exits the process; mj_strerror() names a code and mj_last_error() gives the
 * scheduler's sentence for the last refusal. libmj is meant for one thread of
 * a process (calls from several threads must be serialized by the caller).
 * mj(3) documents every call.
 */
#ifndef MJ_H
#define MJ_H

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- error codes ---------------------------------------------------------- */
#define MJ_OK 0
#define MJ_ERR_ENV (-1)         /* not inside a dynres job: MJ_JOB_ID/MJ_SECRET/MJ_SOCKET missing or malformed */
#define MJ_ERR_CONNECT (-2)     /* the scheduler cannot be reached (connection refused or lost) */
#define MJ_ERR_AUTH (-3)        /* the scheduler refused this process's identity (uid or secret) */
#define MJ_ERR_REFUSED (-4)     /* the scheduler refused the request; mj_last_error() says why */
#define MJ_ERR_STATE (-5)       /* call out of order (e.g. commit with no order, register after deregister) */
#define MJ_ERR_ROLLED_BACK (-6) /* the order was rolled back (timeout, scheduler restart): undo it */
#define MJ_ERR_PROTO (-7)       /* malformed or oversized message from the scheduler */
#define MJ_ERR_ARG (-8)         /* bad argument (NULL pointer, value out of range) */
#define MJ_ERR_NOMEM (-9)       /* out of memory */
#define MJ_ERR_LAUNCH (-10)     /* mj_launch could not start the process */

/* ---- status at start (mj_init_adapt) --------------------------------------- */
typedef enum {
  MJ_NEW = 0,     /* first start of the job */
  MJ_JOINING = 1, /* a process started on a node added by an expand (MJ_JOINING=1 in its environment) */
  MJ_RESUMED = 2  /* the job script was run again after a restart-based resize */
} mj_start_kind;

typedef struct {
  mj_start_kind kind;
  int64_t job;          /* job id */
  int num_nodes;        /* nodes the job holds now */
  int old_num_nodes;    /* RESUMED: nodes before the resize; otherwise == num_nodes */
  int64_t order;        /* RESUMED: the order to commit once restored; otherwise 0 */
  int restart_count;    /* times the script was run again for a resize */
  const char* nodelist; /* the job's nodes now, compressed ("n[1-4]"); owned by libmj */
  const char* node;     /* the node this process runs on (MJ_NODE), or "" when unknown */
} mj_status;

/* Connect to the scheduler and say how this process started. Must come
 * before every other call except mj_strerror/mj_last_error/mj_report_*
 * (which connect on their own). Errors: MJ_ERR_ENV, MJ_ERR_CONNECT,
 * MJ_ERR_AUTH, MJ_ERR_ARG (st NULL). Calling it again returns the same
 * status. */
int mj_init_adapt(mj_status* st);

/* ---- registration [Finnerty24] ------------------------------------------------ */
/* The job becomes malleable: orders may arrive. MJ_ERR_STATE after
 * mj_deregister (no re-registration). Registering twice is accepted. */
int mj_register(void);
/* The job becomes rigid for good (its shutdown phase). An outstanding
 * order is rolled back first. */
int mj_deregister(void);

/* ---- orders ---------------------------------------------------------------- */
typedef enum { MJ_ORDER_NONE = 0, MJ_ORDER_EXPAND = 1, MJ_ORDER_SHRINK = 2 } mj_order_kind;
typedef enum { MJ_ROLE_STAY = 0, MJ_ROLE_LEAVE = 1, MJ_ROLE_JOIN = 2 } mj_role;

#define MJ_MAX_ORDER_NODES 4096 /* an order never names more nodes */

typedef struct {
  int64_t id;            /* order id, > 0 */
  mj_order_kind kind;
  int count;             /* nodes added (expand) or to give back (shrink) */
  int named;             /* 1: nodes[] names them; 0: shrink by count, the job chooses which (preShrink) */
  int num_nodes_before;  /* the job's node count before the order */
  int num_nodes_after;   /* and after it is committed */
  double deadline;       /* seconds (scheduler clock, Unix time) by which it must be committed */
  int num_nodes;         /* entries in nodes[] (== count when named, 0 otherwise) */
  const char* const* nodes; /* node names; owned by libmj, valid until the next order arrives
                               (so also right after its commit) or mj_finalize */
} mj_order;

/* Is an order pending? Never blocks. *pending = 1 and *order filled when one
 * is outstanding and not yet begun by this process; *role says what this
 * process does (from MJ_NODE: a process on a node being released LEAVES;
 * everything else STAYS). *pending = -1 when the scheduler rolled back the
 * order this process had begun (timeout): undo it, then probe on. role and
 * order may be NULL. Errors: MJ_ERR_STATE before mj_init_adapt,
 * MJ_ERR_CONNECT while the scheduler cannot be reached (orders cannot
 * arrive; the job continues at its size). Later calls reconnect (at most
 * one attempt a second) and register again if this process had registered;
 * an order begun before the scheduler restarted was rolled back by it. */
int mj_probe_adapt(int* pending, mj_role* role, mj_order* order);

/* Block until an order is pending or timeout_s (seconds, < 0: forever)
 * passes; then as mj_probe_adapt. MJ_ERR_ARG for NaN or >= 1e7 s. */
int mj_wait_adapt(double timeout_s, int* pending, mj_role* role, mj_order* order);

#define MJ_ADAPT_RESTART 1 /* the job will checkpoint, exit and be run again on the new node list */

/* Open the adaptation window of order->id (logged with its time). With
 * MJ_ADAPT_RESTART the supervisor runs the job script again on the new node
 * list once it ends (see above). MJ_ERR_ROLLED_BACK when the order was
 * rolled back meanwhile. */
int mj_adapt_begin(const mj_order* order, int flags);

/* The change is done: the scheduler records the new node set (one
 * transaction) and answers. For a shrink by count, released names exactly
 * order->count of the job's nodes; otherwise pass NULL, 0. order_id is
 * order->id, or mj_status.order after a restart. MJ_ERR_ROLLED_BACK: the
 * order timed out or the scheduler restarted before the commit: the job
 * keeps its old nodes and must undo the change. If the connection drops
 * during the commit, libmj reconnects and asks the state file whether the
 * commit landed (it answers only what is durable). */
int mj_adapt_commit(int64_t order_id, const char* const* released, int nreleased);

/* ---- reports ----------------------------------------------------------------- */
/* Seconds spent in MPI and computing by this process since its previous
 * report (both >= 0, finite, sum > 0). The scheduler keeps the MTCT ratio of
 * [John24 §4.1] (time in MPI / time computing) over the job's processes and
 * the performance-aware policy uses it. libmjprof reports it on its own.
 * The report names the node this process runs on (MJ_NODE) and, on Linux,
 * carries the calling thread's CPU seconds and run-queue wait since its
 * previous report (/proc/thread-self/schedstat): per node, the scheduler
 * compares the ranks' compute shares and the share of the CPU they got to
 * find slow nodes (mjsched(8) SLOW NODES, [HoG14 §5.5.1]). */
int mj_report_perf(double mpi_s, double compute_s);
/* Fraction of the job's work done, in [0, 1]; shown by mjstat -j. */
int mj_report_progress(double fraction);

/* ---- launching on the job's nodes ---------------------------------------------- */
/* Start argv (argv[0] searched in PATH) on node `node` of this job through
 * the cluster's launcher (local: a child process; srun: srun --overlap -N1
 * -n1 -w HOST inside the outer allocation), with MJ_NODE=node and
 * MJ_JOINING=1 in its environment and the job's MJ_* variables. *pid gets the
 * local child (the process itself, or its srun); the caller waits for it.
 * Errors: MJ_ERR_ENV, MJ_ERR_ARG, MJ_ERR_LAUNCH. */
int mj_launch(const char* node, char* const argv[], pid_t* pid);

/* ---- the rest ---------------------------------------------------------------- */
/* Close the connection (an outstanding order is left to its timeout). */
int mj_finalize(void);
/* A constant sentence for an MJ_* code. */
const char* mj_strerror(int err);
/* The scheduler's message for the last MJ_ERR_REFUSED/AUTH/STATE, or "". */
const char* mj_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* MJ_H */
