// Frames over real sockets: round trips, malformed input, notify/request.
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "../testutil.hpp"
#include <filesystem>
#include <optional>
#include <thread>

#include "dynres/proto.hpp"

using namespace dynres::proto;
using Catch::Matchers::Contains;

namespace {

struct Pair {
  int a = -1, b = -1;
  Pair() {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    a = sv[0];
    b = sv[1];
  }
  ~Pair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
  void close_a() {
    ::close(a);
    a = -1;
  }
};

void write_raw(int fd, const std::string& bytes) {
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
}

std::string header(uint32_t n) {
  std::string h(4, '\0');
  h[0] = static_cast<char>(n >> 24);
  h[1] = static_cast<char>(n >> 16);
  h[2] = static_cast<char>(n >> 8);
  h[3] = static_cast<char>(n);
  return h;
}

struct TempDir : dynres::test::TempDir {
  TempDir() : dynres::test::TempDir("proto") {}
};

}  // namespace

TEST_CASE("proto: frames round-trip over a socketpair", "[proto]") {
  Pair p;
  json a = {{"op", "wake"}, {"why", "submit"}, {"job", 42}};
  json b = {{"op", "data"}, {"text", std::string(200000, 'x') + "\xc3\xa9"}, {"list", {1, 2.5, nullptr, true}}};
  std::thread writer([&] {
    send_frame(p.a, a);
    send_frame(p.a, b);
    send_frame(p.a, json::object());
  });
  auto ra = recv_frame(p.b, 2000);
  auto rb = recv_frame(p.b, 2000);
  auto rc = recv_frame(p.b, 2000);
  writer.join();
  REQUIRE(ra);
  REQUIRE(rb);
  REQUIRE(rc);
  CHECK(*ra == a);
  CHECK(*rb == b);
  CHECK(*rc == json::object());
}

TEST_CASE("proto: the wire format is a 4-byte big-endian length and JSON", "[proto]") {
  Pair p;
  send_frame(p.a, {{"op", "ping"}});
  std::string expect = json{{"op", "ping"}}.dump();
  char buf[64];
  ssize_t n = ::read(p.b, buf, sizeof buf);
  REQUIRE(n == static_cast<ssize_t>(4 + expect.size()));
  CHECK(std::string(buf, 4) == header(static_cast<uint32_t>(expect.size())));
  CHECK(std::string(buf + 4, n - 4) == expect);

  write_raw(p.a, header(13) + R"({"op":"x","n":1})" "");  // 16 bytes of body, header says 13
  REQUIRE_THROWS_AS(recv_frame(p.b, 500), ProtoError);     // '{"op":"x","n"' is not JSON
}

TEST_CASE("proto: orderly close and timeout give nothing", "[proto]") {
  SECTION("close") {
    Pair p;
    p.close_a();
    CHECK(!recv_frame(p.b, 500));
  }
  SECTION("timeout") {
    Pair p;
    auto t0 = std::chrono::steady_clock::now();
    CHECK(!recv_frame(p.b, 100));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  }
}

TEST_CASE("proto: malformed frames are rejected", "[proto]") {
  SECTION("length over the limit") {
    Pair p;
    write_raw(p.a, header(static_cast<uint32_t>(kMaxFrame + 1)));
    REQUIRE_THROWS_WITH(recv_frame(p.b, 500), Contains("exceeds"));
  }
  SECTION("length 0xffffffff") {
    Pair p;
    write_raw(p.a, header(0xffffffffu));
    REQUIRE_THROWS_AS(recv_frame(p.b, 500), ProtoError);
  }
  SECTION("body shorter than the length, then close") {
    Pair p;
    write_raw(p.a, header(100) + "{\"op\":");
    p.close_a();
    REQUIRE_THROWS_AS(recv_frame(p.b, 500), ProtoError);
  }
  SECTION("header cut short, then close") {
    Pair p;
    write_raw(p.a, std::string("\0\0", 2));
    p.close_a();
    REQUIRE_THROWS_AS(recv_frame(p.b, 500), ProtoError);
  }
  SECTION("body that is not JSON") {
    Pair p;
    write_raw(p.a, header(5) + "hello");
    REQUIRE_THROWS_WITH(recv_frame(p.b, 500), Contains("malformed JSON"));
  }
  SECTION("writing to a closed peer fails cleanly") {
    Pair p;
    ::close(p.b);
    p.b = -1;
    REQUIRE_THROWS_AS(send_frame(p.a, {{"op", "x"}}), ProtoError);
  }
}

TEST_CASE("proto: Unix socket server, request and notify", "[proto]") {
  TempDir d;
  std::string path = (d.path / "s.sock").string();
  int lfd = listen_unix(path);
  REQUIRE(lfd >= 0);
  struct stat sb;
  REQUIRE(::stat(path.c_str(), &sb) == 0);
  CHECK(S_ISSOCK(sb.st_mode));
  CHECK((sb.st_mode & 0777) == 0600);

  std::vector<json> seen;
  std::thread server([&] {
    while (seen.size() < 2) {
      int c = ::accept(lfd, nullptr, nullptr);
      if (c < 0) break;
      std::optional<json> m;
      try {
        m = recv_frame(c, 2000);
      } catch (...) {
      }
      if (m) {
        seen.push_back(*m);
        if (m->value("op", "") == "ping") send_frame(c, {{"ok", true}, {"echo", (*m)["n"]}});
      }
      ::close(c);
    }
  });
  auto r = request(path, {{"op", "ping"}, {"n", 7}}, 2000);
  CHECK(notify(path, {{"op", "wake"}}));
  server.join();
  REQUIRE(r);
  CHECK((*r)["ok"] == true);
  CHECK((*r)["echo"] == 7);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0]["op"] == "ping");
  CHECK(seen[1]["op"] == "wake");

  // a second listener on a live socket is refused (its probe connection is
  // left in the backlog; nobody reads it)
  REQUIRE_THROWS_WITH(listen_unix(path), Contains("already in use"));
  ::close(lfd);

  // nobody listens now: the stale socket file is replaced by a new listener
  CHECK_FALSE(notify(path, {{"op", "wake"}}));
  int l2 = listen_unix(path);
  CHECK(l2 >= 0);
  ::close(l2);
}

TEST_CASE("proto: notify and request to a missing socket", "[proto]") {
  TempDir d;
  std::string path = (d.path / "none.sock").string();
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(notify(path, {{"op", "wake"}}));
  CHECK(!request(path, {{"op", "ping"}}, 300));
  CHECK(connect_unix(path, 100) == -1);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  // a path too long for sockaddr_un
  std::string longp = "/tmp/" + std::string(200, 'a');
  CHECK_FALSE(notify(longp, {{"op", "wake"}}));
  REQUIRE_THROWS_WITH(listen_unix(longp), Contains("too long"));
  // a regular file is not a socket
  std::string file = (d.path / "plain").string();
  FILE* f = std::fopen(file.c_str(), "w");
  std::fclose(f);
  CHECK_FALSE(notify(file, {{"op", "wake"}}));
}

TEST_CASE("proto: request to a server that never answers times out", "[proto]") {
  TempDir d;
  std::string path = (d.path / "mute.sock").string();
  int lfd = listen_unix(path);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(!request(path, {{"op", "ping"}}, 200));  // queued in the backlog, never accepted
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
  ::close(lfd);
}

TEST_CASE("proto: a header cut short by silence is an error, not a quiet timeout", "[proto]") {
  // two of the four length bytes, then nothing: the peer is out of step
  Pair p;
  write_raw(p.a, std::string("\0\0", 2));
  REQUIRE_THROWS_WITH(recv_frame(p.b, 200), Contains("middle of a frame"));
}

TEST_CASE("proto: FrameReader assembles frames from pieces and bounds them", "[proto]") {
  SECTION("a frame arriving in pieces is returned only when whole") {
    Pair p;
    FrameReader r(1000);
    const std::string body = json{{"op", "submit"}, {"script", std::string(300, 'x')}}.dump();
    write_raw(p.a, header(static_cast<uint32_t>(body.size())));
    REQUIRE(r.fill(p.b));
    CHECK(!r.next());
    write_raw(p.a, body.substr(0, body.size() - 3));  // all but the last 3 bytes
    while (r.pending() < 4 + body.size() - 3) REQUIRE(r.fill(p.b));
    CHECK(!r.next());  // 3 bytes short: nothing yet, and nothing consumed
    CHECK(r.pending() == 4 + body.size() - 3);
    write_raw(p.a, body.substr(body.size() - 3));
    while (r.pending() < 4 + body.size()) REQUIRE(r.fill(p.b));
    auto m = r.next();
    REQUIRE(m);
    CHECK((*m)["op"] == "submit");
    CHECK((*m)["script"].get<std::string>().size() == 300);
    CHECK(r.pending() == 0);
  }
  SECTION("two frames in one read come out one by one") {
    Pair p;
    FrameReader r;
    const std::string a = R"({"n":1})", b = R"({"n":2})";
    write_raw(p.a, header(uint32_t(a.size())) + a + header(uint32_t(b.size())) + b);
    while (r.pending() < 8 + a.size() + b.size()) REQUIRE(r.fill(p.b));
    auto m1 = r.next(), m2 = r.next();
    REQUIRE(m1);
    REQUIRE(m2);
    CHECK((*m1)["n"] == 1);
    CHECK((*m2)["n"] == 2);
    CHECK(!r.next());
  }
  SECTION("a length over this connection's limit is refused before its body arrives") {
    Pair p;
    FrameReader r(100);
    write_raw(p.a, header(1000));
    REQUIRE(r.fill(p.b));
    REQUIRE_THROWS_WITH(r.next(), Contains("exceeds the limit of 100 bytes"));
  }
  SECTION("orderly close") {
    Pair p;
    FrameReader r;
    p.close_a();
    CHECK(!r.fill(p.b));
  }
}
