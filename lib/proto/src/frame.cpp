// The frame format (4-byte big-endian length + JSON body) on file descriptors:
// the one implementation behind send_frame/recv_frame and send_msg/recv_msg.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "detail.hpp"

namespace dynres::proto {
namespace detail {

Deadline::Deadline(int timeout_ms)
    : forever_(timeout_ms < 0), at_(std::chrono::steady_clock::now() + std::chrono::milliseconds(forever_ ? 0 : timeout_ms)) {}

int Deadline::left_ms() const {
  if (forever_) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(at_ - std::chrono::steady_clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

bool wait_fd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

namespace {

enum class Got { all, eof_at_start, timeout_at_start };

// Read exactly n bytes before the deadline. When nothing has been read and
// the read does not continue a frame (in_frame false), EOF and timeout are
// reported; otherwise they are a ProtoError (the stream is out of step).
Got read_exact(int fd, char* buf, size_t n, const Deadline& dl, bool in_frame) {
  size_t got = 0;
  while (got < n) {
    int left = dl.left_ms();
    if (left == 0 || !wait_fd(fd, POLLIN, left)) {
      if (got == 0 && !in_frame) return Got::timeout_at_start;
      throw ProtoError("recv: timed out in the middle of a frame");
    }
    ssize_t r = ::recv(fd, buf + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw ProtoError(std::string("recv: ") + std::strerror(errno));
    }
    if (r == 0) {
      if (got == 0 && !in_frame) return Got::eof_at_start;
      throw ProtoError("recv: peer closed the connection in the middle of a frame");
    }
    got += static_cast<size_t>(r);
  }
  return Got::all;
}

std::string too_large(size_t n) {
  return "frame of " + std::to_string(n) + " bytes exceeds the limit of " + std::to_string(kMaxFrame) + " bytes";
}

}  // namespace

ReadEnd read_frame(int fd, int timeout_ms, json& out, size_t max_body) {
  unsigned char hdr[4];
  Got g = read_exact(fd, reinterpret_cast<char*>(hdr), 4, Deadline(timeout_ms), false);
  if (g == Got::eof_at_start) return ReadEnd::closed;
  if (g == Got::timeout_at_start) return ReadEnd::timeout;
  uint32_t n = (uint32_t(hdr[0]) << 24) | (uint32_t(hdr[1]) << 16) | (uint32_t(hdr[2]) << 8) | hdr[3];
  if (n > kMaxFrame) throw ProtoError("recv: " + too_large(n));
  if (n > max_body)
    throw ProtoError("recv: frame of " + std::to_string(n) + " bytes exceeds the limit of " + std::to_string(max_body) +
                     " bytes for this frame");
  // the body grows with the bytes that arrive, never ahead of them by more
  // than a piece: a peer announcing a large frame and sending nothing costs
  // nothing (60 connections announcing 64 MiB once took 2 GB)
  constexpr size_t kPiece = 64 * 1024;
  std::string body;
  const Deadline body_dl(timeout_ms < 0 ? -1 : timeout_ms + 1000);
  while (body.size() < n) {
    const size_t at = body.size(), piece = std::min<size_t>(kPiece, n - at);
    body.resize(at + piece);
    read_exact(fd, body.data() + at, piece, body_dl, true);
  }
  try {
    out = json::parse(body);
  } catch (const json::exception& e) {
    throw ProtoError(std::string("recv: malformed JSON frame: ") + e.what());
  }
  return ReadEnd::frame;
}

bool is_auth_frame(const json& m) {
  if (!m.is_object()) return false;
  auto op = m.find("op");
  return op != m.end() && op->is_string() && op->get_ref<const std::string&>() == "auth";
}

}  // namespace detail

void send_frame(int fd, const json& body) {
  std::string s;
  try {
    s = body.dump();
  } catch (const json::exception& e) {  // e.g. invalid UTF-8 in a string
    throw ProtoError(std::string("send: cannot encode the message: ") + e.what());
  }
  if (s.size() > kMaxFrame) throw ProtoError("send: " + detail::too_large(s.size()));
  uint32_t n = static_cast<uint32_t>(s.size());
  char hdr[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
  s.insert(0, hdr, 4);
  size_t off = 0;
  while (off < s.size()) {
    ssize_t w = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw ProtoError(std::string("send: ") + std::strerror(errno));
    }
    off += static_cast<size_t>(w);
  }
}

bool FrameReader::fill(int fd) {
  char tmp[16384];
  for (;;) {
    ssize_t r = ::recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (r > 0) {
      buf_.append(tmp, static_cast<size_t>(r));
      return true;
    }
    if (r == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

std::optional<json> FrameReader::next() {
  if (buf_.size() < 4) return std::nullopt;
  auto b = reinterpret_cast<const unsigned char*>(buf_.data());
  uint32_t n = (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
  if (n > max_) throw ProtoError("recv: frame of " + std::to_string(n) + " bytes exceeds the limit of " +
                                 std::to_string(max_) + " bytes for this connection");
  if (buf_.size() - 4 < n) return std::nullopt;
  json out;
  try {
    out = json::parse(buf_.begin() + 4, buf_.begin() + 4 + n);
  } catch (const json::exception& e) {
    throw ProtoError(std::string("recv: malformed JSON frame: ") + e.what());
  }
  buf_.erase(0, 4 + static_cast<size_t>(n));
  return out;
}

std::optional<json> recv_frame(int fd, int timeout_ms) {
  json m;
  if (detail::read_frame(fd, timeout_ms, m) != detail::ReadEnd::frame) return std::nullopt;
  return m;
}

}  // namespace dynres::proto
