// The agent's control protocol read as an attacker and as a crash
// would, against real icagent processes (forked run_agent) with a real
// second level (ckstore) and real libfabric endpoints:
//   * "flush" reports success only once the version's MANIFEST.json
//     is durable (agent 0 of a set waits for every agent's part);
//   * a SHMR version missing ranks of the registered rank count is
//     never committed as complete;
//   * negative, wrapping or out-of-range integers are refused with
//     "invalid: ..." and change nothing;
//   * a begin larger than the agent's limit is refused with
//     "nomem: ..." before allocating, and the library falls back to the
//     second level with that message as its last error.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include "dynres/ckstore.hpp"
#include "dynres/icheck/agent.hpp"
#include "dynres/icheck/client.hpp"
#include "dynres/icheck/fabric.hpp"
#include "dynres/icheck/wire.hpp"

namespace fs = std::filesystem;
using namespace dynres::icheck;

namespace {
std::atomic<bool> g_stop{false};

struct Dir {
  fs::path p;
  Dir() {
    char t[] = "/tmp/icheck_unit_safety.XXXXXX";
    p = ::mkdtemp(t);
  }
  ~Dir() { fs::remove_all(p); }
};

/// One icagent (forked run_agent) serving app "safe" of our uid.
struct Agent {
  std::string addr;
  pid_t pid = -1;
  Agent(const fs::path& dir, const std::string& name, const fs::path& pfs, uint64_t max_bytes = 0) {
    const std::string sock = (dir / (name + ".sock")).string();
    addr = "unix:" + sock;
    pid = ::fork();
    if (pid == 0) {
      AgentOptions o;
      o.listen = addr;
      o.id = name;
      o.app = "safe";
      o.uid = uint32_t(::geteuid());
      o.provider = "shm";
      o.fabric_node = "127.0.0.1";
      o.pfs_dir = pfs.string();
      o.pfs_every = 1000000;  // second level only on flush
      o.print_ready = false;
      o.max_bytes = max_bytes;
      ::signal(SIGTERM, [](int) { g_stop = true; });
      try {
        run_agent(o, &g_stop);
      } catch (...) {
        _exit(1);
      }
      _exit(0);
    }
    // ready once a connection is accepted: the socket file exists from
    // bind() on, before listen() (a connect in that gap is refused)
    for (int i = 0; i < 500; ++i) {
      if (fs::exists(sock)) try {
          connect_to(addr, 1000);
          break;
        } catch (const std::exception&) {
        }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  bool alive() const { return ::kill(pid, 0) == 0 && ::waitpid(pid, nullptr, WNOHANG) == 0; }
  ~Agent() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

/// A control connection speaking the protocol by hand.
struct Link {
  Socket s;
  json call(const json& m, int timeout_ms = 20000) {
    send_msg(s, m);
    return recv_msg(s, timeout_ms);
  }
};

Fabric& my_fabric() {
  static Fabric f([] {
    FabricOptions o;
    o.provider = "shm";
    o.node = "127.0.0.1";
    return o;
  }());
  return f;
}

Link hello(const std::string& addr, int slot, int nslots, int nagents, const std::vector<std::string>& peers,
           int nranks) {
  Link l{connect_to(addr, 2000)};
  json r = l.call({{"op", "hello"}, {"app", "safe"}, {"uid", ::geteuid()}, {"slot", slot}, {"nslots", nslots},
                   {"nagents", nagents}, {"agent_index", slot % nagents}, {"nranks", nranks}, {"peers", peers},
                   {"provider", "shm"}, {"addr", my_fabric().address_hex()}});
  REQUIRE(r.value("ok", false));
  return l;
}

/// Commit version v of `ranks` (each a 4096-byte binary region) by push
/// without moving bytes (the piece stays zero-filled), and publish it.
void commit_push(Link& l, uint64_t v, const std::vector<int>& ranks, int nranks) {
  json regs = json::array();
  size_t off = 0;
  for (int r : ranks) {
    regs.push_back({{"label", "x"}, {"type", 5}, {"count", 4096}, {"rank", r}, {"nranks", nranks}, {"offset", off},
                    {"bytes", 4096}});
    off += 4096;
  }
  REQUIRE(l.call({{"op", "begin"}, {"v", v}, {"total", off}, {"regions", regs}, {"mode", "push"}}).value("ok", false));
  REQUIRE(l.call({{"op", "end"}, {"v", v}, {"mode", "push"}}).value("ok", false));
  REQUIRE(l.call({{"op", "publish"}, {"v", v}}).value("ok", false));
}

std::string err_of(const json& r) { return r.value("error", std::string()); }
}  // namespace

TEST_CASE("agent: flush succeeds only once the manifest is durable", "[agent][safety]") {
  auto provs = available_rma_providers();
  if (std::find(provs.begin(), provs.end(), "shm") == provs.end()) return;
  Dir d;
  const fs::path pfs = d.p / "pfs";
  Agent a0(d.p, "a0", pfs), a1(d.p, "a1", pfs);
  const std::vector<std::string> peers{a0.addr, a1.addr};
  Link l0 = hello(a0.addr, 0, 2, 2, peers, 2);
  Link l1 = hello(a1.addr, 1, 2, 2, peers, 2);
  commit_push(l0, 1, {0}, 2);
  commit_push(l1, 1, {1}, 2);
  dynres::ckstore::Store st(pfs, "safe", ::geteuid());

  // Agent 0 alone: its own part is written, agent 1's is missing, so there
  // is no manifest and the flush must not report success.
  json r = l0.call({{"op", "flush"}, {"timeout_ms", 1500}});
  const bool manifest = fs::exists(pfs) && st.has_manifest(1);
  INFO("flush of agent 0 alone: " << r.dump());
  CHECK(r.contains("error") != r.value("ok", false));
  CHECK(r.value("ok", false) == manifest);  // "ok" without a manifest is the bug
  CHECK_FALSE(manifest);
  CHECK(err_of(r).find("manifest of v1") != std::string::npos);

  // Both agents at once (what the controller does when it stops a set):
  // both succeed, and when they answer the version is valid on disk.
  auto j0 = std::async(std::launch::async, [&] { return l0.call({{"op", "flush"}, {"timeout_ms", 15000}}); });
  auto j1 = std::async(std::launch::async, [&] { return l1.call({{"op", "flush"}, {"timeout_ms", 15000}}); });
  json r0 = j0.get(), r1 = j1.get();
  INFO(r0.dump() << " " << r1.dump());
  CHECK(r0.value("ok", false));
  CHECK(r1.value("ok", false));
  REQUIRE(st.has_manifest(1));
  auto m = st.verify(1);
  CHECK(m.nranks == 2);
  CHECK(m.regions.size() == 2);
}

TEST_CASE("agent: a version missing ranks of the registered count is refused", "[agent][safety]") {
  auto provs = available_rma_providers();
  if (std::find(provs.begin(), provs.end(), "shm") == provs.end()) return;
  Dir d;
  const fs::path pfs = d.p / "pfs";
  Agent a(d.p, "a0", pfs);
  // SHMR, 4 ranks registered; the only slot (node 0) holds ranks 0 and 1:
  // ranks 2 and 3 (the last node) are missing from the version.
  Link l = hello(a.addr, 0, 1, 1, {a.addr}, 4);
  commit_push(l, 1, {0, 1}, 4);
  json r = l.call({{"op", "flush"}, {"timeout_ms", 10000}});
  INFO(r.dump());
  dynres::ckstore::Store st(pfs, "safe", ::geteuid());
  const bool manifest = fs::exists(pfs) && st.has_manifest(1);
  CHECK_FALSE(manifest);
  CHECK(r.contains("error"));
  // The complete version (all four ranks) is accepted.
  commit_push(l, 2, {0, 1, 2, 3}, 4);
  r = l.call({{"op", "flush"}, {"timeout_ms", 10000}});
  INFO(r.dump());
  CHECK(r.value("ok", false));
  REQUIRE(st.has_manifest(2));
  CHECK(st.verify(2).nranks == 4);
}

TEST_CASE("agent: integers are checked, ranges overflow-safe", "[agent][safety]") {
  auto provs = available_rma_providers();
  if (std::find(provs.begin(), provs.end(), "shm") == provs.end()) return;
  Dir d;
  Agent a(d.p, "a0", d.p / "pfs");
  Link l = hello(a.addr, 0, 1, 1, {a.addr}, 1);
  auto begin = [&](const json& regs, const json& total) {
    return l.call({{"op", "begin"}, {"v", 1}, {"total", total}, {"regions", regs}, {"mode", "pull"}});
  };
  const json good = json::array({{{"label", "x"}, {"type", 5}, {"count", 1 << 20}, {"rank", 0}, {"offset", 0}}});
  // begin: regions must lie inside the piece; negative sizes are refused
  CHECK(err_of(begin(json::array({{{"label", "x"}, {"type", 5}, {"count", 1 << 20}, {"rank", 0}, {"offset", 4096}}}),
                     1 << 20))
            .rfind("invalid:", 0) == 0);
  CHECK(err_of(begin(json::array({{{"label", "x"}, {"type", 2}, {"count", uint64_t(1) << 62}, {"rank", 0},
                                   {"offset", 0}}}),
                     1 << 20))
            .rfind("invalid:", 0) == 0);  // count * 8 wraps
  CHECK(err_of(begin(good, -1)).rfind("invalid:", 0) == 0);
  CHECK(err_of(begin(json::array({{{"label", "x"}, {"type", 9}, {"count", 1}, {"rank", 0}, {"offset", 0}}}), 8))
            .rfind("invalid:", 0) == 0);
  // a good begin, then chunks: the example of the issue, and a wrapping one
  REQUIRE(begin(good, 1 << 20).value("ok", false));
  json r = l.call({{"op", "chunk"}, {"buf_off", 0}, {"data_off", -1048576}, {"len", 2097152}});
  INFO(r.dump());
  CHECK(err_of(r).rfind("invalid:", 0) == 0);
  r = l.call({{"op", "chunk"}, {"buf_off", 0}, {"data_off", UINT64_MAX - 4095}, {"len", 8192}});
  CHECK(err_of(r).rfind("invalid:", 0) == 0);
  r = l.call({{"op", "chunk"}, {"buf_off", 0}, {"data_off", 4096}, {"len", (1 << 20)}});
  CHECK(err_of(r).rfind("invalid:", 0) == 0);
  r = l.call({{"op", "chunk"}, {"buf_off", 0}, {"data_off", 0}, {"len", 1.5}});
  CHECK(err_of(r).rfind("invalid:", 0) == 0);
  r = l.call({{"op", "chunk"}, {"buf_off", UINT64_MAX}, {"data_off", 0}, {"len", 16}, {"base", 16}, {"key", 1}});
  CHECK(err_of(r).rfind("invalid:", 0) == 0);
  // hello with a negative slot
  Link h{connect_to(a.addr, 2000)};
  r = h.call({{"op", "hello"}, {"app", "safe"}, {"uid", ::geteuid()}, {"slot", -1}, {"nslots", 1}, {"nagents", 1},
              {"agent_index", 0}, {"provider", "shm"}, {"addr", my_fabric().address_hex()}});
  CHECK(err_of(r).rfind("invalid:", 0) == 0);
  // rchunk after a version exists
  REQUIRE(l.call({{"op", "begin"}, {"v", 2}, {"total", 4096},
                  {"regions", json::array({{{"label", "x"}, {"type", 5}, {"count", 4096}, {"rank", 0}, {"offset", 0}}})},
                  {"mode", "push"}})
              .value("ok", false));
  REQUIRE(l.call({{"op", "end"}, {"v", 2}, {"mode", "push"}}).value("ok", false));
  REQUIRE(l.call({{"op", "publish"}, {"v", 2}}).value("ok", false));
  REQUIRE(l.call({{"op", "rbegin"}, {"v", 2}, {"mode", "pull"}}).value("ok", false));
  r = l.call({{"op", "rchunk"}, {"buf_off", 0}, {"data_off", -4096}, {"len", 8192}, {"key", 1}, {"base", 0}});
  CHECK(err_of(r).rfind("invalid:", 0) == 0);
  // nothing changed: the agent is alive and still holds v2 as current
  CHECK(a.alive());
  r = l.call({{"op", "versions"}});
  REQUIRE(r.value("ok", false));
  REQUIRE(r["versions"].size() == 1);
  CHECK(r["versions"][0].value("v", 0) == 2);
}

TEST_CASE("agent: begin over the agent's limit is refused, the library falls back",
          "[agent][safety]") {
  auto provs = available_rma_providers();
  if (std::find(provs.begin(), provs.end(), "shm") == provs.end()) return;
  Dir d;
  Agent a(d.p, "a0", d.p / "pfs", 1u << 20);  // 1 MiB
  {
    Link l = hello(a.addr, 0, 1, 1, {a.addr}, 1);
    json r = l.call({{"op", "begin"}, {"v", 1}, {"total", uint64_t(1) << 40},
                     {"regions", json::array({{{"label", "x"}, {"type", 5}, {"count", uint64_t(1) << 40}, {"rank", 0},
                                               {"offset", 0}}})},
                     {"mode", "pull"}});
    CHECK(err_of(r).rfind("nomem:", 0) == 0);
    CHECK(err_of(r).find("1048576") != std::string::npos);
    r = l.call({{"op", "stats"}});
    CHECK(r.value("mem_bytes", size_t(1)) == 0);  // nothing was allocated
  }
  // The library: a 4 MiB checkpoint is refused by the agent, written to the
  // second level instead, and the reason is the library's last error.
  std::ofstream(d.p / "c.yaml") << "agents: [\"" << a.addr << "\"]\npfs_dir: " << (d.p / "pfs").string()
                                << "\ntransport: {provider: shm, node: 127.0.0.1}\n";
  std::vector<double> x(512 * 1024, 1.25);
  Client c;
  int status = -1;
  REQUIRE(c.init((d.p / "c.yaml").c_str(), "safe", nullptr, &status) == ICHECK_OK);
  REQUIRE(std::string(c.mode()) == "rdma");
  REQUIRE(c.add("x", x.data(), x.size(), ICHECK_DOUBLE) == ICHECK_OK);
  CHECK(c.commit() == ICHECK_OK);
  CHECK(c.version() == 1);
  CHECK(std::string(c.mode()) == "direct");
  CHECK(std::string(c.last_error()).find("nomem:") != std::string::npos);
  dynres::ckstore::Store st(d.p / "pfs", "safe", ::geteuid());
  CHECK(st.valid(1));
  CHECK(c.finalize(IC_PERSIST) == ICHECK_OK);
  CHECK(a.alive());
}

TEST_CASE("agent: stopping wakes a flush that waits", "[agent][safety]") {
  auto provs = available_rma_providers();
  if (std::find(provs.begin(), provs.end(), "shm") == provs.end()) return;
  Dir d;
  const fs::path pfs = d.p / "pfs";
  Agent a0(d.p, "a0", pfs), a1(d.p, "a1", pfs);
  const std::vector<std::string> peers{a0.addr, a1.addr};
  Link l0 = hello(a0.addr, 0, 2, 2, peers, 2);
  Link l1 = hello(a1.addr, 1, 2, 2, peers, 2);
  commit_push(l0, 1, {0}, 2);
  commit_push(l1, 1, {1}, 2);
  // agent 0 waits up to 30 s for agent 1's part, which never comes
  auto f = std::async(std::launch::async, [&] {
    try {
      return l0.call({{"op", "flush"}, {"timeout_ms", 30000}}, 40000);
    } catch (const std::exception& e) {
      return json{{"error", e.what()}};
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::kill(a0.pid, SIGTERM) == 0);
  int st = -1;
  REQUIRE(::waitpid(a0.pid, &st, 0) == a0.pid);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  a0.pid = -1;
  CHECK(took < 3.0);
  json r = f.get();
  INFO(r.dump());
  CHECK(r.contains("error"));  // never "ok": the manifest was not written
}

TEST_CASE("restart: a timed-out agent restore drops the agent link", "[agent][safety]") {
  auto provs = available_rma_providers();
  if (std::find(provs.begin(), provs.end(), "shm") == provs.end()) return;
  Dir d;
  const fs::path pfs = d.p / "pfs";
  Agent a(d.p, "a0", pfs);  // second level only on flush
  std::ofstream(d.p / "c.yaml") << "agents: [\"" << a.addr << "\"]\npfs_dir: " << pfs.string()
                                << "\nrequest_timeout_ms: 1000\ntransport: {provider: shm, node: 127.0.0.1}\n";
  const std::string cfg = (d.p / "c.yaml").string();
  ::setenv("ICHECK_TRANSFER", "push", 1);
  const size_t n = 64 * 1024;
  auto fill = [n](double v) { return std::vector<double>(n, v); };
  std::vector<double> x = fill(1.0);
  int status = -1;
  {  // v1: agent + second level (finalize flushes)
    Client c;
    REQUIRE(c.init(cfg.c_str(), "safe", nullptr, &status) == ICHECK_OK);
    REQUIRE(c.add("x", x.data(), n, ICHECK_DOUBLE) == ICHECK_OK);
    REQUIRE(c.commit() == ICHECK_OK);
    REQUIRE(c.finalize(0) == ICHECK_OK);
  }
  {  // v2: agent memory only
    Client c;
    REQUIRE(c.init(cfg.c_str(), "safe", nullptr, &status) == ICHECK_OK);
    REQUIRE(c.add("x", x.data(), n, ICHECK_DOUBLE) == ICHECK_OK);
    std::fill(x.begin(), x.end(), 2.0);
    const int crc = c.commit();
    INFO(c.last_error());
    REQUIRE(crc == ICHECK_OK);
    REQUIRE(c.version() == 2);
    REQUIRE(c.finalize(IC_PERSIST) == ICHECK_OK);
  }
  {  // the agent stalls during the restart: the library falls back to the
     // second level (v1); when the agent wakes up its late reply must not be
     // taken for the answer to a later request
    Client c;
    REQUIRE(c.init(cfg.c_str(), "safe", nullptr, &status) == ICHECK_OK);
    REQUIRE(status == ICHECK_STATUS_RESTART);
    std::fill(x.begin(), x.end(), 0.0);
    REQUIRE(c.add("x", x.data(), n, ICHECK_DOUBLE) == ICHECK_OK);
    REQUIRE(::kill(a.pid, SIGSTOP) == 0);
    const int rc = c.restart_all();
    REQUIRE(::kill(a.pid, SIGCONT) == 0);
    INFO("restart_all rc " << rc << ": " << c.last_error());
    REQUIRE(rc == ICHECK_OK);
    CHECK(x == fill(1.0));  // v1 from the second level, nothing else
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the agent's late replies arrive
    CHECK(x == fill(1.0));  // and nothing lands in the regions afterwards
    std::fill(x.begin(), x.end(), 3.0);
    REQUIRE(c.commit() == ICHECK_OK);
    REQUIRE(c.finalize(IC_PERSIST) == ICHECK_OK);
  }
  {  // the next run restores exactly the newest committed version
    Client c;
    REQUIRE(c.init(cfg.c_str(), "safe", nullptr, &status) == ICHECK_OK);
    std::fill(x.begin(), x.end(), 0.0);
    REQUIRE(c.add("x", x.data(), n, ICHECK_DOUBLE) == ICHECK_OK);
    REQUIRE(c.restart_all() == ICHECK_OK);
    CHECK(c.version() == 3);
    CHECK(x == fill(3.0));
    c.finalize(IC_PERSIST);
  }
  ::unsetenv("ICHECK_TRANSFER");
}

TEST_CASE("agent: end checks the region checksums it keeps; test ops are off by default",
          "[agent][safety]") {
  auto provs = available_rma_providers();
  if (std::find(provs.begin(), provs.end(), "shm") == provs.end()) return;
  Dir d;
  Agent a(d.p, "a0", d.p / "pfs");
  Link l = hello(a.addr, 0, 1, 1, {a.addr}, 1);
  const json regs = json::array({{{"label", "x"}, {"type", 5}, {"count", 4096}, {"rank", 0}, {"offset", 0}},
                                 {{"label", "y"}, {"type", 5}, {"count", 4096}, {"rank", 0}, {"offset", 4096}}});
  REQUIRE(l.call({{"op", "begin"}, {"v", 1}, {"total", 8192}, {"regions", regs}, {"mode", "push"}}).value("ok", false));
  // one checksum per region, each a non-negative integer
  CHECK(err_of(l.call({{"op", "end"}, {"v", 1}, {"mode", "push"}, {"sums", json::array({1})}})).rfind("invalid:", 0) == 0);
  CHECK(err_of(l.call({{"op", "end"}, {"v", 1}, {"mode", "push"}, {"sums", json::array({1, -2})}})).rfind("invalid:", 0) ==
        0);
  CHECK(err_of(l.call({{"op", "end"}, {"v", 1}, {"mode", "push"}, {"sums", json::array({1, "2"})}})).rfind("invalid:", 0) ==
        0);
  CHECK(err_of(l.call({{"op", "end"}, {"v", 1}, {"mode", "push"}, {"sums", 7}})).rfind("invalid:", 0) == 0);
  // refused ends leave the piece incomplete: it cannot be published
  CHECK(err_of(l.call({{"op", "publish"}, {"v", 1}})).rfind("noent:", 0) == 0);
  const uint64_t big = UINT64_MAX - 5;
  REQUIRE(l.call({{"op", "end"}, {"v", 1}, {"mode", "push"}, {"sums", json::array({big, 42})}}).value("ok", false));
  REQUIRE(l.call({{"op", "publish"}, {"v", 1}}).value("ok", false));
  json r = l.call({{"op", "rbegin"}, {"v", 1}, {"mode", "push"}});
  REQUIRE(r.value("ok", false));
  CHECK(r["regions"][0].value("xxh3", uint64_t(0)) == big);
  CHECK(r["regions"][1].value("xxh3", uint64_t(0)) == 42);
  REQUIRE(l.call({{"op", "rend"}}).value("ok", false));
  // the test operation exists only with ICHECK_AGENT_TEST_OPS=1
  CHECK(err_of(l.call({{"op", "test_corrupt"}, {"v", 1}})).rfind("invalid: unknown op", 0) == 0);
  // the zero-filled piece does not match checksum 42: the second-level
  // write refuses it, and no manifest is written
  CHECK(err_of(l.call({{"op", "flush"}, {"timeout_ms", 20000}})).find("does not match the application's checksum") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(d.p / "pfs" / std::to_string(::geteuid()) / "safe" / "v0000000001" / "MANIFEST.json"));
  CHECK(a.alive());
}

TEST_CASE("agent: a part of a version agent 0 skipped is answered at once, not at the timeout", "[agent][safety]") {
  // t4010-icheck-app-api under load: agent 0's second-level writer skipped v1 (v2
  // was queued before it took up v1) while agent 1's only writer waited for
  // the manifest of v1 inside its "part" delivery; agent 0 then needed
  // agent 1's part of v2, queued behind that wait: every flush hung for the
  // 60 s timeout of "part". Here agent 0 never writes v1 (it flushes v2
  // only), which is the same state for agent 1's part.
  auto provs = available_rma_providers();
  if (std::find(provs.begin(), provs.end(), "shm") == provs.end()) return;
  Dir d;
  const fs::path pfs = d.p / "pfs";
  Agent a0(d.p, "a0", pfs), a1(d.p, "a1", pfs);
  const std::vector<std::string> peers{a0.addr, a1.addr};
  Link l0 = hello(a0.addr, 0, 2, 2, peers, 2);
  Link l1 = hello(a1.addr, 1, 2, 2, peers, 2);
  commit_push(l0, 1, {0}, 2);
  commit_push(l1, 1, {1}, 2);
  // agent 1 writes its part of v1 and delivers it to agent 0, which waits
  // for its own part of v1 (allowed: it may still come)
  const auto t0 = std::chrono::steady_clock::now();
  Link f{connect_to(a1.addr, 2000)};  // flush needs no hello; l1 stays free for v2
  auto f1 = std::async(std::launch::async, [&] { return f.call({{"op", "flush"}, {"timeout_ms", 30000}}, 40000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // both move on to v2; agent 0 queues v2 without ever writing v1
  commit_push(l0, 2, {0}, 2);
  commit_push(l1, 2, {1}, 2);
  Link m0{connect_to(a0.addr, 2000)}, m1{connect_to(a1.addr, 2000)};
  auto j0 = std::async(std::launch::async, [&] { return m0.call({{"op", "flush"}, {"timeout_ms", 8000}}, 15000); });
  auto j1 = std::async(std::launch::async, [&] { return m1.call({{"op", "flush"}, {"timeout_ms", 8000}}, 15000); });
  json r0 = j0.get(), r1 = j1.get(), rv1 = f1.get();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("v1 flush of agent 1: " << rv1.dump() << "; v2 flushes: " << r0.dump() << " " << r1.dump() << "; " << took
                               << " s");
  // v1 can no longer be written: agent 1 is told so at once
  CHECK(err_of(rv1).find("superseded: agent 0 skipped v1") != std::string::npos);
  // and v2 becomes durable on both agents without waiting for any timeout
  CHECK(r0.value("ok", false));
  CHECK(r1.value("ok", false));
  CHECK(took < 6.0);
  dynres::ckstore::Store st(pfs, "safe", ::geteuid());
  CHECK_FALSE(st.has_manifest(1));
  REQUIRE(st.has_manifest(2));
  CHECK(st.verify(2).nranks == 2);
  CHECK(a0.alive());
  CHECK(a1.alive());
}

namespace {
/// The library's direct fallback: version v of ranks 0..nranks-1 (4096
/// bytes each), written and committed to the second level.
void write_direct(dynres::ckstore::Store& st, uint64_t v, int nranks) {
  dynres::ckstore::Options o;
  o.keep_last = 2;
  auto w = st.begin_version(v, nranks, o);
  std::vector<char> x(4096, 7);
  for (int r = 0; r < nranks; ++r) {
    dynres::ckstore::RegionInfo ri;
    ri.label = "x";
    ri.type = dynres::ckstore::ElemType::Binary;
    ri.count = x.size();
    ri.rank = r;
    w.add_region(ri, x.data());
  }
  w.commit();
}

/// Two agents of one set (slots 0 and 1, second level only on flush), each
/// holding its rank's piece of v1.
struct SetAtV1 {
  Dir d;
  fs::path pfs = d.p / "pfs";
  Agent a0{d.p, "a0", pfs}, a1{d.p, "a1", pfs};
  Link l0 = hello(a0.addr, 0, 2, 2, {a0.addr, a1.addr}, 2);
  Link l1 = hello(a1.addr, 1, 2, 2, {a0.addr, a1.addr}, 2);
  SetAtV1() {
    commit_push(l0, 1, {0}, 2);
    commit_push(l1, 1, {1}, 2);
  }
};
}  // namespace

TEST_CASE("agent: a version the library superseded on the second level is not written; flush succeeds",
          "[agent][safety]") {
  // t4250-icsched-memory-grow: an agent took v, refused v+1 for the node's
  // checkpoint memory ("nomem"), and the library wrote v+1 itself; its
  // retention then removed the agent's unfinished directory of v (older
  // than the newest valid version) under the agent's writer, and every
  // later flush of that agent failed "create: No such file or directory".
  // A version superseded on the second level is not written at all.
  auto provs = available_rma_providers();
  if (std::find(provs.begin(), provs.end(), "shm") == provs.end()) return;
  SetAtV1 set;
  auto &pfs = set.pfs;
  auto &l0 = set.l0, &l1 = set.l1;
  // the library's direct fallback: v2 of both ranks, written and committed
  dynres::ckstore::Store st(pfs, "safe", ::geteuid());
  write_direct(st, 2, 2);
  REQUIRE(st.newest_valid(dynres::ckstore::Check::shallow) == std::optional<std::uint64_t>(2));
  const auto t0 = std::chrono::steady_clock::now();
  auto j0 = std::async(std::launch::async, [&] { return l0.call({{"op", "flush"}, {"timeout_ms", 8000}}, 15000); });
  auto j1 = std::async(std::launch::async, [&] { return l1.call({{"op", "flush"}, {"timeout_ms", 8000}}, 15000); });
  json r0 = j0.get(), r1 = j1.get();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("flushes: " << r0.dump() << " " << r1.dump() << "; " << took << " s");
  CHECK(r0.value("ok", false));
  CHECK(r1.value("ok", false));
  CHECK(took < 6.0);
  CHECK_FALSE(fs::exists(st.version_dir(1)));  // v1 was not written beside the newer v2
  CHECK(st.newest_valid(dynres::ckstore::Check::deep) == std::optional<std::uint64_t>(2));
  CHECK(set.a0.alive());
  CHECK(set.a1.alive());
}

TEST_CASE("agent: agent 0 waiting for a part its peer skipped as superseded is answered, not timed out",
          "[agent][safety]") {
  // REMOVE_NODES fences the agents on the node (Alg. 9): the application's
  // next version goes to the second level directly, and the flush that
  // follows finds it there on one agent (which skips its part of v1) while
  // agent 0, which looked before, waits for that part of v1.
  auto provs = available_rma_providers();
  if (std::find(provs.begin(), provs.end(), "shm") == provs.end()) return;
  SetAtV1 set;
  auto &pfs = set.pfs;
  auto &l0 = set.l0, &l1 = set.l1;
  const auto t0 = std::chrono::steady_clock::now();
  auto j0 = std::async(std::launch::async, [&] { return l0.call({{"op", "flush"}, {"timeout_ms", 8000}}, 15000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // agent 0's part of v1 written, it waits for agent 1's
  dynres::ckstore::Store st(pfs, "safe", ::geteuid());
  write_direct(st, 2, 2);
  json r1 = l1.call({{"op", "flush"}, {"timeout_ms", 8000}}, 15000);
  json r0 = j0.get();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("flushes: " << r0.dump() << " " << r1.dump() << "; " << took << " s");
  CHECK(r1.value("ok", false));
  CHECK(r0.value("ok", false));
  CHECK(took < 4.0);  // not agent 0's 8 s timeout
  CHECK_FALSE(st.has_manifest(1));
  CHECK(st.newest_valid(dynres::ckstore::Check::deep) == std::optional<std::uint64_t>(2));
}
