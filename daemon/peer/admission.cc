// The checks of an incoming connect request (admission.h).
#include "daemon/peer/admission.h"

#include <algorithm>
#include <string_view>

#include "config/address.h"

namespace rdmamsg::peer {

namespace {

// The same host: equal addresses, an IPv4-mapped IPv6 address equal to its IPv4 form.
bool sameHost(const config::Address& a, const config::Address& b) {
  auto plain = [](const std::string& host) {
    constexpr std::string_view kMapped = "::ffff:";
    if (host.size() > kMapped.size() && host.compare(0, kMapped.size(), kMapped) == 0 &&
        host.find('.') != std::string::npos)
      return host.substr(kMapped.size());
    return host;
  };
  return plain(a.host) == plain(b.host);
}

Admission refuse(RejectReason reason, std::string who) {
  Admission a;
  a.reason = reason;
  a.who = std::move(who);
  return a;
}

}  // namespace

Admission admitRequest(const config::Config& cfg, std::span<const uint8_t> privateData,
                       const sockaddr* source) {
  std::string from = config::Address::textOf(source);
  const Result<Hello> hello = decodeHello(privateData.data(), privateData.size());
  if (!hello) return refuse(RejectReason::kBadHandshake, from);
  if (hello->version != kProtocolVersion)
    return refuse(RejectReason::kVersion, from + " (it speaks protocol version " +
                                              std::to_string(hello->version) + ", this daemon " +
                                              std::to_string(kProtocolVersion) + ")");
  if (hello->targetId != nodeId(cfg.node)) return refuse(RejectReason::kWrongTarget, from);
  const config::Peer* peer = nullptr;
  for (const auto& p : cfg.peers)
    if (nodeId(p.name) == hello->nodeId) peer = &p;
  if (peer == nullptr) return refuse(RejectReason::kUnknownPeer, from);
  // A name is only a claim: it must come from that node's address.
  if (peer->verifyAddress) {
    auto src = source != nullptr ? config::Address::fromSockaddr(*source) : std::nullopt;
    const auto rails = peer->rails();
    if (!src || std::none_of(rails.begin(), rails.end(),
                             [&](const config::Address& a) { return sameHost(*src, a); }))
      return refuse(RejectReason::kWrongAddress, from + " (it claims to be node " + peer->name +
                                                     ", whose address is " +
                                                     config::toString(rails) + ")");
  }
  const bool theirs = (hello->flags & kHelloAuthenticates) != 0;
  if (theirs != cfg.auth.secret.has_value())
    return refuse(RejectReason::kAuthentication,
                  from + " (node " + peer->name +
                      (theirs ? " authenticates with a mesh secret, and this node has none)"
                              : " does not authenticate, and this node requires the mesh secret)"));
  if (theirs && (hello->flags & kHelloBatchMac) == 0)
    return refuse(RejectReason::kAuthentication,
                  from + " (node " + peer->name +
                      " authenticates without per-batch MACs, an older rdmamsgd: this node "
                      "takes no batch unauthenticated)");
  if (theirs && ((hello->flags & kHelloEncrypts) != 0) != cfg.auth.encryption)
    return refuse(
        RejectReason::kAuthentication,
        from + " (node " + peer->name +
            (cfg.auth.encryption ? " does not encrypt, and this node has encryption: on)"
                                 : " encrypts (encryption: on), and this node does not)"));
  if (const std::size_t lane = helloLane(hello->flags); lane >= cfg.lanesWith(*peer))
    return refuse(RejectReason::kNoLane,
                  from + " (node " + peer->name + " dials lane " + std::to_string(lane) +
                      "; this node keeps " + std::to_string(cfg.lanesWith(*peer)) +
                      " with it, rail_policy " + toString(cfg.railPolicy) +
                      ": do the two nodes have the same rail_policy and rails?)");
  Admission a;
  a.who = peer->name;
  a.peer = peer;
  a.hello = *hello;
  return a;
}

}  // namespace rdmamsg::peer
