// Control channel of iCheck: length-prefixed JSON frames over Unix-domain or
// TCP stream sockets [John24 §6.1.1.1: "TCP/IP for configuration
// messages"]. RMA payloads never travel here; only metadata (addresses,
// memory keys, chunk plans, versions).
//
// The implementation is dynres::proto (lib/proto, dynres/proto_socket.hpp),
// shared with the scheduler tools; this header only names it in
// dynres::icheck. There: the address syntax ("unix:/path", "host:port",
// "tcp:host:port"), the frame limit (proto::kMaxFrame, 64 MiB), and who the
// peer is (peer_uid: SO_PEERCRED for Unix sockets, a MUNGE credential checked
// by accept_on for TCP; ICHECK_TCP_AUTH=none turns the TCP check off).
#pragma once
#include "dynres/proto_socket.hpp"

namespace dynres::icheck {

using json = nlohmann::json;

/// Any control-channel failure (connect refused, peer closed, timeout, bad
/// frame, {"error": ...} reply to request()).
using WireError = proto::ProtoError;
using proto::Socket;

using proto::accept_on;
using proto::accept_unauthenticated;
using proto::authenticate_accepted;
using proto::peer_host;
using proto::address_host;
using proto::bound_address;
using proto::connect_to;
using proto::is_unix_address;
using proto::listen_on;
using proto::peer_uid;
using proto::recv_msg;
using proto::request;
using proto::send_msg;

}  // namespace dynres::icheck

namespace dynres::icheck {

/// Identity is required on TCP: with ICHECK_TCP_AUTH=none (proto::TcpAuth::none) the
/// TCP peers' identity is unknown, so an iCheck daemon may serve TCP only on
/// a loopback address (127.0.0.0/8, ::1, or a name resolving only to those).
/// Throws std::runtime_error saying so for any other TCP listen address;
/// Unix addresses and TcpAuth::munge always pass.
void require_safe_tcp_auth(const std::string& listen_addr);

/// True when every address `host` resolves to is a loopback address.
bool is_loopback_host(const std::string& host);

}  // namespace dynres::icheck
