// Owning sockets, "unix:"/TCP addresses, listen/accept/connect, and the
// MUNGE authentication of TCP connections (see dynres/proto_socket.hpp).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "detail.hpp"

namespace dynres::proto {

using detail::Deadline;
using detail::SocketAccess;
using detail::wait_fd;

// ------------------------------------------------------------------ Socket

Socket::~Socket() { close(); }

Socket::Socket(Socket&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), tcp_uid_(std::exchange(o.tcp_uid_, -1)),
      skip_auth_frame_(std::exchange(o.skip_auth_frame_, false)) {}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = std::exchange(o.fd_, -1);
    tcp_uid_ = std::exchange(o.tcp_uid_, -1);
    skip_auth_frame_ = std::exchange(o.skip_auth_frame_, false);
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  tcp_uid_ = -1;
  skip_auth_frame_ = false;
}

void Socket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

int Socket::release() {
  tcp_uid_ = -1;
  skip_auth_frame_ = false;
  return std::exchange(fd_, -1);
}

// ------------------------------------------------------------------ policy

namespace {

TcpAuth policy_from_env() {
  const char* v = std::getenv("ICHECK_TCP_AUTH");
  std::string s = v ? v : "";
  if (s == "none") return TcpAuth::none;
  if (!s.empty() && s != "munge")
    std::fprintf(stderr, "dynres: ICHECK_TCP_AUTH=%s is not 'munge' or 'none'; using munge\n", s.c_str());
  return TcpAuth::munge;
}

std::atomic<TcpAuth>& policy() {
  static std::atomic<TcpAuth> p{policy_from_env()};
  return p;
}

}  // namespace

TcpAuth tcp_auth() { return policy().load(); }
void set_tcp_auth(TcpAuth mode) { policy().store(mode); }

// --------------------------------------------------------------- addresses

bool is_unix_address(const std::string& addr) { return addr.rfind("unix:", 0) == 0; }

namespace {

struct HostPort {
  std::string host;  ///< as written (IPv6 literals keep their brackets)
  std::string port;
  /// The host for getaddrinfo(): brackets stripped; nullptr for "any".
  const char* resolvable(std::string& buf) const {
    if (host.empty() || host == "*") return nullptr;
    buf = host.size() > 1 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
    return buf.c_str();
  }
};

HostPort split_tcp(std::string a) {
  if (a.rfind("tcp:", 0) == 0) a = a.substr(4);
  auto c = a.rfind(':');
  if (c == std::string::npos || c + 1 == a.size())
    throw ProtoError("bad address '" + a + "' (want host:port, tcp:host:port or unix:/path)");
  return {a.substr(0, c), a.substr(c + 1)};
}

sockaddr_un unix_sa(const std::string& addr) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::string p = addr.substr(5);
  if (p.size() >= sizeof(sa.sun_path)) throw ProtoError("unix socket path too long (max 107 bytes): " + p);
  std::memcpy(sa.sun_path, p.c_str(), p.size() + 1);
  return sa;
}

using AddrInfo = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

AddrInfo resolve(const std::string& addr, bool passive) {
  auto hp = split_tcp(addr);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  std::string buf;
  int g = ::getaddrinfo(hp.resolvable(buf), hp.port.c_str(), &hints, &res);
  if (g != 0) throw ProtoError("resolve " + addr + ": " + ::gai_strerror(g));
  return AddrInfo(res, &::freeaddrinfo);
}

Socket new_socket(int family, const std::string& addr) {
  Socket s(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throw ProtoError("socket for " + addr + ": " + std::strerror(errno));
  return s;
}

void set_nodelay(const Socket& s) {
  int one = 1;
  ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool is_unix_socket(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  return ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0 && ss.ss_family == AF_UNIX;
}

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
    ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

}  // namespace

std::string address_host(const std::string& addr) {
  if (is_unix_address(addr)) return "";
  return split_tcp(addr).host;
}

// ------------------------------------------------------------------ listen

Socket listen_on(const std::string& addr, int backlog) {
  if (is_unix_address(addr)) {
    auto sa = unix_sa(addr);
    ::unlink(sa.sun_path);
    Socket s = new_socket(AF_UNIX, addr);
    mode_t old = ::umask(0077);
    int r = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    ::umask(old);
    if (r != 0) throw ProtoError("bind " + addr + ": " + std::strerror(errno));
    ::chmod(sa.sun_path, 0600);
    if (::listen(s.fd(), backlog) != 0) throw ProtoError("listen " + addr + ": " + std::strerror(errno));
    return s;
  }
  AddrInfo res = resolve(addr, true);
  Socket s = new_socket(res->ai_family, addr);
  int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd(), res->ai_addr, res->ai_addrlen) != 0) throw ProtoError("bind " + addr + ": " + std::strerror(errno));
  if (::listen(s.fd(), backlog) != 0) throw ProtoError("listen " + addr + ": " + std::strerror(errno));
  return s;
}

std::string bound_address(const Socket& s, const std::string& requested) {
  if (is_unix_address(requested)) return requested;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    throw ProtoError("getsockname for " + requested + ": " + std::strerror(errno));
  int port = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                     : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return split_tcp(requested).host + ":" + std::to_string(port);
}

// ---------------------------------------------------------- authentication

namespace {

const char* const kNoCredential = "TCP control connection without a valid MUNGE credential: ";
const char* const kHint =
    " (is munged running on both hosts, with the same key? On a trusted network the server may set "
    "ICHECK_TCP_AUTH=none)";

// Read and verify the auth frame of a freshly accepted TCP connection. The
// verified uid goes into s; otherwise the reason for refusing it is returned.
std::optional<std::string> authenticate(Socket& s) {
  json m;
  detail::ReadEnd end;
  try {
    end = detail::read_frame(s.fd(), kAuthTimeoutMs, m, kMaxAuthFrame);
  } catch (const ProtoError& e) {
    return std::string(e.what());
  }
  if (end == detail::ReadEnd::closed) return std::string("the client closed the connection before authenticating");
  if (end == detail::ReadEnd::timeout)
    return "no auth frame within " + std::to_string(kAuthTimeoutMs) + " ms";
  if (!detail::is_auth_frame(m)) return std::string("the first frame was not an auth frame {\"op\":\"auth\",...}");
  auto cred = m.find("munge");
  if (cred == m.end() || !cred->is_string()) {
    std::string why = "the client sent none";
    auto cerr = m.find("munge_error");
    if (cerr != m.end() && cerr->is_string()) why += " (client: " + cerr->get<std::string>() + ")";
    return why;
  }
  std::string err;
  auto uid = detail::munge_verify(cred->get<std::string>(), err);
  if (!uid) return err;
  SocketAccess::set_tcp_uid(s, *uid);
  return std::nullopt;
}

// Tell a refused client why, then close without resetting the connection
// (unread input on close would make the kernel send RST, which can destroy
// the reply before the client reads it).
void refuse(Socket& s, const std::string& reason) {
  std::string msg = std::string("perm: ") + kNoCredential + reason + kHint;
  std::fprintf(stderr, "dynres: refused TCP connection from %s: %s\n", peer_name(s.fd()).c_str(), msg.c_str());
  try {
    send_frame(s.fd(), {{"error", msg}});
  } catch (const ProtoError&) {
  }
  ::shutdown(s.fd(), SHUT_WR);
  Deadline drain(100);
  char buf[4096];
  while (wait_fd(s.fd(), POLLIN, drain.left_ms())) {
    ssize_t r = ::recv(s.fd(), buf, sizeof buf, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) break;
    if (drain.passed()) break;
  }
  s.close();
}

}  // namespace

// ------------------------------------------------------------------ accept

Socket accept_on(const Socket& l, int timeout_ms) {
  Deadline dl(timeout_ms);
  for (;;) {
    if (!wait_fd(l.fd(), POLLIN, dl.left_ms())) return Socket();
    Socket c(::accept4(l.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!c.valid()) return Socket();
    if (is_unix_socket(c.fd())) return c;
    set_nodelay(c);
    if (tcp_auth() == TcpAuth::none) {
      SocketAccess::set_skip_auth_frame(c, true);
      return c;
    }
    auto why = authenticate(c);
    if (!why) return c;
    refuse(c, *why);
    if (dl.passed()) return Socket();
  }
}

Socket accept_unauthenticated(const Socket& l, int timeout_ms) {
  if (!wait_fd(l.fd(), POLLIN, timeout_ms)) return Socket();
  Socket c(::accept4(l.fd(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!c.valid() || is_unix_socket(c.fd())) return c;
  set_nodelay(c);
  return c;
}

bool authenticate_accepted(Socket& c) {
  if (!c.valid()) return false;
  if (is_unix_socket(c.fd())) return true;
  if (tcp_auth() == TcpAuth::none) {
    SocketAccess::set_skip_auth_frame(c, true);
    return true;
  }
  auto why = authenticate(c);
  if (!why) return true;
  refuse(c, *why);
  return false;
}

std::string peer_host(const Socket& s) {
  if (!s.valid() || is_unix_socket(s.fd())) return "";
  std::string n = peer_name(s.fd());
  auto c = n.rfind(':');
  return c == std::string::npos ? n : n.substr(0, c);
}

// ----------------------------------------------------------------- connect

namespace {

// Connect s to sa within dl; throws ProtoError naming addr.
void connect_within(const Socket& s, const sockaddr* sa, socklen_t len, const std::string& addr, int timeout_ms,
                    const Deadline& dl) {
  int fl = ::fcntl(s.fd(), F_GETFL);
  ::fcntl(s.fd(), F_SETFL, fl | O_NONBLOCK);
  int r = ::connect(s.fd(), sa, len);
  if (r != 0 && errno != EINPROGRESS && errno != EAGAIN) throw ProtoError("connect " + addr + ": " + std::strerror(errno));
  if (r != 0) {
    if (!wait_fd(s.fd(), POLLOUT, dl.left_ms()))
      throw ProtoError("connect " + addr + ": timed out after " + std::to_string(timeout_ms) + " ms");
    int err = 0;
    socklen_t el = sizeof err;
    ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) throw ProtoError("connect " + addr + ": " + std::strerror(err));
  }
  ::fcntl(s.fd(), F_SETFL, fl);
}

// The auth frame a TCP client sends first (see the header).
json auth_frame() {
  json m = {{"op", "auth"}};
  if (tcp_auth() == TcpAuth::none) {
    m["munge_error"] = "ICHECK_TCP_AUTH=none on the client";
    return m;
  }
  std::string err;
  if (auto cred = detail::munge_credential(err)) m["munge"] = *cred;
  else m["munge_error"] = err;
  return m;
}

}  // namespace

Socket connect_to(const std::string& addr, int timeout_ms) {
  Deadline dl(timeout_ms);
  if (is_unix_address(addr)) {
    auto sa = unix_sa(addr);
    Socket s = new_socket(AF_UNIX, addr);
    connect_within(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa, addr, timeout_ms, dl);
    return s;
  }
  AddrInfo res = resolve(addr, false);
  std::string last;
  for (addrinfo* ai = res.get(); ai; ai = ai->ai_next) {
    try {
      Socket s = new_socket(ai->ai_family, addr);
      set_nodelay(s);
      connect_within(s, ai->ai_addr, ai->ai_addrlen, addr, timeout_ms, dl);
      send_msg(s, auth_frame());
      return s;
    } catch (const ProtoError& e) {
      last = e.what();
      if (dl.passed()) break;
    }
  }
  throw ProtoError(last);
}

// ----------------------------------------------------------------- messages

void send_msg(const Socket& s, const json& msg) {
  if (!s.valid()) throw ProtoError("send: not connected");
  send_frame(s.fd(), msg);
}

json recv_msg(const Socket& s, int timeout_ms, size_t max_body) {
  if (!s.valid()) throw ProtoError("recv: not connected");
  Deadline dl(timeout_ms);
  for (;;) {
    json m;
    switch (detail::read_frame(s.fd(), dl.left_ms(), m, std::min(max_body, kMaxFrame))) {
      case detail::ReadEnd::closed: throw ProtoError("recv: peer closed the connection");
      case detail::ReadEnd::timeout: throw ProtoError("recv: timeout");
      case detail::ReadEnd::frame: break;
    }
    bool skip = SocketAccess::skip_auth_frame(s);
    SocketAccess::set_skip_auth_frame(s, false);
    if (!(skip && detail::is_auth_frame(m))) return m;
  }
}

json request(const Socket& s, const json& msg, int timeout_ms) {
  send_msg(s, msg);
  json r = recv_msg(s, timeout_ms);
  if (r.is_object() && r.contains("error"))
    throw ProtoError(r["error"].is_string() ? r["error"].get<std::string>() : r["error"].dump());
  return r;
}

long peer_uid(const Socket& s) {
  if (!s.valid()) return -1;
  if (!is_unix_socket(s.fd())) return SocketAccess::tcp_uid(s);
  ucred cr{};
  socklen_t len = sizeof cr;
  if (::getsockopt(s.fd(), SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return -1;
  return long(cr.uid);
}

}  // namespace dynres::proto
