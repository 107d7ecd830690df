// The contract between the local client server and the daemon's router.
//
// LocalServer decodes and validates client frames and calls a LocalHandler
// for every request; the router implements it and answers asynchronously
// through LocalServer (deliver / ack / fail, see local_server.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/local_protocol.h"
#include "common/status.h"
#include "daemon/external_payload.h"

namespace rdmamsg::local {

// Identifies one client connection for the daemon's lifetime (never reused).
using SessionId = uint64_t;

// Who is told when the application has taken a delivered message (or
// never will: its session closed first). Typed, so the local layer never
// holds a pointer into the layers that use it:
//  - peer: a message from peer daemon `owner` (Mesh's handle of the peer),
//    connection `epoch`, sequence numbers seq .. seq + count - 1;
//  - local: a message from local session `owner`, its message ids
//    seq .. seq + count - 1.
//  - pub: a publish delivered to subscription `owner` (the router's id of
//    it), the router's fan-out slots seq .. seq + count - 1.
// The session extends the last receipt when the next message continues it.
struct Receipt {
  enum class Kind : uint8_t { peer, local, pub };
  Kind kind = Kind::peer;
  uint64_t owner = 0;
  uint64_t epoch = 0;
  uint64_t seq = 0;
  uint64_t count = 1;

  bool continuedBy(const Receipt& next) const {
    return kind == next.kind && owner == next.owner && epoch == next.epoch &&
           seq + count == next.seq;
  }
};

// The connecting process, read with SO_PEERCRED (and its supplementary
// groups with SO_PEERGROUPS) at accept time: what it was when it connected.
struct PeerCred {
  pid_t pid = 0;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::vector<gid_t> groups;  // supplementary groups
  bool known = false;         // false: SO_PEERCRED failed (refused by any local_policy)
};

// One SEND from a client. Views are valid only during the onSend call: copy
// what must outlive it (the payload belongs to the session's input buffer
// or the client's shared memory), or share `inPlace`.
struct SendRequest {
  uint64_t msgId = 0;                  // client-chosen, non-zero; echoed by ack/fail
  std::string_view node;               // destination node (valid name)
  std::string_view service;            // destination service (valid name)
  std::string_view fromService;        // sender's service: a service this session
                                       // registered, or "" when it registered none
  std::span<const std::byte> payload;  // size <= the configured maximum
  // Set when the payload lies in the client's shared memory and may be
  // posted from there (external_payload.h): a handler that keeps the
  // payload past onSend() keeps a share() of the handle (the payload stays
  // valid as long as a handle does).
  const PayloadHandle* inPlace = nullptr;
};

// One SUB from a client: a subscription to the subjects `pattern` matches.
struct SubscribeRequest {
  uint64_t subId = 0;        // client-chosen, non-zero: names it in UNSUB and MSG
  std::string_view pattern;  // valid (subject::checkPattern)
  std::string_view group;    // the queue group, "" for none (a valid name)
  proto::SlowConsumer policy = proto::SlowConsumer::drop;
  uint32_t pendingLimit = 0;  // messages not taken before the policy acts (0: the daemon's)
};

// One PUB from a client: a publish, or a request (timeout > 0).
struct PublishRequest {
  uint64_t msgId = 0;                  // client-chosen, non-zero; PUB_ACK or REPLY echoes it
  std::string_view subject;            // valid (subject::checkSubject)
  std::span<const std::byte> payload;  // size <= the configured maximum
  std::chrono::milliseconds timeout{0};
};

// One RESPOND from a client: the reply to a request it received.
struct RespondRequest {
  uint64_t msgId = 0;  // client-chosen, non-zero; ACK or ERROR echoes it
  std::string_view replyTo;
  std::span<const std::byte> payload;
};

class LocalHandler {
 public:
  virtual ~LocalHandler() = default;

  // A client asks to receive messages for `service` (a valid name). Return ok
  // to accept; any other Status (duplicate_service, busy…) is sent back to
  // the client as the reason.
  virtual Status onRegister(SessionId session, std::string_view service) = 0;

  // The client gave up `service` (one it had registered).
  virtual void onUnregister(SessionId session, std::string_view service) = 0;

  // A message to route. The handler must eventually call exactly one of
  // LocalServer::ack(session, msgId) or LocalServer::fail(session, msgId, …),
  // unless the session closes first (onSessionClosed). Calls may be made from
  // inside onSend. To apply backpressure, call LocalServer::hold (the
  // destination) or, for a client that ignores it, LocalServer::pauseReading.
  virtual void onSend(SessionId session, const SendRequest& request) = 0;

  // Subjects. A handler that routes none refuses them (the defaults).
  // A subscription: ok to accept (SUBSCRIBED), else the reason (ERROR).
  virtual Status onSubscribe(SessionId /*session*/, const SubscribeRequest& /*request*/) {
    return Status(Errc::bad_request, "subjects are not routed here");
  }
  virtual void onUnsubscribe(SessionId /*session*/, uint64_t /*subId*/) {}
  // A publish or request: ok when the handler answers it later
  // (LocalServer::pubAck, or deliverReply for a request), else the outcome
  // to answer now.
  virtual Status onPublish(SessionId /*session*/, const PublishRequest& /*request*/) {
    return Status(Errc::bad_request, "subjects are not routed here");
  }
  // A reply: ok when the handler answers it later (ack or fail), else the
  // outcome to answer now.
  virtual Status onRespond(SessionId /*session*/, const RespondRequest& /*request*/) {
    return Status(Errc::bad_request, "subjects are not routed here");
  }

  // The JSON text of STATUS_REPLY (see docs/protocol.md for the expected keys).
  virtual std::string onStatus(SessionId session) = 0;

  // The session is gone (client closed, protocol error, closeSession). Called
  // once, from a deferred callback, for every session the handler has seen;
  // drop its services and forget its in-flight message ids. LocalServer calls
  // for this session are ignored from the moment it starts closing.
  virtual void onSessionClosed(SessionId session) = 0;
};

}  // namespace rdmamsg::local
