// Address parsing and sockaddr conversion, on top of inet_pton / inet_ntop.
#include "config/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>

namespace rdmamsg::config {
namespace {

Parsed<std::uint16_t> parsePort(std::string_view text) {
  if (text.empty()) return Parsed<std::uint16_t>::fail("missing port after ':'");
  unsigned long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (end != text.data() + text.size() ||
      (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return Parsed<std::uint16_t>::fail("port '" + std::string(text) + "' is not a number");
  }
  if (ec == std::errc::result_out_of_range || value < 1 || value > 65535) {
    return Parsed<std::uint16_t>::fail("port " + std::string(text) + " out of range 1..65535");
  }
  return Parsed<std::uint16_t>::ok(static_cast<std::uint16_t>(value));
}

// Canonical text of a numeric host of the given family, or nullopt if it is not one.
std::optional<std::string> canonicalHost(int family, const std::string& host) {
  unsigned char binary[sizeof(in6_addr)];
  if (inet_pton(family, host.c_str(), binary) != 1) return std::nullopt;
  char text[INET6_ADDRSTRLEN];
  if (inet_ntop(family, binary, text, sizeof text) == nullptr) return std::nullopt;
  return std::string(text);
}

Parsed<Address> fail(std::string_view text, const std::string& why) {
  return Parsed<Address>::fail("'" + std::string(text) + "': " + why);
}

}  // namespace

bool Address::isIpv6() const {
  return host.find(':') != std::string::npos;
}

std::string Address::toString() const {
  const std::string h = isIpv6() ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

socklen_t Address::toSockaddr(sockaddr_storage& out) const {
  std::memset(&out, 0, sizeof out);
  if (isIpv6()) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out);
    if (inet_pton(AF_INET6, host.c_str(), &sin6->sin6_addr) != 1) return 0;
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    return sizeof(sockaddr_in6);
  }
  auto* sin = reinterpret_cast<sockaddr_in*>(&out);
  if (inet_pton(AF_INET, host.c_str(), &sin->sin_addr) != 1) {
    std::memset(&out, 0, sizeof out);
    return 0;
  }
  sin->sin_family = AF_INET;
  sin->sin_port = htons(port);
  return sizeof(sockaddr_in);
}

std::string Address::textOf(const sockaddr* addr) {
  auto a = addr != nullptr ? fromSockaddr(*addr) : std::nullopt;
  return a ? a->toString() : "?";
}

std::optional<Address> Address::fromSockaddr(const sockaddr& addr) {
  char text[INET6_ADDRSTRLEN];
  if (addr.sa_family == AF_INET) {
    const auto& sin = reinterpret_cast<const sockaddr_in&>(addr);
    if (inet_ntop(AF_INET, &sin.sin_addr, text, sizeof text) == nullptr) return std::nullopt;
    return Address{text, ntohs(sin.sin_port)};
  }
  if (addr.sa_family == AF_INET6) {
    const auto& sin6 = reinterpret_cast<const sockaddr_in6&>(addr);
    if (inet_ntop(AF_INET6, &sin6.sin6_addr, text, sizeof text) == nullptr) return std::nullopt;
    return Address{text, ntohs(sin6.sin6_port)};
  }
  return std::nullopt;
}

Parsed<Address> parseAddress(std::string_view text) {
  if (text.empty())
    return Parsed<Address>::fail("empty address (expected IPv4:port or [IPv6]:port)");
  std::string_view host;
  std::string_view port;
  int family = AF_INET;
  if (text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return fail(text, "missing ']' after the IPv6 address");
    if (close + 1 >= text.size() || text[close + 1] != ':') {
      return fail(text, "missing ':port' after ']'");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    family = AF_INET6;
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail(text, "missing port (expected IPv4:port)");
    if (text.find(':') != colon) {
      return fail(text, "an IPv6 address must be written in brackets, e.g. [::1]:7471");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  auto canonical = canonicalHost(family, std::string(host));
  if (!canonical) {
    return fail(text, "'" + std::string(host) + "' is not a numeric " +
                          (family == AF_INET6 ? "IPv6" : "IPv4") +
                          " address (host names are not resolved)");
  }
  auto portNumber = parsePort(port);
  if (!portNumber) return Parsed<Address>::fail(portNumber.error);
  return Parsed<Address>::ok(Address{std::move(*canonical), *portNumber.value});
}

}  // namespace rdmamsg::config
