// Messages over stream sockets: length-prefixed frames with JSON bodies
//. A frame is a 4-byte big-endian body length followed by
// that many bytes of UTF-8 JSON; bodies are limited to kMaxFrame bytes on
// both the sending and the receiving side. Every message is an object; requests
// carry an "op" member, e.g. {"op":"wake","why":"submit"}, and a reply that
// reports a failure carries {"error": "..."}.
//
// This is the only implementation of the framing in dynres. This header is the
// file-descriptor level used by the scheduler tools (Unix sockets named by a
// path); dynres/proto_socket.hpp adds the owning Socket, "unix:"/TCP addresses
// and the MUNGE authentication of TCP connections used by iCheck.
#pragma once
#include <nlohmann/json.hpp>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

namespace dynres::proto {

using json = nlohmann::json;

/// Largest frame body, in bytes (64 MiB), for every user of the protocol.
/// Larger bodies are refused by send_frame/send_msg and a larger announced
/// length is a ProtoError in recv_frame/recv_msg (the bytes are never read).
constexpr std::size_t kMaxFrame = std::size_t{64} << 20;

/// Any failure of the protocol layer: I/O error, malformed or oversized frame,
/// connection refused, timeout (where the function says so), bad address, or
/// an {"error": ...} reply to request(const Socket&, ...).
class ProtoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Create a listening SOCK_STREAM socket at path, mode 0600 (owner only).
/// A stale socket file (nobody listening) is replaced; a live one makes this
/// throw ProtoError("... already in use ..."). Other failures (path longer
/// than 107 bytes, bind/listen errors) throw ProtoError too.
/// Returns the fd (close-on-exec); the caller closes it.
int listen_unix(const std::string& path);

/// Connect to the Unix socket at path, waiting at most timeout_ms (ms).
/// Returns the connected, blocking, close-on-exec fd, or -1 when nobody
/// listens there (missing file, not a socket, refused, timeout, bad path).
int connect_unix(const std::string& path, int timeout_ms = 1000);

/// Send one frame on fd. Throws ProtoError on I/O failure or when the body
/// exceeds kMaxFrame. Never raises SIGPIPE.
void send_frame(int fd, const json& body);

/// Receive one frame from fd, waiting at most timeout_ms (ms; -1 = forever)
/// for it to begin; the body then gets timeout_ms + 1000 ms more.
/// std::nullopt on orderly close or timeout before the first byte;
/// ProtoError on a malformed or oversized frame, a frame cut short by close
/// or timeout, or an I/O error.
std::optional<json> recv_frame(int fd, int timeout_ms = -1);

/// Incremental reader of frames for a connection served from a poll() loop
/// (the scheduler's job connections): fill() takes what one recv() returns
/// without blocking, next() hands out complete frames. A peer sending half a
/// frame never stalls the caller. Bodies longer than max_body are refused
/// from the announced length, before anything is allocated for them.
class FrameReader {
 public:
  explicit FrameReader(std::size_t max_body = kMaxFrame) : max_(max_body) {}
  /// One non-blocking recv() from fd into the buffer. False on orderly close
  /// (or an I/O error other than EAGAIN/EINTR); true otherwise.
  bool fill(int fd);
  /// The next complete frame, or std::nullopt when more bytes are needed.
  /// Throws ProtoError for an oversized or malformed frame (the connection
  /// is then out of step and should be closed).
  std::optional<json> next();
  /// Bytes buffered but not yet returned as frames.
  std::size_t pending() const { return buf_.size(); }

 private:
  std::size_t max_;
  std::string buf_;
};

/// Fire-and-forget to a Unix socket path: connect (at most timeout_ms), send,
/// close. False when nobody listens or the send fails; never throws.
bool notify(const std::string& path, const json& body, int timeout_ms = 300);

/// Request/response over a Unix socket path: connect, send, wait for one reply
/// frame (timeout_ms each). std::nullopt when nobody listens, on timeout or on
/// any protocol failure; never throws. The reply is returned as is, even when
/// it carries {"error": ...}.
std::optional<json> request(const std::string& path, const json& body, int timeout_ms = 2000);

}  // namespace dynres::proto
