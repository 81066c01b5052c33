// Owning sockets, "unix:"/TCP addresses and authenticated TCP connections on
// top of the frames of dynres/proto.hpp (used by iCheck's control channel,
// [John24 §6.1.1.1]: "TCP/IP for configuration messages").
//
// Address syntax: "unix:/path/to.sock", or "host:port" / "tcp:host:port"
// ("[v6addr]:port" for IPv6 literals; host "" or "*" = any, listen only).
//
// Who is on the other end (peer_uid):
//   * Unix sockets: the kernel tells (SO_PEERCRED). No extra frames.
//   * TCP: MUNGE. connect_to() sends, right after connecting, one auth frame
//     {"op":"auth","munge":"<credential>"} made with munge_encode(3) (empty
//     payload). If no credential can be had (munged unreachable, or the
//     process runs with TcpAuth::none) it sends {"op":"auth"} instead, with
//     "munge_error" saying why. accept_on() reads that frame (kAuthTimeoutMs)
//     and verifies it with munge_decode(3), which also rejects replayed and
//     expired credentials; the verified uid is what peer_uid() returns.
//     A TCP connection without a valid credential is refused: it gets one
//     frame {"error":"perm: TCP control connection without a valid MUNGE
//     credential: <reason> ..."}, is closed, and accept_on() goes on waiting.
//   * Opt-out for trusted networks: TcpAuth::none (set_tcp_auth(), or the
//     environment variable ICHECK_TCP_AUTH=none). Then TCP connections are
//     accepted without checking, a leading auth frame is skipped, and
//     peer_uid() is -1 for TCP: the peer's uid is whatever its messages claim.
#pragma once
#include <string>

#include "dynres/proto.hpp"

namespace dynres::proto {

namespace detail {
struct SocketAccess;
}

/// Owning socket file descriptor (move-only; closes on destruction). Besides
/// the fd it remembers what accept_on() learnt about a TCP peer.
class Socket {
 public:
  Socket() = default;
  /// Take ownership of fd (-1 = no socket).
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Close the fd now (idempotent).
  void close();
  /// Shut down both directions (wakes a thread blocked in recv) without closing.
  void shutdown();
  /// Give up ownership: returns the fd (or -1) and leaves this Socket invalid.
  int release();

 private:
  friend struct detail::SocketAccess;
  int fd_ = -1;
  long tcp_uid_ = -1;                   ///< MUNGE-verified uid of a TCP peer, -1 = unknown
  mutable bool skip_auth_frame_ = false;  ///< TcpAuth::none: drop a leading auth frame in recv_msg
};

/// Policy for incoming TCP connections (process-wide, see the header comment).
enum class TcpAuth {
  munge,  ///< default: refuse TCP connections without a valid MUNGE credential
  none,   ///< trusted network: accept them; peer_uid() is -1 for TCP
};

/// The current policy. Its initial value comes from the environment variable
/// ICHECK_TCP_AUTH, read once on first use: "none" -> TcpAuth::none; unset,
/// empty or "munge" -> TcpAuth::munge; any other value -> TcpAuth::munge with
/// a warning on stderr (fail closed). Thread-safe.
TcpAuth tcp_auth();
/// Override the policy for the rest of the process (e.g. from a command-line
/// option or a test). Thread-safe; affects later connect_to/accept_on calls.
void set_tcp_auth(TcpAuth mode);

/// How long accept_on() waits for the auth frame of a new TCP connection (ms).
constexpr int kAuthTimeoutMs = 2000;
/// Largest auth frame (bytes of JSON body) accept_on() reads from a TCP peer
/// that has not authenticated yet; a MUNGE credential is a few hundred
/// bytes. A longer announced frame is refused before its body is read.
constexpr std::size_t kMaxAuthFrame = 8192;

/// Listen on addr (backlog = pending connections). For "host:0" the kernel
/// picks a port; bound_address() returns the effective address. A Unix socket
/// file is unlinked first (a live listener there is replaced; compare
/// listen_unix) and chmod 0600 afterwards; keep its directory at 0700.
/// TCP listeners use SO_REUSEADDR. Throws ProtoError (bad address, resolve,
/// bind or listen failure).
Socket listen_on(const std::string& addr, int backlog = 64);

/// The address a listening socket is bound to, in the syntax above: for TCP
/// the requested host with the effective port ("h:0" -> "h:41234"); Unix
/// addresses are returned unchanged.
std::string bound_address(const Socket& s, const std::string& requested);

/// Accept one connection, waiting at most timeout_ms (ms; < 0 = forever);
/// returns an invalid Socket on timeout or accept failure. TCP connections
/// get TCP_NODELAY and are authenticated first (header comment): refused ones
/// are answered, closed, logged on stderr and never returned; waiting then
/// continues until the deadline. A slow client's auth frame can make a call
/// last up to kAuthTimeoutMs longer than timeout_ms.
Socket accept_on(const Socket& listener, int timeout_ms);

/// accept_on() without authenticating: returns the next connection at once,
/// so that a server can authenticate it on a worker thread
/// (authenticate_accepted) and a slow or hostile peer never stalls the
/// accepting thread. The caller must call authenticate_accepted() before
/// reading from the socket. Invalid Socket on timeout or accept failure.
Socket accept_unauthenticated(const Socket& listener, int timeout_ms);

/// The authentication accept_on() does, for a connection from
/// accept_unauthenticated(): Unix sockets pass; TCP connections must send a
/// valid MUNGE auth frame of at most kMaxAuthFrame bytes within
/// kAuthTimeoutMs (TcpAuth::none: passes, the frame is skipped later).
/// Returns true when the connection may be served; false when it was
/// refused (answered with "perm: ...", logged and closed).
bool authenticate_accepted(Socket& s);

/// Numeric host of a TCP peer ("127.0.0.1", "::1"); "" for Unix sockets or
/// when unknown. For per-peer limits.
std::string peer_host(const Socket& s);

/// Connect to addr, waiting at most timeout_ms (ms) for the connection (each
/// resolved TCP address is tried in turn within that time). TCP connections
/// get TCP_NODELAY and send the auth frame. Throws ProtoError ("connect ADDR:
/// timed out after N ms", refused, resolve failure, bad address).
Socket connect_to(const std::string& addr, int timeout_ms);

/// Send one frame (4-byte big-endian length + JSON text, at most kMaxFrame
/// bytes). Throws ProtoError.
void send_msg(const Socket& s, const json& msg);
/// Receive one frame, waiting at most timeout_ms (ms; < 0 = forever) for it to
/// begin. Throws ProtoError on timeout ("recv: timeout"), closed peer ("recv:
/// peer closed the connection"), a frame over max_body bytes (at most
/// kMaxFrame; refused from its announced length, before the body is read) or
/// a malformed frame. Memory for the body grows with the bytes received.
json recv_msg(const Socket& s, int timeout_ms = -1, std::size_t max_body = kMaxFrame);
/// send_msg + recv_msg; a reply carrying {"error": "..."} is thrown as
/// ProtoError with that text.
json request(const Socket& s, const json& msg, int timeout_ms);

/// uid of the peer: SO_PEERCRED for Unix sockets; for TCP connections from
/// accept_on() the MUNGE-verified uid; -1 otherwise (TCP with TcpAuth::none,
/// or the connecting side of a TCP connection).
long peer_uid(const Socket& s);
/// True for "unix:" addresses.
bool is_unix_address(const std::string& addr);
/// Host part of a TCP address ("" for unix addresses). Throws ProtoError for
/// an address without a port.
std::string address_host(const std::string& addr);

}  // namespace dynres::proto
