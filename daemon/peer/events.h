// What a peer tells the layer above it (the router). These calls are made
// from the peer's service step and its timers — never from inside a call
// the router made into the peer — so the router is never re-entered.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "common/status.h"
#include "daemon/delivery_room.h"
#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {

class Peer;

// One flow of one peer: Outbound's queue of messages for one destination
// service there. A client held because a flow is full waits on its key
// until queueDrained(key).
struct FlowKey {
  uint64_t peer = 0;  // Peer::id()
  uint64_t flow = 0;  // numbered by the peer's Outbound, never reused
  friend bool operator==(const FlowKey&, const FlowKey&) = default;
};
struct FlowKeyHash {
  size_t operator()(const FlowKey& k) const noexcept {
    return std::hash<uint64_t>()(k.peer * 0x9e3779b97f4a7c15ULL ^ k.flow);
  }
};

// What a peer did with a message it accepted: `holdOn` is set when the
// client should send no more to its destination until queueDrained(key).
struct Admitted {
  std::optional<FlowKey> holdOn;
};

enum class Delivery {
  kDelivered,       // the listener has it: confirm now
  kUnknownService,  // no listener: confirm with unknown_service now
  kAccepted,        // queued for the listener: the router confirms it (confirmLater)
                    // once the listener has taken it
  kBusy,            // no memory for it (its listener does not keep up): confirm busy now
};

class PeerEvents {
 public:
  virtual ~PeerEvents() = default;
  // A message for a local service, from connection `epoch` of `from`. For
  // kAccepted the router later calls from.confirmLater(epoch, seq, …).
  // `room`: the room reserveIncoming() gave, which `payload` fills (null
  // when it was put together in the peer's own buffer).
  virtual Delivery deliverIncoming(Peer& from, uint64_t epoch, uint64_t seq,
                                   std::string_view srcService, std::string_view dstService,
                                   std::span<const std::byte> payload, DeliveryRoom* room) = 0;
  // Room for a fragmented message of `total` payload bytes for
  // `dstService`, asked for at its first fragment; null: the peer puts it
  // together in its own buffer.
  virtual std::unique_ptr<DeliveryRoom> reserveIncoming(Peer& /*from*/,
                                                        std::string_view /*srcService*/,
                                                        std::string_view /*dstService*/,
                                                        uint64_t /*total*/) {
    return nullptr;
  }
  // The connection of `from` is gone (its senders were told).
  virtual void connectionLost(Peer& from) = 0;
  // The outcome of a message a local client sent.
  virtual void outcome(uint64_t session, uint64_t msgId, const Status& status) = 0;
  // Messages msgId .. msgId + count - 1 of one client were delivered.
  virtual void delivered(uint64_t session, uint64_t msgId, uint64_t count) = 0;
  // A flow that held its senders (the key send() gave) has drained.
  virtual void queueDrained(const FlowKey& flow) = 0;

  // Subjects, with a peer whose Hello carries kHelloSubjects:
  // a connection of `from` is established (connection from.epoch()); what
  // it announced on the last one is gone.
  virtual void connectionUp(Peer& /*from*/) {}
  // `from` announced that its clients' interest changed. An error closes
  // the connection with it as the reason (too much interest).
  virtual Status interest(Peer& /*from*/, InterestOp /*op*/, std::string_view /*group*/,
                          std::string_view /*pattern*/) {
    return Status();
  }
  // What came of a publish of this node's on `from`'s host (token: the
  // one its envelope carried).
  virtual void pubResult(Peer& /*from*/, uint64_t /*token*/, const PubResultBody& /*result*/) {}
};

}  // namespace rdmamsg::peer
