/* icheck.h — application API of iCheck, the adaptive checkpoint/restart
 * service of dynres (seed 000 §6.1.3, §7.4.1).
 *
 * Typical use (seed 000 Listing 6.1):
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
  ICHECK_EFABRIC = -13     /**< libfabric error                              */
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

/** Hints passed to icheck_probe_agents (seed 000 §6.1.3.2, Alg. 5/7). */
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
 *  the committed count and the added type). */
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

/** Human-readable text of an icheck_error. */
const char* icheck_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* ICHECK_H */
