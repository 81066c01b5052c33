/* icadapt — MPI test program of iCheck's data redistribution [John24
 * §7.4.1; t/integration/t4090-icheck-redist.sh]. One object of every kind:
 *   "iter"   CONSTANT int (42)            "nprocs" SIZE int     "me" RANK int
 *   "def"    DEFAULT int (7)              "joined" DEFAULT_JOINING int (-5; stored 100 + rank)
 *   "vol"    VOLATILE double (recalc: 1000 * new size + old size)
 *   "blk"    BLOCK double, width 3, 3 * 1001 elements
 *   "cyc"    CYCLIC int, width 5, 10007 elements
 *   "pre"    PREDEFINED explicit int: balanced blocks in reverse rank order, 9973 elements
 *   "grd"    PREDEFINED process grid (icheck_add_processor_mapping) double, 37 x 29
 *   "man"    MANUAL int, 5003 elements, local parts = balanced blocks; on a
 *            resized restore rank 0 gets the global array and scatters it
 * Element value = f(label, global index). Each rank checks every element of
 * its part against its own layout (computed here independently of
 * libicheck) and rank 0 prints a checksum per distributed object over the
 * global array (independent of the process count):
 *   "CHECKSUM <label> <16 hex>", "RESTORED <N> <M>", "OK", or "BAD ..." (exit 1).
 *
 * usage: icadapt APP commit|restore|bad --config F [--restart] [--persist] [--no-manual]
 *   commit: fill, commit once, finalize (flushing to the second level;
 *           --persist: IC_PERSIST, the version stays in agent memory only)
 *   restore: icheck_restart_all (or icheck_restart + icheck_restore with
 *            --restart), check, print
 *   bad: bad inputs must be refused with the right codes; nothing written
 *   --no-manual: leave out "man" (a version icredist can redistribute offline)
 */
#include <icheck.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, bad, no_manual, use_redistribute;
static MPI_Comm comm; /* the process set of the phase running */
#define BAD(...) (fprintf(stdout, "BAD rank %d: ", rank), fprintf(stdout, __VA_ARGS__), fputc('\n', stdout), bad = 1)

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
static size_t bstart(size_t n, size_t p, size_t i) { return i * (n / p) + (i < n % p ? i : n % p); }
static size_t bcount(size_t n, size_t p, size_t i) { return n / p + (i < n % p ? 1 : 0); }

#define GB (3 * 1001)
#define GC 10007
#define GP 9973
#define GR 37
#define GCOL 29
#define GM 5003
static double vblk(size_t g) { return (double)g * 0.5 + 1.0; }
static int vcyc(size_t g) { return (int)(g * 3 + 1); }
static int vpre(size_t g) { return (int)(g * 5 + 2); }
static double vgrd(size_t g) { return (double)g * 0.25 - 3.0; }
static int vman(size_t g) { return (int)(g * 11 + 3); }

/* global indices of this rank's elements, in local order */
static size_t* idx_block(size_t* n) {
  size_t U = GB / 3, s = bstart(U, (size_t)size, (size_t)rank) * 3, c = bcount(U, (size_t)size, (size_t)rank) * 3;
  size_t* x = malloc((c + 1) * sizeof *x);
  for (size_t i = 0; i < c; ++i) x[i] = s + i;
  *n = c;
  return x;
}
static size_t* idx_cyclic(size_t* n) {
  size_t* x = malloc((GC + 1) * sizeof *x), c = 0;
  for (size_t b = (size_t)rank; b * 5 < GC; b += (size_t)size)
    for (size_t k = 0; k < 5 && b * 5 + k < GC; ++k) x[c++] = b * 5 + k;
  *n = c;
  return x;
}
static void pre_layout(int p, size_t* counts, size_t* offsets) {
  for (int r = 0; r < p; ++r) { /* rank r owns balanced block p-1-r */
    counts[r] = bcount(GP, (size_t)p, (size_t)(p - 1 - r));
    offsets[r] = bstart(GP, (size_t)p, (size_t)(p - 1 - r));
  }
}
static size_t* idx_pre(size_t* n) {
  size_t counts[64], offsets[64];
  pre_layout(size, counts, offsets);
  size_t* x = malloc((counts[rank] + 1) * sizeof *x);
  for (size_t i = 0; i < counts[rank]; ++i) x[i] = offsets[rank] + i;
  *n = counts[rank];
  return x;
}
static void grid_dims(int p, int* d) {
  d[0] = 1;
  for (int k = 1; k * k <= p; ++k)
    if (p % k == 0) d[0] = k;
  d[1] = p / d[0];
}
static size_t* idx_grid(size_t* n) {
  int d[2];
  grid_dims(size, d);
  size_t pr = (size_t)rank / (size_t)d[1], pc = (size_t)rank % (size_t)d[1];
  size_t r0 = bstart(GR, (size_t)d[0], pr), nr = bcount(GR, (size_t)d[0], pr);
  size_t c0 = bstart(GCOL, (size_t)d[1], pc), nc = bcount(GCOL, (size_t)d[1], pc);
  size_t* x = malloc((nr * nc + 1) * sizeof *x), c = 0;
  for (size_t i = 0; i < nr; ++i)
    for (size_t j = 0; j < nc; ++j) x[c++] = (r0 + i) * GCOL + c0 + j;
  *n = c;
  return x;
}
static size_t* idx_man(size_t* n) {
  size_t s = bstart(GM, (size_t)size, (size_t)rank), c = bcount(GM, (size_t)size, (size_t)rank);
  size_t* x = malloc((c + 1) * sizeof *x);
  for (size_t i = 0; i < c; ++i) x[i] = s + i;
  *n = c;
  return x;
}

/* checksum over the global array: sum of mix(g ^ mix(value bits)) */
static void checksum(const char* label, const size_t* idx, size_t n, const void* data, size_t es) {
  uint64_t acc = 0, tot = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = 0;
    memcpy(&bits, (const char*)data + i * es, es);
    acc += mix(idx[i] ^ mix(bits));
  }
  MPI_Reduce(&acc, &tot, 1, MPI_UINT64_T, MPI_SUM, 0, comm);
  if (rank == 0) printf("CHECKSUM %s %016llx\n", label, (unsigned long long)tot);
}

static int recalc(const char* label, void* ptr, size_t count, const icheck_adapt_info* in, void* arg) {
  (void)label, (void)arg;
  if (count != 1 || in->new_size != size || in->rank != rank) return 1;
  *(double*)ptr = 1000.0 * in->new_size + in->old_size;
  return 0;
}
/* MANUAL restart function: rank 0 holds the global array, scatters blocks */
static int manual(const char* label, const void* global, size_t gcount, const size_t* old_counts, void* ptr,
                  size_t local_count, const icheck_adapt_info* in, void* arg) {
  (void)label, (void)arg;
  size_t sum = 0;
  for (int i = 0; i < in->old_size; ++i) sum += old_counts[i];
  if (sum != gcount || (rank == 0) != (global != NULL)) return 1;
  int* counts = malloc(sizeof(int) * (size_t)size);
  int* displs = malloc(sizeof(int) * (size_t)size);
  for (int r = 0; r < size; ++r) counts[r] = (int)bcount(gcount, (size_t)size, (size_t)r), displs[r] = (int)bstart(gcount, (size_t)size, (size_t)r);
  if ((size_t)counts[rank] != local_count) return 1;
  MPI_Scatterv(global, counts, displs, MPI_INT, ptr, (int)local_count, MPI_INT, 0, comm);
  free(counts), free(displs);
  return 0;
}

static void expect(int rc, int want, const char* what) {
  if (rc != want) BAD("%s returned %d (%s), expected %d", what, rc, icheck_strerror(rc), want);
}

/* One phase (commit, restore or bad) over the process set c; returns
 * non-zero when any rank of c saw something wrong. */
static int run(MPI_Comm c, const char* app, const char* phase, const char* config, int use_restart, int persist) {
  comm = c;
  MPI_Comm world = c;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  bad = 0;
  int status = -1;
  int rc = icheck_init(config, app, ICHECK_COMM(world), &status);
  if (rc) {
    printf("BAD init %d\n", rc);
    MPI_Abort(world, 1);
  }
  if (!strcmp(phase, "bad")) {
    int x = 1;
    double d[4];
    icheck_pmap* pm = NULL;
    icheck_pmap_create(&pm);
    expect(icheck_add_adapt_global("big", d, ICHECK_DOUBLE, SIZE_MAX / 4, ICHECK_BLOCK, (size_t)1), ICHECK_ELAYOUT, "overflowing global count");
    size_t c3[2] = {6, 4}, o3[2] = {0, 5};
    expect(icheck_add_processor_layout(pm, 2, c3, o3), ICHECK_ELAYOUT, "overlapping predefined parts");
    size_t c4[2] = {5, 4}, o4[2] = {0, 5};
    expect(icheck_add_processor_layout(pm, 2, c4, o4), ICHECK_OK, "valid predefined layout of 9");
    expect(icheck_add_processor_layout(pm, 2, c4, o4), ICHECK_EEXIST, "second layout for 2 processes");
    icheck_pmap* pm3 = NULL;
    icheck_pmap_create(&pm3);
    size_t c5[3] = {3, 3, 3}, o5[3] = {0, 3, 6};
    expect(icheck_add_processor_layout(pm3, 3, c5, o5), ICHECK_OK, "valid layout for 3");
    expect(icheck_add_adapt_global("pre", d, ICHECK_DOUBLE, 9, ICHECK_PREDEFINED, (const icheck_pmap*)pm3), size == 3 ? ICHECK_OK : ICHECK_ELAYOUT, "no mapping for this process count");
    icheck_pmap_free(pm3);
    int dims[2] = {2, 2};
    size_t shape[2] = {3, 3};
    expect(icheck_add_processor_mapping(pm, 3, 2, dims, shape), ICHECK_ELAYOUT, "grid of 4 cells for 3 processes");
    expect(icheck_add_adapt_global("pre2", d, ICHECK_DOUBLE, 10, ICHECK_PREDEFINED, (const icheck_pmap*)pm), ICHECK_ELAYOUT, "predefined counts sum to 9, not 10");
    expect(icheck_add_adapt_global("cyc", d, ICHECK_DOUBLE, 10, ICHECK_CYCLIC, (size_t)0), ICHECK_ELAYOUT, "cyclic width 0");
    expect(icheck_add_adapt_global("blk", d, ICHECK_DOUBLE, 10, ICHECK_BLOCK, (size_t)3), ICHECK_ELAYOUT, "block width 3 of 10");
    expect(icheck_add_adapt_global("x", d, ICHECK_DOUBLE, 10, 99, (size_t)1), ICHECK_EINVAL, "unknown distribution");
    expect(icheck_add_adapt("__icheck_adapt", &x, 1, ICHECK_INT, ICHECK_CONSTANT), ICHECK_ELABEL, "reserved label");
    expect(icheck_add("__icheck_x", &x, 1, ICHECK_INT), ICHECK_ELABEL, "reserved label (icheck_add)");
    expect(icheck_add_adapt("a/b", &x, 1, ICHECK_INT, ICHECK_CONSTANT), ICHECK_ELABEL, "unsafe label");
    expect(icheck_add_adapt("s", &x, 1, ICHECK_CHAR, ICHECK_SIZE), ICHECK_EINVAL, "SIZE of chars");
    expect(icheck_add_adapt("d", &x, 1, ICHECK_INT, ICHECK_DEFAULT, (const void*)NULL), ICHECK_EINVAL, "DEFAULT without value");
    expect(icheck_add_adapt("v", &x, 1, ICHECK_INT, ICHECK_VOLATILE, (icheck_recalc_fn)NULL, (void*)NULL), ICHECK_EINVAL, "VOLATILE without function");
    expect(icheck_add_adapt("q", &x, 1, ICHECK_INT, 77), ICHECK_EINVAL, "unknown attribute");
    expect(icheck_add_adapt("ok", &x, 1, ICHECK_INT, ICHECK_CONSTANT), ICHECK_OK, "valid CONSTANT");
    expect(icheck_add_adapt("ok", &x, 1, ICHECK_INT, ICHECK_RANK), ICHECK_EEXIST, "label twice");
    expect(icheck_restore("ok", &x, 1), ICHECK_ESTATE, "restore before restart");
    int mloc[3] = {0, 0, 0};
    expect(icheck_add_adapt_global("m", mloc, ICHECK_INT, 100, ICHECK_MANUAL, (size_t)3, manual, (void*)NULL, 0), ICHECK_OK, "MANUAL add");
    expect(icheck_commit(), ICHECK_ELAYOUT, "commit with MANUAL counts not summing to the global count");
    icheck_pmap_free(pm);
    printf("VERSION %lld\n", (long long)icheck_version());
    icheck_finalize(0);
    if (!bad && rank == 0) printf("OK\n");
    return bad;
  }
  /* declare every object */
  int iter = 0, nprocs = -1, me = -1, def = -1, joined = 100 + rank, defv = 7, joinv = -5;
  double vol = -1;
  size_t nb, nc, np, ng, nm;
  size_t *ib = idx_block(&nb), *ic = idx_cyclic(&nc), *ip = idx_pre(&np), *ig = idx_grid(&ng), *im = idx_man(&nm);
  double* blk = calloc(nb + 1, sizeof *blk);
  int* cyc = calloc(nc + 1, sizeof *cyc);
  int* pre = calloc(np + 1, sizeof *pre);
  double* grd = calloc(ng + 1, sizeof *grd);
  int* man = calloc(nm + 1, sizeof *man);
  icheck_pmap *pmap = NULL, *gmap = NULL;
  icheck_pmap_create(&pmap);
  icheck_pmap_create(&gmap);
  for (int p = 1; p <= 8; ++p) {
    size_t counts[8], offsets[8];
    pre_layout(p, counts, offsets);
    expect(icheck_add_processor_layout(pmap, p, counts, offsets), ICHECK_OK, "processor layout");
    int d[2];
    size_t shape[2] = {GR, GCOL};
    grid_dims(p, d);
    expect(icheck_add_processor_mapping(gmap, p, 2, d, shape), ICHECK_OK, "processor mapping");
  }
  expect(icheck_add_adapt("iter", &iter, 1, ICHECK_INT, ICHECK_CONSTANT), 0, "add iter");
  expect(icheck_add_adapt("nprocs", &nprocs, 1, ICHECK_INT, ICHECK_SIZE), 0, "add nprocs");
  expect(icheck_add_adapt("me", &me, 1, ICHECK_INT, ICHECK_RANK), 0, "add me");
  expect(icheck_add_adapt("def", &def, 1, ICHECK_INT, ICHECK_DEFAULT, (const void*)&defv), 0, "add def");
  expect(icheck_add_adapt("joined", &joined, 1, ICHECK_INT, ICHECK_DEFAULT_JOINING, (const void*)&joinv), 0, "add joined");
  expect(icheck_add_adapt("vol", &vol, 1, ICHECK_DOUBLE, ICHECK_VOLATILE, recalc, (void*)NULL), 0, "add vol");
  expect(icheck_add_adapt_global("blk", blk, ICHECK_DOUBLE, GB, ICHECK_BLOCK, (size_t)3), 0, "add blk");
  expect(icheck_add_adapt_global("cyc", cyc, ICHECK_INT, GC, ICHECK_CYCLIC, (size_t)5), 0, "add cyc");
  expect(icheck_add_adapt_global("pre", pre, ICHECK_INT, GP, ICHECK_PREDEFINED, (const icheck_pmap*)pmap), 0, "add pre");
  expect(icheck_add_adapt_global("grd", grd, ICHECK_DOUBLE, (size_t)GR * GCOL, ICHECK_PREDEFINED, (const icheck_pmap*)gmap), 0, "add grd");
  if (!no_manual) expect(icheck_add_adapt_global("man", man, ICHECK_INT, GM, ICHECK_MANUAL, nm, manual, (void*)NULL, 0), 0, "add man");
  size_t lc = 0;
  expect(icheck_adapt_local_count("cyc", &lc), 0, "local count");
  if (lc != nc) BAD("local count of cyc %zu, expected %zu", lc, nc);

  if (!strcmp(phase, "commit")) {
    iter = 42;
    for (size_t i = 0; i < nb; ++i) blk[i] = vblk(ib[i]);
    for (size_t i = 0; i < nc; ++i) cyc[i] = vcyc(ic[i]);
    for (size_t i = 0; i < np; ++i) pre[i] = vpre(ip[i]);
    for (size_t i = 0; i < ng; ++i) grd[i] = vgrd(ig[i]);
    for (size_t i = 0; i < nm; ++i) man[i] = vman(im[i]);  /* unused with --no-manual */
    expect(icheck_commit(), 0, "commit");
    if (rank == 0) printf("COMMITTED %d version %lld\n", size, (long long)icheck_version());
  } else {
    if (status != ICHECK_STATUS_RESTART) BAD("no checkpoint to restore");
    if (use_redistribute) {
      /* [John24 Listing 7.2]: one icheck_redistribute per label, no
       * icheck_restart; reverse order, VOLATILE last */
      const char* ls[] = {"man", "grd", "pre", "cyc", "blk", "joined", "def", "me", "nprocs", "iter", "vol"};
      void* ps[] = {man, grd, pre, cyc, blk, &joined, &def, &me, &nprocs, &iter, &vol};
      size_t cs[] = {nm, ng, np, nc, nb, 1, 1, 1, 1, 1, 1};
      for (int k = no_manual; k < 11; ++k) expect(icheck_redistribute(ls[k], ps[k], cs[k]), 0, ls[k]);
      expect(icheck_redistribute("nosuch", &vol, 1), ICHECK_ENOENT, "redistribute of an unknown label");
      expect(icheck_redistribute("blk", blk, nb + 1), ICHECK_EMISMATCH, "redistribute with a wrong count");
      expect(icheck_redistribute(rank == 0 ? "blk" : "cyc", rank == 0 ? (void*)blk : (void*)cyc, rank == 0 ? nb : nc),
             size > 1 ? ICHECK_EINVAL : ICHECK_OK, "ranks naming different labels");
    } else if (use_restart) {
      expect(icheck_restart(), 0, "icheck_restart");
      /* reverse order: labels can be restored one by one (VOLATILE too) */
      const char* ls[] = {"man", "grd", "pre", "cyc", "blk", "joined", "def", "me", "nprocs", "iter"};
      void* ps[] = {man, grd, pre, cyc, blk, &joined, &def, &me, &nprocs, &iter};
      size_t cs[] = {nm, ng, np, nc, nb, 1, 1, 1, 1, 1};
      for (int k = no_manual; k < 10; ++k) expect(icheck_restore(ls[k], ps[k], cs[k]), 0, ls[k]);
      expect(icheck_restore("vol", &vol, 1), 0, "vol");
      expect(icheck_restore("nosuch", &vol, 1), ICHECK_ENOENT, "restore of an unknown label");
      expect(icheck_restore("blk", blk, nb + 1), ICHECK_EMISMATCH, "restore with a wrong count");
    } else {
      rc = icheck_restart_all();
      if (rc) BAD("restart_all: %s (%d)", icheck_strerror(rc), rc);
    }
    const int N = icheck_restart_size();
    if (rank == 0) printf("RESTORED %d %d\n", N, size);
    if (iter != 42) BAD("iter %d", iter);
    if (nprocs != size) BAD("nprocs %d", nprocs);
    if (me != rank) BAD("me %d", me);
    if (def != 7) BAD("def %d", def);
    if (joined != (rank < N ? 100 + rank : -5)) BAD("joined %d (old size %d)", joined, N);
    if (vol != 1000.0 * size + N) BAD("vol %g", vol);
    for (size_t i = 0; i < nb; ++i) if (blk[i] != vblk(ib[i])) { BAD("blk[%zu] = %g, want %g", i, blk[i], vblk(ib[i])); break; }
    for (size_t i = 0; i < nc; ++i) if (cyc[i] != vcyc(ic[i])) { BAD("cyc[%zu] = %d, want %d", i, cyc[i], vcyc(ic[i])); break; }
    for (size_t i = 0; i < np; ++i) if (pre[i] != vpre(ip[i])) { BAD("pre[%zu] = %d, want %d", i, pre[i], vpre(ip[i])); break; }
    for (size_t i = 0; i < ng; ++i) if (grd[i] != vgrd(ig[i])) { BAD("grd[%zu] = %g, want %g", i, grd[i], vgrd(ig[i])); break; }
    for (size_t i = 0; i < nm && !no_manual; ++i) if (man[i] != vman(im[i])) { BAD("man[%zu] = %d, want %d", i, man[i], vman(im[i])); break; }
  }
  checksum("blk", ib, nb, blk, sizeof *blk);
  checksum("cyc", ic, nc, cyc, sizeof *cyc);
  checksum("pre", ip, np, pre, sizeof *pre);
  checksum("grd", ig, ng, grd, sizeof *grd);
  if (!no_manual) checksum("man", im, nm, man, sizeof *man);
  if (rank == 0) printf("MODE %s\n", icheck_mode());
  rc = icheck_finalize(persist ? IC_PERSIST : 0);
  if (rc) BAD("finalize %d", rc);
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, world);
  if (!any && rank == 0) printf("OK\n");
  icheck_pmap_free(pmap);
  icheck_pmap_free(gmap);
  free(ib), free(ic), free(ip), free(ig), free(im), free(blk), free(cyc), free(pre), free(grd), free(man);
  return any;
}

/* A comma-separated list of world ranks contains r. */
static int member(const char* list, int r) {
  char buf[256];
  snprintf(buf, sizeof buf, ",%s,", list);
  char me[16];
  snprintf(me, sizeof me, ",%d,", r);
  return strstr(buf, me) != NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: icadapt APP commit|restore|bad|pset [--config F] [--restart] [--redistribute] [--old LIST --new LIST]\n");
    return 2;
  }
  const char *app = argv[1], *phase = argv[2], *config = NULL, *olds = NULL, *news = NULL;
  int use_restart = 0, persist = 0;
  for (int i = 3; i < argc; ++i) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
    else if (!strcmp(argv[i], "--restart")) use_restart = 1;
    else if (!strcmp(argv[i], "--redistribute")) use_redistribute = 1;
    else if (!strcmp(argv[i], "--persist")) persist = 1;
    else if (!strcmp(argv[i], "--no-manual")) no_manual = 1;
    else if (!strcmp(argv[i], "--old") && i + 1 < argc) olds = argv[++i];
    else if (!strcmp(argv[i], "--new") && i + 1 < argc) news = argv[++i];
  }
  MPI_Init(&argc, &argv);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int wrank = 0, wsize = 0, any = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  if (wsize > 64) return 2;
  if (strcmp(phase, "pset") != 0) {
    any = run(MPI_COMM_WORLD, app, phase, config, use_restart, persist);
  } else {
    /* A process set that persists across an adaptation: the processes of
     * --old commit (IC_PERSIST: the version stays in the agents) and leave
     * the library; then the processes of --new (some stayed, some join)
     * initialise it on their communicator and take their parts with one
     * icheck_redistribute per label. Leaving processes wait. */
    if (!olds || !news) {
      fprintf(stderr, "icadapt pset needs --old LIST and --new LIST\n");
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm oldc, newc;
    MPI_Comm_split(MPI_COMM_WORLD, member(olds, wrank) ? 0 : MPI_UNDEFINED, wrank, &oldc);
    MPI_Comm_split(MPI_COMM_WORLD, member(news, wrank) ? 0 : MPI_UNDEFINED, wrank, &newc);
    if (oldc != MPI_COMM_NULL) {
      MPI_Comm_rank(oldc, &rank);
      if (rank == 0) printf("PHASE old\n");
      any |= run(oldc, app, "commit", config, 0, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* the adaptation */
    if (newc != MPI_COMM_NULL) {
      MPI_Comm_rank(newc, &rank);
      if (rank == 0) printf("PHASE new\n");
      use_redistribute = 1;
      any |= run(newc, app, "restore", config, 0, persist);
    }
    int all = 0;
    MPI_Allreduce(&any, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    any = all;
    if (oldc != MPI_COMM_NULL) MPI_Comm_free(&oldc);
    if (newc != MPI_COMM_NULL) MPI_Comm_free(&newc);
  }
  MPI_Finalize();
  return any;
}
