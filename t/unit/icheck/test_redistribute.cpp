// The data movement of icheck_redistribute (redist.hpp, [John24 §7.4.1.2,
// §7.4.2]): for every N, M in 1..8 and every distribution pair (BLOCK of
// width 1 and 3, CYCLIC of width 1 and 5, PREDEFINED explicit parts with an
// empty rank and uneven sizes, PREDEFINED process grid; same and mixed
// kinds), global counts that do not divide evenly, element sizes 1, 4 and 8,
// tiny and default windows: every new rank's buffer holds exactly the
// elements its layout assigns, the global array reassembled from the new
// parts has the original checksum (XXH3_64), and every read stays inside the
// old rank's buffer. The reader here is memory; the agents' RMA reader is
// exercised by t4190-icheck-redistribute.sh.
#include <catch2/catch.hpp>
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dynres/icheck/redist.hpp"

using namespace dynres::icheck;
using dist::Kind;
using dist::Layout;

namespace {
uint64_t val(uint64_t g) {
  uint64_t x = g * 0x9e3779b97f4a7c15ULL + 12345;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  return x ^ (x >> 27);
}
/// Element g as es bytes (the low bytes of val(g)).
void put(char* p, uint64_t g, size_t es) {
  const uint64_t v = val(g);
  std::memcpy(p, &v, es);
}
/// Local buffers of every rank of l, filled from the global array.
std::vector<std::vector<char>> parts_of(const Layout& l, size_t es) {
  std::vector<std::vector<char>> parts(size_t(l.nprocs));
  for (int r = 0; r < l.nprocs; ++r) {
    auto& p = parts[size_t(r)];
    p.resize(size_t(dist::local_count(l, r) * es));
    uint64_t j = 0;
    for (auto s : dist::segments(l, r))
      for (uint64_t k = 0; k < s.len; ++k, ++j) put(p.data() + j * es, s.off + k, es);
  }
  return parts;
}
uint64_t global_sum(const Layout& l, const std::vector<std::vector<char>>& parts, size_t es) {
  std::vector<char> g(size_t(l.global * es));
  for (int r = 0; r < l.nprocs; ++r) {
    uint64_t j = 0;
    for (auto s : dist::segments(l, r))
      for (uint64_t k = 0; k < s.len; ++k, ++j) std::memcpy(g.data() + (s.off + k) * es, parts[size_t(r)].data() + j * es, es);
  }
  return XXH3_64bits(g.data(), g.size());
}

Layout block(uint64_t G, int P, uint64_t w) {
  Layout l;
  l.kind = Kind::Block, l.global = G, l.nprocs = P, l.width = w;
  return l;
}
Layout cyclic(uint64_t G, int P, uint64_t w) {
  Layout l;
  l.kind = Kind::Cyclic, l.global = G, l.nprocs = P, l.width = w;
  return l;
}
/// Uneven explicit parts in reverse rank order; rank 1 (if P > 2) owns nothing.
Layout explicit_parts(uint64_t G, int P) {
  Layout l;
  l.kind = Kind::Explicit, l.global = G, l.nprocs = P;
  std::vector<uint64_t> w(static_cast<size_t>(P));
  uint64_t tw = 0;
  for (int r = 0; r < P; ++r) w[size_t(r)] = (P > 2 && r == 1) ? 0 : uint64_t(r % 3 + 1), tw += w[size_t(r)];
  uint64_t off = 0;
  std::vector<uint64_t> c(static_cast<size_t>(P)), o(static_cast<size_t>(P));
  for (int r = P - 1; r >= 0; --r) {
    c[size_t(r)] = r == 0 ? G - off : G * w[size_t(r)] / tw;
    o[size_t(r)] = off, off += c[size_t(r)];
  }
  l.counts = c, l.offsets = o;
  return l;
}
Layout grid(uint64_t rows, uint64_t cols, int P) {
  Layout l;
  l.kind = Kind::Grid, l.global = rows * cols, l.nprocs = P, l.shape = {rows, cols};
  int d0 = 1;
  for (int k = 1; k * k <= P; ++k)
    if (P % k == 0) d0 = k;
  l.dims = {d0, P / d0};
  return l;
}

struct Result {
  bool ok = true;
  std::string why;
  int path = 0;
};

/// Redistribute l_from -> l_to through a memory reader; check every element
/// and the global checksum.
Result run(const Layout& from, const Layout& to, size_t es, uint64_t window) {
  Result res;
  REQUIRE(dist::validate(from).empty());
  REQUIRE(dist::validate(to).empty());
  auto old = parts_of(from, es);
  const uint64_t want = global_sum(from, old, es);
  std::vector<std::vector<char>> fresh(size_t(to.nprocs));
  for (int r = 0; r < to.nprocs; ++r) {
    auto& dst = fresh[size_t(r)];
    dst.assign(size_t(dist::local_count(to, r) * es), char(0x5a));
    std::vector<std::pair<char*, uint64_t>> targets;
    redist::Reader rd;
    rd.target = [&](char* p, uint64_t n) { targets.push_back({p, n}); };
    rd.read = [&](std::vector<redist::Read>& b) {
      for (auto& x : b) {
        const auto& src = old.at(size_t(x.src));
        if (x.off > src.size() || x.len > src.size() - x.off) throw std::runtime_error("read outside old rank's buffer");
        bool inside = false;
        for (auto& [p, n] : targets) inside = inside || (x.dst >= p && x.dst + x.len <= p + n);
        if (!inside) throw std::runtime_error("read into memory not announced with target()");
        std::memcpy(x.dst, src.data() + x.off, size_t(x.len));
      }
    };
    auto st = redist::fill(from, to, r, es, rd, dst.data(), window);
    res.path = st.path;
    uint64_t j = 0;
    std::vector<char> e(es);
    for (auto s : dist::segments(to, r))
      for (uint64_t k = 0; k < s.len; ++k, ++j) {
        put(e.data(), s.off + k, es);
        if (std::memcmp(e.data(), dst.data() + j * es, es) != 0 && res.ok)
          res.ok = false, res.why = "rank " + std::to_string(r) + " local " + std::to_string(j) + " (global " + std::to_string(s.off + k) + ") wrong";
      }
  }
  if (res.ok && global_sum(to, fresh, es) != want) res.ok = false, res.why = "global checksum differs";
  return res;
}
}  // namespace

TEST_CASE("redistribute: every N, M in 1..8, every distribution, uneven sizes, checksummed", "[redist]") {
  const uint64_t G = 3 * 337;  // 1011: no N or M in 2..8 divides it evenly
  int cases = 0;
  for (int N = 1; N <= 8; ++N)
    for (int M = 1; M <= 8; ++M) {
      const std::vector<std::pair<Layout, Layout>> pairs = {
          {block(G, N, 1), block(G, M, 1)},       {block(G, N, 3), block(G, M, 3)},
          {cyclic(G, N, 1), cyclic(G, M, 1)},     {cyclic(G, N, 5), cyclic(G, M, 5)},
          {cyclic(G, N, 5), cyclic(G, M, 2)},     {block(G, N, 1), cyclic(G, M, 1)},
          {cyclic(G, N, 1), block(G, M, 3)},      {explicit_parts(G, N), explicit_parts(G, M)},
          {explicit_parts(G, N), cyclic(G, M, 4)}, {grid(37, 29, N), grid(37, 29, M)},
          {grid(37, 29, N), block(37 * 29, M, 29)},
      };
      for (auto& [f, t] : pairs)
        for (size_t es : {size_t(1), size_t(4), size_t(8)})
          for (uint64_t window : {uint64_t(24), uint64_t(32) << 20}) {
            auto r = run(f, t, es, window);
            INFO("N=" << N << " M=" << M << " from kind " << int(f.kind) << " w" << f.width << " to kind "
                      << int(t.kind) << " w" << t.width << " es=" << es << " window=" << window);
            REQUIRE(r.ok);
            REQUIRE(r.why.empty());
            ++cases;
          }
    }
  CHECK(cases == 64 * 11 * 3 * 2);
}

TEST_CASE("redistribute: paths — BLOCK lands in place, same-width CYCLIC strided", "[redist]") {
  // large BLOCK rows: one read per overlapping old part, no bounce
  auto r = run(block(1 << 16, 3, 1), block(1 << 16, 5, 1), 8, 32u << 20);
  CHECK(r.ok);
  CHECK(r.path == 1);
  CHECK(run(cyclic(1 << 12, 3, 1), cyclic(1 << 12, 5, 1), 8, 32u << 20).path == 2);
  CHECK(run(cyclic(1 << 12, 3, 4), cyclic(1 << 12, 5, 2), 8, 32u << 20).path == 3);
  // BLOCK 4 -> 1: exactly the four old parts are read, once
  redist::Reader rd;
  uint64_t bytes = 0, reads = 0;
  rd.read = [&](std::vector<redist::Read>& b) {
    for (auto& x : b) bytes += x.len, reads++;
  };
  std::vector<char> dst(size_t(1 << 20) * 8);
  auto st = redist::fill(block(1 << 20, 4, 1), block(1 << 20, 1, 1), 0, 8, rd, dst.data());
  CHECK(st.path == 1);
  CHECK(reads == 4);
  CHECK(bytes == (uint64_t(1) << 20) * 8);
  CHECK(st.batches == 1);
}

TEST_CASE("redistribute: a failing reader's error reaches the caller", "[redist]") {
  redist::Reader rd;
  rd.read = [](std::vector<redist::Read>&) { throw std::runtime_error("agent 1 gone"); };
  std::vector<char> dst(1011 * 8);
  CHECK_THROWS_WITH(redist::fill(cyclic(1011, 2, 1), cyclic(1011, 1, 1), 0, 8, rd, dst.data()), "agent 1 gone");
  CHECK_THROWS_AS(redist::fill(block(10, 2, 1), block(11, 1, 1), 0, 8, rd, dst.data()), std::invalid_argument);
}
