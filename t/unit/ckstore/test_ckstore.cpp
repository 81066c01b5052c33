// Unit tests of dynres_ckstore (second-level checkpoint format, [John24 §6.2.5]).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "../testutil.hpp"
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <thread>

#include "dynres/ckstore.hpp"

using namespace dynres::ckstore;
namespace fs = std::filesystem;

namespace {

struct TempDir : dynres::test::TempDir {
  TempDir() : dynres::test::TempDir("ckstore") {}
};

Options small_opts() {
  Options o;
  o.chunk_size = 4096;
  o.compress = false;
  o.durable = false;
  return o;
}

std::vector<double> ramp(std::size_t n, double base) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = base + 0.5 * static_cast<double>(i);
  return v;
}

std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(g());
  return v;
}

void flip_byte(const fs::path& p, std::uint64_t off) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f);
  f.seekg(static_cast<std::streamoff>(off));
  char c;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x01);
  f.seekp(static_cast<std::streamoff>(off));
  f.write(&c, 1);
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

/// Write a simple one-region version v holding `n` doubles starting at `base`.
Manifest write_simple(const fs::path& root, std::uint64_t v, double base, std::size_t n = 3000,
                      Options o = small_opts()) {
  auto d = ramp(n, base);
  RegionData r{{"x", ElemType::Double, 0, n, 0, {}}, d.data()};
  return write_version(root, "app", ::geteuid(), v, std::span<const RegionData>(&r, 1), o);
}

Errc code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  FAIL("no ckstore::Error thrown");
  return Errc::invalid;
}

}  // namespace

/// Path of the file holding (rank 0, label) of version v, as its manifest names it.
/// The whole file as text.
std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

fs::path chunk_file(const Store& s, std::uint64_t v, const std::string& label) {
  return s.version_dir(v) / s.manifest(v).find(0, label)->chunks.at(0).file;
}

TEST_CASE("safe_component accepts plain names and rejects dangerous ones") {
  CHECK(safe_component("heat"));
  CHECK(safe_component("grid_0.v2-final"));
  CHECK(safe_component("wärme"));
  CHECK(safe_component(std::string(128, 'a')));
  CHECK_FALSE(safe_component(std::string(129, 'a')));
  CHECK_FALSE(safe_component(""));
  CHECK_FALSE(safe_component("a/b"));
  CHECK_FALSE(safe_component(".."));
  CHECK_FALSE(safe_component("a..b"));
  CHECK_FALSE(safe_component(".hidden"));
  CHECK_FALSE(safe_component(std::string("a\0b", 3)));
  CHECK_FALSE(safe_component("tab\there"));
  CHECK_FALSE(safe_component("\xff\xfe"));
  CHECK(version_dir_name(42) == "v0000000042");
  CHECK(parse_version_dir_name("v0000000042") == std::optional<std::uint64_t>(42));
  CHECK_FALSE(parse_version_dir_name("v42"));
  CHECK_FALSE(parse_version_dir_name("v0000000000"));
  CHECK(chunk_file_name(3, "grid") == "r000003.grid.dat");
  CHECK(chunk_file_name(3, "grid", "00ff00ff00ff00ff") == "r000003.grid.00ff00ff00ff00ff.dat");
  CHECK(new_writer_tag().size() == 16);
  CHECK(new_writer_tag() != new_writer_tag());
  CHECK(code_of([] { version_dir_name(0); }) == Errc::invalid);
}

TEST_CASE("roundtrip of several ranks, labels and types, uncompressed, odd chunk boundaries") {
  TempDir t;
  const int nranks = 3;
  std::vector<std::vector<double>> grids;
  std::vector<std::vector<float>> fl;
  std::vector<std::vector<int>> ints;
  std::vector<RegionData> regs;
  for (int r = 0; r < nranks; ++r) {
    grids.push_back(ramp(1000 + 77 * static_cast<std::size_t>(r), r * 1000.0));  // not multiples of 4096
    fl.push_back(std::vector<float>(1024, 1.5f + static_cast<float>(r)));  // exactly one chunk
    ints.push_back(std::vector<int>{r, 42});
  }
  std::uint64_t goff = 0;
  for (int r = 0; r < nranks; ++r) {
    Layout L;
    L.dist = Dist::Block;
    L.global_count = 1000 * 3 + 77 * 3;
    L.global_offset = goff;
    goff += grids[r].size();
    regs.push_back({{"grid", ElemType::Double, 0, grids[r].size(), r, L}, grids[r].data()});
    regs.push_back({{"f", ElemType::Float, 0, fl[r].size(), r, {}}, fl[r].data()});
    Layout rep;
    rep.dist = Dist::Replicated;
    regs.push_back({{"iter", ElemType::Int, 0, 2, r, rep}, ints[r].data()});
  }
  const char blob[] = "opaque bytes";
  RegionData b{{"blob", ElemType::Binary, 0, sizeof blob, 1, {}}, blob};
  regs.push_back(b);
  Manifest m = write_version(t.path, "heat", ::geteuid(), 7, regs, small_opts());
  CHECK(m.nranks == nranks);
  CHECK(m.regions.size() == regs.size());

  Store s(t.path, "heat");
  CHECK(s.list_versions() == std::vector<std::uint64_t>{7});
  Manifest v = s.verify(7);
  CHECK(v.nranks == 3);
  CHECK(v.app == "heat");
  CHECK(v.uid == ::geteuid());
  const Region* g1 = v.find(1, "grid");
  REQUIRE(g1);
  CHECK(g1->info.type == ElemType::Double);
  CHECK(g1->info.elem_size == 8);
  CHECK(g1->info.count == 1077);
  CHECK(g1->info.layout.dist == Dist::Block);
  CHECK(g1->info.layout.global_offset == 1000);
  CHECK(g1->info.layout.global_count == 3231);
  CHECK(g1->chunks.size() == 3);  // 8616 bytes / 4096
  CHECK(g1->chunks.back().raw_length == 8616 - 2 * 4096);
  CHECK(v.find(0, "f")->chunks.size() == 1);
  CHECK(v.find(2, "iter")->info.layout.dist == Dist::Replicated);

  for (int r = 0; r < nranks; ++r) {
    std::vector<double> g(grids[r].size());
    s.read_region(7, r, "grid", g.data(), g.size() * sizeof(double));
    CHECK(g == grids[r]);
    std::vector<float> f(fl[r].size());
    s.read_region(7, r, "f", f.data(), f.size() * sizeof(float));
    CHECK(f == fl[r]);
    std::vector<int> it(2);
    s.read_region(7, r, "iter", it.data(), 2 * sizeof(int));
    CHECK(it == ints[r]);
  }
  auto bb = s.read_region(7, 1, "blob");
  CHECK(std::memcmp(bb.data(), blob, sizeof blob) == 0);

  // partial reads across chunk boundaries
  std::vector<char> part(5000);
  s.read_range(v, *g1, 3000, part.data(), part.size());
  CHECK(std::memcmp(part.data(), reinterpret_cast<const char*>(grids[1].data()) + 3000, 5000) == 0);

  // caller errors
  std::vector<double> wrong(10);
  CHECK(code_of([&] { s.read_region(7, 0, "grid", wrong.data(), 80); }) == Errc::mismatch);
  CHECK(code_of([&] { s.read_region(7, 0, "nope", wrong.data(), 80); }) == Errc::not_found);
  CHECK(code_of([&] { s.read_region(8, 0, "grid", wrong.data(), 80); }) == Errc::not_found);
  CHECK(code_of([&] { s.read_range(v, *g1, 8000, part.data(), 1000); }) == Errc::invalid);
}

TEST_CASE("compression only above the threshold and only when it shrinks the chunk") {
  TempDir t;
  Options o = small_opts();
  o.compress = true;
  o.compress_threshold = 10000;  // bytes
  auto smooth = ramp(5000, 0.0);                // 40000 bytes, compressible
  std::vector<double> zeros(5000, 0.0);         // very compressible
  auto noise = random_bytes(40000, 1);          // incompressible
  std::vector<double> small(100, 1.0);          // 800 bytes, below threshold
  std::vector<RegionData> regs{
      {{"smooth", ElemType::Double, 0, smooth.size(), 0, {}}, smooth.data()},
      {{"zeros", ElemType::Double, 0, zeros.size(), 0, {}}, zeros.data()},
      {{"noise", ElemType::Binary, 0, noise.size(), 0, {}}, noise.data()},
      {{"small", ElemType::Double, 0, small.size(), 0, {}}, small.data()},
  };
  Manifest m = write_version(t.path, "app", ::geteuid(), 1, regs, o);
  const Region* z = m.find(0, "zeros");
  REQUIRE(z);
  CHECK(z->chunks.size() == 10);  // 40000 / 4096 -> 10 chunks
  for (auto& c : z->chunks) CHECK(c.compressed);
  CHECK(z->stored_bytes() < z->bytes() / 10);
  for (auto& c : m.find(0, "noise")->chunks) CHECK_FALSE(c.compressed);
  for (auto& c : m.find(0, "small")->chunks) CHECK_FALSE(c.compressed);

  Store s(t.path, "app");
  s.verify(1);
  std::vector<double> back(5000);
  s.read_region(1, 0, "smooth", back.data(), back.size() * 8);
  CHECK(back == smooth);
  s.read_region(1, 0, "zeros", back.data(), back.size() * 8);
  CHECK(back == zeros);
  auto nb = s.read_region(1, 0, "noise");
  CHECK(std::memcmp(nb.data(), noise.data(), noise.size()) == 0);
  // partial read inside a compressed chunk
  std::vector<char> part(100);
  s.read_range(m, *m.find(0, "smooth"), 4100, part.data(), 100);
  CHECK(std::memcmp(part.data(), reinterpret_cast<const char*>(smooth.data()) + 4100, 100) == 0);

  SECTION("multi-threaded compression gives identical chunks") {
    Options o2 = o;
    o2.threads = 3;
    RegionData r{{"smooth", ElemType::Double, 0, smooth.size(), 0, {}}, smooth.data()};
    Manifest m2 = write_version(t.path, "app", ::geteuid(), 2, std::span<const RegionData>(&r, 1), o2);
    auto& a = m.find(0, "smooth")->chunks;
    auto& b = m2.find(0, "smooth")->chunks;
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].stored_xxh3 == b[i].stored_xxh3);
      CHECK(a[i].raw_xxh3 == b[i].raw_xxh3);
      CHECK(a[i].file_offset == b[i].file_offset);
    }
    s.read_region(2, 0, "smooth", back.data(), back.size() * 8);
    CHECK(back == smooth);
  }
}

TEST_CASE("streaming writer: pieces of any size give the same result as one buffer") {
  TempDir t;
  for (bool compress : {false, true}) {
    Options o = small_opts();
    o.compress = compress;
    o.compress_threshold = 0;
    auto data = ramp(3333, 7.0);
    const auto* p = reinterpret_cast<const char*>(data.data());
    const std::size_t total = data.size() * sizeof(double);
    Store s(t.path, compress ? "zs" : "plain");
    {
      auto w = s.begin_version(1, 1, o);
      auto id = w.open_region({"x", ElemType::Double, 0, data.size(), 0, {}});
      std::size_t off = 0, step = 1;
      while (off < total) {
        std::size_t n = std::min(step, total - off);
        w.write(id, p + off, n);
        off += n;
        step = step * 3 + 1;  // 1, 4, 13, 40, ... crosses chunk borders in all ways
      }
      w.close_region(id);
      w.set_attr("iteration", "12");
      Manifest m = w.commit();
      CHECK(m.attrs.at("iteration") == "12");
    }
    Manifest one = write_version(t.path, compress ? "zs" : "plain", ::geteuid(), 2,
                                 std::vector<RegionData>{{{"x", ElemType::Double, 0, data.size(), 0, {}}, data.data()}},
                                 o, 1);
    Manifest m1 = s.verify(1);
    auto& a = m1.find(0, "x")->chunks;
    auto& b = one.find(0, "x")->chunks;
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].raw_xxh3 == b[i].raw_xxh3);
      CHECK(a[i].stored_xxh3 == b[i].stored_xxh3);
      CHECK(a[i].compressed == compress);
    }
    CHECK(s.manifest(1).attrs.at("iteration") == "12");
    std::vector<double> back(data.size());
    s.read_region(1, 0, "x", back.data(), total);
    CHECK(back == data);
  }
}

TEST_CASE("writer rejects bad regions and misuse") {
  TempDir t;
  Store s(t.path, "app");
  auto w = s.begin_version(1, 1, small_opts());
  double d[4] = {1, 2, 3, 4};
  CHECK(code_of([&] { w.open_region({"zero", ElemType::Double, 0, 0, 0, {}}); }) == Errc::invalid);
  CHECK(code_of([&] { w.open_region({"../x", ElemType::Double, 0, 4, 0, {}}); }) == Errc::invalid);
  CHECK(code_of([&] { w.open_region({"", ElemType::Double, 0, 4, 0, {}}); }) == Errc::invalid);
  CHECK(code_of([&] { w.open_region({".x", ElemType::Double, 0, 4, 0, {}}); }) == Errc::invalid);
  CHECK(code_of([&] { w.open_region({"x", ElemType::Double, 0, 4, 1, {}}); }) == Errc::invalid);  // rank >= nranks
  CHECK(code_of([&] { w.open_region({"x", ElemType::Double, 4, 4, 0, {}}); }) == Errc::invalid);
  Layout bad;
  bad.global_shape = {2, 3};
  bad.global_count = 7;
  CHECK(code_of([&] { w.open_region({"x", ElemType::Double, 0, 4, 0, bad}); }) == Errc::invalid);
  auto id = w.open_region({"x", ElemType::Double, 0, 4, 0, {}});
  CHECK(code_of([&] { w.open_region({"x", ElemType::Double, 0, 4, 0, {}}); }) == Errc::invalid);
  w.write(id, d, 16);
  CHECK(code_of([&] { w.close_region(id); }) == Errc::mismatch);  // only half written
  CHECK(code_of([&] { w.write(id, d, 32); }) == Errc::mismatch);  // too much
  CHECK(code_of([&] { w.seal(); }) == Errc::invalid);             // region still open
  w.write(id, d + 2, 16);
  w.close_region(id);
  CHECK(code_of([&] { w.write(id, d, 8); }) == Errc::invalid);  // closed: no byte more
  CHECK(code_of([&] { w.close_region(id); }) == Errc::invalid);
  w.commit();
  CHECK(code_of([&] { s.begin_version(1, 2, small_opts()); }) == Errc::invalid);  // exists
  CHECK(code_of([] { Store("/tmp", "a/b"); }) == Errc::invalid);
  CHECK(code_of([] { Store("/tmp", ".."); }) == Errc::invalid);
  Options o = small_opts();
  o.chunk_size = 100;
  CHECK(code_of([&] { s.begin_version(2, 1, o); }) == Errc::invalid);
  CHECK(code_of([&] { s.begin_version(0, 1, small_opts()); }) == Errc::invalid);
  CHECK(code_of([&] { s.begin_version(kMaxVersion + 1, 1, small_opts()); }) == Errc::invalid);

  SECTION("an aborted (destroyed, unsealed) writer leaves nothing behind") {
    {
      auto w2 = s.begin_version(3, 1, small_opts());
      w2.add_region({"x", ElemType::Double, 0, 4, 0, {}}, d);
    }
    CHECK_FALSE(fs::exists(s.version_dir(3)));
    CHECK(s.list_versions() == std::vector<std::uint64_t>{1});
  }
}

TEST_CASE("a flipped byte anywhere is detected and newest_valid falls back") {
  TempDir t;
  for (bool compress : {false, true}) {
    CAPTURE(compress);
    Options o = small_opts();
    o.compress = compress;
    o.compress_threshold = 0;
    const std::string app = compress ? "zapp" : "app";
    auto d1 = ramp(3000, 1.0), d2 = ramp(3000, 2.0);
    RegionData r1{{"x", ElemType::Double, 0, 3000, 0, {}}, d1.data()};
    RegionData r2{{"x", ElemType::Double, 0, 3000, 0, {}}, d2.data()};
    write_version(t.path, app, ::geteuid(), 1, std::span<const RegionData>(&r1, 1), o);
    Manifest m2 = write_version(t.path, app, ::geteuid(), 2, std::span<const RegionData>(&r2, 1), o);
    Store s(t.path, app);
    CHECK(s.newest_valid() == std::optional<std::uint64_t>(2));
    const fs::path f = chunk_file(s, 2, "x");
    // flip a byte in the middle of the second chunk
    const auto& c = m2.find(0, "x")->chunks.at(1);
    flip_byte(f, c.file_offset + c.stored_length / 2);
    try {
      s.verify(2);
      FAIL("verify passed on a corrupted chunk");
    } catch (const Error& e) {
      CHECK(e.code() == Errc::corrupt);
      CHECK(e.path() == f.string());
      CHECK_THAT(e.what(), Catch::Contains("r000000.x.") && Catch::Contains("checksum"));
    }
    CHECK(s.valid(2, Check::shallow));  // size is right, content is not
    CHECK_FALSE(s.valid(2));
    std::vector<double> back(3000);
    CHECK(code_of([&] { s.read_region(2, 0, "x", back.data(), 24000); }) == Errc::corrupt);
    CHECK(s.newest_valid() == std::optional<std::uint64_t>(1));
    s.read_region(*s.newest_valid(), 0, "x", back.data(), 24000);
    CHECK(back == d1);
  }
}

TEST_CASE("a version without manifest (crash mid-write) is ignored") {
  TempDir t;
  write_simple(t.path, 1, 1.0);
  Store s(t.path, "app");
  {
    auto w = s.begin_version(2, 1, small_opts());
    auto d = ramp(3000, 2.0);
    w.add_region({"x", ElemType::Double, 0, 3000, 0, {}}, d.data());
    w.seal();  // chunks on disk, no manifest: the "crash" happens here
  }
  bool chunks_on_disk = false;  // written under this writer's tag
  for (auto& e : fs::directory_iterator(s.version_dir(2)))
    chunks_on_disk |= e.path().filename().string().rfind("r000000.x.", 0) == 0;
  CHECK(chunks_on_disk);
  CHECK(s.list_versions() == std::vector<std::uint64_t>{2, 1});
  CHECK_FALSE(s.has_manifest(2));
  CHECK(code_of([&] { s.manifest(2); }) == Errc::not_found);
  CHECK_FALSE(s.valid(2));
  CHECK(s.newest_valid() == std::optional<std::uint64_t>(1));
  CHECK(s.newest_valid(Check::shallow) == std::optional<std::uint64_t>(1));
}

TEST_CASE("truncated or extended chunk files and tampered manifests are detected") {
  TempDir t;
  write_simple(t.path, 1, 1.0);
  Manifest m = write_simple(t.path, 2, 2.0);
  write_simple(t.path, 3, 3.0);
  Store s(t.path, "app");
  const fs::path f2 = chunk_file(s, 2, "x");
  fs::resize_file(f2, fs::file_size(f2) - 10);
  CHECK_FALSE(s.valid(2, Check::shallow));
  try {
    s.verify(2, Check::shallow);
    FAIL("truncation not detected");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::corrupt);
    CHECK_THAT(e.what(), Catch::Contains("truncated") && Catch::Contains("r000000.x."));
  }
  std::vector<double> back(3000);
  CHECK(code_of([&] { s.read_region(2, 0, "x", back.data(), 24000); }) == Errc::corrupt);

  const fs::path f3 = chunk_file(s, 3, "x");
  { std::ofstream(f3, std::ios::app | std::ios::binary) << "garbage"; }
  CHECK_FALSE(s.valid(3, Check::shallow));

  // manifest of v1: change one digit of a value -> manifest checksum fails
  const fs::path mp = s.version_dir(1) / kManifestName;
  std::string text = read_text(mp);
  auto pos = text.find("\"count\": 3000");
  REQUIRE(pos != std::string::npos);
  text.replace(pos, 13, "\"count\": 3001");
  { std::ofstream(mp, std::ios::trunc) << text; }
  CHECK(code_of([&] { s.manifest(1); }) == Errc::corrupt);
  CHECK_FALSE(s.newest_valid());
  // truncated manifest
  fs::resize_file(mp, 20);
  CHECK(code_of([&] { s.manifest(1); }) == Errc::corrupt);
  // missing chunk file
  write_simple(t.path, 4, 4.0);
  fs::remove(chunk_file(s, 4, "x"));
  CHECK(code_of([&] { s.verify(4, Check::shallow); }) == Errc::corrupt);
}

TEST_CASE("a version missing a rank's regions is refused at commit") {
  TempDir t;
  Store s(t.path, "app");
  double d[4] = {1, 2, 3, 4};
  auto w0 = s.begin_version(1, 2, small_opts());
  w0.add_region({"x", ElemType::Double, 0, 4, 0, {}}, d);
  std::vector<std::string> parts{w0.seal()};
  CHECK(code_of([&] { commit_parts(s, 1, 2, parts, small_opts()); }) == Errc::invalid);
  CHECK_FALSE(s.has_manifest(1));
  auto w1 = s.begin_version(1, 2, small_opts());
  w1.add_region({"x", ElemType::Double, 0, 4, 1, {}}, d);
  parts.push_back(w1.seal());
  commit_parts(s, 1, 2, parts, small_opts());
  CHECK(s.valid(1));
}

TEST_CASE("retention keeps the newest K valid versions and never the newest valid one") {
  TempDir t;
  for (std::uint64_t v = 1; v <= 5; ++v) write_simple(t.path, v, static_cast<double>(v), 100);
  Store s(t.path, "app");
  // v6 is in flight (no manifest yet), v5 becomes corrupt (size)
  {
    auto w = s.begin_version(6, 1, small_opts());
    double d[2] = {0, 0};
    w.add_region({"x", ElemType::Double, 0, 2, 0, {}}, d);
    w.seal();
  }
  fs::resize_file(chunk_file(s, 5, "x"), 8);
  // v6 and v5 are newer than the newest valid version (v4): never touched,
  // and they do not count: the two newest VALID versions (v4, v3) are kept,
  // so a later corruption of v4 still leaves v3 to restore.
  auto deleted = s.retain(2);
  std::sort(deleted.begin(), deleted.end());
  CHECK(deleted == std::vector<std::uint64_t>{1, 2});
  CHECK(s.list_versions() == std::vector<std::uint64_t>{6, 5, 4, 3});
  CHECK(s.newest_valid() == std::optional<std::uint64_t>(4));
  CHECK(s.retain(0).empty());
  CHECK(s.retain(1) == std::vector<std::uint64_t>{3});  // v4 is the newest valid: kept; v5, v6 newer
  s.remove_version(6);
  CHECK(code_of([&] { s.remove_version(6); }) == Errc::not_found);

  SECTION("keep_last option applies at commit") {
    Options o = small_opts();
    o.keep_last = 2;
    write_simple(t.path, 7, 7.0, 100, o);
    write_simple(t.path, 8, 8.0, 100, o);
    CHECK(s.list_versions() == std::vector<std::uint64_t>{8, 7});
  }
}

TEST_CASE("several writers of one version commit their parts together") {
  TempDir t;
  Store s(t.path, "multi");
  std::vector<std::string> parts;
  std::vector<std::vector<double>> data;
  for (int r = 0; r < 2; ++r) data.push_back(ramp(500, r));
  std::vector<std::thread> th;
  parts.resize(2);
  for (int r = 0; r < 2; ++r)
    th.emplace_back([&, r] {
      VersionWriter w(t.path, "multi", ::geteuid(), 5, 2, small_opts());
      w.add_region({"x", ElemType::Double, 0, 500, r, {}}, data[r].data());
      parts[r] = w.seal();
    });
  for (auto& x : th) x.join();
  Manifest m = commit_parts(s, 5, 2, parts, small_opts(), {{"who", "test"}});
  CHECK(m.regions.size() == 2);
  CHECK(s.verify(5).attrs.at("who") == "test");
  std::vector<double> back(500);
  s.read_region(5, 1, "x", back.data(), 4000);
  CHECK(back == data[1]);
  // committing again is refused; duplicate labels are refused
  CHECK(code_of([&] { commit_parts(s, 5, 2, parts, small_opts()); }) == Errc::invalid);
}

TEST_CASE("permissions: modes 0700/0600 and foreign uids are refused") {
  TempDir t;
  write_simple(t.path, 1, 1.0, 100);
  Store s(t.path, "app");
  const fs::path uid_dir = t.path / std::to_string(::geteuid());
  CHECK(mode_of(uid_dir) == 0700);
  CHECK(mode_of(s.app_dir()) == 0700);
  CHECK(mode_of(s.version_dir(1)) == 0700);
  CHECK(mode_of(chunk_file(s, 1, "x")) == 0600);
  CHECK(mode_of(s.version_dir(1) / kManifestName) == 0600);

  Store other(t.path, "app", ::geteuid() + 1);
  if (::geteuid() != 0) {
    CHECK(code_of([&] { other.list_versions(); }) == Errc::perm);
    CHECK(code_of([&] { other.newest_valid(); }) == Errc::perm);
    std::vector<double> back(100);
    CHECK(code_of([&] { other.read_region(1, 0, "x", back.data(), 800); }) == Errc::perm);
  } else {
    // root may read every uid's store (agents); an ordinary user may not
    // read root's: checked in a child that becomes nobody (65534).
    pid_t pid = ::fork();
    if (pid == 0) {
      if (::setresuid(65534, 65534, 65534) != 0) _exit(3);
      Store mine_not(t.path, "app", 0);
      std::vector<double> back(100);
      bool ok = code_of([&] { mine_not.list_versions(); }) == Errc::perm &&
                code_of([&] { mine_not.newest_valid(); }) == Errc::perm &&
                code_of([&] { mine_not.read_region(1, 0, "x", back.data(), 800); }) == Errc::perm;
      _exit(ok ? 0 : 1);
    }
    int st = -1;
    ::waitpid(pid, &st, 0);
    CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
  }

  // a version moved under another app name is refused (identity = name + uid)
  fs::create_directories(t.path / std::to_string(::geteuid()) / "thief");
  fs::permissions(t.path / std::to_string(::geteuid()) / "thief", fs::perms::owner_all);
  fs::rename(s.version_dir(1), t.path / std::to_string(::geteuid()) / "thief" / "v0000000001");
  Store thief(t.path, "thief");
  CHECK(code_of([&] { thief.manifest(1); }) == Errc::mismatch);

  if (::geteuid() == 0) {
    // uid directory owned by somebody else -> refused
    write_simple(t.path, 2, 2.0, 100);
    REQUIRE(::chown(uid_dir.c_str(), 12345, static_cast<gid_t>(-1)) == 0);
    CHECK(code_of([&] { s.list_versions(); }) == Errc::perm);
    CHECK(code_of([&] { write_simple(t.path, 3, 3.0, 100); }) == Errc::perm);
    REQUIRE(::chown(uid_dir.c_str(), 0, static_cast<gid_t>(-1)) == 0);
    CHECK(s.list_versions() == std::vector<std::uint64_t>{2});
  } else {
    // non-root cannot write for another uid
    CHECK(code_of([&] { other.begin_version(1, 1, small_opts()); }) == Errc::perm);
  }
}

TEST_CASE("Error carries code, path and a readable message") {
  Error e(Errc::corrupt, "/x/y.dat", "checksum mismatch");
  CHECK(e.code() == Errc::corrupt);
  CHECK(e.path() == "/x/y.dat");
  CHECK(std::string(e.what()) == "ckstore: corrupt: /x/y.dat: checksum mismatch");
  CHECK(std::string(to_string(Errc::not_found)) == "not_found");
  CHECK(parse_elem_type("double") == ElemType::Double);
  CHECK(parse_dist("cyclic") == Dist::Cyclic);
  CHECK(code_of([] { parse_elem_type("quad"); }) == Errc::invalid);
  CHECK(elem_size(ElemType::Float) == 4);
  CHECK(static_cast<int>(ElemType::Binary) == 5);
}

TEST_CASE("odd attrs and malformed parts do not escape as foreign exceptions") {
  TempDir t;
  Store s(t.path, "app");
  {
    auto w = s.begin_version(1, 1, small_opts());
    double d[2] = {1, 2};
    w.add_region({"x", ElemType::Double, 0, 2, 0, {}}, d);
    w.set_attr("host", "bad\xff utf8");
    w.commit();
  }
  CHECK(s.verify(1).attrs.count("host") == 1);
  {
    auto w = s.begin_version(2, 1, small_opts());
    w.seal();
  }
  std::vector<std::string> junk{"{\"format\":\"dynres-ckstore-part\",\"app\":\"app\",\"uid\":" +
                                std::to_string(::geteuid()) + ",\"version\":2}"};
  CHECK(code_of([&] { commit_parts(s, 2, 1, junk, small_opts()); }) == Errc::invalid);
  junk[0] = "not json";
  CHECK(code_of([&] { commit_parts(s, 2, 1, junk, small_opts()); }) == Errc::invalid);
  CHECK(code_of([&] { commit_parts(s, 9, 1, junk, small_opts()); }) == Errc::not_found);
}

TEST_CASE("root writes and reads the store of another uid (iCheck agents)") {
  if (::geteuid() != 0) return;  // only root may write for another uid
  TempDir t;
  const std::uint32_t uid = 65534;
  Store s(t.path, "agentapp", uid);
  std::vector<double> d(1000);
  std::iota(d.begin(), d.end(), 0.5);
  // the agent's path: has_manifest, begin_version, seal, commit_parts
  REQUIRE_FALSE(s.has_manifest(1));
  auto w = s.begin_version(1, 1, small_opts());
  w.add_region({"x", ElemType::Double, 0, d.size(), 0, {}}, d.data());
  std::vector<std::string> parts{w.seal()};
  Manifest m = commit_parts(s, 1, 1, parts, small_opts());
  CHECK(m.uid == uid);
  CHECK(s.has_manifest(1));
  CHECK(s.list_versions() == std::vector<std::uint64_t>{1});
  CHECK(s.newest_valid() == std::optional<std::uint64_t>(1));
  struct stat st {};
  REQUIRE(::stat((s.version_dir(1) / kManifestName).c_str(), &st) == 0);
  CHECK(st.st_uid == uid);  // the files belong to the application's uid
  REQUIRE(::stat(s.app_dir().c_str(), &st) == 0);
  CHECK(st.st_uid == uid);
}

TEST_CASE("decompressed bytes are checked against their own checksum") {
  // The stored-bytes checksum guards the file; the raw checksum guards the
  // decompression. Re-sign a manifest whose raw checksum of one compressed
  // chunk is wrong: the stored bytes still match, so only the raw check can
  // refuse the read.
  TempDir t;
  Options o = small_opts();
  o.compress = true;
  o.compress_threshold = 1000;
  std::vector<double> zeros(5000, 0.0);
  RegionData r{{"zeros", ElemType::Double, 0, zeros.size(), 0, {}}, zeros.data()};
  write_version(t.path, "app", ::geteuid(), 1, std::span<const RegionData>(&r, 1), o);
  Store s(t.path, "app");
  Manifest m = s.manifest(1);
  Region* z = nullptr;
  for (auto& reg : m.regions)
    if (reg.info.label == "zeros") z = &reg;
  REQUIRE(z);
  REQUIRE(z->chunks.at(0).compressed);
  z->chunks.at(0).raw_xxh3 ^= 1;
  { std::ofstream(s.version_dir(1) / kManifestName, std::ios::trunc) << m.to_json(); }
  REQUIRE_NOTHROW(s.manifest(1));  // the re-signed manifest itself is valid
  std::vector<double> back(5000);
  try {
    s.read_region(1, 0, "zeros", back.data(), back.size() * 8);
    FAIL("a wrong decompressed checksum was not noticed");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::corrupt);
    CHECK_THAT(e.what(), Catch::Contains("checksum mismatch (raw bytes)"));
  }
}

TEST_CASE("a manifest edited consistently is refused by its own checksum") {
  // Every field still agrees with every other and with the chunk sizes: a
  // chunk's raw and stored checksums changed together (an uncompressed chunk
  // keeps them equal). Only the manifest's own checksum can tell; a restart
  // that trusted it would accept data the checksums no longer describe.
  TempDir t;
  write_simple(t.path, 1, 1.0);
  Store s(t.path, "app");
  const fs::path mp = s.version_dir(1) / kManifestName;
  std::string text = read_text(mp);
  auto key = text.find("\"raw_xxh3\": \"");
  REQUIRE(key != std::string::npos);
  const std::string sum = text.substr(key + 13, 16);
  std::string other = sum;
  other[0] = other[0] == '0' ? '1' : '0';
  size_t n = 0;
  for (auto p = text.find(sum); p != std::string::npos; p = text.find(sum, p + 1)) text.replace(p, 16, other), ++n;
  REQUIRE(n == 2);  // raw_xxh3 and stored_xxh3
  { std::ofstream(mp, std::ios::trunc) << text; }
  try {
    s.manifest(1);
    FAIL("an edited manifest was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::corrupt);
    CHECK_THAT(e.what(), Catch::Contains("manifest checksum"));
  }
  CHECK_FALSE(s.newest_valid());
}
