// What a peer tells the layer above it (the router). These calls are made
// from the peer's service step and its timers — never from inside a call
// the router made into the peer — so the router is never re-entered.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "common/status.h"

namespace rdmamsg::peer {

class Peer;

enum class Delivery {
  kDelivered,       // handed to the listener: confirm now
  kUnknownService,  // no listener: confirm with unknown_service now
  kHeld,            // the listener is congested: the router holds it and confirms later
  kWindowExceeded,  // the peer sent more than the flow's window: a protocol error
};

class PeerEvents {
 public:
  virtual ~PeerEvents() = default;
  // A message for a local service, from connection `epoch` of `from`. For
  // kHeld the router copies it and later calls from.confirmLater(epoch, seq, …).
  virtual Delivery deliverIncoming(Peer& from, uint64_t epoch, uint64_t seq,
                                   std::string_view srcService, std::string_view dstService,
                                   std::span<const std::byte> payload) = 0;
  // Whether the router can hold more messages (receive_memory_limit). When
  // it cannot, the peer stops taking batches off the link until it is woken.
  virtual bool canHold() const = 0;
  // The connection of `from` is gone: what the router holds from it is dropped
  // (its senders were told the connection was lost).
  virtual void connectionLost(Peer& from) = 0;
  // The outcome of a message a local client sent.
  virtual void outcome(uint64_t session, uint64_t msgId, const Status& status) = 0;
  // Messages msgId .. msgId + count - 1 of one client were delivered.
  virtual void delivered(uint64_t session, uint64_t msgId, uint64_t count) = 0;
  // A queue that paused its senders (the wait key send() gave) has drained.
  virtual void queueDrained(const void* waitKey) = 0;
};

}  // namespace rdmamsg::peer
