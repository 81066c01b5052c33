/* icheck.h — application API of iCheck, the adaptive checkpoint/restart
 * service of dynres [John24 §6.1.3, §7.4.1].
 *
 * Typical use [John24 Listing 6.1]:
 *
 *   int status;
 *   icheck_init(cfg, "heat", ICHECK_COMM(MPI_COMM_WORLD), &status);
 *   icheck_add("grid", grid, n, ICHECK_DOUBLE);
 *   if (status == ICHECK_STATUS_RESTART) icheck_restart_all();
 *   for (...) { step(); if (i % k == 0) icheck_commit(); }
 *   icheck_finalize(0);
 *
 * All functions return ICHECK_OK (0) or a negative icheck_error; none of them
 * aborts the program. Sizes are element counts (not bytes) unless noted.
 * Thread safety: call from one thread per process.
 */
#ifndef ICHECK_H
#define ICHECK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Element types of a checkpointed array (sizes 4, 8, 4, 1, 1 bytes). */
typedef enum icheck_type {
  ICHECK_FLOAT = 1,
  ICHECK_DOUBLE = 2,
  ICHECK_INT = 3,
  ICHECK_CHAR = 4,
  ICHECK_BINARY = 5
} icheck_type;

/** Error codes (negative). */
typedef enum icheck_error {
  ICHECK_OK = 0,
  ICHECK_EINVAL = -1,      /**< NULL pointer, zero count, bad type or flag   */
  ICHECK_ELABEL = -2,      /**< label empty, too long, or not a safe file-name component */
  ICHECK_EEXIST = -3,      /**< label already added                          */
  ICHECK_ENOENT = -4,      /**< unknown label / no checkpoint to restart     */
  ICHECK_EMISMATCH = -5,   /**< restore with a different count or type       */
  ICHECK_ESTATE = -6,      /**< call out of order (e.g. commit before init)  */
  ICHECK_ECONTROLLER = -7, /**< controller unreachable (library falls back)  */
  ICHECK_EAGENT = -8,      /**< agent failure during a transfer              */
  ICHECK_EIO = -9,         /**< second-level file I/O failed                 */
  ICHECK_ECORRUPT = -10,   /**< checksum mismatch: data refused              */
  ICHECK_ENOMEM = -11,
  ICHECK_EPERM = -12,      /**< checkpoint belongs to another user/app       */
  ICHECK_EFABRIC = -13,    /**< libfabric error                              */
  ICHECK_ELAYOUT = -14     /**< data distribution invalid: PREDEFINED counts do not sum to the
                                global count or overlap, no mapping for this process count,
                                global count * element size overflows, bad width */
} icheck_error;

/** Values stored in *status by icheck_init. */
enum {
  ICHECK_STATUS_NEW = 0,     /**< no checkpoint of this application exists   */
  ICHECK_STATUS_RESTART = 1  /**< a committed checkpoint exists: restart     */
};

/** Flags of icheck_finalize. */
enum {
  IC_PERSIST = 1 /**< keep the checkpoint in agent memory after the application ends */
};

/** Hints passed to icheck_probe_agents ([John24 §6.1.3.2, Alg. 5]/7). */
typedef struct icheck_hints {
  double last_commit_seconds; /**< time of the most recent commit; <0: let the library measure */
  int num_nodes;              /**< current node count (changes for malleable jobs); 0 = unchanged */
  int num_procs;              /**< current process count; 0 = unchanged */
} icheck_hints;

/** Pass the address of an MPI communicator to icheck_init, or NULL for a
 *  non-MPI program: icheck_init(cfg, "app", ICHECK_COMM(MPI_COMM_WORLD), &st). */
#define ICHECK_COMM(c) ((const void*)&(c))

/** Register with the controller and connect to the agents it assigns.
 *  config: path of the static configuration file (icheck.yaml(5)); NULL uses
 *          $ICHECK_CONFIG, then $DYNRES_HOME/icheck.yaml.
 *  app_name: identity of the application together with the caller's uid.
 *  comm: address of an MPI_Comm (collective over it), or NULL.
 *  status: out, ICHECK_STATUS_NEW or ICHECK_STATUS_RESTART.
 *  If the controller cannot be reached after bounded retries (and the standby
 *  controller), the library writes checkpoints directly to the second level
 *  and returns ICHECK_OK; icheck_mode() tells which mode is in use. */
int icheck_init(const char* config, const char* app_name, const void* comm, int* status);

/** Mark `count` elements of `type` at `ptr` for checkpointing under `label`.
 *  The memory must stay valid until icheck_finalize. */
int icheck_add(const char* label, void* ptr, size_t count, icheck_type type);

/** Take a checkpoint of every added region and make it the current version
 *  once every agent holds it complete (the previous version stays until
 *  then). Asynchronous mode returns after the data is safe to be captured
 *  by the agents; see icheck_enable_asynchronous. */
int icheck_commit(void);

/** Fetch the most recent committed version from the agents (or the second
 *  level) into the library. Call once, after icheck_init reported RESTART. */
int icheck_restart(void);

/** Copy the restarted data of `label` into ptr (count elements; must equal
 *  the committed count and the added type; for a label of
 *  icheck_add_adapt_global: this rank's local count in the new layout, see
 *  icheck_adapt_local_count). ICHECK_ENOENT: unknown label. */
int icheck_restore(const char* label, void* ptr, size_t count);

/** icheck_restart + icheck_restore of every added label into its region. */
int icheck_restart_all(void);

/** Ask the controller whether the agent set changed (Alg. 5, 7); reconnects
 *  to the new agents if so. hints may be NULL. */
int icheck_probe_agents(const icheck_hints* hints);

/** Turn asynchronous (non-blocking) commits on (flag != 0) or off. The
 *  application must not modify added regions until icheck_wait returns. */
int icheck_enable_asynchronous(int flag);

/** Wait until an asynchronous commit in flight has completed. */
int icheck_wait(void);

/** Tell the controller the application finished; flags: 0 or IC_PERSIST. */
int icheck_finalize(int flags);

/** Version number of the newest committed checkpoint (0 when none). */
int64_t icheck_version(void);

/** "rdma" when agents are used, "direct" in file fallback mode, "none" before init. */
const char* icheck_mode(void);

/** Why the last call of this process that failed did so, in words (e.g. the
 *  controller's reason for refusing a registration); "" when none has. Every
 *  rank of a job learns a refused icheck_init's reason, so any rank can print
 *  it. Valid until the next icheck_* call. */
const char* icheck_last_error(void);

/* ---- Data redistribution ([John24 §7.4.1]; malleability by restart, §7.4.4)
 *
 * A checkpoint committed by N processes can be restored by M processes.
 * Declare every object with its role before the first icheck_commit (and,
 * after a restart, before icheck_restart/icheck_restart_all):
 *
 *   icheck_add_adapt("iter", &it, 1, ICHECK_INT, ICHECK_CONSTANT);
 *   icheck_add_adapt("nprocs", &np, 1, ICHECK_INT, ICHECK_SIZE);
 *   icheck_add_adapt_global("grid", rows, ICHECK_DOUBLE, ny * nx, ICHECK_BLOCK, (size_t)nx);
 *   if (status == ICHECK_STATUS_RESTART) icheck_restart_all();
 *
 * Each rank's checkpoint part records the committing process count, its
 * rank and the distribution of every object (a "__icheck_adapt" region;
 * labels starting with "__icheck" are reserved). With M == N every rank
 * restores its own part (from the agents or the second level). With
 * M != N the restore reads the second level (agents holding the version
 * are asked to flush it first) and every rank reads exactly the pieces of
 * the old parts that overlap its new part. Collective calls: icheck_restart,
 * icheck_restart_all, and icheck_restore of a CONSTANT or MANUAL label.
 * Variadic arguments must have exactly the types named below (cast integer
 * literals: (size_t)1). */

/** Attributes of icheck_add_adapt ([John24 §7.4.1.1], replicated data). */
typedef enum icheck_attr {
  ICHECK_CONSTANT = 1,       /**< same value on every rank: rank 0's copy is stored, restored everywhere */
  ICHECK_SIZE = 2,           /**< set to the restoring communicator size (int/float/double) */
  ICHECK_RANK = 3,           /**< set to the restoring rank (int/float/double) */
  ICHECK_DEFAULT = 4,        /**< ... const void* value: set to value (count elements) on restore */
  ICHECK_VOLATILE = 5,       /**< ... icheck_recalc_fn fn, void* arg: fn recomputes it on restore,
                                  after every other object of the restore is in place */
  ICHECK_DEFAULT_JOINING = 6 /**< ... const void* value: ranks that existed (rank < N) get their
                                  stored value, joining ranks (rank >= N) get value */
} icheck_attr;

/** Distributions of icheck_add_adapt_global [John24 §7.4.1.2]. */
typedef enum icheck_dist {
  ICHECK_BLOCK = 1,      /**< ... size_t width: contiguous blocks of whole units of width elements
                              (0 = 1); U = global/width units, rank r of P gets U/P units, the
                              first U%P ranks one more (heat's block rows: width = NX) */
  ICHECK_CYCLIC = 2,     /**< ... size_t width: blocks of width (>= 1) elements dealt round robin */
  ICHECK_PREDEFINED = 3, /**< ... const icheck_pmap* pmap: the layout of pmap for the current
                              process count (icheck_add_processor_mapping/_layout) */
  ICHECK_MANUAL = 4      /**< ... size_t local_count, icheck_manual_fn fn, void* arg, int src:
                              unstructured; on a restore with M != N the global array (old
                              parts concatenated in rank order) is handed to fn on rank src
                              (ICHECK_ALL: every rank), fn is called on every rank and places
                              the data itself. With M == N each rank gets its own part back. */
} icheck_dist;

/** src of ICHECK_MANUAL: every rank receives the global array. */
#define ICHECK_ALL (-1)

/** What a callback is told about the restore. */
typedef struct icheck_adapt_info {
  int old_size;    /**< N: processes that committed the checkpoint */
  int new_size;    /**< M: processes restoring it */
  int rank;        /**< this process's rank (0..M-1) */
  int64_t version; /**< the checkpoint version restored */
} icheck_adapt_info;

/** ICHECK_VOLATILE: recompute the object at ptr (count elements). Return 0,
 *  or a non-zero value that icheck_restore reports as ICHECK_EINVAL. */
typedef int (*icheck_recalc_fn)(const char* label, void* ptr, size_t count, const icheck_adapt_info* info,
                                void* arg);

/** ICHECK_MANUAL: global is the whole array (global_count elements) on the
 *  receiving rank(s), NULL elsewhere; old_counts[i] is old rank i's count
 *  (N entries, all ranks). ptr/local_count: as given to icheck_add_adapt_global.
 *  Return 0, or non-zero (reported as ICHECK_EINVAL). */
typedef int (*icheck_manual_fn)(const char* label, const void* global, size_t global_count,
                                const size_t* old_counts, void* ptr, size_t local_count,
                                const icheck_adapt_info* info, void* arg);

/** Add a replicated/local object with a redistribution attribute (icheck_attr;
 *  variadic arguments as listed there). ICHECK_SIZE/RANK need ICHECK_INT,
 *  ICHECK_FLOAT or ICHECK_DOUBLE. Errors: EINVAL, ELABEL, EEXIST, ESTATE
 *  (after the first commit). */
int icheck_add_adapt(const char* label, void* ptr, size_t count, icheck_type type, int attribute, ...);

/** Partitioning array of ICHECK_PREDEFINED: one layout per process count. */
typedef struct icheck_pmap icheck_pmap;
int icheck_pmap_create(icheck_pmap** pmap);
void icheck_pmap_free(icheck_pmap* pmap);

/** The icheck_add_processor_mapping of [John24](num_procs, dim, ..., pmap): with
 *  num_procs processes the row-major array of ndims extents `shape`
 *  (slowest first) is cut into a dims[0] x ... x dims[ndims-1] process grid
 *  (product = num_procs; block split per dimension as ICHECK_BLOCK); rank r
 *  has row-major grid coordinates (as MPI_Cart_create) and stores its block
 *  row-major. 1 <= ndims <= 8. Errors: EINVAL, ELAYOUT, EEXIST (num_procs
 *  already mapped). */
int icheck_add_processor_mapping(icheck_pmap* pmap, int num_procs, int ndims, const int* dims,
                                 const size_t* shape);

/** Explicit PREDEFINED layout for num_procs processes: rank r owns the global
 *  elements [offsets[r], offsets[r] + counts[r]) (counts may be 0). The
 *  counts must sum to the global count and the ranges must not overlap
 *  (ELAYOUT otherwise). */
int icheck_add_processor_layout(icheck_pmap* pmap, int num_procs, const size_t* counts, const size_t* offsets);

/** Add this rank's part of a distributed global array of global_count
 *  elements (icheck_dist; variadic arguments as listed there). ptr holds
 *  this rank's local elements in the distribution's local order (NULL allowed
 *  when it owns none). Errors: EINVAL, ELABEL, EEXIST, ESTATE, ELAYOUT
 *  (global_count * element size overflows, bad width, PREDEFINED layout
 *  invalid, not for this global count, or missing for this process count). */
int icheck_add_adapt_global(const char* label, void* ptr, icheck_type type, size_t global_count, int dist, ...);

/** Elements this rank owns of an icheck_add_adapt_global label. */
int icheck_adapt_local_count(const char* label, size_t* count);

/** icheck_redistribute [John24 §7.4.1.2, §7.4.2, Listing 7.2]: after an
 *  adaptation (a restart on another process count, or a process set that
 *  changed and called icheck_init on its new communicator), every process of
 *  the new set calls it once per label and receives its part of the newest
 *  committed version into ptr. Collective over the library's communicator;
 *  every rank passes the same label. count: elements this rank owns in the
 *  new layout (icheck_adapt_local_count) for icheck_add_adapt_global labels,
 *  the added count otherwise; ptr may be NULL when count is 0. The first
 *  call does what icheck_restart does (it need not be called); labels may
 *  come in any order; VOLATILE labels recompute their value when called.
 *  Data comes straight from the agents' memory by RMA (every agent at once,
 *  each rank reads only the byte ranges its part overlaps); when no agent
 *  holds the version (direct mode, agents lost) or an agent fails during
 *  the reads, from the second level the old processes or their agents
 *  wrote. Same distributions and attributes as icheck_restore.
 *  Errors: ESTATE (before icheck_init), EINVAL (labels differ between
 *  ranks, NULL label, bad args), ENOENT (unknown label, no checkpoint),
 *  EMISMATCH (count or type differs from the checkpoint's), ECORRUPT
 *  (checksum or metadata bad), EIO, EAGENT (agents and second level
 *  both failed). The result is the same on every rank. */
int icheck_redistribute(const char* label, void* ptr, size_t count);

/** Process count that committed the version being restored (after
 *  icheck_restart/icheck_restart_all; 0 before). */
int icheck_restart_size(void);

/** Human-readable text of an icheck_error. */
const char* icheck_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* ICHECK_H */
