#include "dynres/proto.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace dynres::proto {
namespace {

sockaddr_un make_addr(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof(a.sun_path)) throw ProtoError("socket path too long (max 107 bytes): " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

bool wait_fd(int fd, short ev, int timeout_ms) {
  pollfd p{fd, ev, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

// Read exactly n bytes; false on EOF before the first byte or timeout.
bool read_all(int fd, char* buf, size_t n, int timeout_ms, bool& eof) {
  size_t got = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (got < n) {
    int left = -1;
    if (timeout_ms >= 0) {
      left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  deadline - std::chrono::steady_clock::now()).count());
      if (left <= 0) return false;
    }
    if (!wait_fd(fd, POLLIN, left)) return false;
    ssize_t r = ::read(fd, buf + got, n - got);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw ProtoError(std::string("socket read: ") + std::strerror(errno));
    }
    if (r == 0) {
      if (got == 0) {
        eof = true;
        return false;
      }
      throw ProtoError("socket closed in the middle of a frame");
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

int listen_unix(const std::string& path) {
  auto a = make_addr(path);
  int probe = connect_unix(path, 200);
  if (probe >= 0) {
    ::close(probe);
    throw ProtoError("socket " + path + " is already in use by a running daemon");
  }
  ::unlink(path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw ProtoError(std::string("socket: ") + std::strerror(errno));
  mode_t old = ::umask(0077);
  int r = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::umask(old);
  if (r != 0 || ::listen(fd, 128) != 0) {
    int e = errno;
    ::close(fd);
    throw ProtoError("cannot listen on " + path + ": " + std::strerror(e));
  }
  ::chmod(path.c_str(), 0600);
  return fd;
}

int connect_unix(const std::string& path, int timeout_ms) {
  sockaddr_un a;
  try {
    a = make_addr(path);
  } catch (...) {
    return -1;
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  int r = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  if (r != 0 && (errno == EINPROGRESS || errno == EAGAIN)) {
    if (!wait_fd(fd, POLLOUT, timeout_ms)) r = -1;
    else {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      r = err ? -1 : 0;
    }
  }
  if (r != 0) {
    ::close(fd);
    return -1;
  }
  int fl = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

void send_frame(int fd, const json& body) {
  std::string s = body.dump();
  if (s.size() > kMaxFrame) throw ProtoError("frame too large");
  uint32_t n = static_cast<uint32_t>(s.size());
  unsigned char hdr[4] = {static_cast<unsigned char>(n >> 24), static_cast<unsigned char>(n >> 16),
                          static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(n)};
  std::string buf(reinterpret_cast<char*>(hdr), 4);
  buf += s;
  size_t off = 0;
  while (off < buf.size()) {
    ssize_t w = ::send(fd, buf.data() + off, buf.size() - off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw ProtoError(std::string("socket write: ") + std::strerror(errno));
    }
    off += static_cast<size_t>(w);
  }
}

std::optional<json> recv_frame(int fd, int timeout_ms) {
  unsigned char hdr[4];
  bool eof = false;
  if (!read_all(fd, reinterpret_cast<char*>(hdr), 4, timeout_ms, eof)) return std::nullopt;
  uint32_t n = (uint32_t(hdr[0]) << 24) | (uint32_t(hdr[1]) << 16) | (uint32_t(hdr[2]) << 8) | hdr[3];
  if (n > kMaxFrame) throw ProtoError("frame of " + std::to_string(n) + " bytes exceeds the limit");
  std::string body(n, '\0');
  if (n && !read_all(fd, body.data(), n, timeout_ms < 0 ? -1 : std::max(timeout_ms, 1000), eof))
    throw ProtoError("timed out in the middle of a frame");
  try {
    return json::parse(body);
  } catch (const json::exception& e) {
    throw ProtoError(std::string("malformed JSON frame: ") + e.what());
  }
}

bool notify(const std::string& path, const json& body, int timeout_ms) {
  int fd = connect_unix(path, timeout_ms);
  if (fd < 0) return false;
  bool ok = true;
  try {
    send_frame(fd, body);
  } catch (...) {
    ok = false;
  }
  ::close(fd);
  return ok;
}

std::optional<json> request(const std::string& path, const json& body, int timeout_ms) {
  int fd = connect_unix(path, timeout_ms);
  if (fd < 0) return std::nullopt;
  std::optional<json> r;
  try {
    send_frame(fd, body);
    r = recv_frame(fd, timeout_ms);
  } catch (...) {
    r.reset();
  }
  ::close(fd);
  return r;
}

}  // namespace dynres::proto
