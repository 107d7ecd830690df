// Unit tests of the checks of an incoming connect request
// (daemon/peer/admission.h): every refusal names its reason, and only a
// configured peer, from its address, agreeing on the mesh secret, is
// admitted.
#include "daemon/peer/admission.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace rdmamsg::peer {
namespace {

config::Config mesh(bool secret = false) {
  config::Config cfg;
  cfg.node = "alpha";
  cfg.peers.push_back({"beta", {"127.0.0.2", 7471}, true});
  cfg.peers.push_back({"gamma", {"127.0.0.3", 7471}, false});  // behind address translation
  if (secret) {
    config::Secret s;
    s.bytes = std::string(32, 's');
    cfg.auth.secret = s;
  }
  return cfg;
}

Hello helloFrom(const std::string& name, const std::string& target = "alpha") {
  Hello h;
  h.nodeId = nodeId(name);
  h.targetId = nodeId(target);
  return h;
}

std::vector<uint8_t> bytesOf(const Hello& h) {
  std::vector<uint8_t> v(sizeof h);
  std::memcpy(v.data(), &h, sizeof h);
  return v;
}

sockaddr_in from(const char* ip) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(40000);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

Admission admit(const config::Config& cfg, const Hello& h, const char* ip) {
  sockaddr_in src = from(ip);
  return admitRequest(cfg, bytesOf(h), reinterpret_cast<const sockaddr*>(&src));
}

TEST(Admission, AConfiguredPeerFromItsAddressIsAdmitted) {
  const config::Config cfg = mesh();
  const Admission a = admit(cfg, helloFrom("beta"), "127.0.0.2");
  EXPECT_EQ(a.reason, RejectReason::kNone);
  ASSERT_NE(a.peer, nullptr);
  EXPECT_EQ(a.peer->name, "beta");
  EXPECT_EQ(a.hello.nodeId, nodeId("beta"));
}

TEST(Admission, ARequestWithoutAValidHandshakeIsRefused) {
  const config::Config cfg = mesh();
  sockaddr_in src = from("127.0.0.2");
  const std::vector<uint8_t> garbage(10, 0xab);
  EXPECT_EQ(admitRequest(cfg, garbage, reinterpret_cast<const sockaddr*>(&src)).reason,
            RejectReason::kBadHandshake);
  Hello old = helloFrom("beta");
  old.version = kProtocolVersion + 1;
  const Admission a = admit(cfg, old, "127.0.0.2");
  EXPECT_EQ(a.reason, RejectReason::kVersion);
  EXPECT_NE(a.who.find("protocol version"), std::string::npos) << a.who;
}

TEST(Admission, ARequestMeantForAnotherNodeOrFromAStrangerIsRefused) {
  const config::Config cfg = mesh();
  EXPECT_EQ(admit(cfg, helloFrom("beta", "delta"), "127.0.0.2").reason, RejectReason::kWrongTarget);
  EXPECT_EQ(admit(cfg, helloFrom("mallory"), "127.0.0.9").reason, RejectReason::kUnknownPeer);
}

TEST(Admission, APeerMustComeFromItsAddressUnlessItsAddressIsNotVerified) {
  const config::Config cfg = mesh();
  const Admission a = admit(cfg, helloFrom("beta"), "127.0.0.9");
  EXPECT_EQ(a.reason, RejectReason::kWrongAddress);
  EXPECT_NE(a.who.find("claims to be node beta"), std::string::npos) << a.who;
  EXPECT_EQ(admit(cfg, helloFrom("gamma"), "127.0.0.9").reason, RejectReason::kNone)
      << "verify_address: false";
}

TEST(Admission, BothEndsMustAgreeOnTheMeshSecret) {
  Hello authenticating = helloFrom("beta");
  authenticating.flags |= kHelloAuthenticates | kHelloBatchMac;
  EXPECT_EQ(admit(mesh(false), authenticating, "127.0.0.2").reason, RejectReason::kAuthentication);
  EXPECT_EQ(admit(mesh(true), helloFrom("beta"), "127.0.0.2").reason,
            RejectReason::kAuthentication);
  EXPECT_EQ(admit(mesh(true), authenticating, "127.0.0.2").reason, RejectReason::kNone);
}

// An older rdmamsgd proves the secret but MACs no batch: refused, never
// taken without batch authentication.
TEST(Admission, AnAuthenticatingPeerWithoutBatchMacsIsRefused) {
  Hello older = helloFrom("beta");
  older.flags |= kHelloAuthenticates;
  const Admission a = admit(mesh(true), older, "127.0.0.2");
  EXPECT_EQ(a.reason, RejectReason::kAuthentication);
  EXPECT_NE(a.who.find("without per-batch MACs"), std::string::npos) << a.who;
}

// rail_policy spread: a request names its lane; one this node does not
// keep with the dialer (its rail_policy or rails differ) is refused, saying so.
TEST(Admission, ALaneIsAdmittedOnlyWhereThisNodeKeepsIt) {
  config::Config cfg = mesh();
  cfg.extraListen = {config::Address{"127.0.1.1", 7471}};
  cfg.peers[0].extraRails = {config::Address{"127.0.1.2", 7471}};
  Hello lane1 = helloFrom("beta");
  lane1.flags |= laneFlags(1);
  EXPECT_EQ(helloLane(lane1.flags), 1u);
  const Admission refused = admit(cfg, lane1, "127.0.0.2");
  EXPECT_EQ(refused.reason, RejectReason::kNoLane);
  EXPECT_NE(refused.who.find("rail_policy active-standby"), std::string::npos) << refused.who;
  cfg.railPolicy = config::RailPolicy::kSpread;
  EXPECT_EQ(admit(cfg, lane1, "127.0.1.2").reason, RejectReason::kNone);
  Hello lane2 = helloFrom("beta");
  lane2.flags |= laneFlags(2);
  EXPECT_EQ(admit(cfg, lane2, "127.0.0.2").reason, RejectReason::kNoLane)
      << "two rails: lanes 0, 1";
  EXPECT_EQ(admit(cfg, helloFrom("beta"), "127.0.0.2").reason, RejectReason::kNone);
}

}  // namespace
}  // namespace rdmamsg::peer
