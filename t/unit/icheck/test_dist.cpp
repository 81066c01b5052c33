// Distribution math of iCheck's redistribution (lib/icheck dist.hpp,
// [John24 §7.4.1.2]): for every N, M in 1..8 and every distribution (BLOCK with
// unit widths, CYCLIC widths, PREDEFINED by explicit counts/offsets and by a
// 2-D process grid), the parts of N ranks redistributed to M ranks hold
// exactly the elements the new layout assigns, and the global array
// reassembled from the new parts has the original checksum.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "dynres/icheck/dist.hpp"

using namespace dynres::icheck::dist;

namespace {
uint64_t val(uint64_t g) {  // element value: a hash of its global index
  uint64_t x = g + 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t checksum(const std::vector<uint64_t>& a) {
  uint64_t s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += val(i * 31 + 7) ^ a[i];
  return s;
}
/// Local parts of every rank of `l`, filled from the global array.
std::vector<std::vector<uint64_t>> split(const Layout& l) {
  std::vector<std::vector<uint64_t>> parts(size_t(l.nprocs));
  for (int r = 0; r < l.nprocs; ++r) {
    for (auto s : segments(l, r))
      for (uint64_t k = 0; k < s.len; ++k) parts[size_t(r)].push_back(val(s.off + k));
    REQUIRE(parts[size_t(r)].size() == local_count(l, r));
  }
  return parts;
}
/// Every global element owned exactly once; locate agrees with segments.
void check_tiles(const Layout& l) {
  std::vector<int> seen(l.global, 0);
  for (int r = 0; r < l.nprocs; ++r) {
    uint64_t local = 0;
    for (auto s : segments(l, r))
      for (uint64_t k = 0; k < s.len; ++k, ++local) {
        seen[s.off + k]++;
        Loc p = locate(l, s.off + k);
        REQUIRE(p.rank == r);
        REQUIRE(p.local == local);
        REQUIRE(p.run >= 1);
      }
  }
  for (int x : seen) REQUIRE(x == 1);
}
/// Redistribute from -> to with plan() and check every new part and the checksum.
void check_redist(const Layout& from, const Layout& to) {
  auto old_parts = split(from);
  std::vector<uint64_t> global(from.global, 0);
  for (int r = 0; r < to.nprocs; ++r) {
    std::vector<uint64_t> mine(local_count(to, r), ~0ULL);
    for (const Move& m : plan(from, to, r)) {
      REQUIRE(m.src_rank >= 0);
      REQUIRE(m.src_rank < from.nprocs);
      REQUIRE(m.src_off + m.len <= old_parts[size_t(m.src_rank)].size());
      REQUIRE(m.dst_off + m.len <= mine.size());
      for (uint64_t k = 0; k < m.len; ++k) mine[m.dst_off + k] = old_parts[size_t(m.src_rank)][m.src_off + k];
    }
    uint64_t i = 0;
    for (auto s : segments(to, r))
      for (uint64_t k = 0; k < s.len; ++k, ++i) {
        REQUIRE(mine[i] == val(s.off + k));
        global[s.off + k] = mine[i];
      }
  }
  std::vector<uint64_t> want(from.global);
  for (uint64_t g = 0; g < from.global; ++g) want[g] = val(g);
  REQUIRE(checksum(global) == checksum(want));
}
Layout block(uint64_t G, int P, uint64_t w) { return {Kind::Block, G, P, w, {}, {}, {}, {}}; }
Layout cyclic(uint64_t G, int P, uint64_t w) { return {Kind::Cyclic, G, P, w, {}, {}, {}, {}}; }
/// Random explicit layout (some ranks empty), a permutation of the parts.
Layout explicit_layout(uint64_t G, int P, std::mt19937& rng) {
  std::vector<uint64_t> cut{0, G};
  for (int i = 1; i < P; ++i) cut.push_back(std::uniform_int_distribution<uint64_t>(0, G)(rng));
  std::sort(cut.begin(), cut.end());
  std::vector<int> perm(static_cast<size_t>(P));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  Layout l{Kind::Explicit, G, P, 1, std::vector<uint64_t>(size_t(P)), std::vector<uint64_t>(size_t(P)), {}, {}};
  for (int i = 0; i < P; ++i) {
    l.offsets[size_t(perm[size_t(i)])] = cut[size_t(i)];
    l.counts[size_t(perm[size_t(i)])] = cut[size_t(i) + 1] - cut[size_t(i)];
  }
  return l;
}
/// 2-D grid: P = dims[0] * dims[1] over a rows x cols array.
Layout grid(int P, uint64_t rows, uint64_t cols) {
  int d0 = 1;
  for (int d = 1; d * d <= P; ++d)
    if (P % d == 0) d0 = d;
  return {Kind::Grid, rows * cols, P, 1, {}, {}, {rows, cols}, {d0, P / d0}};
}
std::vector<Layout> all_layouts(int P, uint64_t G, std::mt19937& rng) {
  return {block(G, P, 1), block(G, P, 7), cyclic(G, P, 1), cyclic(G, P, 3), cyclic(G, P, 8),
          explicit_layout(G, P, rng), grid(P, 9, 7)};
}
}  // namespace

TEST_CASE("dist: every layout tiles the global array and locate agrees", "[dist]") {
  std::mt19937 rng(42);
  for (int P = 1; P <= 8; ++P)
    for (const Layout& l : all_layouts(P, 63, rng)) {
      REQUIRE(validate(l).empty());
      check_tiles(l);
    }
  check_tiles(block(5, 8, 1));  // more ranks than elements: empty ranks
  check_tiles(cyclic(5, 8, 2));
  check_tiles(grid(8, 3, 1));   // grid dimension larger than the extent
}

TEST_CASE("dist: N -> M for N, M in 1..8, every distribution, checksums", "[dist]") {
  std::mt19937 rng(7);
  const uint64_t G = 63;  // 9 x 7, a multiple of the block unit 7
  for (int N = 1; N <= 8; ++N)
    for (int M = 1; M <= 8; ++M) {
      auto from = all_layouts(N, G, rng), to = all_layouts(M, G, rng);
      for (size_t k = 0; k < from.size(); ++k) {
        INFO("N=" << N << " M=" << M << " distribution #" << k);
        check_redist(from[k], to[k]);              // same distribution, new size
        check_redist(from[k], to[(k + 3) % to.size()]);  // and into another one
      }
    }
}

TEST_CASE("dist: block rows like heat: few merged copies", "[dist]") {
  // 10 rows of 4 cells from 4 ranks (3,3,2,2 rows) to 3 ranks (4,3,3 rows)
  auto p = plan(block(40, 4, 4), block(40, 3, 4), 0);
  REQUIRE(p == std::vector<Move>{{0, 0, 0, 12}, {1, 0, 12, 4}});
  p = plan(block(40, 4, 4), block(40, 3, 4), 2);
  REQUIRE(p == std::vector<Move>{{2, 4, 0, 4}, {3, 0, 4, 8}});
  // identity: one copy per rank
  for (int r = 0; r < 5; ++r) REQUIRE(plan(cyclic(50, 5, 2), cyclic(50, 5, 2), r).size() == 1);
}

TEST_CASE("dist: bad layouts are named", "[dist]") {
  REQUIRE(validate(block(10, 2, 3)).find("multiple") != std::string::npos);
  REQUIRE(validate(cyclic(10, 2, 0)).find("width") != std::string::npos);
  REQUIRE(validate(block(0, 2, 1)).find("global count is 0") != std::string::npos);
  REQUIRE(validate(block(10, 0, 1)).find("process count") != std::string::npos);
  Layout e{Kind::Explicit, 10, 2, 1, {5, 4}, {0, 5}, {}, {}};
  REQUIRE(validate(e).find("sum to 9") != std::string::npos);
  e.counts = {6, 4};
  REQUIRE(validate(e).find("overlap") != std::string::npos);
  e.counts = {5, 5}, e.offsets = {0, 6};
  REQUIRE(validate(e).find("outside") != std::string::npos);
  e.counts = {UINT64_MAX, 11}, e.offsets = {0, 0};
  REQUIRE(validate(e).find("more than") != std::string::npos);
  e.counts = {5};
  REQUIRE(validate(e).find("one count") != std::string::npos);
  Layout g{Kind::Grid, 63, 6, 1, {}, {}, {9, 7}, {2, 2}};
  REQUIRE(validate(g).find("4 cells for 6") != std::string::npos);
  g.dims = {2, 3}, g.shape = {9, 8};
  REQUIRE(validate(g).find("72 elements") != std::string::npos);
  g.shape = {UINT64_MAX, 3};
  REQUIRE(validate(g).find("overflow") != std::string::npos);
}
