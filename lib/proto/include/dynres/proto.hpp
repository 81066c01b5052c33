// Messages over Unix domain sockets: length-prefixed frames with JSON bodies
// (DESIGN.md "proto"). A frame is a 4-byte big-endian body length followed by
// that many bytes of UTF-8 JSON; bodies are limited to kMaxFrame bytes.
// Every message is an object with an "op" member, e.g. {"op":"wake","why":"submit"}.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace dynres::proto {

using json = nlohmann::json;

constexpr size_t kMaxFrame = 16u << 20;  ///< 16 MiB

class ProtoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Create a listening SOCK_STREAM socket at path, mode 0600 (owner only).
/// A stale socket file (nobody listening) is replaced; a live one makes this
/// throw ProtoError("... already in use"). Returns the fd (close-on-exec).
int listen_unix(const std::string& path);

/// Connect to path, waiting at most timeout_ms. Returns -1 when nobody listens.
int connect_unix(const std::string& path, int timeout_ms = 1000);

/// Send one frame; throws ProtoError on I/O failure.
void send_frame(int fd, const json& body);

/// Receive one frame, waiting at most timeout_ms (-1 = forever).
/// std::nullopt on orderly close or timeout; ProtoError on a malformed frame.
std::optional<json> recv_frame(int fd, int timeout_ms = -1);

/// Fire-and-forget: connect, send, close. False when nobody listens.
bool notify(const std::string& path, const json& body, int timeout_ms = 300);

/// Request/response: connect, send, wait for one reply frame.
std::optional<json> request(const std::string& path, const json& body, int timeout_ms = 2000);

}  // namespace dynres::proto
