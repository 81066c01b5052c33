#include "dynres/icheck/wire.hpp"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace dynres::icheck {

Socket::~Socket() { close(); }
Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}
void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}
void Socket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

bool is_unix_address(const std::string& addr) { return addr.rfind("unix:", 0) == 0; }

namespace {
struct HostPort {
  std::string host, port;
};
HostPort split_tcp(std::string a) {
  if (a.rfind("tcp:", 0) == 0) a = a.substr(4);
  auto c = a.rfind(':');
  if (c == std::string::npos) throw WireError("bad address (want host:port or unix:/path): " + a);
  return {a.substr(0, c), a.substr(c + 1)};
}
sockaddr_un unix_sa(const std::string& addr) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::string p = addr.substr(5);
  if (p.size() >= sizeof(sa.sun_path)) throw WireError("unix socket path too long: " + p);
  std::memcpy(sa.sun_path, p.c_str(), p.size() + 1);
  return sa;
}
bool wait_fd(int fd, short ev, int timeout_ms) {
  pollfd p{fd, ev, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}
}  // namespace

std::string address_host(const std::string& addr) {
  if (is_unix_address(addr)) return "";
  return split_tcp(addr).host;
}

Socket listen_on(const std::string& addr, int backlog) {
  if (is_unix_address(addr)) {
    auto sa = unix_sa(addr);
    ::unlink(sa.sun_path);
    Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) throw WireError(std::string("socket: ") + strerror(errno));
    mode_t old = ::umask(0077);
    int r = ::bind(s.fd(), (sockaddr*)&sa, sizeof sa);
    ::umask(old);
    if (r != 0) throw WireError("bind " + addr + ": " + strerror(errno));
    ::chmod(sa.sun_path, 0600);
    if (::listen(s.fd(), backlog) != 0) throw WireError("listen " + addr + ": " + strerror(errno));
    return s;
  }
  auto hp = split_tcp(addr);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  int g = ::getaddrinfo(hp.host.empty() || hp.host == "*" ? nullptr : hp.host.c_str(), hp.port.c_str(), &hints, &res);
  if (g != 0) throw WireError("resolve " + addr + ": " + gai_strerror(g));
  Socket s(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int r = ::bind(s.fd(), res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (r != 0) throw WireError("bind " + addr + ": " + strerror(errno));
  if (::listen(s.fd(), backlog) != 0) throw WireError("listen " + addr + ": " + strerror(errno));
  return s;
}

std::string bound_address(const Socket& s, const std::string& requested) {
  if (is_unix_address(requested)) return requested;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(s.fd(), (sockaddr*)&ss, &len);
  int port = ss.ss_family == AF_INET ? ntohs(((sockaddr_in*)&ss)->sin_port)
                                     : ntohs(((sockaddr_in6*)&ss)->sin6_port);
  auto hp = split_tcp(requested);
  return hp.host + ":" + std::to_string(port);
}

Socket accept_on(const Socket& l, int timeout_ms) {
  if (!wait_fd(l.fd(), POLLIN, timeout_ms)) return Socket();
  int fd = ::accept4(l.fd(), nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return Socket();
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return Socket(fd);
}

Socket connect_to(const std::string& addr, int timeout_ms) {
  auto finish = [&](Socket s, const sockaddr* sa, socklen_t len) {
    int fl = ::fcntl(s.fd(), F_GETFL);
    ::fcntl(s.fd(), F_SETFL, fl | O_NONBLOCK);
    int r = ::connect(s.fd(), sa, len);
    if (r != 0 && errno != EINPROGRESS && errno != EAGAIN)
      throw WireError("connect " + addr + ": " + strerror(errno));
    if (r != 0) {
      if (!wait_fd(s.fd(), POLLOUT, timeout_ms)) throw WireError("connect " + addr + ": timeout");
      int err = 0;
      socklen_t el = sizeof err;
      ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &el);
      if (err) throw WireError("connect " + addr + ": " + strerror(err));
    }
    ::fcntl(s.fd(), F_SETFL, fl);
    return s;
  };
  if (is_unix_address(addr)) {
    auto sa = unix_sa(addr);
    Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    return finish(std::move(s), (sockaddr*)&sa, sizeof sa);
  }
  auto hp = split_tcp(addr);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int g = ::getaddrinfo(hp.host.c_str(), hp.port.c_str(), &hints, &res);
  if (g != 0) throw WireError("resolve " + addr + ": " + gai_strerror(g));
  Socket s(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  try {
    auto out = finish(std::move(s), res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    return out;
  } catch (...) {
    ::freeaddrinfo(res);
    throw;
  }
}

namespace {
void write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw WireError(std::string("send: ") + strerror(errno));
    }
    c += w;
    n -= size_t(w);
  }
}
void read_all(int fd, void* p, size_t n, int timeout_ms) {
  char* c = static_cast<char*>(p);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (n) {
    int wait = -1;
    if (timeout_ms >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) throw WireError("recv: timeout");
      wait = int(left);
    }
    if (!wait_fd(fd, POLLIN, wait)) throw WireError("recv: timeout");
    ssize_t r = ::recv(fd, c, n, 0);
    if (r == 0) throw WireError("recv: peer closed the connection");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw WireError(std::string("recv: ") + strerror(errno));
    }
    c += r;
    n -= size_t(r);
  }
}
}  // namespace

void send_msg(const Socket& s, const json& msg) {
  if (!s.valid()) throw WireError("send: not connected");
  std::string body = msg.dump();
  uint32_t len = htonl(uint32_t(body.size()));
  std::string frame(reinterpret_cast<char*>(&len), 4);
  frame += body;
  write_all(s.fd(), frame.data(), frame.size());
}

json recv_msg(const Socket& s, int timeout_ms) {
  if (!s.valid()) throw WireError("recv: not connected");
  uint32_t len = 0;
  read_all(s.fd(), &len, 4, timeout_ms);
  len = ntohl(len);
  if (len > (64u << 20)) throw WireError("recv: frame too large");
  std::string body(len, '\0');
  read_all(s.fd(), body.data(), len, timeout_ms < 0 ? -1 : timeout_ms + 1000);
  try {
    return json::parse(body);
  } catch (const std::exception& e) {
    throw WireError(std::string("recv: malformed frame: ") + e.what());
  }
}

json request(const Socket& s, const json& msg, int timeout_ms) {
  send_msg(s, msg);
  json r = recv_msg(s, timeout_ms);
  if (r.contains("error")) throw WireError(r["error"].get<std::string>());
  return r;
}

long peer_uid(const Socket& s) {
  ucred cr{};
  socklen_t len = sizeof cr;
  if (::getsockopt(s.fd(), SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return -1;
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  ::getsockname(s.fd(), (sockaddr*)&ss, &sl);
  if (ss.ss_family != AF_UNIX) return -1;
  return long(cr.uid);
}

}  // namespace dynres::icheck
