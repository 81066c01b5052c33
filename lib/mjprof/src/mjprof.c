/* libmjprof — PMPI profiling for dynres's performance-aware scheduling
 * (MTCT = time in MPI / time computing, [John24 §4.1]).
 *
 * Use: LD_PRELOAD=libmjprof.so mpiexec ... app   (or link -lmjprof before MPI).
 * Every wrapped MPI call below adds its wall time to the process's MPI time;
 * computing time is wall time since MPI_Init minus MPI time. From inside a
 * wrapped call (no thread, no signal), at most every MJPROF_INTERVAL seconds
 * (default 5), the deltas since the previous report go to the scheduler with
 * mj_report_perf(mpi_s, compute_s); MPI_Finalize sends the last one. Outside
 * a dynres job (mj_report_perf answers MJ_ERR_ENV) it stops reporting and
 * only measures. With MJPROF_SUMMARY=1 MPI_Finalize prints one line per rank
 * to stderr:
 *   mjprof: rank R wall_s=W mpi_s=M compute_s=C mtct=M/C reports=N report_errors=E
 *
 * Wrapped: Send Ssend Recv Isend Irecv Wait Waitall Waitany Waitsome Test
 * Probe Barrier Bcast Reduce Allreduce Gather Gatherv Scatter Scatterv
 * Allgather Allgatherv Alltoall Alltoallv Sendrecv Sendrecv_replace
 * (MPI_Init, MPI_Init_thread and MPI_Finalize start and end the count).
 * Nested calls (an MPI library calling its own MPI_ entry points) count once.
 * Single-threaded use (MPI_THREAD_FUNNELED or less); the counters are not
 * atomic. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mj.h"

static double g_t0 = -1;           /* wall clock at MPI_Init (s) */
static double g_mpi = 0;           /* total seconds in MPI */
static double g_last = 0;          /* wall clock of the last report */
static double g_mpi_at_last = 0;   /* g_mpi at the last report */
static double g_interval = 5;      /* MJPROF_INTERVAL */
static int g_depth = 0;            /* nesting of wrapped calls */
static int g_reporting = 1;        /* 0 once outside a job or after finalize */
static long g_reports = 0, g_report_errors = 0;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void mjp_start(void) {
  if (g_t0 >= 0) return;
  g_t0 = g_last = now_s();
  const char* e = getenv("MJPROF_INTERVAL");
  if (e && *e) {
    char* end = NULL;
    double v = strtod(e, &end);
    if (end == e || *end || !isfinite(v) || v <= 0 || v > 86400)
      fprintf(stderr, "mjprof: MJPROF_INTERVAL='%s' is not a number of seconds in (0, 86400]: using 5\n", e);
    else
      g_interval = v;
  }
}

/* Send the deltas since the last report (t = now). */
static void mjp_report(double t) {
  double dmpi = g_mpi - g_mpi_at_last;
  double dcomp = (t - g_last) - dmpi;
  if (dmpi < 0) dmpi = 0;
  if (dcomp < 0) dcomp = 0;
  g_last = t;
  g_mpi_at_last = g_mpi;
  if (!g_reporting || dmpi + dcomp <= 0) return;
  int rc = mj_report_perf(dmpi, dcomp);
  if (rc == MJ_OK) {
    ++g_reports;
  } else if (rc == MJ_ERR_ENV) {
    g_reporting = 0; /* not inside a dynres job: measure only */
  } else {
    ++g_report_errors;
  }
}

static inline double mjp_enter(void) {
  if (g_t0 < 0) mjp_start();
  return g_depth++ == 0 ? now_s() : -1;
}

static inline void mjp_leave(double t_in) {
  if (--g_depth != 0 || t_in < 0) return;
  double t = now_s();
  g_mpi += t - t_in;
  if (t - g_last >= g_interval) mjp_report(t);
}

#define MJP_WRAP(NAME, PARAMS, ARGS)       \
  int MPI_##NAME PARAMS {                   \
    double t_in_ = mjp_enter();             \
    int rc_ = PMPI_##NAME ARGS;             \
    mjp_leave(t_in_);                       \
    return rc_;                             \
  }

int MPI_Init(int* argc, char*** argv) {
  int rc = PMPI_Init(argc, argv);
  g_t0 = -1;
  mjp_start();
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  g_t0 = -1;
  mjp_start();
  return rc;
}

int MPI_Finalize(void) {
  if (g_t0 < 0) mjp_start();
  double t = now_s();
  mjp_report(t);
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* s = getenv("MJPROF_SUMMARY");
  if (s && strcmp(s, "1") == 0) {
    double wall = t - g_t0, comp = wall - g_mpi;
    if (comp < 0) comp = 0;
    double mtct = comp > 0 ? g_mpi / comp : 1e9;
    fprintf(stderr, "mjprof: rank %d wall_s=%.6f mpi_s=%.6f compute_s=%.6f mtct=%.6g reports=%ld report_errors=%ld\n",
            rank, wall, g_mpi, comp, mtct, g_reports, g_report_errors);
  }
  g_reporting = 0;
  return PMPI_Finalize();
}

MJP_WRAP(Send, (const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm),
         (buf, count, dt, dest, tag, comm))
MJP_WRAP(Ssend, (const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm),
         (buf, count, dt, dest, tag, comm))
MJP_WRAP(Recv, (void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status* st),
         (buf, count, dt, src, tag, comm, st))
MJP_WRAP(Isend, (const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request* rq),
         (buf, count, dt, dest, tag, comm, rq))
MJP_WRAP(Irecv, (void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request* rq),
         (buf, count, dt, src, tag, comm, rq))
MJP_WRAP(Wait, (MPI_Request* rq, MPI_Status* st), (rq, st))
MJP_WRAP(Waitall, (int n, MPI_Request rqs[], MPI_Status sts[]), (n, rqs, sts))
MJP_WRAP(Waitany, (int n, MPI_Request rqs[], int* idx, MPI_Status* st), (n, rqs, idx, st))
MJP_WRAP(Waitsome, (int n, MPI_Request rqs[], int* outn, int idx[], MPI_Status sts[]), (n, rqs, outn, idx, sts))
MJP_WRAP(Test, (MPI_Request* rq, int* flag, MPI_Status* st), (rq, flag, st))
MJP_WRAP(Probe, (int src, int tag, MPI_Comm comm, MPI_Status* st), (src, tag, comm, st))
MJP_WRAP(Barrier, (MPI_Comm comm), (comm))
MJP_WRAP(Bcast, (void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm), (buf, count, dt, root, comm))
MJP_WRAP(Reduce, (const void* sb, void* rb, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm),
         (sb, rb, count, dt, op, root, comm))
MJP_WRAP(Allreduce, (const void* sb, void* rb, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm),
         (sb, rb, count, dt, op, comm))
MJP_WRAP(Gather, (const void* sb, int sc, MPI_Datatype st, void* rb, int rc, MPI_Datatype rt, int root, MPI_Comm comm),
         (sb, sc, st, rb, rc, rt, root, comm))
MJP_WRAP(Gatherv, (const void* sb, int sc, MPI_Datatype st, void* rb, const int rcs[], const int dis[], MPI_Datatype rt,
                   int root, MPI_Comm comm),
         (sb, sc, st, rb, rcs, dis, rt, root, comm))
MJP_WRAP(Scatter, (const void* sb, int sc, MPI_Datatype st, void* rb, int rc, MPI_Datatype rt, int root, MPI_Comm comm),
         (sb, sc, st, rb, rc, rt, root, comm))
MJP_WRAP(Scatterv, (const void* sb, const int scs[], const int dis[], MPI_Datatype st, void* rb, int rc, MPI_Datatype rt,
                    int root, MPI_Comm comm),
         (sb, scs, dis, st, rb, rc, rt, root, comm))
MJP_WRAP(Allgather, (const void* sb, int sc, MPI_Datatype st, void* rb, int rc, MPI_Datatype rt, MPI_Comm comm),
         (sb, sc, st, rb, rc, rt, comm))
MJP_WRAP(Allgatherv, (const void* sb, int sc, MPI_Datatype st, void* rb, const int rcs[], const int dis[],
                      MPI_Datatype rt, MPI_Comm comm),
         (sb, sc, st, rb, rcs, dis, rt, comm))
MJP_WRAP(Alltoall, (const void* sb, int sc, MPI_Datatype st, void* rb, int rc, MPI_Datatype rt, MPI_Comm comm),
         (sb, sc, st, rb, rc, rt, comm))
MJP_WRAP(Alltoallv, (const void* sb, const int scs[], const int sdis[], MPI_Datatype st, void* rb, const int rcs[],
                     const int rdis[], MPI_Datatype rt, MPI_Comm comm),
         (sb, scs, sdis, st, rb, rcs, rdis, rt, comm))
MJP_WRAP(Sendrecv, (const void* sb, int sc, MPI_Datatype st, int dest, int stag, void* rb, int rc, MPI_Datatype rt,
                    int src, int rtag, MPI_Comm comm, MPI_Status* status),
         (sb, sc, st, dest, stag, rb, rc, rt, src, rtag, comm, status))
MJP_WRAP(Sendrecv_replace, (void* buf, int count, MPI_Datatype dt, int dest, int stag, int src, int rtag,
                            MPI_Comm comm, MPI_Status* status),
         (buf, count, dt, dest, stag, src, rtag, comm, status))
