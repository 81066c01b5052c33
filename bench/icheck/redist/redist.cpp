// bench_icheck_redist — N -> M redistribution of one distributed double
// array: icheck_redistribute against what MPI users write today, all in the
// same MPICH run ([John24 §7.4.2, Fig. 9.18]).
//
// Run by bench/icheck/redist/run.sh (which starts the agents and loops over
// sizes, distributions and (N, M)); by hand, from the build directory:
//   icagent --listen unix:/tmp/a0.sock --app rbench --provider shm --fabric-node 127.0.0.1 --no-multi-level &
//   mpiexec -n 5 bench/bench_icheck_redist --config rb.yaml --n 3 --m 5 --mib 256 --dist cyclic --reps 5
// where rb.yaml lists the agents (icheck.yaml(5)) and the transport.
//
// World = max(N, M) processes; the old set is world ranks 0..N-1, the new set
// 0..M-1 (ranks below min(N, M) stay, the others leave or join). The array
// has G = MiB * 2^20 / 8 doubles, value(g) = g, distributed BLOCK or CYCLIC
// (width 1) [John24 §7.4.1.2]; every method ends with each new rank's part in
// its local order, verified element by element (not timed).
//   gs      the naive baseline of [John24 Fig. 9.18]: MPI_Gatherv of the old
//           parts to world rank 0, (CYCLIC: one pass putting the elements in
//           new-rank order), MPI_Scatterv to the new ranks
//   a2a     MPI_Alltoallv from old to new parts (what the MaM malleability
//           library does): CYCLIC packs per destination and unpacks per
//           source, BLOCK sends straight from and into the parts
//   warm    the agents hold a fresh version (committed by the old set,
//           IC_PERSIST): time of icheck_redistribute("array") on the new set
//   cold    icheck_commit on the old set + the same icheck_redistribute
//   (init   icheck_init + icheck_add_adapt_global on the new set: printed,
//           not part of warm or cold — a persisting process set keeps its
//           session in a library with MPI_Comm_spawn-free MPICH, here it is
//           re-opened per repetition)
// Baseline memcpy: one thread copying min(S, 256 MiB) between warm buffers.
// Times: barrier, operation, barrier; rank 0's wall time; medians of --reps.
// Output: one "row" line per method with median seconds, GB/s (S / time),
// xmemcpy (memcpy bandwidth fraction), speed-up over gs and a2a.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "icheck.h"

namespace {

int wrank = 0, wsize = 1;
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
uint64_t bstart(uint64_t n, uint64_t p, uint64_t i) { return i * (n / p) + std::min(i, n % p); }
uint64_t bcount(uint64_t n, uint64_t p, uint64_t i) { return n / p + (i < n % p ? 1 : 0); }

struct Layout {
  bool cyclic = false;
  uint64_t G = 0;
  int P = 1;
  uint64_t count(int r) const {
    if (r < 0 || r >= P) return 0;
    return cyclic ? (G > uint64_t(r) ? (G - 1 - uint64_t(r)) / uint64_t(P) + 1 : 0) : bcount(G, uint64_t(P), uint64_t(r));
  }
  uint64_t global(int r, uint64_t j) const { return cyclic ? uint64_t(r) + j * uint64_t(P) : bstart(G, uint64_t(P), uint64_t(r)) + j; }
};

/// Every element of this rank's new part equals its global index.
bool verify(const Layout& to, const std::vector<double>& part) {
  const uint64_t n = to.count(wrank);
  for (uint64_t j = 0; j < n; ++j)
    if (part[j] != double(to.global(wrank, j))) {
      std::fprintf(stderr, "rank %d: element %" PRIu64 " is %.0f, want %" PRIu64 "\n", wrank, j, part[j], to.global(wrank, j));
      return false;
    }
  return true;
}
void fill(const Layout& from, std::vector<double>& part) {
  const uint64_t n = from.count(wrank);
  for (uint64_t j = 0; j < n; ++j) part[j] = double(from.global(wrank, j));
}
void die(const char* what, int rc) {
  std::fprintf(stderr, "bench_icheck_redist: rank %d: %s: %s (%d)\n", wrank, what, icheck_strerror(rc), rc);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/// (a) naive: gather everything at world rank 0, scatter the new parts.
void gather_scatter(const Layout& from, const Layout& to, const std::vector<double>& old, std::vector<double>& fresh,
                    std::vector<double>& global, std::vector<double>& sendbuf) {
  std::vector<int> gc(size_t(wsize), 0), gd(size_t(wsize), 0), sc(size_t(wsize), 0), sd(size_t(wsize), 0);
  int acc = 0;
  for (int i = 0; i < wsize; ++i) gc[size_t(i)] = int(from.count(i)), gd[size_t(i)] = acc, acc += gc[size_t(i)];
  acc = 0;
  for (int r = 0; r < wsize; ++r) sc[size_t(r)] = int(to.count(r)), sd[size_t(r)] = acc, acc += sc[size_t(r)];
  MPI_Gatherv(old.data(), gc[size_t(wrank)], MPI_DOUBLE, global.data(), gc.data(), gd.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  const double* src = global.data();
  if (wrank == 0 && from.cyclic) {
    // gathered = old parts one after the other; the new parts one after the
    // other: new rank r's element j is g = r + jM, at old rank g % N, local g / N
    const uint64_t N = uint64_t(from.P), M = uint64_t(to.P);
    for (int r = 0; r < to.P; ++r) {
      double* d = sendbuf.data() + sd[size_t(r)];
      uint64_t g = uint64_t(r), i = g % N, k = g / N;
      const uint64_t sq = M / N, sr = M % N;
      for (int j = 0; j < sc[size_t(r)]; ++j) {
        d[j] = src[size_t(gd[size_t(i)]) + k];
        k += sq, i += sr;
        if (i >= N) i -= N, k++;
      }
    }
    src = sendbuf.data();
  }
  MPI_Scatterv(src, sc.data(), sd.data(), MPI_DOUBLE, fresh.data(), sc[size_t(wrank)], MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

/// (b) MPI_Alltoallv old -> new (CYCLIC: pack per destination, unpack per source).
void alltoallv(const Layout& from, const Layout& to, const std::vector<double>& old, std::vector<double>& fresh,
               std::vector<double>& sbuf, std::vector<double>& rbuf) {
  const size_t W = size_t(wsize);
  std::vector<int> sc(W, 0), sd(W, 0), rc(W, 0), rd(W, 0);
  const uint64_t N = uint64_t(from.P), M = uint64_t(to.P);
  const uint64_t nold = from.count(wrank), nnew = to.count(wrank);
  if (!from.cyclic) {
    // BLOCK: the overlap of old part i and new part r, straight from/into the parts
    const uint64_t o0 = bstart(from.G, N, uint64_t(wrank)), n0 = bstart(to.G, M, uint64_t(wrank));
    for (int k = 0; k < wsize; ++k) {
      if (wrank < from.P && k < to.P) {
        const uint64_t a = std::max(o0, bstart(to.G, M, uint64_t(k))), b = std::min(o0 + nold, bstart(to.G, M, uint64_t(k)) + to.count(k));
        if (b > a) sc[size_t(k)] = int(b - a), sd[size_t(k)] = int(a - o0);
      }
      if (wrank < to.P && k < from.P) {
        const uint64_t s = bstart(from.G, N, uint64_t(k));
        const uint64_t a = std::max(n0, s), b = std::min(n0 + nnew, s + from.count(k));
        if (b > a) rc[size_t(k)] = int(b - a), rd[size_t(k)] = int(a - n0);
      }
    }
    MPI_Alltoallv(old.data(), sc.data(), sd.data(), MPI_DOUBLE, fresh.data(), rc.data(), rd.data(), MPI_DOUBLE, MPI_COMM_WORLD);
    return;
  }
  // CYCLIC: old local k is g = rank + kN, going to new rank g % M
  if (wrank < from.P) {
    const uint64_t step = N % M;
    uint64_t d = uint64_t(wrank) % M;
    for (uint64_t k = 0; k < nold; ++k) {
      sc[size_t(d)]++;
      d += step;
      if (d >= M) d -= M;
    }
    int acc = 0;
    for (size_t k = 0; k < W; ++k) sd[k] = acc, acc += sc[k];
    std::vector<int> pos(sd);
    d = uint64_t(wrank) % M;
    for (uint64_t k = 0; k < nold; ++k) {
      sbuf[size_t(pos[size_t(d)]++)] = old[k];
      d += step;
      if (d >= M) d -= M;
    }
  }
  if (wrank < to.P) {
    const uint64_t step = M % N;
    uint64_t s = uint64_t(wrank) % N;
    for (uint64_t j = 0; j < nnew; ++j) {
      rc[size_t(s)]++;
      s += step;
      if (s >= N) s -= N;
    }
    int acc = 0;
    for (size_t k = 0; k < W; ++k) rd[k] = acc, acc += rc[k];
  }
  MPI_Alltoallv(sbuf.data(), sc.data(), sd.data(), MPI_DOUBLE, rbuf.data(), rc.data(), rd.data(), MPI_DOUBLE, MPI_COMM_WORLD);
  if (wrank < to.P) {
    std::vector<int> pos(rd);
    const uint64_t step = M % N;
    uint64_t s = uint64_t(wrank) % N;
    for (uint64_t j = 0; j < nnew; ++j) {
      fresh[j] = rbuf[size_t(pos[size_t(s)]++)];
      s += step;
      if (s >= N) s -= N;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  int N = 0, M = 0, reps = 3;
  uint64_t mib = 64;
  std::string dist = "block", config, methods = "gs,a2a,icheck";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        if (wrank == 0) std::fprintf(stderr, "bench_icheck_redist: %s needs a value\n", a.c_str());
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      return argv[++i];
    };
    if (a == "--n") N = std::atoi(next().c_str());
    else if (a == "--m") M = std::atoi(next().c_str());
    else if (a == "--mib") mib = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--dist") dist = next();
    else if (a == "--reps") reps = std::atoi(next().c_str());
    else if (a == "--config") config = next();
    else if (a == "--methods") methods = next();
    else {
      if (wrank == 0) std::fprintf(stderr, "bench_icheck_redist: unknown option %s\n", a.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (N < 1 || M < 1 || std::max(N, M) != wsize || mib == 0 || mib > 8192 || reps < 1 || (dist != "block" && dist != "cyclic")) {
    if (wrank == 0)
      std::fprintf(stderr, "bench_icheck_redist: need --n N --m M with max(N, M) = world size (%d), --mib 1..8192, "
                           "--dist block|cyclic, --reps >= 1\n", wsize);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const bool use_ic = methods.find("icheck") != std::string::npos;
  if (use_ic && config.empty()) {
    if (wrank == 0) std::fprintf(stderr, "bench_icheck_redist: icheck needs --config (agents)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const uint64_t S = mib << 20, G = S / 8;
  Layout from{dist == "cyclic", G, N}, to{dist == "cyclic", G, M};
  std::vector<double> old(size_t(from.count(wrank)) + 1), fresh(size_t(to.count(wrank)) + 1);
  fill(from, old);
  std::fill(fresh.begin(), fresh.end(), -1.0);  // touched: no first-touch faults inside the timings
  auto timed = [&](auto&& op) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now();
    op();
    MPI_Barrier(MPI_COMM_WORLD);
    return now() - t0;
  };
  auto check = [&](const char* what) {
    int ok = verify(to, fresh) ? 1 : 0, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
      if (wrank == 0) std::fprintf(stderr, "bench_icheck_redist: %s delivered wrong data\n", what);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::fill(fresh.begin(), fresh.end(), -1.0);
  };
  // memcpy baseline (one thread, warm buffers)
  double t_memcpy = 0;
  uint64_t mbytes = std::min<uint64_t>(S, 256u << 20);
  if (wrank == 0) {
    std::vector<char> a(size_t(mbytes), 1), b(size_t(mbytes), 2);
    std::vector<double> ts;
    for (int k = 0; k < std::max(3, reps); ++k) {
      const double t0 = now();
      std::memcpy(b.data(), a.data(), size_t(mbytes));
      ts.push_back(now() - t0);
      a[size_t(k)] = b[size_t(mbytes - 1 - k)];  // keep the copies observable
    }
    t_memcpy = median(ts) * double(S) / double(mbytes);
  }
  std::vector<double> tgs, ta2a, twarm, tcold, tinit, tcommit;
  if (methods.find("gs") != std::string::npos) {
    std::vector<double> global(wrank == 0 ? size_t(G) : 1), sendbuf(wrank == 0 && from.cyclic ? size_t(G) : 1);
    if (wrank == 0) std::fill(global.begin(), global.end(), 0.0), std::fill(sendbuf.begin(), sendbuf.end(), 0.0);
    for (int k = 0; k < reps; ++k) {
      tgs.push_back(timed([&] { gather_scatter(from, to, old, fresh, global, sendbuf); }));
      check("MPI_Gatherv + MPI_Scatterv");
    }
  }
  if (methods.find("a2a") != std::string::npos) {
    std::vector<double> sbuf(from.cyclic ? old.size() : 1, 0.0), rbuf(from.cyclic ? fresh.size() : 1, 0.0);
    for (int k = 0; k < reps; ++k) {
      ta2a.push_back(timed([&] { alltoallv(from, to, old, fresh, sbuf, rbuf); }));
      check("MPI_Alltoallv");
    }
  }
  if (use_ic) {
    MPI_Comm oldc, newc;
    MPI_Comm_split(MPI_COMM_WORLD, wrank < N ? 0 : MPI_UNDEFINED, wrank, &oldc);
    MPI_Comm_split(MPI_COMM_WORLD, wrank < M ? 0 : MPI_UNDEFINED, wrank, &newc);
    for (int k = 0; k < reps; ++k) {
      int st = 0, rc = 0;
      double tc = 0;
      if (wrank < N) {  // the old set commits a fresh version
        if ((rc = icheck_init(config.c_str(), "rbench", ICHECK_COMM(oldc), &st))) die("icheck_init (old set)", rc);
        if ((rc = icheck_add_adapt_global("array", old.data(), ICHECK_DOUBLE, size_t(G), from.cyclic ? ICHECK_CYCLIC : ICHECK_BLOCK, size_t(1))))
          die("icheck_add_adapt_global (old)", rc);
        MPI_Barrier(oldc);
        const double t0 = now();
        if ((rc = icheck_commit())) die("icheck_commit", rc);
        MPI_Barrier(oldc);
        tc = now() - t0;
        if (std::string(icheck_mode()) != "rdma") die("commit not to the agents (mode direct)", ICHECK_EAGENT);
        if ((rc = icheck_finalize(IC_PERSIST))) die("icheck_finalize (old)", rc);
      }
      MPI_Barrier(MPI_COMM_WORLD);  // the adaptation
      double ti = 0;
      const double t0 = now();
      if (wrank < M) {
        if ((rc = icheck_init(config.c_str(), "rbench", ICHECK_COMM(newc), &st))) die("icheck_init (new set)", rc);
        if ((rc = icheck_add_adapt_global("array", fresh.data(), ICHECK_DOUBLE, size_t(G), to.cyclic ? ICHECK_CYCLIC : ICHECK_BLOCK, size_t(1))))
          die("icheck_add_adapt_global (new)", rc);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      ti = now() - t0;
      const double tw = timed([&] {
        if (wrank < M && (rc = icheck_redistribute("array", fresh.data(), size_t(to.count(wrank))))) die("icheck_redistribute", rc);
      });
      check("icheck_redistribute");
      if (wrank < M && (rc = icheck_finalize(IC_PERSIST))) die("icheck_finalize (new)", rc);
      MPI_Bcast(&tc, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      twarm.push_back(tw), tcommit.push_back(tc), tcold.push_back(tc + tw), tinit.push_back(ti);
    }
    if (oldc != MPI_COMM_NULL) MPI_Comm_free(&oldc);
    if (newc != MPI_COMM_NULL) MPI_Comm_free(&newc);
  }
  if (wrank == 0) {
    const double gs = median(tgs), a2a = median(ta2a);
    auto row = [&](const char* what, const std::vector<double>& t) {
      if (t.empty()) return;
      const double m = median(t);
      std::printf("row %-6s %-6s %5" PRIu64 "MiB N=%d M=%d  %8.4f s  %6.2f GB/s  xmemcpy %5.2f  vs_gs %5.2f  vs_a2a %5.2f\n", dist.c_str(),
                  what, mib, N, M, m, double(S) / m / 1e9, t_memcpy / m, gs > 0 ? gs / m : 0.0, a2a > 0 ? a2a / m : 0.0);
    };
    std::printf("# memcpy %.4f s for %" PRIu64 " MiB (%.2f GB/s, one thread); medians of %d\n", t_memcpy, mib, double(S) / t_memcpy / 1e9, reps);
    row("memcpy", {t_memcpy});
    row("gs", tgs);
    row("a2a", ta2a);
    row("warm", twarm);
    row("cold", tcold);
    if (!tcommit.empty())
      std::printf("# icheck commit %.4f s, init+add on the new set %.4f s (not in warm/cold)\n", median(tcommit), median(tinit));
  }
  MPI_Finalize();
  return 0;
}
