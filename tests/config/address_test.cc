// Tests of address parsing and conversion to and from sockaddr.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "config/address.h"

namespace rdmamsg::config {
namespace {

Address parse(std::string_view text) {
  auto parsed = parseAddress(text);
  EXPECT_TRUE(parsed) << text << ": " << parsed.error;
  return parsed.value.value_or(Address{});
}

std::string error(std::string_view text) {
  auto parsed = parseAddress(text);
  EXPECT_FALSE(parsed) << text;
  return parsed.error;
}

TEST(AddressTest, ParsesIpv4AndPort) {
  const Address a = parse("127.0.0.2:7471");
  EXPECT_EQ(a.host, "127.0.0.2");
  EXPECT_EQ(a.port, 7471);
  EXPECT_FALSE(a.isIpv6());
  EXPECT_EQ(a.toString(), "127.0.0.2:7471");
}

TEST(AddressTest, ParsesBracketedIpv6InCanonicalForm) {
  const Address a = parse("[fd00:0:0::0001]:1");
  EXPECT_EQ(a.host, "fd00::1");
  EXPECT_EQ(a.port, 1);
  EXPECT_TRUE(a.isIpv6());
  EXPECT_EQ(a.toString(), "[fd00::1]:1");
  EXPECT_EQ(parse("[FD00::1]:1"), a);
  EXPECT_EQ(parse("[::]:65535").toString(), "[::]:65535");
}

TEST(AddressTest, PortMustBe1To65535) {
  EXPECT_EQ(error("127.0.0.1:0"), "port 0 out of range 1..65535");
  EXPECT_EQ(error("127.0.0.1:65536"), "port 65536 out of range 1..65535");
  EXPECT_EQ(error("127.0.0.1:99999"), "port 99999 out of range 1..65535");
  EXPECT_EQ(error("127.0.0.1:99999999999999999999"),
            "port 99999999999999999999 out of range 1..65535");
  EXPECT_EQ(error("127.0.0.1:http"), "port 'http' is not a number");
  EXPECT_EQ(error("127.0.0.1:-1"), "port '-1' is not a number");
  EXPECT_EQ(error("127.0.0.1:"), "missing port after ':'");
  EXPECT_EQ(parse("127.0.0.1:65535").port, 65535);
}

TEST(AddressTest, RejectsMalformedAddresses) {
  EXPECT_NE(error("").find("empty address"), std::string::npos);
  EXPECT_NE(error("127.0.0.1").find("missing port"), std::string::npos);
  EXPECT_NE(error("::1:7471").find("must be written in brackets"), std::string::npos);
  EXPECT_NE(error("[::1]").find("missing ':port'"), std::string::npos);
  EXPECT_NE(error("[::1:7471").find("missing ']'"), std::string::npos);
  EXPECT_NE(error("[127.0.0.1]:7471").find("not a numeric IPv6"), std::string::npos);
  EXPECT_NE(error("localhost:7471").find("host names are not resolved"), std::string::npos);
  EXPECT_NE(error("256.0.0.1:7471").find("not a numeric IPv4"), std::string::npos);
  EXPECT_NE(error("10.1:7471").find("not a numeric IPv4"), std::string::npos);
  EXPECT_NE(error("[fe80::1%eth0]:7471").find("not a numeric IPv6"), std::string::npos);
}

TEST(AddressTest, ToSockaddrIpv4) {
  sockaddr_storage storage;
  ASSERT_EQ(parse("10.1.2.3:7471").toSockaddr(storage), sizeof(sockaddr_in));
  const auto& sin = reinterpret_cast<const sockaddr_in&>(storage);
  EXPECT_EQ(sin.sin_family, AF_INET);
  EXPECT_EQ(ntohs(sin.sin_port), 7471);
  EXPECT_EQ(ntohl(sin.sin_addr.s_addr), 0x0a010203u);
}

TEST(AddressTest, ToSockaddrIpv6) {
  sockaddr_storage storage;
  ASSERT_EQ(parse("[::1]:9").toSockaddr(storage), sizeof(sockaddr_in6));
  const auto& sin6 = reinterpret_cast<const sockaddr_in6&>(storage);
  EXPECT_EQ(sin6.sin6_family, AF_INET6);
  EXPECT_EQ(ntohs(sin6.sin6_port), 9);
  EXPECT_TRUE(IN6_IS_ADDR_LOOPBACK(&sin6.sin6_addr));
}

TEST(AddressTest, ToSockaddrFailsForNonNumericHost) {
  sockaddr_storage storage;
  EXPECT_EQ((Address{"example.org", 1}.toSockaddr(storage)), 0u);
  EXPECT_EQ((Address{"", 1}.toSockaddr(storage)), 0u);
}

TEST(AddressTest, FromSockaddrRoundTrips) {
  for (const char* text : {"192.168.1.9:4791", "[fd00::17]:7471"}) {
    const Address a = parse(text);
    sockaddr_storage storage;
    ASSERT_GT(a.toSockaddr(storage), 0u);
    EXPECT_EQ(Address::fromSockaddr(reinterpret_cast<const sockaddr&>(storage)), a) << text;
  }
  sockaddr other{};
  other.sa_family = AF_UNIX;
  EXPECT_FALSE(Address::fromSockaddr(other));
}

}  // namespace
}  // namespace rdmamsg::config
