#include "dynres/node_agent.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
/// `sinfo -h -N -n node -o %t` of the outer Slurm (no shell; at most 5 s):
/// the node's short state, "" when sinfo cannot tell.
std::string outer_state(const std::string& node) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return "";
  pid_t c = ::fork();
  if (c < 0) {
    ::close(p[0]), ::close(p[1]);
    return "";
  }
  if (c == 0) {
    ::dup2(p[1], 1);
    int nul = ::open("/dev/null", O_WRONLY);
    if (nul >= 0) ::dup2(nul, 2);
    ::execlp("sinfo", "sinfo", "-h", "-N", "-n", node.c_str(), "-o", "%t", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(p[1]);
  std::string out;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count());
    if (left <= 0) break;
    pollfd q{p[0], POLLIN, 0};
    if (::poll(&q, 1, left) <= 0) break;
    char buf[256];
    ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n <= 0 || out.size() > 4096) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  ::kill(c, SIGKILL);
  ::waitpid(c, nullptr, 0);
  auto nl = out.find('\n');
  if (nl != std::string::npos) out.resize(nl);
  while (!out.empty() && (out.back() == ' ' || out.back() == '\r')) out.pop_back();
  return out.size() <= 32 ? out : "";
}
}  // namespace

bool outer_state_lost(const std::string& state) {
  if (state.empty()) return false;
  if (state.back() == '*') return true;
  return state.rfind("down", 0) == 0 || state.rfind("fail", 0) == 0;
}

int run_node_agent(const std::string& home, const std::string& node, bool outer_slurm, double outer_period) {
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
      double next_outer = 0;
      while (!g_stop) {
        pollfd p{fd, POLLIN, 0};
        int n = ::poll(&p, 1, static_cast<int>(period * 1000));
        if (n > 0) break;  // the scheduler closed (or wrote, which it never does): reconnect
        proto::json hb = {{"op", "heartbeat"}};
        double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
        if (outer_slurm && now >= next_outer) {
          next_outer = now + outer_period;
          std::string st = outer_state(node);
          if (outer_state_lost(st)) {
            std::fprintf(stderr, "mjnoded: node %s: the outer Slurm reports it %s\n", node.c_str(), st.c_str());
            hb["outer"] = st;
          }
        }
        proto::send_frame(fd, hb);
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
