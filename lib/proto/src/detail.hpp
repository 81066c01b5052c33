// Internals shared by the proto sources (not installed, not for callers).
#pragma once
#include <chrono>
#include <optional>
#include <string>

#include "dynres/proto_socket.hpp"

namespace dynres::proto::detail {

/// A point in time timeout_ms (ms) from now; negative = never.
class Deadline {
 public:
  explicit Deadline(int timeout_ms);
  /// Milliseconds left for poll(): -1 = forever, 0 = passed.
  int left_ms() const;
  bool passed() const { return left_ms() == 0; }

 private:
  bool forever_;
  std::chrono::steady_clock::time_point at_;
};

/// poll() fd for events, retrying on EINTR. True when ready, false on timeout
/// (timeout_ms: -1 = forever) or poll failure.
bool wait_fd(int fd, short events, int timeout_ms);

/// How read_frame ended without a frame.
enum class ReadEnd { frame, closed, timeout };

/// Read one frame. Returns frame (body in out), closed (orderly close before
/// the first byte) or timeout (nothing arrived within timeout_ms). Throws
/// ProtoError for an oversized or malformed frame, a close or timeout in the
/// middle of a frame (the body gets timeout_ms + 1000 ms), or an I/O error.
/// max_body: frames announcing a longer body are refused (ProtoError) before
/// a byte of the body is read or allocated (the pre-auth frame of a TCP
/// connection gets kMaxAuthFrame, everything else kMaxFrame).
ReadEnd read_frame(int fd, int timeout_ms, json& out, size_t max_body = kMaxFrame);

/// True when m is an auth frame {"op":"auth", ...}.
bool is_auth_frame(const json& m);

/// A fresh MUNGE credential (empty payload) from the local munged, or
/// std::nullopt with the reason in err.
std::optional<std::string> munge_credential(std::string& err);
/// The uid a MUNGE credential was made by, if munged verifies it (not
/// replayed, not expired, same key); else std::nullopt with the reason in err.
std::optional<long> munge_verify(const std::string& cred, std::string& err);

/// What proto's functions may change in a Socket besides its fd.
struct SocketAccess {
  static void set_tcp_uid(Socket& s, long uid) { s.tcp_uid_ = uid; }
  static long tcp_uid(const Socket& s) { return s.tcp_uid_; }
  static void set_skip_auth_frame(const Socket& s, bool on) { s.skip_auth_frame_ = on; }
  static bool skip_auth_frame(const Socket& s) { return s.skip_auth_frame_; }
};

}  // namespace dynres::proto::detail
