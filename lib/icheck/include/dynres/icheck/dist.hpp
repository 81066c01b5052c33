// Distribution math of iCheck's data redistribution [John24 §7.4.1.2]:
// which elements of a global 1-D array (a flat, row-major view of an N-d
// array) rank r of P owns, in which local order, and how the parts of a
// layout over N processes map onto the parts of a layout over M processes.
//
// Pure functions, no I/O, header only (lib/icheck/src/adapt.cpp and
// t/unit/icheck/test_dist.cpp use it). All counts and offsets are in
// elements, never bytes. A rank's local buffer is the concatenation of its
// segments in the order segments() returns them.
//
// Layouts:
//   Block     global_count split in P contiguous blocks of whole units of
//             `width` elements (width 0 = 1; global_count must be a multiple
//             of width): U = G / width units, rank r gets U/P units, the
//             first U%P ranks one more, in rank order (the usual MPI block
//             row split: heat's rows are units of NX cells).
//   Cyclic    blocks of `width` elements (>= 1) dealt round robin: block b
//             belongs to rank b % P; the last block may be shorter.
//   Explicit  PREDEFINED by counts/offsets: rank r owns [offsets[r],
//             offsets[r] + counts[r]); the counts must sum to G and the
//             ranges must not overlap (so they tile [0, G) exactly).
//   Grid      PREDEFINED by a process grid (icheck_add_processor_mapping,
//             the seed's dim[0] x dim[1]): an array of `shape` (slowest
//             dimension first, product G) cut into dims[0] x dims[1] x ...
//             blocks (Block split per dimension); rank r has grid coordinates
//             in row-major order (last dimension fastest, as MPI_Cart_create)
//             and stores its block row-major.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace dynres::icheck::dist {

enum class Kind { Block = 1, Cyclic = 2, Explicit = 3, Grid = 4 };

/// Largest number of ranks and grid dimensions a layout may describe.
inline constexpr int kMaxProcs = 1 << 20;
inline constexpr int kMaxDims = 8;

struct Layout {
  Kind kind = Kind::Block;
  uint64_t global = 0;  ///< G, elements of the global array
  int nprocs = 1;       ///< P
  uint64_t width = 1;   ///< Block unit / Cyclic block length
  std::vector<uint64_t> counts, offsets;  ///< Explicit: per rank, size P
  std::vector<uint64_t> shape;            ///< Grid: extents, product G
  std::vector<int> dims;                  ///< Grid: process grid, product P
};

/// A run of `len` global elements starting at global index `off`.
struct Seg {
  uint64_t off = 0, len = 0;
  bool operator==(const Seg&) const = default;
};

/// Where global element g lives: rank, local index, and how many elements
/// from g on are contiguous both globally and in that rank's local buffer.
struct Loc {
  int rank = 0;
  uint64_t local = 0, run = 0;
};

/// One copy of a redistribution plan: `len` elements from local index
/// `src_off` of old rank `src_rank` to local index `dst_off` of the new rank.
struct Move {
  int src_rank = 0;
  uint64_t src_off = 0, dst_off = 0, len = 0;
  bool operator==(const Move&) const = default;
};

namespace detail {
/// Balanced block split of n items over p: [start, start + count) of part i.
inline uint64_t bstart(uint64_t n, uint64_t p, uint64_t i) { return i * (n / p) + std::min(i, n % p); }
inline uint64_t bcount(uint64_t n, uint64_t p, uint64_t i) { return n / p + (i < n % p ? 1 : 0); }
/// Part owning item k of a balanced split of n over p.
inline uint64_t bowner(uint64_t n, uint64_t p, uint64_t k) {
  const uint64_t b = n / p, r = n % p, big = r * (b + 1);
  if (k < big) return k / (b + 1);
  return r + (k - big) / b;  // b > 0 here: k < n
}
inline bool mul_ok(uint64_t a, uint64_t b, uint64_t& out) {
  if (a != 0 && b > UINT64_MAX / a) return false;
  out = a * b;
  return true;
}
/// Grid coordinates of rank r (row-major, last dimension fastest).
inline std::vector<uint64_t> coords(const std::vector<int>& dims, int r) {
  std::vector<uint64_t> c(dims.size());
  uint64_t x = uint64_t(r);
  for (size_t d = dims.size(); d-- > 0;) c[d] = x % uint64_t(dims[d]), x /= uint64_t(dims[d]);
  return c;
}
}  // namespace detail

/// "" when the layout is well formed, else what is wrong (for the error
/// message of ICHECK_ELAYOUT / ICHECK_EINVAL). Overflow-safe.
inline std::string validate(const Layout& l) {
  if (l.nprocs < 1 || l.nprocs > kMaxProcs) return "process count " + std::to_string(l.nprocs) + " outside 1.." + std::to_string(kMaxProcs);
  if (l.global == 0) return "global count is 0";
  switch (l.kind) {
    case Kind::Block:
      if (l.width == 0) return "block width is 0";
      if (l.global % l.width) return "global count " + std::to_string(l.global) + " is not a multiple of the block width " + std::to_string(l.width);
      return "";
    case Kind::Cyclic:
      if (l.width == 0) return "cyclic width is 0";
      return "";
    case Kind::Explicit: {
      if (l.counts.size() != size_t(l.nprocs) || l.offsets.size() != size_t(l.nprocs))
        return "predefined layout needs one count and one offset per process (" + std::to_string(l.nprocs) + ")";
      uint64_t sum = 0;
      std::vector<size_t> idx;
      for (size_t i = 0; i < l.counts.size(); ++i) {
        if (l.counts[i] > l.global || sum > l.global - l.counts[i])
          return "predefined counts sum to more than the global count " + std::to_string(l.global);
        sum += l.counts[i];
        if (l.counts[i] == 0) continue;
        if (l.offsets[i] > l.global || l.counts[i] > l.global - l.offsets[i])
          return "predefined part of rank " + std::to_string(i) + " [" + std::to_string(l.offsets[i]) + ", +" +
                 std::to_string(l.counts[i]) + ") lies outside the global array of " + std::to_string(l.global);
        idx.push_back(i);
      }
      if (sum != l.global)
        return "predefined counts sum to " + std::to_string(sum) + ", not to the global count " + std::to_string(l.global);
      std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return l.offsets[a] < l.offsets[b]; });
      for (size_t k = 1; k < idx.size(); ++k)
        if (l.offsets[idx[k - 1]] + l.counts[idx[k - 1]] > l.offsets[idx[k]])
          return "predefined parts of ranks " + std::to_string(idx[k - 1]) + " and " + std::to_string(idx[k]) + " overlap";
      return "";
    }
    case Kind::Grid: {
      if (l.dims.empty() || l.dims.size() > size_t(kMaxDims) || l.dims.size() != l.shape.size())
        return "process grid needs 1.." + std::to_string(kMaxDims) + " dimensions, as many as the array shape";
      uint64_t p = 1, g = 1;
      for (size_t d = 0; d < l.dims.size(); ++d) {
        if (l.dims[d] < 1) return "process grid dimension " + std::to_string(d) + " is < 1";
        if (l.shape[d] == 0) return "array extent " + std::to_string(d) + " is 0";
        if (!detail::mul_ok(p, uint64_t(l.dims[d]), p) || !detail::mul_ok(g, l.shape[d], g))
          return "process grid or array shape overflows";
      }
      if (p != uint64_t(l.nprocs))
        return "process grid has " + std::to_string(p) + " cells for " + std::to_string(l.nprocs) + " processes";
      if (g != l.global) return "array shape holds " + std::to_string(g) + " elements, not the global count " + std::to_string(l.global);
      return "";
    }
  }
  return "unknown distribution";
}

/// Elements rank r owns (its local buffer length). Layout must be valid.
inline uint64_t local_count(const Layout& l, int r) {
  const uint64_t P = uint64_t(l.nprocs), R = uint64_t(r);
  switch (l.kind) {
    case Kind::Block: return detail::bcount(l.global / l.width, P, R) * l.width;
    case Kind::Cyclic: {
      const uint64_t nb = l.global / l.width + (l.global % l.width ? 1 : 0);  // blocks
      if (R >= nb) return 0;
      const uint64_t mine = (nb - 1 - R) / P + 1;  // blocks R, R+P, ... < nb
      const bool has_last = (nb - 1) % P == R;
      return mine * l.width - (has_last && l.global % l.width ? l.width - l.global % l.width : 0);
    }
    case Kind::Explicit: return l.counts[size_t(r)];
    case Kind::Grid: {
      auto c = detail::coords(l.dims, r);
      uint64_t n = 1;
      for (size_t d = 0; d < l.dims.size(); ++d) n *= detail::bcount(l.shape[d], uint64_t(l.dims[d]), c[d]);
      return n;
    }
  }
  return 0;
}

/// The global ranges rank r owns, in local order (adjacent ranges merged).
inline std::vector<Seg> segments(const Layout& l, int r) {
  std::vector<Seg> out;
  auto push = [&](uint64_t off, uint64_t len) {
    if (!len) return;
    if (!out.empty() && out.back().off + out.back().len == off) out.back().len += len;
    else out.push_back({off, len});
  };
  const uint64_t P = uint64_t(l.nprocs), R = uint64_t(r);
  switch (l.kind) {
    case Kind::Block: {
      const uint64_t U = l.global / l.width;
      push(detail::bstart(U, P, R) * l.width, detail::bcount(U, P, R) * l.width);
      break;
    }
    case Kind::Cyclic:
      for (uint64_t b = R; b * l.width < l.global; b += P) push(b * l.width, std::min(l.width, l.global - b * l.width));
      break;
    case Kind::Explicit: push(l.offsets[size_t(r)], l.counts[size_t(r)]); break;
    case Kind::Grid: {
      const size_t D = l.dims.size();
      auto c = detail::coords(l.dims, r);
      std::vector<uint64_t> lo(D), n(D);
      for (size_t d = 0; d < D; ++d) {
        lo[d] = detail::bstart(l.shape[d], uint64_t(l.dims[d]), c[d]);
        n[d] = detail::bcount(l.shape[d], uint64_t(l.dims[d]), c[d]);
        if (!n[d]) return out;
      }
      std::vector<uint64_t> i(D, 0);  // index inside the block, dims 0..D-2
      for (;;) {
        uint64_t g = 0;
        for (size_t d = 0; d < D; ++d) g = g * l.shape[d] + lo[d] + (d + 1 < D ? i[d] : 0);
        push(g, n[D - 1]);
        size_t d = D - 1;
        while (d-- > 0) {
          if (++i[d] < n[d]) break;
          i[d] = 0;
        }
        if (d == size_t(-1)) break;
      }
      break;
    }
  }
  return out;
}

/// Owner of global element g (< global) and the contiguous run from it.
inline Loc locate(const Layout& l, uint64_t g) {
  const uint64_t P = uint64_t(l.nprocs);
  switch (l.kind) {
    case Kind::Block: {
      const uint64_t U = l.global / l.width, u = g / l.width, r = detail::bowner(U, P, u);
      const uint64_t start = detail::bstart(U, P, r) * l.width, end = start + detail::bcount(U, P, r) * l.width;
      return {int(r), g - start, end - g};
    }
    case Kind::Cyclic: {
      const uint64_t b = g / l.width, w = g % l.width;
      const uint64_t end = std::min((b + 1) * l.width, l.global);
      return {int(b % P), (b / P) * l.width + w, end - g};
    }
    case Kind::Explicit: {
      for (size_t r = 0; r < l.counts.size(); ++r)
        if (l.counts[r] && g >= l.offsets[r] && g - l.offsets[r] < l.counts[r])
          return {int(r), g - l.offsets[r], l.offsets[r] + l.counts[r] - g};
      return {-1, 0, 0};  // unreachable for a valid layout
    }
    case Kind::Grid: {
      const size_t D = l.dims.size();
      std::vector<uint64_t> gi(D), own(D), li(D), n(D);
      uint64_t x = g;
      for (size_t d = D; d-- > 0;) gi[d] = x % l.shape[d], x /= l.shape[d];
      uint64_t rank = 0, local = 0;
      for (size_t d = 0; d < D; ++d) {
        own[d] = detail::bowner(l.shape[d], uint64_t(l.dims[d]), gi[d]);
        li[d] = gi[d] - detail::bstart(l.shape[d], uint64_t(l.dims[d]), own[d]);
        n[d] = detail::bcount(l.shape[d], uint64_t(l.dims[d]), own[d]);
        rank = rank * uint64_t(l.dims[d]) + own[d];
        local = local * n[d] + li[d];
      }
      return {int(rank), local, n[D - 1] - li[D - 1]};
    }
  }
  return {-1, 0, 0};
}

/// locate() for many elements of one layout: Explicit layouts through a
/// table of their non-empty ranks sorted by offset (log P per lookup).
class Locator {
 public:
  explicit Locator(const Layout& l) : l_(l) {
    if (l.kind != Kind::Explicit) return;
    for (size_t i = 0; i < l.counts.size(); ++i)
      if (l.counts[i]) order_.push_back(i);
    std::sort(order_.begin(), order_.end(), [&](size_t a, size_t b) { return l.offsets[a] < l.offsets[b]; });
  }
  Loc operator()(uint64_t g) const {
    if (l_.kind != Kind::Explicit) return locate(l_, g);
    auto it = std::upper_bound(order_.begin(), order_.end(), g, [&](uint64_t x, size_t i) { return x < l_.offsets[i]; });
    const size_t i = *(it - 1);
    return {int(i), g - l_.offsets[i], l_.offsets[i] + l_.counts[i] - g};
  }

 private:
  const Layout& l_;
  std::vector<size_t> order_;
};

/// Append the copies filling local elements [dst, dst + len) of a new rank
/// from the global run [g, g + len) of the old layout (`where`), merging a
/// copy with the previous one when both sides continue it.
inline void append_moves(std::vector<Move>& out, const Locator& where, uint64_t g, uint64_t len, uint64_t dst) {
  while (len) {
    Loc p = where(g);
    const uint64_t n = std::min(p.run, len);
    if (!out.empty() && out.back().src_rank == p.rank && out.back().src_off + out.back().len == p.local &&
        out.back().dst_off + out.back().len == dst)
      out.back().len += n;
    else
      out.push_back({p.rank, p.local, dst, n});
    g += n, len -= n, dst += n;
  }
}

/// Redistribution plan for new rank r of `to`: the copies that fill its
/// local buffer from the local buffers of `from`'s ranks, in destination
/// order, adjacent copies merged. Both layouts valid with equal global.
inline std::vector<Move> plan(const Layout& from, const Layout& to, int r) {
  std::vector<Move> out;
  const Locator where(from);
  uint64_t dst = 0;
  for (const Seg& s : segments(to, r)) {
    append_moves(out, where, s.off, s.len, dst);
    dst += s.len;
  }
  return out;
}

}  // namespace dynres::icheck::dist
