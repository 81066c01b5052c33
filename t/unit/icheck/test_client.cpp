// libicheck error codes and the direct (second-level) mode with real files;
// configuration parsing.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "dynres/icheck/client.hpp"
#include "dynres/icheck/config.hpp"

namespace fs = std::filesystem;
using namespace dynres::icheck;

namespace {
struct TmpDir {
  fs::path p;
  TmpDir() {
    char t[] = "/tmp/icheck_unit.XXXXXX";
    p = ::mkdtemp(t);
  }
  ~TmpDir() { fs::remove_all(p); }
};
}  // namespace

TEST_CASE("config: static and dynamic files", "[config]") {
  TmpDir d;
  std::ofstream(d.p / "dyn.yaml") << "factor: 3\ninit_agent_count: num_nodes\ndistribution: fill\nread_interval: 7\n";
  std::ofstream(d.p / "s.yaml") << "controller: unix:run/c.sock\ncontroller_standby: 127.0.0.1:7777\n"
                                   "heartbeat_interval: 2\npfs_dir: pfs\ndynamic_config: dyn.yaml\n"
                                   "transport: {provider: shm}\nhello_timeout_ms: 4500\n";
  auto c = load_static((d.p / "s.yaml").string());
  CHECK(c.hello_timeout_ms == 4500);
  REQUIRE(c.controllers.size() == 2);
  CHECK(c.controllers[0] == "unix:" + (d.p / "run/c.sock").string());
  CHECK(c.controllers[1] == "127.0.0.1:7777");
  CHECK(c.heartbeat_interval == 2);
  CHECK(c.pfs_dir == (d.p / "pfs").string());
  CHECK(c.provider == "shm");
  CHECK(c.dyn.factor == 3);
  CHECK(c.dyn.init_agent_count == 0);
  CHECK(c.dyn.distribution == "fill");
  CHECK(c.dyn.read_interval == 7);
  std::ofstream(d.p / "bad.yaml") << "heartbeat_interval: [oops\n";
  CHECK_THROWS(load_static((d.p / "bad.yaml").string()));
  std::ofstream(d.p / "h0.yaml") << "hello_timeout_ms: 0\n";
  CHECK_THROWS_WITH(load_static((d.p / "h0.yaml").string()), Catch::Contains("hello_timeout_ms"));
  std::ofstream(d.p / "ok.yaml") << "heartbeat_interval: 1\n";
  CHECK(load_static((d.p / "ok.yaml").string()).hello_timeout_ms == 30000);
}

TEST_CASE("client: bad calls return error codes, data survives", "[client]") {
  TmpDir d;
  std::ofstream(d.p / "c.yaml") << "direct: true\npfs_dir: " << (d.p / "pfs").string() << "\n";
  std::string cfg = (d.p / "c.yaml").string();
  std::vector<double> a(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = double(i) * 0.25;
  int st = -1;
  {
    Client c;
    CHECK(c.commit() == ICHECK_ESTATE);  // commit before init
    CHECK(c.add("x", a.data(), a.size(), ICHECK_DOUBLE) == ICHECK_ESTATE);
    CHECK(c.init(cfg.c_str(), "../evil", nullptr, &st) == ICHECK_ELABEL);
    CHECK(c.init(cfg.c_str(), "unit", nullptr, nullptr) == ICHECK_EINVAL);
    REQUIRE(c.init(cfg.c_str(), "unit", nullptr, &st) == ICHECK_OK);
    CHECK(st == ICHECK_STATUS_NEW);
    CHECK(std::string(c.mode()) == "direct");
    CHECK(c.init(cfg.c_str(), "unit", nullptr, &st) == ICHECK_ESTATE);
    CHECK(c.add("x", nullptr, 10, ICHECK_DOUBLE) == ICHECK_EINVAL);
    CHECK(c.add("x", a.data(), 0, ICHECK_DOUBLE) == ICHECK_EINVAL);
    CHECK(c.add("x", a.data(), 10, 99) == ICHECK_EINVAL);
    CHECK(c.add("a/b", a.data(), 10, ICHECK_DOUBLE) == ICHECK_ELABEL);
    CHECK(c.add("..", a.data(), 10, ICHECK_DOUBLE) == ICHECK_ELABEL);
    CHECK(c.add("", a.data(), 10, ICHECK_DOUBLE) == ICHECK_ELABEL);
    REQUIRE(c.add("grid", a.data(), a.size(), ICHECK_DOUBLE) == ICHECK_OK);
    CHECK(c.add("grid", a.data(), a.size(), ICHECK_DOUBLE) == ICHECK_EEXIST);
    CHECK(c.restore("grid", a.data(), a.size()) == ICHECK_ESTATE);  // no restart yet
    CHECK(c.restart() == ICHECK_ENOENT);                           // nothing committed
    REQUIRE(c.commit() == ICHECK_OK);
    CHECK(c.version() == 1);
    CHECK(c.finalize(42) == ICHECK_EINVAL);
    CHECK(c.finalize(0) == ICHECK_OK);
  }
  {
    Client c;
    REQUIRE(c.init(cfg.c_str(), "unit", nullptr, &st) == ICHECK_OK);
    CHECK(st == ICHECK_STATUS_RESTART);
    std::vector<double> b(1000, -1);
    REQUIRE(c.add("grid", b.data(), b.size(), ICHECK_DOUBLE) == ICHECK_OK);
    REQUIRE(c.restart() == ICHECK_OK);
    CHECK(c.restore("nope", b.data(), b.size()) == ICHECK_ENOENT);
    CHECK(c.restore("grid", b.data(), b.size() - 1) == ICHECK_EMISMATCH);
    CHECK(c.restore("grid", nullptr, b.size()) == ICHECK_EINVAL);
    CHECK(b[10] == -1);  // refused calls did not touch the data
    REQUIRE(c.restore("grid", b.data(), b.size()) == ICHECK_OK);
    CHECK(b == a);
    c.finalize(0);
  }
  {  // restore with a different type
    Client c;
    REQUIRE(c.init(cfg.c_str(), "unit", nullptr, &st) == ICHECK_OK);
    std::vector<float> f(1000);
    REQUIRE(c.add("grid", f.data(), f.size(), ICHECK_FLOAT) == ICHECK_OK);
    REQUIRE(c.restart() == ICHECK_OK);
    CHECK(c.restore("grid", f.data(), f.size()) == ICHECK_EMISMATCH);
    c.finalize(0);
  }
  // files are owner-only
  auto perms = fs::status(d.p / "pfs" / std::to_string(::geteuid())).permissions();
  CHECK((perms & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
}
