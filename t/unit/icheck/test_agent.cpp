// Commit/restart through a real icagent process (forked run_agent) over real
// libfabric RMA: zero-copy and staged commits, pull and push, several
// regions of different types and unaligned sizes, agent buffer recycling
// (double buffering, [John24 §6.2.3.2]) and in-place restart_all.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "dynres/icheck/agent.hpp"
#include "dynres/icheck/client.hpp"
#include "dynres/icheck/fabric.hpp"
#include "dynres/icheck/wire.hpp"

namespace fs = std::filesystem;
using namespace dynres::icheck;

namespace {
std::atomic<bool> g_agent_stop{false};
struct AgentProc {
  fs::path dir;
  std::string sock;
  pid_t pid = -1;
  AgentProc(const std::string& prov, bool recycle) {
    char t[] = "/tmp/icheck_unit_agent.XXXXXX";
    dir = ::mkdtemp(t);
    sock = (dir / "a.sock").string();
    pid = ::fork();
    if (pid == 0) {
      AgentOptions o;
      o.listen = "unix:" + sock;
      o.app = "uagent";
      o.uid = uint32_t(::geteuid());
      o.provider = prov;
      o.fabric_node = "127.0.0.1";
      o.multi_level = false;
      o.print_ready = false;
      o.recycle = recycle;
      ::signal(SIGTERM, [](int) { g_agent_stop = true; });
      try {
        run_agent(o, &g_agent_stop);
      } catch (...) {
        _exit(1);
      }
      _exit(0);
    }
    for (int i = 0; i < 500 && !fs::exists(sock); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ofstream(dir / "c.yaml") << "agents: [\"unix:" << sock << "\"]\npfs_dir: " << (dir / "pfs").string()
                                  << "\ntransport: {provider: \"" << prov << "\", node: 127.0.0.1}\n";
  }
  std::string cfg() const { return (dir / "c.yaml").string(); }
  json stats() {
    Socket s = connect_to("unix:" + sock, 2000);
    return request(s, {{"op", "stats"}}, 5000);
  }
  ~AgentProc() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      int st;
      ::waitpid(pid, &st, 0);
    }
    fs::remove_all(dir);
  }
};
}  // namespace

TEST_CASE("agent: zero-copy and staged commits, recycling, in-place restart", "[agent]") {
  auto provs = available_rma_providers();
  for (const std::string prov : {"shm", "tcp;ofi_rxm"}) {
    if (std::find(provs.begin(), provs.end(), prov) == provs.end()) continue;
    for (const char* mode : {"pull", "push"})
      for (const char* zc : {"1", "0"}) {
        DYNAMIC_SECTION(prov << " " << mode << " zero_copy=" << zc) {
          AgentProc agent(prov, true);
          ::setenv("ICHECK_TRANSFER", mode, 1);
          ::setenv("ICHECK_ZERO_COPY", zc, 1);
          // Three regions: 3 MiB + 8 bytes of doubles, an odd int count, a byte blob.
          std::vector<double> d((3u << 20) / 8 + 1);
          std::vector<int> k(100003);
          std::vector<char> b(4097);
          int st = -1;
          {
            Client c;
            REQUIRE(c.init(agent.cfg().c_str(), "uagent", nullptr, &st) == ICHECK_OK);
            REQUIRE(std::string(c.mode()) == "rdma");
            REQUIRE(c.add("d", d.data(), d.size(), ICHECK_DOUBLE) == ICHECK_OK);
            REQUIRE(c.add("k", k.data(), k.size(), ICHECK_INT) == ICHECK_OK);
            REQUIRE(c.add("b", b.data(), b.size(), ICHECK_BINARY) == ICHECK_OK);
            for (int v = 1; v <= 4; ++v) {
              for (size_t i = 0; i < d.size(); ++i) d[i] = double(i) * v + 0.5;
              for (size_t i = 0; i < k.size(); ++i) k[i] = int(i) ^ v;
              for (size_t i = 0; i < b.size(); ++i) b[i] = char(i * v);
              REQUIRE(c.commit() == ICHECK_OK);
              CHECK(c.version() == v);
            }
            json s = agent.stats();
            CHECK(s.value("recycled", 0) >= 2);  // v3 and v4 reuse superseded buffers
            // The idle spare is handed to MADV_FREE within 200 ms.
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            s = agent.stats();
            CHECK(s.value("spare_bytes", size_t(0)) > 0);
            CHECK(s.value("lazy_free", size_t(0)) >= s.value("spare_bytes", size_t(0)) / 2);
            CHECK(s.value(std::string(mode) == "push" ? "pushes" : "pulls", 0) == 4);
            CHECK(c.finalize(IC_PERSIST) == ICHECK_OK);
          }
          const auto d0 = d;
          const auto k0 = k;
          const auto b0 = b;
          std::fill(d.begin(), d.end(), 0.0);
          std::fill(k.begin(), k.end(), 0);
          std::fill(b.begin(), b.end(), 0);
          {  // in place (restart_all)
            Client c;
            REQUIRE(c.init(agent.cfg().c_str(), "uagent", nullptr, &st) == ICHECK_OK);
            REQUIRE(st == ICHECK_STATUS_RESTART);
            c.add("d", d.data(), d.size(), ICHECK_DOUBLE);
            c.add("k", k.data(), k.size(), ICHECK_INT);
            c.add("b", b.data(), b.size(), ICHECK_BINARY);
            REQUIRE(c.restart_all() == ICHECK_OK);
            CHECK(c.version() == 4);
            CHECK(d == d0);
            CHECK(k == k0);
            CHECK(b == b0);
            c.finalize(IC_PERSIST);
          }
          {  // through the library copy (restart + restore of one label)
            Client c;
            REQUIRE(c.init(agent.cfg().c_str(), "uagent", nullptr, &st) == ICHECK_OK);
            std::vector<int> k2(k.size());
            REQUIRE(c.restart() == ICHECK_OK);
            REQUIRE(c.restore("k", k2.data(), k2.size()) == ICHECK_OK);
            CHECK(k2 == k0);
            CHECK(c.restore("k", k2.data(), k2.size() - 1) == ICHECK_EMISMATCH);
            c.finalize(IC_PERSIST);
          }
          ::unsetenv("ICHECK_TRANSFER");
          ::unsetenv("ICHECK_ZERO_COPY");
        }
      }
  }
}

TEST_CASE("agent: without recycling superseded versions are freed", "[agent]") {
  AgentProc agent("auto", false);
  std::vector<double> d(1u << 18);
  int st;
  Client c;
  REQUIRE(c.init(agent.cfg().c_str(), "uagent", nullptr, &st) == ICHECK_OK);
  c.add("d", d.data(), d.size(), ICHECK_DOUBLE);
  for (int v = 1; v <= 3; ++v) REQUIRE(c.commit() == ICHECK_OK);
  json s = agent.stats();
  CHECK(s.value("recycled", -1) == 0);
  CHECK(s.value("spare_bytes", -1) == 0);
  c.finalize(IC_PERSIST);
}

TEST_CASE("agent: control connections do not leak descriptors or threads", "[agent]") {
  AgentProc agent("auto", true);
  auto fds = [&] {
    size_t n = 0;
    for ([[maybe_unused]] auto& e : fs::directory_iterator("/proc/" + std::to_string(agent.pid) + "/fd")) ++n;
    return n;
  };
  auto threads = [&] {
    std::ifstream f("/proc/" + std::to_string(agent.pid) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
    return -1;
  };
  agent.stats();
  const size_t fd0 = fds();
  // A manager opens one connection per heartbeat; 300 of them.
  for (int i = 0; i < 300; ++i) REQUIRE(agent.stats().contains("ncops"));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the accept loop reaps every 200 ms
  CHECK(fds() <= fd0 + 2);
  CHECK(threads() <= 8);
}

// §6.5.1: an agent fails while an asynchronous commit is in flight and the
// application has already changed its regions (allowed once a staged
// asynchronous commit returned, icheck(3)): the fallback must write the
// staged copy of the version, not the live, newer data.
TEST_CASE("agent: asynchronous commit whose agent dies writes the staged version", "[agent]") {
  AgentProc agent("auto", true);
  std::vector<double> d(1u << 16);
  int st = -1;
  for (size_t i = 0; i < d.size(); ++i) d[i] = double(i);
  const auto committed = d;
  {
    Client c;
    REQUIRE(c.init(agent.cfg().c_str(), "uagent", nullptr, &st) == ICHECK_OK);
    REQUIRE(std::string(c.mode()) == "rdma");
    REQUIRE(c.add("d", d.data(), d.size(), ICHECK_DOUBLE) == ICHECK_OK);
    REQUIRE(c.enable_async(1) == ICHECK_OK);
    ::kill(agent.pid, SIGSTOP);  // the transfer cannot finish
    REQUIRE(c.commit() == ICHECK_OK);
    for (auto& x : d) x = -1;  // the application moves on
    ::kill(agent.pid, SIGKILL);
    ::waitpid(agent.pid, nullptr, 0);
    agent.pid = -1;
    CHECK(c.wait() == ICHECK_OK);  // fell back to the second level
    CHECK(std::string(c.mode()) == "direct");
    CHECK(c.version() == 1);
    c.finalize(IC_PERSIST);
  }
  std::vector<double> back(d.size(), 0.0);
  Client r;
  REQUIRE(r.init(agent.cfg().c_str(), "uagent", nullptr, &st) == ICHECK_OK);
  REQUIRE(st == ICHECK_STATUS_RESTART);
  REQUIRE(r.add("d", back.data(), back.size(), ICHECK_DOUBLE) == ICHECK_OK);
  REQUIRE(r.restart_all() == ICHECK_OK);
  CHECK(r.version() == 1);
  CHECK(back == committed);
  r.finalize(IC_PERSIST);
}
