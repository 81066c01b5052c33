/* heat — 2-D Jacobi heat simulation on a metal plate ([John24 §2.2.2.2],
 * the non-iMPI heat code used in §8.2.3) with iCheck checkpoint/restart
 * (include/icheck.h, [John24 §6.1.3, Listing 6.1]).
 *
 * Usage:
 *   mpiexec -n 4 heat [--nx 256] [--ny 256] [--iters 1000] [--ckpt-every 100]
 *                     [--app heat] [--config icheck.yaml] [--no-icheck]
 *                     [--fault-at N] [--stop-at N] [--no-persist] [--print-every N]
 *                     [--hand-redist FILE] [--malleable] [--iter-seconds S] [-q]
 *   heat --nx 64 --ny 64 --iters 50 --no-icheck      (one plain process)
 *
 * The global grid has NY rows and NX columns (cells), boundaries included:
 * row 0 is held at 100, row NY-1 at 0, column 0 at 75 and column NX-1 at 50
 * (fixed Dirichlet conditions); interior cells start at 0. Rows are
 * block-distributed over the ranks (rank r gets NY/size rows, the first
 * NY%size ranks one more; each rank needs at least one row). Every
 * iteration exchanges one ghost row with each neighbour (MPI_Sendrecv) and
 * applies one Jacobi sweep u' = (up + down + left + right) / 4 to interior
 * cells. The sweep is evaluated in the same order in every decomposition, so
 * the result is bit-identical for any rank count.
 *
 * Checkpointing (unless --no-icheck or built with -DNO_ICHECK): icheck_init
 * with the application name (--app, default "heat"), then two objects with
 * their redistribution roles [John24 §7.4.1]:
 *   "grid"       this rank's rows of the global grid (lrows * NX doubles,
 *                no ghost rows): icheck_add_adapt_global, ICHECK_BLOCK of the
 *                NY * NX row-major array in units of NX cells (whole rows),
 *                which is exactly heat's row split;
 *   "iteration"  the number of completed iterations (int, ICHECK_CONSTANT).
 * A commit happens after every K-th completed iteration (--ckpt-every K,
 * 0 = never). If icheck_init reports RESTART, icheck_redistribute() restores
 * each of them (one call per label) and the run continues after the stored
 * iteration — on any process
 * count: a checkpoint of N ranks restarted on M != N ranks is redistributed
 * by iCheck (each rank gets its new rows; the grid size must be the same).
 * This is how a malleable heat job resizes [John24 §7.4.4]: --stop-at N
 * commits after iteration N, finalizes (flushing the checkpoint to the second
 * level) and exits 0 ("heat: stopped iteration=N"), and the relaunch on the
 * new process count continues. --hand-redist FILE replaces iCheck by the
 * hand-written alternative (MPI-IO: every rank writes/reads its rows at
 * their global offset in FILE, the iteration in a header) for comparison
 * [John24 Table 9.4]. --fault-at N kills the process
 * (SIGKILL) after iteration N of a run that was not itself restarted, to
 * exercise restart. icheck_finalize(IC_PERSIST) ends the run (--no-persist:
 * flags 0). Note that a persisted checkpoint makes the next run of the same
 * --app restart from it.
 *
 * Output (rank 0): per commit "heat: commit iteration=<i> version=<v>
 * seconds=<max over ranks>", and finally
 *   heat: checksum=<16 hex digits> iterations=<n>
 * where the checksum is the wrapping sum over all cells of
 * mix(global index, bits of the double), reduced with MPI_SUM and mixed with
 * NX and NY — independent of the rank count and of interruption + restart.
 *
 * --iter-seconds S makes every iteration last at least S seconds (each rank
 * sleeps the rest of it after its sweep): a heavier step for demonstrations
 * and tests that must resize a run before it ends, without burning CPU.
 *
 * Malleability (--malleable or HEAT_MALLEABLE=1, inside a dynres job:
 * MJ_JOB_ID set; mj(3), [John24 §7.4.4] "malleability through
 * checkpoint-restart"): rank 0 alone talks to the scheduler through libmj.
 * It calls mj_init_adapt and mj_register, and after every iteration
 * mj_probe_adapt (never blocks); the pending flag and the order are
 * broadcast to every rank. On an order, rank 0 opens the adaptation window
 * with mj_adapt_begin(MJ_ADAPT_RESTART); every rank commits with iCheck
 * (unless that iteration was just committed), finalizes (with agents:
 * IC_PERSIST, the version stays in their memory and the new ranks read
 * their parts from there; without: flush to the second level) and exits 0
 * ("heat: stopped for resize ..."). The job's
 * supervisor then runs the job script again on the new node list; there
 * mj_init_adapt reports MJ_RESUMED, heat restores the checkpoint
 * redistributed over the new process count (the script chooses it, e.g.
 * one rank per node of MJ_JOB_NUM_NODES) and rank 0 commits the order with
 * mj_adapt_commit ("heat: resumed order=..."). Before the last iteration's
 * result rank 0 deregisters (no order is accepted in the shutdown phase;
 * a job cannot register again, so a later heat run in the same job script
 * runs at a fixed size) and prints "heat: malleable probes=N
 * probe_seconds=S poll_seconds=T" (rank 0's time in mj_probe_adapt, and in
 * the probes plus the broadcasts of their answers, which includes waiting
 * for the slowest rank; also on the "stopped for resize" line).
 * The time stamps t_* of these lines are Unix times in seconds (rank 0's
 * clock) for bench/mj/restart_resize.sh. --malleable needs iCheck; outside
 * a dynres job it says so and heat runs at a fixed size, as it does when
 * the scheduler cannot be reached. Without --malleable heat never calls
 * libmj.
 *
 * MPI_Init is called when started by a launcher (PMI_RANK, PMI_SIZE,
 * PMIX_RANK, OMPI_COMM_WORLD_SIZE) or with --mpi; otherwise one process runs
 * without MPI. Exit codes: 0 ok, 1 runtime error, 2 bad arguments.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HEAT_HAVE_MPI
#include <mpi.h>
#endif
#ifndef NO_ICHECK
#include "icheck.h"
#endif
#ifdef HEAT_HAVE_MJ
#include "mj.h"
#endif

typedef struct {
  int mpi, rank, size;
} par_t;

static par_t P = {0, 0, 1};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(int code) {
  fflush(stdout);
  fflush(stderr);
#ifdef HEAT_HAVE_MPI
  if (P.mpi) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  exit(code);
}

static double max_over_ranks(double v) {
#ifdef HEAT_HAVE_MPI
  if (P.mpi) {
    double out = v;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
  }
#endif
  return v;
}

/* Unix time in seconds (the scheduler's clock: resize_orders.sent/settled). */
__attribute__((unused)) static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* Fixed boundary value of global cell (g, j), or -1 for interior cells. */
static double boundary(long g, long j, long nx, long ny) {
  if (g == 0) return 100.0;
  if (g == ny - 1) return 0.0;
  if (j == 0) return 75.0;
  if (j == nx - 1) return 50.0;
  return -1.0;
}

__attribute__((unused)) static int launched_by_mpiexec(void) {
  const char* v[] = {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; ++i)
    if (getenv(v[i])) return 1;
  return 0;
}

static long parse_long(const char* s, const char* name, long min) {
  char* end = NULL;
  long v = strtol(s, &end, 10);
  if (!s[0] || *end || v < min) {
    fprintf(stderr, "heat: --%s wants an integer >= %ld, got '%s'\n", name, min, s);
    exit(2);
  }
  return v;
}

static void usage(FILE* f) {
  fprintf(f,
          "usage: heat [--nx N] [--ny N] [--iters N] [--ckpt-every K] [--app NAME]\n"
          "            [--config PATH] [--no-icheck] [--fault-at N] [--stop-at N] [--no-persist]\n"
          "            [--print-every N] [--hand-redist FILE] [--malleable] [--iter-seconds S]\n"
          "            [--mpi|--no-mpi] [-q]\n"
          "2-D Jacobi heat simulation [John24 §2.2.2.2] with iCheck checkpoints.\n");
}

#ifndef NO_ICHECK
static void check_ic(int rc, const char* what) {
  if (rc == ICHECK_OK) return;
  fprintf(stderr, "heat: rank %d: %s failed: %s (%d)\n", P.rank, what, icheck_strerror(rc), rc);
  if (rc == ICHECK_EMISMATCH)
    fprintf(stderr, "heat: the checkpoint was taken with another grid size (use another --app)\n");
  die(1);
}
#endif

#ifdef HEAT_HAVE_MPI
/* Hand-written redistribution for comparison with iCheck ([John24] Table
 * 9.4), the shortest one for block rows: MPI-IO, every rank writes/reads its
 * rows at their global offset, rank 0 the iteration in a header. Counted by
 * the lines between the HAND-REDIST markers (t/integration/heat_redist.sh). */
/* HAND-REDIST BEGIN */
static void hand_save(const char* f, const double* rows, long r0, long lrows, long nx, int iter) {
  MPI_File fh;
  if (MPI_File_open(MPI_COMM_WORLD, f, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh)) die(1);
  if (P.rank == 0) MPI_File_write_at(fh, 0, &iter, 1, MPI_INT, MPI_STATUS_IGNORE);
  MPI_File_write_at_all(fh, 8 + r0 * nx * 8, rows, (int)(lrows * nx), MPI_DOUBLE, MPI_STATUS_IGNORE);
  MPI_File_close(&fh);
}
static int hand_load(const char* f, double* rows, long r0, long lrows, long nx, int* iter) {
  MPI_File fh;
  if (MPI_File_open(MPI_COMM_WORLD, f, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh)) return 0;
  MPI_File_read_at_all(fh, 0, iter, 1, MPI_INT, MPI_STATUS_IGNORE);
  MPI_File_read_at_all(fh, 8 + r0 * nx * 8, rows, (int)(lrows * nx), MPI_DOUBLE, MPI_STATUS_IGNORE);
  MPI_File_close(&fh);
  return 1;
}
/* HAND-REDIST END */
#endif

#ifdef HEAT_HAVE_MJ
/* The malleable side (rank 0 talks to libmj; the others follow by broadcast). */
typedef struct {
  mj_status st;      /* rank 0: from mj_init_adapt */
  double t_main;     /* rank 0: wall clock at the top of main */
  double t_mpi, t_mj, t_grid, t_icinit; /* rank 0: after MPI_Init, mj_init_adapt, grid, icheck_init */
} mall_t;
static mall_t M;
static double mj_probe_s = 0; /* rank 0: seconds in mj_probe_adapt */

static void mj_warn(const char* what, int rc) {
  fprintf(stderr, "heat: --malleable: %s: %s%s%s\n", what, mj_strerror(rc), mj_last_error()[0] ? ": " : "",
          mj_last_error());
}

/* Collective. Rank 0 probes; 1 when every rank must stop for a
 * restart-based resize (rank 0 has begun the order *o). */
static int mall_poll(mj_order* o, double* t_seen) {
  int64_t msg[5] = {0, 0, 0, 0, 0}; /* go, order id, kind, nodes before, after */
  if (P.rank == 0) {
    int pending = 0;
    const double tp = now_s();
    int rc = mj_probe_adapt(&pending, NULL, o);
    mj_probe_s += now_s() - tp;
    if (rc == MJ_OK && pending == 1) {
      *t_seen = wall_s();
      rc = mj_adapt_begin(o, MJ_ADAPT_RESTART);
      if (rc == MJ_OK)
        msg[0] = 1, msg[1] = o->id, msg[2] = o->kind, msg[3] = o->num_nodes_before, msg[4] = o->num_nodes_after;
      else
        mj_warn("mj_adapt_begin", rc);
    } else if (rc == MJ_OK && pending == -1) {
      fprintf(stderr, "heat: --malleable: order %lld was rolled back\n", (long long)o->id);
    } else if (rc != MJ_OK && rc != MJ_ERR_CONNECT) {
      mj_warn("mj_probe_adapt", rc);
    }
  }
#ifdef HEAT_HAVE_MPI
  if (P.mpi) MPI_Bcast(msg, 5, MPI_INT64_T, 0, MPI_COMM_WORLD);
#endif
  if (msg[0] && P.rank != 0) {
    o->id = msg[1], o->kind = (mj_order_kind)msg[2];
    o->num_nodes_before = (int)msg[3], o->num_nodes_after = (int)msg[4];
  }
  return (int)msg[0];
}
#endif

int main(int argc, char** argv) {
#ifdef HEAT_HAVE_MJ
  M.t_main = wall_s();
#endif
  long nx = 256, ny = 256, iters = 1000, ckpt_every = 100, fault_at = 0, print_every = 0, stop_at = 0;
  const char* app = "heat";
  const char* hand = NULL;
  const char* config = NULL;
  int use_icheck = 1, persist = 1, quiet = 0, force_mpi = 0, no_mpi = 0, malleable = 0;
  double iter_seconds = 0;
  {
    const char* e = getenv("HEAT_MALLEABLE");
    malleable = e && *e && strcmp(e, "0") != 0;
  }
  enum { O_NX = 1000, O_NY, O_ITERS, O_CKPT, O_APP, O_CONFIG, O_NOICHECK, O_FAULT, O_NOPERSIST,
         O_PRINT, O_MPI, O_NOMPI, O_STOP, O_HAND, O_MALL, O_ITERSEC };
  static const struct option opts[] = {
      {"nx", required_argument, 0, O_NX},           {"ny", required_argument, 0, O_NY},
      {"iters", required_argument, 0, O_ITERS},     {"ckpt-every", required_argument, 0, O_CKPT},
      {"app", required_argument, 0, O_APP},         {"config", required_argument, 0, O_CONFIG},
      {"no-icheck", no_argument, 0, O_NOICHECK},    {"fault-at", required_argument, 0, O_FAULT},
      {"no-persist", no_argument, 0, O_NOPERSIST},  {"print-every", required_argument, 0, O_PRINT},
      {"mpi", no_argument, 0, O_MPI},               {"no-mpi", no_argument, 0, O_NOMPI},
      {"stop-at", required_argument, 0, O_STOP},    {"hand-redist", required_argument, 0, O_HAND},
      {"malleable", no_argument, 0, O_MALL},       {"iter-seconds", required_argument, 0, O_ITERSEC},
      {"quiet", no_argument, 0, 'q'},               {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
    switch (c) {
      case O_NX: nx = parse_long(optarg, "nx", 3); break;
      case O_NY: ny = parse_long(optarg, "ny", 3); break;
      case O_ITERS: iters = parse_long(optarg, "iters", 0); break;
      case O_CKPT: ckpt_every = parse_long(optarg, "ckpt-every", 0); break;
      case O_APP: app = optarg; break;
      case O_CONFIG: config = optarg; break;
      case O_NOICHECK: use_icheck = 0; break;
      case O_FAULT: fault_at = parse_long(optarg, "fault-at", 0); break;
      case O_NOPERSIST: persist = 0; break;
      case O_PRINT: print_every = parse_long(optarg, "print-every", 0); break;
      case O_MPI: force_mpi = 1; break;
      case O_NOMPI: no_mpi = 1; break;
      case O_STOP: stop_at = parse_long(optarg, "stop-at", 1); break;
      case O_HAND: hand = optarg; break;
      case O_MALL: malleable = 1; break;
      case O_ITERSEC: {
        char* end = NULL;
        iter_seconds = strtod(optarg, &end);
        if (!optarg[0] || *end || !(iter_seconds >= 0 && iter_seconds <= 3600)) {
          fprintf(stderr, "heat: --iter-seconds wants seconds in [0, 3600], got '%s'\n", optarg);
          return 2;
        }
        break;
      }
      case 'q': quiet = 1; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "heat: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (iters > 0x7fffffffL) {
    fprintf(stderr, "heat: --iters too large\n");
    return 2;
  }
  if (malleable && (!use_icheck || hand)) {
    fprintf(stderr, "heat: --malleable resizes by iCheck checkpoint-restart: not with --no-icheck or --hand-redist\n");
    return 2;
  }
#ifndef HEAT_HAVE_MJ
  if (malleable) {
    fprintf(stderr, "heat: built without libmj: --malleable is unavailable\n");
    return 2;
  }
#endif
#ifdef NO_ICHECK
  if (malleable) {
    fprintf(stderr, "heat: built without iCheck: --malleable is unavailable\n");
    return 2;
  }
  if (use_icheck && !quiet)
    fprintf(stderr, "heat: built without iCheck: checkpointing disabled\n");
  use_icheck = 0;
  (void)app;
  (void)config;
#endif
  setvbuf(stdout, NULL, _IOLBF, 0);

#ifdef HEAT_HAVE_MPI
  P.mpi = !no_mpi && (force_mpi || launched_by_mpiexec());
  if (P.mpi) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &P.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P.size);
  }
#ifdef HEAT_HAVE_MJ
  M.t_mpi = wall_s();
#endif
#else
  (void)no_mpi;
  if (force_mpi) {
    fprintf(stderr, "heat: built without MPI\n");
    return 2;
  }
#endif
  if (ny < P.size) {
    if (P.rank == 0) fprintf(stderr, "heat: --ny %ld is smaller than the rank count %d\n", ny, P.size);
    die(2);
  }

#ifdef HEAT_HAVE_MJ
  /* Only rank 0 talks to the scheduler (mj(3)); the others learn by
   * broadcast (only when asked: without --malleable nothing changes). */
  __attribute__((unused)) const int mall_asked = malleable; /* the same on every rank (arguments) */
  if (malleable && !getenv("MJ_JOB_ID")) {
    if (P.rank == 0)
      fprintf(stderr, "heat: --malleable: not inside a dynres job (MJ_JOB_ID unset): running at a fixed size\n");
    malleable = 0;
  }
  if (malleable && P.rank == 0) {
    int rc = mj_init_adapt(&M.st);
    M.t_mj = wall_s();
    if (rc != MJ_OK) {
      mj_warn("mj_init_adapt", rc);
      fprintf(stderr, "heat: --malleable: running at a fixed size\n");
      malleable = 0;
    } else if (!quiet) {
      printf("heat: malleable job=%lld status=%s nodes=%d old=%d restart=%d ranks=%d\n", (long long)M.st.job,
             M.st.kind == MJ_RESUMED ? "resumed" : M.st.kind == MJ_JOINING ? "joining" : "new", M.st.num_nodes,
             M.st.old_num_nodes, M.st.restart_count, P.size);
    }
  }
#ifdef HEAT_HAVE_MPI
  if (P.mpi && mall_asked) MPI_Bcast(&malleable, 1, MPI_INT, 0, MPI_COMM_WORLD);
#endif
  double t_restore0 = 0, t_restore1 = 0;
#endif

  /* row decomposition: global rows [r0, r0 + lrows) */
  const long base = ny / P.size, rem = ny % P.size;
  const long lrows = base + (P.rank < rem ? 1 : 0);
  const long r0 = P.rank * base + (P.rank < rem ? P.rank : rem);
  const int up = P.rank - 1, down = P.rank + 1;  /* neighbours; out of range = none */
  const size_t cells = (size_t)(lrows + 2) * (size_t)nx;
  double* u = calloc(cells, sizeof *u);
  double* un = calloc(cells, sizeof *un);
#ifdef HEAT_HAVE_MJ
  M.t_grid = wall_s();
#endif
  if (!u || !un) {
    fprintf(stderr, "heat: out of memory (%zu cells)\n", cells);
    die(1);
  }
  for (long lr = 1; lr <= lrows; ++lr) {
    const long g = r0 + lr - 1;
    for (long j = 0; j < nx; ++j) {
      double b = boundary(g, j, nx, ny);
      u[lr * nx + j] = b >= 0 ? b : 0.0;
    }
  }
  memcpy(un, u, cells * sizeof *u);

  int iter_done = 0; /* completed iterations: label "iteration" */
  int restarted = 0;
  (void)persist;
#ifdef HEAT_HAVE_MPI
  if (hand && !P.mpi) {
    fprintf(stderr, "heat: --hand-redist needs MPI\n");
    die(2);
  }
  if (hand) use_icheck = 0;
  if (hand && hand_load(hand, u + nx, r0, lrows, nx, &iter_done)) restarted = 1;
#else
  if (hand) {
    fprintf(stderr, "heat: built without MPI: no --hand-redist\n");
    return 2;
  }
#endif
#ifndef NO_ICHECK
  if (use_icheck) {
    int status = ICHECK_STATUS_NEW;
    const void* comm = NULL;
#ifdef HEAT_HAVE_MPI
    MPI_Comm world = MPI_COMM_WORLD;
    if (P.mpi) comm = ICHECK_COMM(world);
#endif
    check_ic(icheck_init(config, app, comm, &status), "icheck_init");
#ifdef HEAT_HAVE_MJ
    M.t_icinit = wall_s();
#endif
    /* interior rows only: BLOCK of whole rows (units of NX cells) of NY * NX */
    check_ic(icheck_add_adapt_global("grid", u + nx, ICHECK_DOUBLE, (size_t)ny * nx, ICHECK_BLOCK, (size_t)nx), "add grid");
    check_ic(icheck_add_adapt("iteration", &iter_done, 1, ICHECK_INT, ICHECK_CONSTANT), "add iteration");
    if (!quiet && P.rank == 0)
      printf("heat: icheck mode=%s status=%s\n", icheck_mode(),
             status == ICHECK_STATUS_RESTART ? "restart" : "new");
#ifdef HEAT_HAVE_MJ
    t_restore0 = wall_s();
#endif
    if (status == ICHECK_STATUS_RESTART) {
      double t0 = now_s();
      /* one icheck_redistribute per label [John24 §7.4.2, Listing 7.2]: this
       * rank's rows straight from the agents' memory (or the second level),
       * on any process count */
      check_ic(icheck_redistribute("grid", u + nx, (size_t)lrows * (size_t)nx), "icheck_redistribute(grid)");
      check_ic(icheck_redistribute("iteration", &iter_done, 1), "icheck_redistribute(iteration)");
      double dt = max_over_ranks(now_s() - t0);
      if (iter_done < 0 || iter_done > iters) {
        fprintf(stderr, "heat: restored iteration %d outside 0..%ld\n", iter_done, iters);
        die(1);
      }
      restarted = 1;
      if (!quiet && P.rank == 0)
        printf("heat: restart version=%" PRId64 " iteration=%d seconds=%.6f from_ranks=%d ranks=%d\n",
               icheck_version(), iter_done, dt, icheck_restart_size(), P.size);
    }
#ifdef HEAT_HAVE_MJ
    t_restore1 = wall_s();
#endif
  }
#endif
#ifdef HEAT_HAVE_MJ
  /* A restart-based resize is done once the data is restored on the new
   * process count: rank 0 commits the order, then (re)registers. */
  if (malleable && P.rank == 0) {
    if (M.st.kind == MJ_RESUMED) {
      if (!restarted)
        fprintf(stderr, "heat: --malleable: resumed after order %lld but no checkpoint to restore: starting over\n",
                (long long)M.st.order);
      int rc = mj_adapt_commit(M.st.order, NULL, 0);
      const double t_committed = wall_s();
      if (rc != MJ_OK) mj_warn("mj_adapt_commit", rc);
      printf("heat: resumed order=%lld nodes=%d->%d ranks=%d restart=%d iteration=%d commit=%s"
             " t_main=%.6f t_mpi=%.6f t_mj=%.6f t_grid=%.6f t_icinit=%.6f t_restore_begin=%.6f t_restore_end=%.6f t_committed=%.6f\n",
             (long long)M.st.order, M.st.old_num_nodes, M.st.num_nodes, P.size, M.st.restart_count, iter_done,
             rc == MJ_OK ? "ok" : mj_strerror(rc), M.t_main, M.t_mpi, M.t_mj, M.t_grid, M.t_icinit, t_restore0, t_restore1, t_committed);
    }
    int rc = mj_register();
    if (rc != MJ_OK) {
      mj_warn("mj_register", rc);
      fprintf(stderr, "heat: --malleable: running at a fixed size\n");
      malleable = 0;
    }
  }
#ifdef HEAT_HAVE_MPI
  if (P.mpi && mall_asked) MPI_Bcast(&malleable, 1, MPI_INT, 0, MPI_COMM_WORLD); /* mj_register may fail */
#endif
  int64_t adapt_order = 0; /* > 0: stopped for this restart-based resize */
  double adapt_seconds = 0, ckpt_seconds = 0, t_seen = 0, probe_s = 0; /* probe_s: rank 0's time in mall_poll */
  long probes = 0;
  mj_order adapt;
  memset(&adapt, 0, sizeof adapt);
#endif
  if (!quiet && P.rank == 0)
    printf("heat: nx=%ld ny=%ld ranks=%d iters=%ld ckpt_every=%ld icheck=%d\n", nx, ny, P.size,
           iters, use_icheck ? ckpt_every : 0, use_icheck);

  const double t_begin = now_s();
  for (long it = iter_done; it < iters; ++it) {
    const double t_iter = iter_seconds > 0 ? now_s() : 0;
    /* ghost-cell exchange with the neighbours above and below */
#ifdef HEAT_HAVE_MPI
    if (P.mpi && P.size > 1) {
      const int pu = up >= 0 ? up : MPI_PROC_NULL;
      const int pd = down < P.size ? down : MPI_PROC_NULL;
      MPI_Sendrecv(u + nx, (int)nx, MPI_DOUBLE, pu, 0, u + (lrows + 1) * nx, (int)nx, MPI_DOUBLE,
                   pd, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Sendrecv(u + lrows * nx, (int)nx, MPI_DOUBLE, pd, 1, u, (int)nx, MPI_DOUBLE, pu, 1,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
#else
    (void)up;
    (void)down;
#endif
    double delta = 0.0;
    for (long lr = 1; lr <= lrows; ++lr) {
      const long g = r0 + lr - 1;
      if (g == 0 || g == ny - 1) continue; /* fixed boundary rows */
      const double* a = u + lr * nx;
      double* o = un + lr * nx;
      for (long j = 1; j < nx - 1; ++j) {
        o[j] = 0.25 * (a[j - nx] + a[j + nx] + a[j - 1] + a[j + 1]);
        double d = o[j] > a[j] ? o[j] - a[j] : a[j] - o[j];
        if (d > delta) delta = d;
      }
    }
    memcpy(u + nx, un + nx, (size_t)lrows * (size_t)nx * sizeof *u);
    iter_done = (int)(it + 1);
    if (iter_seconds > 0) {
      const double rest = iter_seconds - (now_s() - t_iter);
      if (rest > 0) {
        struct timespec ts = {(time_t)rest, (long)((rest - (double)(time_t)rest) * 1e9)};
        nanosleep(&ts, NULL);
      }
    }

    if (print_every > 0 && iter_done % print_every == 0) {
      double dmax = max_over_ranks(delta);
      if (P.rank == 0) printf("heat: iteration=%d max_delta=%.6e\n", iter_done, dmax);
    }
#ifndef NO_ICHECK
    if (use_icheck && ckpt_every > 0 && iter_done % ckpt_every == 0) {
      double t0 = now_s();
      check_ic(icheck_commit(), "icheck_commit");
      double dt = max_over_ranks(now_s() - t0);
      if (!quiet && P.rank == 0)
        printf("heat: commit iteration=%d version=%" PRId64 " seconds=%.6f bytes=%zu mode=%s\n",
               iter_done, icheck_version(), dt, (size_t)ny * (size_t)nx * sizeof(double),
               icheck_mode());
    }
#endif
#ifdef HEAT_HAVE_MPI
    if (hand && (iter_done == stop_at || (ckpt_every > 0 && iter_done % ckpt_every == 0)))
      hand_save(hand, u + nx, r0, lrows, nx, iter_done);
#endif
#ifndef NO_ICHECK
    if (use_icheck && iter_done == stop_at && !(ckpt_every > 0 && iter_done % ckpt_every == 0))
      check_ic(icheck_commit(), "icheck_commit");
#endif
    if (iter_done == stop_at) break;
#ifdef HEAT_HAVE_MJ
    /* no order is taken after the last iteration: the job ends anyway */
    int go = 0;
    if (malleable && iter_done < iters) {
      const double tp = now_s();
      go = mall_poll(&adapt, &t_seen);
      probe_s += now_s() - tp;
      ++probes;
    }
    if (go) {
      double t0 = now_s();
      if (P.rank == 0 && !quiet)
        printf("heat: adapt order=%lld %s nodes=%d->%d iteration=%d t_seen=%.6f\n", (long long)adapt.id,
               adapt.kind == MJ_ORDER_EXPAND ? "expand" : "shrink", adapt.num_nodes_before, adapt.num_nodes_after,
               iter_done, t_seen);
#ifndef NO_ICHECK /* (without iCheck --malleable is refused) */
      if (!(ckpt_every > 0 && iter_done % ckpt_every == 0)) check_ic(icheck_commit(), "icheck_commit");
      ckpt_seconds = max_over_ranks(now_s() - t0);
      /* With agents (mode rdma) they keep the version in memory and the new
       * ranks read it from there (IC_PERSIST: no flush on this path, the
       * agents write the second level in the background); without agents
       * the version must be on the second level now. */
      check_ic(icheck_finalize(strcmp(icheck_mode(), "rdma") == 0 ? IC_PERSIST : 0), "icheck_finalize");
#endif
      adapt_seconds = max_over_ranks(now_s() - t0);
      adapt_order = adapt.id;
      break;
    }
#endif
    if (fault_at > 0 && !restarted && iter_done == fault_at) {
      if (P.rank == 0) printf("heat: fault injected after iteration %d: SIGKILL\n", iter_done);
      fflush(stdout);
      fflush(stderr);
#ifdef HEAT_HAVE_MPI
      /* every rank dies only once rank 0's line is written: a rank that died
         first made mpiexec kill rank 0 before it printed (seen under load) */
      if (P.mpi) MPI_Barrier(MPI_COMM_WORLD);
#endif
      raise(SIGKILL);
    }
  }
#ifdef HEAT_HAVE_MJ
  if (adapt_order > 0) {
    if (P.rank == 0)
      printf("heat: stopped for resize order=%lld iteration=%d ranks=%d commit_seconds=%.6f"
             " icheck_commit_seconds=%.6f probes=%ld probe_seconds=%.6f poll_seconds=%.6f t_seen=%.6f"
             " t_flushed=%.6f\n",
             (long long)adapt_order, iter_done, P.size, adapt_seconds, ckpt_seconds, probes, mj_probe_s, probe_s,
             t_seen, wall_s());
    free(u);
    free(un);
#ifdef HEAT_HAVE_MPI
    if (P.mpi) MPI_Finalize();
#endif
    return 0;
  }
  if (malleable && P.rank == 0) { /* shutdown phase: no more orders */
    if (!quiet) printf("heat: malleable probes=%ld probe_seconds=%.6f poll_seconds=%.6f\n", probes, mj_probe_s, probe_s);
    int rc = mj_deregister();
    if (rc != MJ_OK) mj_warn("mj_deregister", rc);
    mj_finalize();
  }
#endif
  const double elapsed = max_over_ranks(now_s() - t_begin);

  /* decomposition-independent checksum over the global grid */
  uint64_t acc = 0, total = 0;
  for (long lr = 1; lr <= lrows; ++lr) {
    const uint64_t g = (uint64_t)(r0 + lr - 1);
    for (long j = 0; j < nx; ++j) {
      uint64_t bits;
      memcpy(&bits, &u[lr * nx + j], sizeof bits);
      acc += mix64(mix64(g * (uint64_t)nx + (uint64_t)j) ^ bits);
    }
  }
  total = acc;
#ifdef HEAT_HAVE_MPI
  if (P.mpi) MPI_Reduce(&acc, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
#endif
  total = mix64(total ^ mix64(((uint64_t)nx << 32) ^ (uint64_t)ny));

#ifndef NO_ICHECK
  /* stopping for a relaunch on another process count: flush to the second level */
  if (use_icheck) check_ic(icheck_finalize(persist && iter_done != stop_at ? IC_PERSIST : 0), "icheck_finalize");
#endif
  if (stop_at > 0 && iter_done == stop_at) {
    if (P.rank == 0) printf("heat: stopped iteration=%d ranks=%d\n", iter_done, P.size);
    free(u);
    free(un);
#ifdef HEAT_HAVE_MPI
    if (P.mpi) MPI_Finalize();
#endif
    return 0;
  }
  if (P.rank == 0) {
    if (!quiet) printf("heat: done seconds=%.3f restarted=%d\n", elapsed, restarted);
    printf("heat: checksum=%016" PRIx64 " iterations=%d\n", total, iter_done);
  }
  free(u);
  free(un);
#ifdef HEAT_HAVE_MPI
  if (P.mpi) MPI_Finalize();
#endif
  return 0;
}
