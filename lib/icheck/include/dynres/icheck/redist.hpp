// The data movement of icheck_redistribute [John24 §7.4.1.2, §7.4.2]: fill
// new rank r's local buffer of a distributed object from the local buffers
// of the old ranks, reading only byte ranges of those old buffers through a
// caller-supplied batch reader (the agents by RMA, or the second level).
//
// Pure apart from the reader, header only (lib/icheck/src/redistribute.cpp
// and t/unit/icheck/test_redistribute.cpp use it). Counts are elements,
// offsets of a Read are bytes of the old rank's local buffer.
//
// Three paths, chosen by the layouts:
//   direct   neither layout CYCLIC and every copy of dist::plan at least
//            kDirectBytes long (BLOCK rows, explicit parts, big grid rows):
//            every copy is one read straight into dst, all in one batch
//            (the reader runs them in parallel, no bounce copy).
//   strided  both CYCLIC with the same width: destination blocks in local
//            order, source block of each found incrementally (no division per
//            block); per window of destination blocks every old rank's
//            needed span of blocks is read in one batch into a bounce buffer,
//            then copied out block by block.
//   general  everything else: the copies of a window of destination elements
//            are found lazily (dist::locate per run, never a plan of the
//            whole object), every old rank's span of them read in one batch
//            into a bounce buffer, then copied.
// Windows bound the bounce memory to about `window_bytes` (a CYCLIC side
// reads whole spans of an old rank: with width w an old rank's needed
// blocks are every (M / gcd(N, M))-th one, so up to M / gcd(N, M) times the
// bytes a rank receives cross the transport).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

#include "dynres/icheck/dist.hpp"

namespace dynres::icheck::redist {

/// `len` bytes at byte offset `off` of old rank `src`'s local buffer into dst.
struct Read {
  int src = 0;
  uint64_t off = 0, len = 0;
  char* dst = nullptr;
};

/// Where the bytes come from. target(p, n): dst memory that reads will land
/// in (called once per buffer before the reads: the agent reader registers
/// it once); read(batch): perform all reads of the batch (in parallel where
/// it can), throw std::exception on any failure.
struct Reader {
  std::function<void(char*, uint64_t)> target = [](char*, uint64_t) {};
  std::function<void(std::vector<Read>&)> read;
};

/// What a fill moved (for benchmarks and tests).
struct Stats {
  uint64_t bytes_read = 0;  ///< bytes the reader delivered
  uint64_t reads = 0, batches = 0;
  int path = 0;  ///< 1 direct, 2 strided, 3 general
  double read_s = 0;  ///< seconds inside the reader (transfers)
};

inline constexpr uint64_t kDirectBytes = 64 << 10;

namespace detail {
inline void copy_elems(char* d, const char* s, uint64_t n, size_t es) {
  if (n == 1) {
    switch (es) {
      case 8: std::memcpy(d, s, 8); return;
      case 4: std::memcpy(d, s, 4); return;
      case 1: *d = *s; return;
      default: break;
    }
  }
  std::memcpy(d, s, n * es);
}
/// Destination runs of rank r in local order from local element j0 on, at
/// most `limit` elements; fn(global_off, len). Lazy for Block/Cyclic/Explicit.
template <class F>
void dest_runs(const dist::Layout& to, int r, const std::vector<dist::Seg>& grid_segs, uint64_t j0, uint64_t limit,
               F&& fn) {
  uint64_t left = limit;
  auto seg = [&](uint64_t off, uint64_t len, uint64_t& skip) {
    if (!left) return;
    if (skip >= len) {
      skip -= len;
      return;
    }
    off += skip, len -= skip, skip = 0;
    const uint64_t n = std::min(len, left);
    fn(off, n);
    left -= n;
  };
  uint64_t skip = j0;
  switch (to.kind) {
    case dist::Kind::Cyclic: {
      const uint64_t P = uint64_t(to.nprocs), w = to.width;
      uint64_t b = uint64_t(r) + (j0 / w) * P;  // global block of local element j0
      skip = j0 % w;
      for (; left && b * w < to.global; b += P) seg(b * w, std::min(w, to.global - b * w), skip);
      break;
    }
    case dist::Kind::Grid:
      for (auto& s : grid_segs) {
        if (!left) break;
        seg(s.off, s.len, skip);
      }
      break;
    default:
      for (auto& s : dist::segments(to, r)) seg(s.off, s.len, skip);
      break;
  }
}
}  // namespace detail

/// Fill dst (local_count(to, r) * es bytes) of new rank r of `to` from the
/// old parts of `from`. Both layouts valid with the same global count; es is
/// the element size in bytes. Throws what the reader throws.
inline Stats fill(const dist::Layout& from, const dist::Layout& to, int r, size_t es, Reader& rd, char* dst,
                  uint64_t window_bytes = 32u << 20) {
  Stats st;
  if (from.global != to.global) throw std::invalid_argument("layouts of different global counts");
  const uint64_t n = dist::local_count(to, r);
  if (n == 0) return st;
  rd.target(dst, n * es);
  auto run_batch = [&](std::vector<Read>& b) {
    if (b.empty()) return;
    for (auto& x : b) st.bytes_read += x.len;
    st.reads += b.size();
    st.batches++;
    const auto t0 = std::chrono::steady_clock::now();
    rd.read(b);
    st.read_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const bool cyc = from.kind == dist::Kind::Cyclic || to.kind == dist::Kind::Cyclic;
  // direct: every copy long enough to land in place
  if (!cyc) {
    auto moves = dist::plan(from, to, r);
    bool direct = true;
    for (auto& m : moves) direct = direct && m.len * es >= kDirectBytes;
    if (direct || moves.size() <= 1) {
      st.path = 1;
      std::vector<Read> b;
      for (auto& m : moves) b.push_back({m.src_rank, m.src_off * es, m.len * es, dst + m.dst_off * es});
      run_batch(b);
      return st;
    }
  }
  std::vector<char> bounce;
  const int N = from.nprocs;
  std::vector<uint64_t> lo(static_cast<size_t>(N)), hi(static_cast<size_t>(N)), boff(static_cast<size_t>(N));
  // bounce layout of one window: old rank i's span [lo, hi) (elements) at boff[i]
  auto read_spans = [&]() {
    uint64_t total = 0;
    for (int i = 0; i < N; ++i) boff[size_t(i)] = total, total += hi[size_t(i)] > lo[size_t(i)] ? hi[size_t(i)] - lo[size_t(i)] : 0;
    if (total * es > bounce.size()) {
      bounce.assign(size_t(total * es), 0);
      rd.target(bounce.data(), bounce.size());
    }
    std::vector<Read> b;
    for (int i = 0; i < N; ++i)
      if (hi[size_t(i)] > lo[size_t(i)])
        b.push_back({i, lo[size_t(i)] * es, (hi[size_t(i)] - lo[size_t(i)]) * es, bounce.data() + boff[size_t(i)] * es});
    run_batch(b);
  };
  if (from.kind == dist::Kind::Cyclic && to.kind == dist::Kind::Cyclic && from.width == to.width) {
    // strided: destination block b' (local) is global block B = r + b'M,
    // held by old rank B % N as its local block B / N
    st.path = 2;
    const uint64_t w = to.width, M = uint64_t(to.nprocs), NN = uint64_t(N);
    const uint64_t nblocks = (n + w - 1) / w;
    const uint64_t win = std::max<uint64_t>(1, window_bytes / (w * es * M));
    const uint64_t stepq = M / NN, stepr = M % NN;
    for (uint64_t b0 = 0; b0 < nblocks; b0 += win) {
      const uint64_t b1 = std::min(nblocks, b0 + win);
      // spans: the old ranks repeat with a period <= N, so the first N
      // blocks of the window give every rank's first local block, the last
      // N its last one
      std::fill(lo.begin(), lo.end(), UINT64_MAX), std::fill(hi.begin(), hi.end(), 0);
      for (uint64_t bb = b0; bb < std::min(b1, b0 + NN); ++bb) {
        const uint64_t Bx = uint64_t(r) + bb * M;
        lo[Bx % NN] = std::min(lo[Bx % NN], (Bx / NN) * w);
      }
      for (uint64_t bb = b1 - std::min(b1 - b0, NN); bb < b1; ++bb) {
        const uint64_t Bx = uint64_t(r) + bb * M;
        hi[Bx % NN] = std::max(hi[Bx % NN], (Bx / NN) * w + std::min(w, to.global - Bx * w));
      }
      read_spans();
      uint64_t B = uint64_t(r) + b0 * M, i = B % NN, k = B / NN;
      char* d = dst + b0 * w * es;
      if (w == 1) {
        for (uint64_t bb = b0; bb < b1; ++bb) {
          detail::copy_elems(d, bounce.data() + (boff[i] + k - lo[i]) * es, 1, es);
          d += es;
          k += stepq, i += stepr;
          if (i >= NN) i -= NN, k++;
        }
      } else {
        for (uint64_t bb = b0; bb < b1; ++bb) {
          const uint64_t len = std::min(w, to.global - (uint64_t(r) + bb * M) * w);
          std::memcpy(d, bounce.data() + (boff[i] + k * w - lo[i]) * es, len * es);
          d += len * es;
          k += stepq, i += stepr;
          if (i >= NN) i -= NN, k++;
        }
      }
    }
    return st;
  }
  // general: lazily found copies per window of destination elements
  st.path = 3;
  const dist::Locator where(from);
  const std::vector<dist::Seg> grid_segs = to.kind == dist::Kind::Grid ? dist::segments(to, r) : std::vector<dist::Seg>{};
  const uint64_t spread = to.kind == dist::Kind::Cyclic ? uint64_t(to.nprocs) : 1;
  const uint64_t win = std::max<uint64_t>(1, window_bytes / (es * spread));
  std::vector<dist::Move> moves;
  for (uint64_t j0 = 0; j0 < n; j0 += win) {
    moves.clear();
    uint64_t dpos = j0;
    detail::dest_runs(to, r, grid_segs, j0, std::min(win, n - j0), [&](uint64_t g, uint64_t len) {
      dist::append_moves(moves, where, g, len, dpos);
      dpos += len;
    });
    std::fill(lo.begin(), lo.end(), UINT64_MAX), std::fill(hi.begin(), hi.end(), 0);
    for (auto& m : moves) {
      lo[size_t(m.src_rank)] = std::min(lo[size_t(m.src_rank)], m.src_off);
      hi[size_t(m.src_rank)] = std::max(hi[size_t(m.src_rank)], m.src_off + m.len);
    }
    read_spans();
    for (auto& m : moves)
      detail::copy_elems(dst + m.dst_off * es, bounce.data() + (boff[size_t(m.src_rank)] + m.src_off - lo[size_t(m.src_rank)]) * es,
                         m.len, es);
  }
  return st;
}

}  // namespace dynres::icheck::redist
