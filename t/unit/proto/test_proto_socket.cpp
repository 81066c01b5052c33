// Sockets, addresses and TCP authentication of dynres/proto_socket.hpp over
// real sockets, with the real munged for the MUNGE cases (they are skipped,
// with a visible warning, when `munge -n | unmunge` does not work here; the
// integration test t4130-icheck-tcp-auth.sh starts munged and always runs them).
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

#include "../testutil.hpp"
#include "dynres/proto_socket.hpp"

using namespace dynres::proto;
using Catch::Matchers::Contains;
using Clock = std::chrono::steady_clock;

namespace {

/// Sets the process-wide TCP policy for one test case, restores it after.
struct AuthMode {
  TcpAuth old = tcp_auth();
  explicit AuthMode(TcpAuth m) { set_tcp_auth(m); }
  ~AuthMode() { set_tcp_auth(old); }
};

bool munge_works() {
  static const bool ok = std::system("munge -n 2>/dev/null | unmunge >/dev/null 2>&1") == 0;
  return ok;
}
#define REQUIRE_MUNGE()                                                                                 \
  do {                                                                                                  \
    if (!munge_works()) {                                                                               \
      WARN("SKIPPED: munged does not work here ('munge -n | unmunge' fails); start it with "            \
           "t/fixtures/munge start DIR (as root)");                                                     \
      return;                                                                                           \
    }                                                                                                   \
  } while (0)

/// A fresh credential from the munge command line tool.
std::string munge_cred() {
  FILE* p = ::popen("munge -n", "r");
  REQUIRE(p);
  char buf[4096];
  std::string out;
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  REQUIRE(::pclose(p) == 0);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

/// A TCP client that speaks raw frames (no auth frame unless it sends one).
Socket raw_tcp(const std::string& addr) {
  auto colon = addr.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(colon + 1))));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(s.valid());
  REQUIRE(::connect(s.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  return s;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

TEST_CASE("proto socket: addresses", "[proto][socket]") {
  CHECK(is_unix_address("unix:/x.sock"));
  CHECK_FALSE(is_unix_address("host:1"));
  CHECK(address_host("unix:/x.sock") == "");
  CHECK(address_host("node7:4000") == "node7");
  CHECK(address_host("tcp:node7:4000") == "node7");
  CHECK(address_host("[::1]:4000") == "[::1]");
  REQUIRE_THROWS_WITH(address_host("nocolon"), Contains("bad address"));
  REQUIRE_THROWS_AS(listen_on("127.0.0.1:"), ProtoError);
  REQUIRE_THROWS_WITH(listen_on("unix:/tmp/" + std::string(200, 'a')), Contains("too long"));
  REQUIRE_THROWS_AS(connect_to("no-such-host.invalid:1", 500), ProtoError);

  Socket l = listen_on("127.0.0.1:0");
  std::string a = bound_address(l, "127.0.0.1:0");
  CHECK(a.rfind("127.0.0.1:", 0) == 0);
  CHECK(a != "127.0.0.1:0");
  CHECK(bound_address(l, "tcp:127.0.0.1:0") == a);
}

TEST_CASE("proto socket: TCP round trip, requests and errors", "[proto][socket]") {
  AuthMode none(TcpAuth::none);
  Socket l = listen_on("127.0.0.1:0");
  std::string addr = bound_address(l, "127.0.0.1:0");
  json big = {{"op", "data"}, {"text", std::string(3u << 20, 'y') + "\xc3\xa9"}, {"list", {1, 2.5, nullptr, true}}};

  // The server thread makes no Catch2 assertions (they are not thread-safe):
  // it reports what it saw through the future.
  struct Seen {
    bool accepted = false;
    long uid = 0;
    int echoed = 0;
    std::string after;
  };
  auto server = std::async(std::launch::async, [&] {
    Seen seen;
    Socket c = accept_on(l, 5000);
    if (!(seen.accepted = c.valid())) return seen;
    seen.uid = peer_uid(c);
    for (;;) {
      json m = recv_msg(c, 5000);  // the client's auth frame is skipped
      std::string op = m.value("op", "");
      if (op == "bye") break;
      if (op == "fail") send_msg(c, {{"error", "invalid: asked to fail"}});
      else send_msg(c, m), ++seen.echoed;
    }
    try {
      recv_msg(c, 2000);
    } catch (const ProtoError& e) {
      seen.after = e.what();
    }
    return seen;
  });
  {
    Socket s = connect_to(addr, 2000);
    CHECK(peer_uid(s) == -1);  // the connecting side does not authenticate the server
    CHECK(request(s, {{"op", "echo"}, {"n", 1}}, 2000) == json({{"op", "echo"}, {"n", 1}}));
    CHECK(request(s, big, 5000) == big);
    REQUIRE_THROWS_WITH(request(s, {{"op", "fail"}}, 2000), "invalid: asked to fail");
    send_msg(s, {{"op", "bye"}});
  }
  Seen seen = server.get();
  CHECK(seen.accepted);
  CHECK(seen.uid == -1);  // TCP without authentication: unknown
  CHECK(seen.echoed == 2);
  CHECK(seen.after == "recv: peer closed the connection");
}

TEST_CASE("proto socket: frames over the limit are refused on both sides", "[proto][socket]") {
  AuthMode none(TcpAuth::none);
  Socket l = listen_on("127.0.0.1:0");
  std::string addr = bound_address(l, "127.0.0.1:0");
  Socket s = connect_to(addr, 2000);
  Socket c = accept_on(l, 2000);
  REQUIRE(c.valid());

  json huge = {{"op", "x"}, {"blob", std::string(kMaxFrame, 'z')}};
  REQUIRE_THROWS_WITH(send_msg(s, huge), Contains("exceeds the limit of 67108864 bytes"));

  // a header announcing kMaxFrame + 1 bytes: refused before reading the body
  uint32_t n = static_cast<uint32_t>(kMaxFrame + 1);
  unsigned char hdr[4] = {static_cast<unsigned char>(n >> 24), static_cast<unsigned char>(n >> 16),
                          static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(n)};
  REQUIRE(::send(s.fd(), hdr, 4, MSG_NOSIGNAL) == 4);
  REQUIRE_THROWS_WITH(recv_msg(c, 2000), Contains("exceeds the limit"));
  // exactly at the limit is fine (the JSON text is kMaxFrame bytes)
  std::string text(kMaxFrame - 2, 'q');
  auto w = std::async(std::launch::async, [&] { send_msg(s, json(text)); });
  CHECK(recv_msg(c, 10000).get<std::string>().size() == text.size());
  w.get();
}

TEST_CASE("proto socket: timeouts", "[proto][socket]") {
  AuthMode none(TcpAuth::none);
  SECTION("connect to a listener whose backlog is full times out") {
    Socket l = listen_on("127.0.0.1:0", 0);  // never accepted: the queue fills at once
    std::string addr = bound_address(l, "127.0.0.1:0");
    std::vector<Socket> held;
    bool timed_out = false;
    for (int i = 0; i < 8 && !timed_out; ++i) {
      auto t0 = Clock::now();
      try {
        held.push_back(connect_to(addr, 300));
      } catch (const ProtoError& e) {
        CHECK_THAT(e.what(), Contains("timed out after 300 ms"));
        double dt = seconds_since(t0);
        CHECK(dt >= 0.25);
        CHECK(dt < 2.0);
        timed_out = true;
      }
    }
    CHECK(timed_out);
  }
  SECTION("connect to a closed port is refused at once") {
    int port;
    {
      Socket l = listen_on("127.0.0.1:0");
      std::string a = bound_address(l, "127.0.0.1:0");
      port = std::stoi(a.substr(a.rfind(':') + 1));
    }
    auto t0 = Clock::now();
    REQUIRE_THROWS_WITH(connect_to("127.0.0.1:" + std::to_string(port), 2000), Contains("refused"));
    CHECK(seconds_since(t0) < 1.0);
  }
  SECTION("accept and recv time out") {
    Socket l = listen_on("127.0.0.1:0");
    std::string addr = bound_address(l, "127.0.0.1:0");
    auto t0 = Clock::now();
    CHECK_FALSE(accept_on(l, 200).valid());
    CHECK(seconds_since(t0) >= 0.15);
    Socket s = connect_to(addr, 1000);
    Socket c = accept_on(l, 1000);
    REQUIRE(c.valid());
    t0 = Clock::now();
    REQUIRE_THROWS_WITH(recv_msg(c, 200), "recv: timeout");  // the auth frame alone is not a message
    CHECK(seconds_since(t0) < 1.5);
  }
}

TEST_CASE("proto socket: Unix sockets are unchanged (no auth frame, SO_PEERCRED)", "[proto][socket]") {
  AuthMode munge(TcpAuth::munge);  // the TCP policy must not matter for Unix sockets
  dynres::test::TempDir d("proto");
  std::string addr = "unix:" + d.file("u.sock");
  Socket l = listen_on(addr);
  CHECK(bound_address(l, addr) == addr);
  struct stat sb;
  REQUIRE(::stat(d.file("u.sock").c_str(), &sb) == 0);
  CHECK((sb.st_mode & 0777) == 0600);

  Socket s = connect_to(addr, 1000);
  auto t0 = Clock::now();
  Socket c = accept_on(l, 1000);
  REQUIRE(c.valid());
  CHECK(seconds_since(t0) < 0.5);  // nothing waited for
  CHECK(peer_uid(c) == long(::getuid()));
  CHECK(peer_uid(s) == long(::getuid()));
  send_msg(s, {{"op", "hello"}});
  // the first bytes on the wire are the message itself
  auto m = recv_frame(c.fd(), 1000);
  REQUIRE(m);
  CHECK((*m)["op"] == "hello");

  // listen_on replaces a live socket file; listen_unix refuses it
  REQUIRE_THROWS_WITH(listen_unix(d.file("u.sock")), Contains("already in use"));
}

TEST_CASE("proto socket: ICHECK_TCP_AUTH=none accepts TCP clients with or without an auth frame",
          "[proto][socket]") {
  AuthMode none(TcpAuth::none);
  Socket l = listen_on("127.0.0.1:0");
  std::string addr = bound_address(l, "127.0.0.1:0");
  Socket raw = raw_tcp(addr);
  send_frame(raw.fd(), {{"op", "heartbeat"}, {"node", "n9"}});
  Socket c = accept_on(l, 1000);
  REQUIRE(c.valid());
  CHECK(peer_uid(c) == -1);
  CHECK(recv_msg(c, 1000)["node"] == "n9");
  // only the first frame may be an auth frame; later ones are delivered
  send_frame(raw.fd(), {{"op", "auth"}});
  CHECK(recv_msg(c, 1000)["op"] == "auth");
}

TEST_CASE("proto socket: MUNGE authenticates TCP connections", "[proto][socket][munge]") {
  REQUIRE_MUNGE();
  AuthMode munge(TcpAuth::munge);
  Socket l = listen_on("127.0.0.1:0");
  std::string addr = bound_address(l, "127.0.0.1:0");

  SECTION("a client with a credential is accepted; peer_uid is the verified uid") {
    Socket s = connect_to(addr, 2000);
    Socket c = accept_on(l, 3000);
    REQUIRE(c.valid());
    CHECK(peer_uid(c) == long(::getuid()));
    send_msg(s, {{"op", "ping"}});
    CHECK(recv_msg(c, 1000)["op"] == "ping");  // the auth frame was consumed by accept_on
  }
  SECTION("a client without a credential is refused and accept_on keeps waiting") {
    Socket raw = raw_tcp(addr);
    send_frame(raw.fd(), {{"op", "heartbeat"}, {"node", "evil"}});
    auto t0 = Clock::now();
    CHECK_FALSE(accept_on(l, 500).valid());  // the refused connection is never returned
    CHECK(seconds_since(t0) < 2.0);
    auto reply = recv_frame(raw.fd(), 2000);
    REQUIRE(reply);
    std::string err = (*reply)["error"];
    CHECK_THAT(err, Contains("perm: TCP control connection without a valid MUNGE credential"));
    CHECK_THAT(err, Contains("not an auth frame"));
    CHECK_FALSE(recv_frame(raw.fd(), 2000));  // then closed
  }
  SECTION("an auth frame without a credential is refused with the client's reason") {
    Socket raw = raw_tcp(addr);
    send_frame(raw.fd(), {{"op", "auth"}, {"munge_error", "munged unreachable"}});
    CHECK_FALSE(accept_on(l, 500).valid());
    auto reply = recv_frame(raw.fd(), 2000);
    REQUIRE(reply);
    CHECK_THAT((*reply)["error"].get<std::string>(), Contains("the client sent none (client: munged unreachable)"));
  }
  SECTION("a forged credential is refused") {
    Socket raw = raw_tcp(addr);
    send_frame(raw.fd(), {{"op", "auth"}, {"munge", "MUNGE:AAAAbogus:"}});
    CHECK_FALSE(accept_on(l, 500).valid());
    auto reply = recv_frame(raw.fd(), 2000);
    REQUIRE(reply);
    CHECK_THAT((*reply)["error"].get<std::string>(), Contains("munge_decode"));
  }
  SECTION("a replayed credential is refused the second time") {
    std::string cred = munge_cred();
    {
      Socket raw = raw_tcp(addr);
      send_frame(raw.fd(), {{"op", "auth"}, {"munge", cred}});
      Socket c = accept_on(l, 3000);
      REQUIRE(c.valid());
      CHECK(peer_uid(c) == long(::getuid()));
    }
    Socket raw = raw_tcp(addr);
    send_frame(raw.fd(), {{"op", "auth"}, {"munge", cred}});
    CHECK_FALSE(accept_on(l, 500).valid());
    auto reply = recv_frame(raw.fd(), 2000);
    REQUIRE(reply);
    CHECK_THAT((*reply)["error"].get<std::string>(), Contains("Replayed credential"));
  }
  SECTION("a refused connection does not hide a good one behind it") {
    Socket raw = raw_tcp(addr);
    send_frame(raw.fd(), {{"op", "status"}});
    Socket good = connect_to(addr, 2000);
    Socket c = accept_on(l, 3000);
    REQUIRE(c.valid());
    CHECK(peer_uid(c) == long(::getuid()));
    auto reply = recv_frame(raw.fd(), 2000);
    REQUIRE(reply);
    CHECK(reply->contains("error"));
  }
  SECTION("a client that sends nothing is refused after the auth timeout") {
    Socket raw = raw_tcp(addr);
    auto t0 = Clock::now();
    CHECK_FALSE(accept_on(l, 100).valid());
    double dt = seconds_since(t0);
    CHECK(dt >= kAuthTimeoutMs / 1000.0 - 0.1);
    CHECK(dt < kAuthTimeoutMs / 1000.0 + 1.5);
    auto reply = recv_frame(raw.fd(), 2000);
    REQUIRE(reply);
    CHECK_THAT((*reply)["error"].get<std::string>(), Contains("no auth frame within"));
  }
}
