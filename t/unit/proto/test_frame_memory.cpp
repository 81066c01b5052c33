// What a peer can make a reader of frames hold in memory: a frame is refused
// from its announced length when over the reader's limit (recv_msg's
// max_body), and the memory for a body grows with the bytes that actually
// arrive, not with the length announced (40 peers announcing 64 MiB each
// once took an iCheck controller to 2.1 GB).
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "dynres/proto_socket.hpp"

using namespace dynres::proto;
using Catch::Matchers::Contains;

namespace {
long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}
void send_header(int fd, uint32_t n) {
  unsigned char h[4] = {static_cast<unsigned char>(n >> 24), static_cast<unsigned char>(n >> 16),
                        static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(n)};
  REQUIRE(::send(fd, h, 4, MSG_NOSIGNAL) == 4);
}
}  // namespace

TEST_CASE("recv_msg refuses a frame over its max_body from the announced length", "[proto]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  Socket a(sv[0]), b(sv[1]);
  send_header(a.fd(), 2048);  // and no body: the refusal must not wait for it
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(recv_msg(b, 2000, 1024), Contains("2048 bytes exceeds the limit of 1024 bytes"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(500));
  // within the limit, frames pass as before
  send_msg(a, {{"op", "x"}});
  CHECK(recv_msg(b, 2000, 1024)["op"] == "x");
}

TEST_CASE("a body's memory grows with the bytes received, not with the length announced", "[proto]") {
  constexpr int kPeers = 6;
  std::vector<Socket> writers, readers;
  for (int i = 0; i < kPeers; ++i) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    writers.emplace_back(sv[0]);
    readers.emplace_back(sv[1]);
  }
  const long before = rss_kib();
  REQUIRE(before > 0);
  std::vector<std::future<std::string>> got;
  for (int i = 0; i < kPeers; ++i) {
    send_header(writers[i].fd(), static_cast<uint32_t>(kMaxFrame));  // 64 MiB announced ...
    REQUIRE(::send(writers[i].fd(), "[1,", 3, MSG_NOSIGNAL) == 3);    // ... 3 bytes sent
    got.push_back(std::async(std::launch::async, [&, i] {
      try {
        recv_msg(readers[i], 10000);
        return std::string("a frame");
      } catch (const ProtoError& e) {
        return std::string(e.what());
      }
    }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // every reader waits mid-frame
  const long during = rss_kib();
  for (auto& w : writers) w.close();  // the frames end cut short
  for (auto& g : got) CHECK_THAT(g.get(), Contains("in the middle of a frame"));
  INFO("RSS before " << before << " KiB, with " << kPeers << " readers mid-frame " << during << " KiB");
  // allocating the announced length would add kPeers x 64 MiB (384 MiB)
  CHECK(during - before < 32 * 1024);
}
