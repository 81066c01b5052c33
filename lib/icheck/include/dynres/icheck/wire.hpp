// Control channel of iCheck: length-prefixed JSON frames over Unix-domain or
// TCP stream sockets (seed 000 §6.1.1.1: "TCP/IP for configuration
// messages"). RMA payloads never travel here; only metadata (addresses,
// memory keys, chunk plans, versions).
//
// Address syntax: "unix:/path/to.sock" or "host:port" / "tcp:host:port".
// Unix sockets are created with mode 0600 inside a directory the caller keeps
// at 0700; the peer's uid is available through peer_uid() (SO_PEERCRED).
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace dynres::icheck {

using json = nlohmann::json;

/// Any control-channel failure (connect refused, peer closed, timeout, bad frame).
class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Owning socket file descriptor (move-only; closes on destruction).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  /// Shut down both directions (wakes a thread blocked in recv) without closing.
  void shutdown();

 private:
  int fd_ = -1;
};

/// Listen on `addr`. For "host:0" the kernel picks a port; bound_address()
/// returns the effective address. Unix socket files are unlinked first and
/// chmod 0600 afterwards.
Socket listen_on(const std::string& addr, int backlog = 64);
/// The address a listening socket is bound to, in the syntax above.
std::string bound_address(const Socket& s, const std::string& requested);
/// Accept one connection; timeout_ms < 0 waits forever. Returns an invalid
/// Socket on timeout.
Socket accept_on(const Socket& listener, int timeout_ms);
/// Connect with a timeout (ms). Throws WireError.
Socket connect_to(const std::string& addr, int timeout_ms);

/// Send one frame: 4-byte big-endian length + JSON text. Throws WireError.
void send_msg(const Socket& s, const json& msg);
/// Receive one frame; timeout_ms < 0 waits forever. Throws WireError on
/// timeout, closed peer or malformed frame (max frame 64 MiB).
json recv_msg(const Socket& s, int timeout_ms = -1);
/// send_msg + recv_msg; a reply carrying {"error": "..."} is thrown as WireError.
json request(const Socket& s, const json& msg, int timeout_ms);

/// uid of the peer of a Unix-domain connection, or -1 for TCP.
long peer_uid(const Socket& s);
/// True for "unix:" addresses.
bool is_unix_address(const std::string& addr);
/// Host part of a TCP address ("" for unix addresses).
std::string address_host(const std::string& addr);

}  // namespace dynres::icheck
