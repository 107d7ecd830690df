// rdmamsg::config::Address: an rdma_cm endpoint written "IPv4:port" or "[IPv6]:port",
// its parser, and the conversion to the sockaddr that rdma_bind_addr / rdma_resolve_addr
// take. Hosts are numeric literals only: the daemon never resolves names.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/parsed.h"

namespace rdmamsg::config {

struct Address {
  std::string host;        // canonical numeric form, no brackets: "10.0.0.1", "fe80::1"
  std::uint16_t port = 0;  // 1..65535 when parsed

  bool isIpv6() const;
  // 0.0.0.0 or :: (every address of the host).
  bool isWildcard() const { return host == "0.0.0.0" || host == "::"; }

  // "10.0.0.1:7471" or "[fe80::1]:7471"; parseAddress(toString()) == *this.
  std::string toString() const;

  // Fills `out` (sockaddr_in or sockaddr_in6, port in network order) and returns its length;
  // returns 0 and leaves `out` zeroed when `host` is not a numeric IPv4/IPv6 literal (never
  // the case for a parsed Address).
  socklen_t toSockaddr(sockaddr_storage& out) const;

  // The inverse, e.g. for the remote address of a connection; nullopt for other families.
  static std::optional<Address> fromSockaddr(const sockaddr& addr);
  // fromSockaddr() as "host:port" for logs; "?" for nullptr or another family.
  static std::string textOf(const sockaddr* addr);

  bool operator==(const Address&) const = default;
};

// Parses "a.b.c.d:port" or "[v6]:port" with port 1..65535. The host is stored in canonical
// form, so two spellings of one address compare equal. IPv6 zone ids (%eth0) are not
// supported.
Parsed<Address> parseAddress(std::string_view text);

}  // namespace rdmamsg::config
