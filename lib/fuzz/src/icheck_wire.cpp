// The iCheck control channel as icheckd serves it (dynres/icheck/wire.hpp,
// the proto library underneath): a TCP connection on loopback is accepted,
// authenticated (MUNGE auth frame; with ICHECK_TCP_AUTH=none a leading auth
// frame is skipped) and read with recv_msg until the stream ends. Oracle: a
// MUNGE-mode connection with these bytes is never accepted (they carry no
// fresh credential), and only ProtoError comes out of recv_msg.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "common.hpp"
#include "dynres/fuzz.hpp"
#include "dynres/proto_socket.hpp"  // what dynres/icheck/wire.hpp names in dynres::icheck

namespace dynres::fuzz {

using detail::require;

void icheck_wire(const uint8_t* data, size_t size) {
  if (size < 1) return;
  static std::unique_ptr<proto::Socket> listener;
  static std::string addr;
  if (!listener) {
    listener = std::make_unique<proto::Socket>(proto::listen_on("127.0.0.1:0"));
    addr = proto::bound_address(*listener, "127.0.0.1:0");
  }
  const bool munge = !(data[0] & 1);
  proto::set_tcp_auth(munge ? proto::TcpAuth::munge : proto::TcpAuth::none);
  const uint8_t* s = data + 1;
  const size_t n = std::min<size_t>(size - 1, 1 << 20);

  // the peer: a plain TCP client writing the bytes, then closing its side
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  require(c >= 0, "socket failed");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1))));
  require(::connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0, "connect to the listener failed");
  std::thread writer([&] {
    size_t off = 0;
    while (off < n) {
      ssize_t w = ::send(c, s + off, n - off, MSG_NOSIGNAL);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    ::shutdown(c, SHUT_WR);
  });
  struct Join {
    std::thread& t;
    int fd;
    ~Join() {
      ::shutdown(fd, SHUT_RDWR);
      t.join();
      ::close(fd);
    }
  } join{writer, c};

  proto::Socket conn = proto::accept_unauthenticated(*listener, 2000);
  require(conn.valid(), "no connection accepted");
  bool ok = proto::authenticate_accepted(conn);
  if (munge) {
    require(!ok, "a connection without a MUNGE credential was accepted");
    return;
  }
  require(ok, "ICHECK_TCP_AUTH=none refused a connection");
  for (int k = 0; k < 100000; ++k) {
    try {
      proto::recv_msg(conn, 2000);
    } catch (const proto::ProtoError&) {
      return;
    }
  }
}

}  // namespace dynres::fuzz
