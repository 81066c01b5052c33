/* ictest — tiny deterministic iCheck application used by the integration
 * tests (t/integration/icheck_*.sh). Iterates a 1-D relaxation, commits every
 * `every` iterations, restarts from the last committed version when one
 * exists, prints the final checksum, so an interrupted + restarted run can be
 * compared with an uninterrupted one.
 *
 * usage: ictest APP N ITERS EVERY [options]
 *   --config F     static config (default: $ICHECK_CONFIG)
 *   --async        asynchronous commits (icheck_wait before modifying)
 *   --sleep-ms S   sleep after every iteration
 *   --probe P      icheck_probe_agents every P iterations
 *   --persist      icheck_finalize(IC_PERSIST)
 *   --hash         also print "HASH iter h" after every commit and restore:
 *                  h = FNV-1a 64 of the checkpointed bytes (grid, iter), the
 *                  same for an iteration in every run (kill campaign check)
 *   --skew-ms S    before every commit rank r sleeps r * S ms, and rank 0
 *                  prints "WAITED iter wall cpu nvcsw": the wall and CPU
 *                  seconds of its main thread in icheck_commit and the
 *                  voluntary context switches it made there (a rank that
 *                  waits for a slower one naps instead of spinning)
 * Output lines: "STATUS new|restart", "RESTORED iter v", "COMMIT iter v mode rc",
 * "RESULT <checksum>", "FINAL v mode", "FINALIZE rc" (exit 6 when rc != 0, e.g.
 * the flush to the second level failed).
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <icheck.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef USE_MPI
#include <mpi.h>
#endif

/* FNV-1a 64 over the grid and the iteration counter, as hex */
static unsigned long long fnv1a(const void* p, size_t n, unsigned long long h) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}
static void print_hash(const double* grid, size_t n, const int* iter) {
  unsigned long long h = fnv1a(grid, n * sizeof(double), 14695981039346656037ULL);
  h = fnv1a(iter, sizeof(int), h);
  printf("HASH %d %016llx\n", iter[0], h);
}

static double tv_s(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }
static double mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void msleep(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s APP N ITERS EVERY [--config F] [--async] [--sleep-ms S] [--probe P] [--persist]\n", argv[0]);
    return 2;
  }
  const char* app = argv[1];
  size_t n = strtoull(argv[2], NULL, 10);
  int iters = atoi(argv[3]), every = atoi(argv[4]);
  const char* config = NULL;
  int async = 0, sleep_ms = 0, probe = 0, persist = 0, hash = 0, skew_ms = 0;
  for (int i = 5; i < argc; ++i) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
    else if (!strcmp(argv[i], "--async")) async = 1;
    else if (!strcmp(argv[i], "--sleep-ms") && i + 1 < argc) sleep_ms = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--probe") && i + 1 < argc) probe = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--persist")) persist = 1;
    else if (!strcmp(argv[i], "--hash")) hash = 1;
    else if (!strcmp(argv[i], "--skew-ms") && i + 1 < argc) skew_ms = atoi(argv[++i]);
  }
  int rank = 0, size = 1;
  const void* comm = NULL;
#ifdef USE_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm world = MPI_COMM_WORLD;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  comm = ICHECK_COMM(world);
#endif
  double* grid = malloc(n * sizeof(double));
  int iter[1] = {0};
  for (size_t i = 0; i < n; ++i) grid[i] = (double)((i + (size_t)rank * 7) % 13);
  int status = -1;
  int rc = icheck_init(config, app, comm, &status);
  if (rc) { fprintf(stderr, "icheck_init: %s\n", icheck_strerror(rc)); return 3; }
  if (rank == 0) printf("STATUS %s mode %s\n", status == ICHECK_STATUS_RESTART ? "restart" : "new", icheck_mode());
  if ((rc = icheck_add("grid", grid, n, ICHECK_DOUBLE)) || (rc = icheck_add("iter", iter, 1, ICHECK_INT))) {
    fprintf(stderr, "icheck_add: %s\n", icheck_strerror(rc));
    return 3;
  }
  if (status == ICHECK_STATUS_RESTART) {
    rc = icheck_restart_all();
    if (rc) { fprintf(stderr, "icheck_restart_all: %s\n", icheck_strerror(rc)); return 4; }
    if (rank == 0) printf("RESTORED %d %lld\n", iter[0], (long long)icheck_version());
    if (rank == 0 && hash) print_hash(grid, n, iter);
  }
  icheck_enable_asynchronous(async);
  fflush(stdout);
  for (int it = iter[0] + 1; it <= iters; ++it) {
    if (async) icheck_wait();
    for (size_t i = 0; i < n; ++i) grid[i] = grid[i] * 0.5 + (double)((i + (size_t)it) % 5);
    iter[0] = it;
    if (it % every == 0) {
      struct rusage u0, u1;
      double w0 = 0;
      if (skew_ms) {
        msleep(rank * skew_ms);
        getrusage(RUSAGE_THREAD, &u0);
        w0 = mono_s();
      }
      rc = icheck_commit();
      if (skew_ms && rank == 0) {
        getrusage(RUSAGE_THREAD, &u1);
        printf("WAITED %d %.3f %.3f %ld\n", it, mono_s() - w0,
               tv_s(u1.ru_utime) + tv_s(u1.ru_stime) - tv_s(u0.ru_utime) - tv_s(u0.ru_stime), u1.ru_nvcsw - u0.ru_nvcsw);
      }
      if (async && !rc) rc = icheck_wait();
      if (rank == 0) printf("COMMIT %d %lld %s %d\n", it, (long long)icheck_version(), icheck_mode(), rc);
      if (rank == 0 && hash && !rc) print_hash(grid, n, iter);
      fflush(stdout);
      if (rc) { fprintf(stderr, "icheck_commit: %s\n", icheck_strerror(rc)); return 5; }
    }
    if (probe && it % probe == 0) {
      rc = icheck_probe_agents(NULL);
      if (rank == 0) printf("PROBE %d %s %d\n", it, icheck_mode(), rc);
      fflush(stdout);
    }
    if (sleep_ms) msleep(sleep_ms);
  }
  icheck_wait();
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += grid[i] * (double)(i % 11 + 1);
#ifdef USE_MPI
  double all = 0;
  MPI_Reduce(&sum, &all, 1, MPI_DOUBLE, MPI_SUM, 0, world);
  sum = all;
#endif
  if (rank == 0) printf("RESULT %.17g\nFINAL %lld %s\n", sum, (long long)icheck_version(), icheck_mode());
  fflush(stdout);
  rc = icheck_finalize(persist ? IC_PERSIST : 0);
  if (rank == 0) printf("FINALIZE %d\n", rc);
  fflush(stdout);
  free(grid);
#ifdef USE_MPI
  MPI_Finalize();
#endif
  (void)size;
  if (rc) { fprintf(stderr, "icheck_finalize: %s\n", icheck_strerror(rc)); return 6; }
  return 0;
}
