#include "dynres/node_agent.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "dynres/paths.hpp"
#include "dynres/proto.hpp"

namespace dynres::schedd {

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }
bool exists(const std::string& p) {
  struct stat sb;
  return ::stat(p.c_str(), &sb) == 0;
}
}  // namespace

int run_node_agent(const std::string& home, const std::string& node) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  const std::string sock = sched_socket(home);
  bool said = false;  // "connected" printed once per connection
  while (!g_stop) {
    if (!exists(state_path(home))) return 0;  // the cluster is gone
    int fd = proto::connect_unix(sock, 1000);
    if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    double period = 0.5;
    try {
      proto::send_frame(fd, {{"op", "node_hello"}, {"node", node}});
      auto r = proto::recv_frame(fd, 5000);
      if (!r || !r->is_object()) throw proto::ProtoError("no answer to node_hello");
      if (r->contains("error")) {
        std::fprintf(stderr, "mjnoded: node %s: %s\n", node.c_str(), r->value("error", std::string("refused")).c_str());
        ::close(fd);
        return 1;
      }
      if (r->contains("heartbeat") && (*r)["heartbeat"].is_number())
        period = std::clamp((*r)["heartbeat"].get<double>(), 0.05, 3600.0);
      if (!said) std::fprintf(stderr, "mjnoded: node %s: connected, heartbeat every %g s\n", node.c_str(), period);
      said = true;
      while (!g_stop) {
        pollfd p{fd, POLLIN, 0};
        int n = ::poll(&p, 1, static_cast<int>(period * 1000));
        if (n > 0) break;  // the scheduler closed (or wrote, which it never does): reconnect
        proto::send_frame(fd, {{"op", "heartbeat"}});
      }
    } catch (const std::exception& e) {
      said = false;
    }
    ::close(fd);
    if (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return 0;
}

}  // namespace dynres::schedd
