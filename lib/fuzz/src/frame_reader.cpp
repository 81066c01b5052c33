// FrameReader (lib/proto) fed from a real socket pair in pieces of varying
// size. Oracle: the frames it returns are exactly the well-formed frames of
// the stream, in order; the first oversized or malformed one is a ProtoError;
// what is left of an unfinished frame stays pending.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>

#include "common.hpp"
#include "dynres/fuzz.hpp"
#include "dynres/proto.hpp"

namespace dynres::fuzz {

using detail::require;

void frame_reader(const uint8_t* data, size_t size) {
  if (size < 2) return;
  // byte 0: the reader's limit; byte 1: the piece sizes; the rest: the stream
  const size_t max_body = data[0] & 1 ? proto::kMaxFrame : 64 * 1024;
  uint32_t rng = data[1] * 2654435761u + 1;
  const uint8_t* s = data + 2;
  const size_t n = size - 2;

  // what a correct reader returns: the frames, then an error or a remainder
  std::vector<proto::json> want;
  bool want_error = false;
  size_t off = 0;
  while (n - off >= 4) {
    uint32_t len = (uint32_t(s[off]) << 24) | (uint32_t(s[off + 1]) << 16) | (uint32_t(s[off + 2]) << 8) | s[off + 3];
    if (len > max_body) {
      want_error = true;
      break;
    }
    if (n - off - 4 < len) break;
    auto j = proto::json::parse(s + off + 4, s + off + 4 + len, nullptr, false);
    if (j.is_discarded()) {
      want_error = true;
      break;
    }
    want.push_back(std::move(j));
    off += 4 + len;
  }

  int sv[2];
  require(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair failed");
  struct Close {
    int* fds;
    ~Close() { ::close(fds[0]), ::close(fds[1]); }
  } closer{sv};
  ::fcntl(sv[0], F_SETFL, O_NONBLOCK);

  proto::FrameReader r(max_body);
  std::vector<proto::json> got;
  bool got_error = false;
  size_t sent = 0;
  bool eof = false;
  if (n == 0) ::shutdown(sv[0], SHUT_WR);
  while (!got_error) {
    if (sent < n) {
      rng = rng * 1103515245u + 12345u;
      size_t piece = 1 + (rng >> 8) % 9000;
      ssize_t w = ::send(sv[0], s + sent, std::min(piece, n - sent), MSG_NOSIGNAL);
      if (w > 0) sent += static_cast<size_t>(w);
      if (sent == n) ::shutdown(sv[0], SHUT_WR);
    }
    bool open = r.fill(sv[1]);
    try {
      while (auto m = r.next()) got.push_back(std::move(*m));
    } catch (const proto::ProtoError& e) {
      got_error = true;
      require(std::string(e.what()).rfind("recv: ", 0) == 0, std::string("unexpected message: ") + e.what());
    }
    if (!open) {
      eof = true;
      break;
    }
  }
  require(got.size() == want.size(), "frames returned: " + std::to_string(got.size()) + ", frames in the stream: " +
                                          std::to_string(want.size()));
  for (size_t i = 0; i < got.size(); ++i) require(got[i] == want[i], "frame " + std::to_string(i) + " differs");
  require(got_error == want_error, got_error ? "a ProtoError for a valid stream" : "no ProtoError for a bad frame");
  if (eof && !got_error) require(r.pending() == n - off, "pending() is not the unfinished frame's size");
}

}  // namespace dynres::fuzz
