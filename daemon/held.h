// The receiving side of flows: messages from peers held for local listeners
// that do not keep up.
//
// A flow here is (source peer, local service). When a listener's output is
// congested, the router holds its messages here instead of leaving them on
// the link, so the link's credits keep flowing and other services are not
// held up. A held message is confirmed to its peer (Peer::confirmLater) when
// the listener takes it — that returns its bytes to the flow's window — or
// fails: unknown_service when the listener goes away, timeout after
// message_timeout. Messages of one flow stay in order: once one is held,
// the flow's next ones wait behind it.
//
// Memory: each flow holds at most its window (flow_window, the peer cannot
// send more unconfirmed; a peer that does is told so by hold()) plus one
// message; over all flows, the router stops taking batches off the links
// at receive_memory_limit (Peer, PeerEvents::canHold).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/byte_buffer.h"
#include "common/status.h"

namespace rdmamsg::peer {
class Peer;
}

namespace rdmamsg {

class HeldMessages {
 public:
  using Clock = std::chrono::steady_clock;
  // Hands one message to its listener; false when the listener is congested.
  using Deliver = std::function<bool(peer::Peer& from, std::string_view srcService,
                                     std::span<const std::byte> payload)>;
  // Tells the peer the outcome of a held message (Peer::confirmLater).
  using Confirm = std::function<void(peer::Peer& from, uint64_t epoch, uint64_t seq, Errc errc)>;

  HeldMessages(uint64_t flowWindow, Confirm confirm)
      : flowWindow_(flowWindow), confirm_(std::move(confirm)) {}

  bool empty() const { return flows_.empty(); }
  // Whether messages of the flow (from, service) wait already.
  bool waiting(const peer::Peer& from, std::string_view service) const;
  // Holds a message at the back of its flow. False: the peer sent more than
  // the flow's window allows (nothing is held).
  bool hold(peer::Peer& from, uint64_t epoch, uint64_t seq, std::string_view srcService,
            std::string_view service, std::span<const std::byte> payload, uint64_t cost);
  // Delivers what the listener of `service` takes, one message from each of
  // its flows in turn, and confirms each (ok) to its peer.
  void drain(std::string_view service, const Deliver& deliver);
  // Fails every message held for `service` with `errc` (its listener is gone).
  void fail(std::string_view service, Errc errc);
  // Forgets what `from` sent (its connection is gone: its senders were told).
  void drop(const peer::Peer& from);
  // Fails (timeout) what has been held longer than `timeout`.
  void expire(Clock::time_point now, std::chrono::milliseconds timeout);

  uint64_t bytes() const { return bytes_; }
  uint64_t messages() const { return messages_; }
  size_t flows() const;

 private:
  struct Header {
    uint64_t seq;
    Clock::time_point since;
    uint64_t cost;
    uint32_t length;
    uint8_t srcLen;
  };
  struct Flow {
    peer::Peer* from;
    uint64_t epoch;
    ByteBuffer data;  // Header, source service, payload; in order
    uint64_t bytes = 0;
    uint64_t count = 0;
    Header front() const;
    void pop(uint64_t& totalBytes, uint64_t& totalMessages);
  };
  Flow* find(const peer::Peer& from, std::string_view service);
  void confirmFront(Flow& f, Errc errc);
  void prune(std::string_view service);
  void compact();  // removes empty flows

  uint64_t flowWindow_;
  Confirm confirm_;
  std::unordered_map<std::string, std::vector<std::unique_ptr<Flow>>> flows_;  // by service
  uint64_t bytes_ = 0, messages_ = 0;
};

}  // namespace rdmamsg
