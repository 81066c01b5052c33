// Real RMA between two processes on loopback, for each provider of
// `fi_info -c FI_RMA -t FI_EP_RDM` that iCheck supports [John24 §6.2].
#include <catch2/catch.hpp>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "dynres/icheck/fabric.hpp"
#include "dynres/icheck/wire.hpp"

using namespace dynres::icheck;

namespace {
// Child: serves a 3 MiB region filled with a pattern; after the parent's
// write it verifies the second half and reports the result.
int serve(int fd, const std::string& prov) {
  Socket s(fd);
  try {
    FabricOptions o;
    o.provider = prov;
    o.node = "127.0.0.1";
    Fabric f(o);
    Fabric::Busy busy(f);
    const size_t n = 3u << 20;
    std::vector<unsigned char> buf(n);
    for (size_t i = 0; i < n / 2; ++i) buf[i] = (unsigned char)(i * 7 + 1);
    auto mr = f.register_memory(buf.data(), n);
    send_msg(s, {{"addr", f.address_hex()}, {"key", mr->key}, {"base", mr->remote_base}});
    recv_msg(s, 30000);  // parent finished its write
    bool ok = true;
    for (size_t i = n / 2; i < n; ++i)
      if (buf[i] != (unsigned char)(i * 13 + 5)) { ok = false; break; }
    send_msg(s, {{"ok", ok}});
    recv_msg(s, 30000);
    return 0;
  } catch (const std::exception& e) {
    try { send_msg(s, {{"error", e.what()}}); } catch (...) {}
    return 1;
  }
}
}  // namespace

TEST_CASE("fabric: RMA read and write between two processes", "[fabric]") {
  auto provs = available_rma_providers();
  std::vector<std::string> tested;
  for (const std::string prov : {"shm", "tcp;ofi_rxm"}) {
    if (std::find(provs.begin(), provs.end(), prov) == provs.end()) continue;
    tested.push_back(prov);
    SECTION("provider " + prov) {
      int sv[2];
      REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
      pid_t pid = fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        close(sv[0]);
        _exit(serve(sv[1], prov));
      }
      close(sv[1]);
      Socket s(sv[0]);
      json hello = recv_msg(s, 30000);
      REQUIRE_FALSE(hello.contains("error"));
      FabricOptions o;
      o.provider = prov;
      o.node = "127.0.0.1";
      o.max_chunk = 256 << 10;  // force several operations in flight
      Fabric f(o);
      CHECK(f.provider() == prov);
      const size_t n = 3u << 20;
      std::vector<unsigned char> mine(n, 0);
      auto mr = f.register_memory(mine.data(), n);
      uint64_t peer = f.add_peer(hello["addr"]);
      uint64_t base = hello["base"], key = hello["key"];
      f.read(peer, *mr, 0, n / 2, base, key);
      bool same = true;
      for (size_t i = 0; i < n / 2; ++i)
        if (mine[i] != (unsigned char)(i * 7 + 1)) { same = false; break; }
      CHECK(same);
      for (size_t i = n / 2; i < n; ++i) mine[i] = (unsigned char)(i * 13 + 5);
      f.write(peer, *mr, n / 2, n - n / 2, base + n / 2, key);
      send_msg(s, {{"written", true}});
      json r = recv_msg(s, 30000);
      CHECK(r.value("ok", false));
      send_msg(s, {{"bye", true}});
      int st = 0;
      waitpid(pid, &st, 0);
      CHECK(WIFEXITED(st));
      CHECK(WEXITSTATUS(st) == 0);
    }
  }
  CHECK_FALSE(tested.empty());
}

TEST_CASE("fabric: RMA to a vanished peer fails instead of hanging", "[fabric]") {
  FabricOptions o;
  o.provider = "tcp;ofi_rxm";
  o.node = "127.0.0.1";
  Fabric a(o);
  std::string addr;
  uint64_t key = 0, base = 0;
  {
    Fabric b(o);
    static std::vector<char> buf(1 << 20);
    auto mr = b.register_memory(buf.data(), buf.size());
    addr = b.address_hex();
    key = mr->key;
    base = mr->remote_base;
  }
  std::vector<char> mine(1 << 20);
  auto mr = a.register_memory(mine.data(), mine.size());
  uint64_t peer = a.add_peer(addr);
  CHECK_THROWS_AS(a.read(peer, *mr, 0, mine.size(), base, key, 3000), FabricError);
}

namespace {
size_t lazy_free_kib() { return resident_memory().lazy_free >> 10; }
bool all_bytes(const Mapping& m, unsigned char v) {
  const unsigned char* p = static_cast<const unsigned char*>(m.p);
  for (size_t i = 0; i < m.len; ++i)
    if (p[i] != v) return false;
  return true;
}
}  // namespace

// The agent's idle spare buffer is handed to MADV_FREE (icagent(8)); a
// commit that takes it back must never lose bytes to a later reclaim.
// MADV_PAGEOUT makes the kernel reclaim the range now, as memory pressure
// would.
TEST_CASE("Mapping: lazy_free gives pages back on reclaim; reuse() and writes keep data", "[fabric][memory]") {
  Mapping m(8u << 20, true);
  std::memset(m.p, 0xab, m.len);
  const size_t before = lazy_free_kib();
  m.lazy_free();
  CHECK(lazy_free_kib() >= before + (m.len >> 10) * 9 / 10);  // counted as reclaimable
#ifdef MADV_PAGEOUT
  if (::madvise(m.p, m.len, MADV_PAGEOUT) != 0) {
    WARN("MADV_PAGEOUT unavailable: reclaim not exercised");
    return;
  }
  // Reclaimed lazily-freed pages read back as zero pages: the memory went back.
  CHECK_FALSE(all_bytes(m, 0xab));
  // Taken back with reuse() and written: a reclaim must keep every byte.
  m.reuse();
  std::memset(m.p, 0xcd, m.len);
  ::madvise(m.p, m.len, MADV_PAGEOUT);
  CHECK(all_bytes(m, 0xcd));
  // Written without reuse() (plain stores after lazy_free): kept as well.
  m.lazy_free();
  std::memset(m.p, 0x5e, m.len);
  ::madvise(m.p, m.len, MADV_PAGEOUT);
  CHECK(all_bytes(m, 0x5e));
#endif
}

// Least-privilege registrations and unguessable keys. A
// region registered as a source (what libicheck does with the application's
// regions and its staging buffer for commits) may be read by a peer but not
// written; a target may be written. Keys are not sequential.
TEST_CASE("fabric: source registrations refuse remote writes; keys are random", "[fabric]") {
  auto provs = available_rma_providers();
  for (const std::string prov : {"shm", "tcp;ofi_rxm"}) {
    if (std::find(provs.begin(), provs.end(), prov) == provs.end()) continue;
    SECTION("provider " + prov) {
      int sv[2];
      REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
      pid_t pid = fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {  // owner of a source region
        close(sv[0]);
        Socket s(sv[1]);
        int rc = 1;
        try {
          FabricOptions o;
          o.provider = prov;
          o.node = "127.0.0.1";
          Fabric f(o);
          Fabric::Busy busy(f);
          std::vector<unsigned char> buf(1 << 20);
          for (size_t i = 0; i < buf.size(); ++i) buf[i] = (unsigned char)(i * 3 + 1);
          auto src = f.register_memory(buf.data(), buf.size(), Fabric::Access::source);
          send_msg(s, {{"addr", f.address_hex()}, {"key", src->key}, {"base", src->remote_base}});
          recv_msg(s, 60000);  // the parent tried
          bool same = true;
          for (size_t i = 0; i < buf.size(); ++i)
            if (buf[i] != (unsigned char)(i * 3 + 1)) { same = false; break; }
          send_msg(s, {{"unchanged", same}});
          recv_msg(s, 30000);
          rc = 0;
        } catch (const std::exception& e) {
          try { send_msg(s, {{"error", e.what()}}); } catch (...) {}
        }
        _exit(rc);
      }
      close(sv[1]);
      Socket s(sv[0]);
      json hello = recv_msg(s, 30000);
      REQUIRE_FALSE(hello.contains("error"));
      FabricOptions o;
      o.provider = prov;
      o.node = "127.0.0.1";
      Fabric f(o);
      std::vector<unsigned char> mine(1 << 20, 0xee);
      auto mr = f.register_memory(mine.data(), mine.size());
      uint64_t peer = f.add_peer(hello["addr"]);
      const uint64_t base = hello["base"], key = hello["key"];
      f.read(peer, *mr, 0, mine.size(), base, key, 10000);  // reading is allowed
      CHECK(mine[0] == 1);
      CHECK(mine[1000] == (unsigned char)(1000 * 3 + 1));
      // writing is refused by the owner's provider (the connection may be
      // dropped afterwards: tcp closes it on the access error)
      std::fill(mine.begin(), mine.end(), 0xee);
      CHECK_THROWS_AS(f.write(peer, *mr, 0, mine.size(), base, key, 1000), FabricError);
      send_msg(s, {{"tried", true}});
      json r = recv_msg(s, 30000);
      CHECK(r.value("unchanged", false));
      send_msg(s, {{"bye", true}});
      int st = 0;
      waitpid(pid, &st, 0);
      CHECK(WIFEXITED(st));
      // keys: three registrations in a row are not k, k+1, k+2
      std::vector<char> a(4096), b(4096), c(4096);
      auto ka = f.register_memory(a.data(), a.size(), Fabric::Access::source);
      auto kb = f.register_memory(b.data(), b.size(), Fabric::Access::source);
      auto kc = f.register_memory(c.data(), c.size(), Fabric::Access::target);
      CHECK_FALSE((kb->key == ka->key + 1 && kc->key == kb->key + 1));
      CHECK(ka->key != kb->key);
    }
  }
}

TEST_CASE("wire: plaintext TCP (ICHECK_TCP_AUTH=none) is allowed only on loopback addresses", "[wire]") {
  CHECK(is_loopback_host("127.0.0.1"));
  CHECK(is_loopback_host("127.1.2.3"));
  CHECK(is_loopback_host("::1"));
  CHECK(is_loopback_host("[::1]"));
  CHECK(!is_loopback_host("10.1.2.3"));
  CHECK(!is_loopback_host("192.168.0.1"));
  CHECK(!is_loopback_host("128.0.0.1"));
  CHECK(!is_loopback_host("::"));
  CHECK(!is_loopback_host("0.0.0.0"));
  CHECK(!is_loopback_host("*"));  // every address
  CHECK(!is_loopback_host(""));
}
