#include "dynres/icheck/wire.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <memory>
#include <stdexcept>

namespace dynres::icheck {

bool is_loopback_host(const std::string& h0) {
  std::string h = h0;
  if (h.size() > 1 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty() || h == "*") return false;  // any address
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(h.c_str(), nullptr, &hints, &res) != 0 || !res) return false;
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> own(res, &::freeaddrinfo);
  for (addrinfo* a = res; a; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(a->ai_addr);
      if ((ntohl(in->sin_addr.s_addr) >> 24) != 127) return false;
    } else if (a->ai_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(a->ai_addr);
      if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return false;
    } else {
      return false;
    }
  }
  return true;
}

void require_safe_tcp_auth(const std::string& listen_addr) {
  if (is_unix_address(listen_addr) || proto::tcp_auth() != proto::TcpAuth::none) return;
  const std::string host = address_host(listen_addr);
  if (!is_loopback_host(host))
    throw std::runtime_error("ICHECK_TCP_AUTH=none refused: listening on " + listen_addr +
                             " (not a loopback address) without MUNGE would let anybody on the network act as any "
                             "user; bind to 127.0.0.1 or use MUNGE (ICHECK_TCP_AUTH=munge)");
}

}  // namespace dynres::icheck
