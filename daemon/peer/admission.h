// Whether an incoming CONNECT_REQUEST may become a connection of a
// configured peer, before that peer's tie-break (Peer::admit): its
// handshake is valid and of this protocol version, it is meant for this
// node, it names a configured peer, it comes from that peer's address
// (unless verify_address is false), and both ends agree on whether the
// mesh secret is used. Verbs-free: the mesh gives it the request's private
// data and source address, and rejects with the reason it returns.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "config/config.h"
#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {

struct Admission {
  RejectReason reason = RejectReason::kNone;  // kNone: admitted
  std::string who;                            // for the log: the source, what it claims
  const config::Peer* peer = nullptr;         // admitted: the peer it is
  Hello hello{};                              // admitted: its handshake
};

Admission admitRequest(const config::Config& cfg, std::span<const uint8_t> privateData,
                       const sockaddr* source);

}  // namespace rdmamsg::peer
