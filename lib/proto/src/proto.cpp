// The path-based Unix-socket API of dynres/proto.hpp (scheduler tools), on
// top of the sockets of socket.cpp and the frames of frame.cpp.
#include <unistd.h>

#include "detail.hpp"

namespace dynres::proto {

int listen_unix(const std::string& path) {
  const std::string addr = "unix:" + path;
  Socket probe;
  try {
    probe = connect_to(addr, 200);
  } catch (const ProtoError&) {
    // nobody listens: a stale file (or none) that listen_on replaces
  }
  if (probe.valid()) throw ProtoError("socket " + path + " is already in use by a running daemon");
  try {
    return listen_on(addr, 128).release();
  } catch (const ProtoError& e) {
    throw ProtoError("cannot listen on " + path + ": " + e.what());
  }
}

int connect_unix(const std::string& path, int timeout_ms) {
  try {
    return connect_to("unix:" + path, timeout_ms).release();
  } catch (const ProtoError&) {
    return -1;
  }
}

bool notify(const std::string& path, const json& body, int timeout_ms) {
  try {
    Socket s = connect_to("unix:" + path, timeout_ms);
    send_msg(s, body);
    return true;
  } catch (const ProtoError&) {
    return false;
  }
}

std::optional<json> request(const std::string& path, const json& body, int timeout_ms) {
  try {
    Socket s = connect_to("unix:" + path, timeout_ms);
    send_msg(s, body);
    return recv_frame(s.fd(), timeout_ms);
  } catch (const ProtoError&) {
    return std::nullopt;
  }
}

}  // namespace dynres::proto
