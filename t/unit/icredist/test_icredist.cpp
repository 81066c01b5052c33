// icredist (lib/icredist) on real second-level checkpoints written by the
// real ckstore writer in libicheck's format: per rank the objects' regions
// and the "__icheck_adapt" metadata region. Expected element positions are
// computed here with their own formulas (not dist.hpp), values are a
// function of the global index, so a redistributed version must hold
// exactly the same global array.
#include <unistd.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "dynres/icredist.hpp"
#include "testutil.hpp"

namespace ck = dynres::ckstore;
namespace ir = dynres::icredist;
using json = nlohmann::json;

namespace {

constexpr std::uint64_t kGB = 3 * 701;  // BLOCK double, width 3: 701 units, uneven over most P
constexpr std::uint64_t kGC = 1003;     // CYCLIC int, width 5: last block short
constexpr std::uint64_t kGE = 997;      // PREDEFINED explicit int

double vb(std::uint64_t g) { return double(g) * 0.5 + 1.0; }
std::int32_t vc(std::uint64_t g) { return std::int32_t(g * 3 + 1); }
std::int32_t ve(std::uint64_t g) { return std::int32_t(g * 7 + 2); }

/// Global indices of rank r of P, in local order: BLOCK of width-w units.
std::vector<std::uint64_t> idx_block(std::uint64_t G, std::uint64_t w, int P, int r) {
  const std::uint64_t U = G / w, q = U / P, rem = U % P;
  const std::uint64_t s = (std::uint64_t(r) * q + std::min<std::uint64_t>(r, rem)) * w;
  const std::uint64_t c = (q + (std::uint64_t(r) < rem ? 1 : 0)) * w;
  std::vector<std::uint64_t> x;
  for (std::uint64_t i = 0; i < c; ++i) x.push_back(s + i);
  return x;
}
/// CYCLIC blocks of w dealt round robin.
std::vector<std::uint64_t> idx_cyclic(std::uint64_t G, std::uint64_t w, int P, int r) {
  std::vector<std::uint64_t> x;
  for (std::uint64_t g = 0; g < G; ++g)
    if ((g / w) % std::uint64_t(P) == std::uint64_t(r)) x.push_back(g);
  return x;
}
/// PREDEFINED explicit: balanced blocks in reverse rank order (as icadapt).
std::pair<std::uint64_t, std::uint64_t> pre_part(std::uint64_t G, int P, int r) {
  const std::uint64_t b = std::uint64_t(P - 1 - r), q = G / P, rem = G % P;
  return {b * q + std::min(b, rem), q + (b < rem ? 1 : 0)};
}

struct Spec {
  bool cyclic_and_block = true;
  bool explicit_obj = false;
  bool manual = false;
  bool plain = false;
  ck::Options opt;
};

/// Write version v of `app` committed by N ranks, libicheck's way.
void write_ckpt(const std::filesystem::path& root, const std::string& app, std::uint64_t v, int N, const Spec& s) {
  std::vector<ck::RegionData> regs;
  std::vector<std::vector<char>> keep;
  auto add = [&](const std::string& label, ck::ElemType t, std::size_t es, std::vector<char> data, int r) {
    keep.push_back(std::move(data));
    regs.push_back({{label, t, es, keep.back().size() / es, r, {}}, keep.back().data()});
  };
  keep.reserve(size_t(N) * 8);
  for (int r = 0; r < N; ++r) {
    json es = json::array();
    es.push_back({{"label", "iter"}, {"role", "constant"}, {"type", 3}, {"count", 1}});
    if (r == 0) {
      std::int32_t it = 42;
      add("iter", ck::ElemType::Int, 4, std::vector<char>((char*)&it, (char*)&it + 4), r);
    }
    es.push_back({{"label", "nprocs"}, {"role", "size"}, {"type", 3}, {"count", 1}});
    if (s.cyclic_and_block) {
      auto ib = idx_block(kGB, 3, N, r);
      std::vector<char> b(ib.size() * 8);
      for (size_t i = 0; i < ib.size(); ++i) {
        double x = vb(ib[i]);
        std::memcpy(b.data() + i * 8, &x, 8);
      }
      es.push_back({{"label", "blk"}, {"role", "global"}, {"type", 2}, {"count", ib.size()}, {"dist", "block"}, {"global", kGB}, {"width", 3}});
      if (!b.empty()) add("blk", ck::ElemType::Double, 8, std::move(b), r);
      auto ic = idx_cyclic(kGC, 5, N, r);
      std::vector<char> c(ic.size() * 4);
      for (size_t i = 0; i < ic.size(); ++i) {
        std::int32_t x = vc(ic[i]);
        std::memcpy(c.data() + i * 4, &x, 4);
      }
      es.push_back({{"label", "cyc"}, {"role", "global"}, {"type", 3}, {"count", ic.size()}, {"dist", "cyclic"}, {"global", kGC}, {"width", 5}});
      if (!c.empty()) add("cyc", ck::ElemType::Int, 4, std::move(c), r);
    }
    if (s.explicit_obj) {
      auto [off, n] = pre_part(kGE, N, r);
      std::vector<char> e(n * 4);
      for (std::uint64_t i = 0; i < n; ++i) {
        std::int32_t x = ve(off + i);
        std::memcpy(e.data() + i * 4, &x, 4);
      }
      es.push_back({{"label", "pre"}, {"role", "global"}, {"type", 3}, {"count", n}, {"dist", "explicit"}, {"global", kGE}, {"offset", off}});
      if (n) add("pre", ck::ElemType::Int, 4, std::move(e), r);
    }
    if (s.manual) {
      es.push_back({{"label", "man"}, {"role", "manual"}, {"type", 3}, {"count", 1}, {"dist", "manual"}, {"global", N}});
      std::int32_t x = r;
      add("man", ck::ElemType::Int, 4, std::vector<char>((char*)&x, (char*)&x + 4), r);
    }
    if (s.plain) {
      es.push_back({{"label", "mine"}, {"role", "plain"}, {"type", 3}, {"count", 1}});
      std::int32_t x = 100 + r;
      add("mine", ck::ElemType::Int, 4, std::vector<char>((char*)&x, (char*)&x + 4), r);
    }
    std::string meta = json{{"format", 1}, {"nranks", N}, {"rank", r}, {"entries", es}}.dump();
    add("__icheck_adapt", ck::ElemType::Char, 1, std::vector<char>(meta.begin(), meta.end()), r);
  }
  ck::write_version(root, app, std::uint32_t(::geteuid()), v, regs, s.opt, N);
}

template <class T>
std::vector<T> as(const std::vector<std::byte>& b) {
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

/// A store with version 1 of `app` committed by N ranks as `s` says.
struct Ckpt {
  dynres::test::TempDir t{"icredist"};
  ck::Store st;
  Ckpt(const std::string& app, int N, const Spec& s) : st(t.path, app) { write_ckpt(t.path, app, 1, N, s); }
};
Spec with(bool Spec::*flag) {
  Spec s;
  s.*flag = true;
  return s;
}

ck::Options small_chunks(bool compress) {
  ck::Options o;
  o.chunk_size = 4096;  // several checksummed chunks per region
  o.durable = false;
  o.compress = compress;
  o.compress_threshold = 0;
  return o;
}

}  // namespace

TEST_CASE("icredist: BLOCK and CYCLIC, every N -> M in 1..8, same global array", "[icredist]") {
  for (int N = 1; N <= 8; ++N)
    for (int M = 1; M <= 8; ++M) {
      dynres::test::TempDir t("icredist");
      ck::Store st(t.path, "app");
      Spec s;
      s.opt = small_chunks((N + M) % 2 == 0);  // half of them zstd-compressed
      write_ckpt(t.path, "app", 1, N, s);
      CAPTURE(N, M);
      ck::Manifest m = ir::redistribute(st, 1, M, {}, small_chunks(false));
      REQUIRE(m.version == 2);
      REQUIRE(m.nranks == M);
      REQUIRE(ir::verify(st, 2).ok);
      ir::VersionInfo vi = ir::describe(st, 2);
      REQUIRE(vi.has_meta);
      for (int r = 0; r < M; ++r) {
        CAPTURE(r);
        REQUIRE(vi.meta[size_t(r)]["nranks"] == M);
        REQUIRE(vi.meta[size_t(r)]["rank"] == r);
        // each new rank's part holds its own elements, in its local order
        auto ib = idx_block(kGB, 3, M, r);
        auto b = as<double>(st.read_region(2, r, "blk"));
        REQUIRE(b.size() == ib.size());
        for (size_t i = 0; i < ib.size(); ++i) REQUIRE(b[i] == vb(ib[i]));
        auto ic = idx_cyclic(kGC, 5, M, r);
        if (ic.empty()) {
          REQUIRE(vi.manifest.find(r, "cyc") == nullptr);
        } else {
          auto c = as<std::int32_t>(st.read_region(2, r, "cyc"));
          REQUIRE(c.size() == ic.size());
          for (size_t i = 0; i < ic.size(); ++i) REQUIRE(c[i] == vc(ic[i]));
        }
      }
      // CONSTANT: rank 0 only
      REQUIRE(as<std::int32_t>(st.read_region(2, 0, "iter")) == std::vector<std::int32_t>{42});
      for (int r = 1; r < M; ++r) REQUIRE(vi.manifest.find(r, "iter") == nullptr);
      // the global arrays of both versions are the same
      ir::VersionInfo v1 = ir::describe(st, 1);
      auto gb = as<double>(ir::gather(st, vi, "blk"));
      REQUIRE(gb.size() == kGB);
      for (std::uint64_t g = 0; g < kGB; ++g) REQUIRE(gb[g] == vb(g));
      REQUIRE(ir::gather(st, vi, "cyc") == ir::gather(st, v1, "cyc"));
      auto gc = as<std::int32_t>(ir::gather(st, vi, "cyc"));
      for (std::uint64_t g = 0; g < kGC; ++g) REQUIRE(gc[g] == vc(g));
      // the source is untouched
      REQUIRE(ir::verify(st, 1).ok);
      REQUIRE(st.manifest(1).nranks == N);
    }
}

TEST_CASE("icredist: PREDEFINED explicit needs its new layout; MANUAL refused", "[icredist]") {
  dynres::test::TempDir t("icredist");
  ck::Store st(t.path, "app");
  Spec s;
  s.explicit_obj = true;
  s.opt = small_chunks(false);
  write_ckpt(t.path, "app", 1, 4, s);
  REQUIRE_THROWS_WITH(ir::redistribute(st, 1, 3), Catch::Contains("'pre' is PREDEFINED") && Catch::Contains("--layout"));
  REQUIRE(st.list_versions() == std::vector<std::uint64_t>{1});
  std::map<std::string, ir::Predefined> bad{{"pre", {{0, 500}, {500, 497}, {}}}};  // 2 parts for 3 ranks
  REQUIRE_THROWS_WITH(ir::redistribute(st, 1, 3, bad), Catch::Contains("one count and one offset per process"));
  std::map<std::string, ir::Predefined> other{{"nope", {{0}, {997}, {}}}};
  REQUIRE_THROWS_WITH(ir::redistribute(st, 1, 3, {{"pre", {{0, 300, 600}, {300, 300, 397}, {}}}, {"nope", {}}}),
                      Catch::Contains("'nope', which is not a PREDEFINED object"));
  REQUIRE(st.list_versions() == std::vector<std::uint64_t>{1});
  // the icadapt layout on 3 ranks: balanced blocks in reverse rank order
  ir::Predefined p;
  for (int r = 0; r < 3; ++r) {
    auto [off, n] = pre_part(kGE, 3, r);
    p.offsets.push_back(off), p.counts.push_back(n);
  }
  ir::redistribute(st, 1, 3, {{"pre", p}});
  for (int r = 0; r < 3; ++r) {
    auto [off, n] = pre_part(kGE, 3, r);
    auto e = as<std::int32_t>(st.read_region(2, r, "pre"));
    REQUIRE(e.size() == n);
    for (std::uint64_t i = 0; i < n; ++i) REQUIRE(e[i] == ve(off + i));
  }
  ir::VersionInfo vi = ir::describe(st, 2);
  bool seen = false;
  for (auto& e : vi.meta[2]["entries"])
    if (e["label"] == "pre") {
      seen = true;
      REQUIRE(e["offset"] == pre_part(kGE, 3, 2).first);
    }
  REQUIRE(seen);

  Ckpt man("man", 2, with(&Spec::manual));
  REQUIRE_THROWS_WITH(ir::redistribute(man.st, 1, 3), Catch::Contains("'man' is MANUAL"));
  REQUIRE(man.st.list_versions() == std::vector<std::uint64_t>{1});
}

TEST_CASE("icredist: rank-private data kept on a shrink, growing refused", "[icredist]") {
  Ckpt c("app", 4, with(&Spec::plain));
  const ck::Store& st = c.st;
  REQUIRE_THROWS_WITH(ir::redistribute(st, 1, 5), Catch::Contains("'mine' is rank-private"));
  REQUIRE(st.list_versions() == std::vector<std::uint64_t>{1});
  ir::redistribute(st, 1, 2);
  REQUIRE(as<std::int32_t>(st.read_region(2, 1, "mine")) == std::vector<std::int32_t>{101});
  REQUIRE(st.manifest(2).find(2, "mine") == nullptr);
}

TEST_CASE("icredist: bad input refused, nothing changed", "[icredist]") {
  dynres::test::TempDir t("icredist");
  ck::Store st(t.path, "app");
  Spec s;
  s.opt = small_chunks(false);
  write_ckpt(t.path, "app", 1, 3, s);
  REQUIRE_THROWS_WITH(ir::redistribute(st, 1, 0), Catch::Contains("new rank count 0 outside"));
  REQUIRE_THROWS_WITH(ir::redistribute(st, 1, -2), Catch::Contains("new rank count -2 outside"));
  REQUIRE_THROWS_WITH(ir::redistribute(st, 7, 2), Catch::Contains("version 7 of 'app' does not exist"));
  REQUIRE_THROWS_WITH(ir::list_app(ck::Store(t.path, "nosuch")), Catch::Contains("unknown application 'nosuch'"));
  REQUIRE_THROWS_WITH(ir::redistribute(ck::Store(t.path, "nosuch"), 1, 2), Catch::Contains("unknown application"));
  REQUIRE_THROWS_AS(ir::gather(st, ir::describe(st, 1), "nolabel"), ir::Error);
  REQUIRE(st.list_versions() == std::vector<std::uint64_t>{1});

  // a corrupted chunk: verify names its file, redistribute refuses, nothing written
  const ck::Manifest m = st.manifest(1);
  const ck::ChunkInfo& c = m.find(1, "blk")->chunks.at(1);
  const auto f = st.version_dir(1) / c.file;
  {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(std::streamoff(c.file_offset + 7));
    io.put('\x5a');
  }
  ir::VerifyResult vr = ir::verify(st, 1);
  REQUIRE_FALSE(vr.ok);
  REQUIRE(vr.bad_file == f.string());
  REQUIRE_THROWS_WITH(ir::redistribute(st, 1, 2), Catch::Contains("is damaged, not rewritten"));
  REQUIRE(st.list_versions() == std::vector<std::uint64_t>{1});

  // a damaged manifest: refused by describe, redistribute, nothing written
  write_ckpt(t.path, "app", 2, 2, s);
  const auto mf = st.version_dir(2) / ck::kManifestName;
  std::string text;
  {
    std::ifstream in(mf);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text[text.find("\"nranks\":2") + 10] = '3';
  std::ofstream(mf) << text;
  REQUIRE_THROWS_WITH(ir::describe(st, 2), Catch::Contains("damaged manifest"));
  REQUIRE_THROWS_WITH(ir::redistribute(st, 2, 4), Catch::Contains("damaged manifest"));
  REQUIRE(st.list_versions() == std::vector<std::uint64_t>{2, 1});
  REQUIRE_FALSE(ir::list_app(st).versions[0].complete);
}

TEST_CASE("icredist: export as raw and .npy", "[icredist]") {
  dynres::test::TempDir t("icredist");
  ck::Store st(t.path, "app");
  write_ckpt(t.path, "app", 1, 3, Spec{});
  ir::VersionInfo vi = ir::describe(st, 1);
  REQUIRE(ir::export_label(st, vi, "cyc", t.file("c.raw"), false) == kGC * 4);
  REQUIRE(std::filesystem::file_size(t.file("c.raw")) == kGC * 4);
  REQUIRE(ir::export_label(st, vi, "blk", t.file("b.npy"), true) == kGB * 8);
  std::ifstream in(t.file("b.npy"), std::ios::binary);
  std::string all(std::istreambuf_iterator<char>(in), {});
  REQUIRE(all.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)) == 0);
  const size_t hl = size_t((unsigned char)all[8]) | size_t((unsigned char)all[9]) << 8;
  REQUIRE((10 + hl) % 64 == 0);
  const std::string head = all.substr(10, hl);
  REQUIRE(head.find("'descr': '<f8'") != std::string::npos);
  REQUIRE(head.find("'shape': (2103,)") != std::string::npos);
  REQUIRE(all.size() == 10 + hl + kGB * 8);
  double x;
  std::memcpy(&x, all.data() + 10 + hl + 8 * 100, 8);
  REQUIRE(x == vb(100));
  REQUIRE_THROWS_WITH(ir::export_label(st, vi, "blk", t.file("b.npy"), true), Catch::Contains("exists; not overwritten"));
}
