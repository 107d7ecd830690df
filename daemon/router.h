// The router: where local clients and peer daemons meet.
//
// It keeps the registry of local services (one session per service name),
// sends each client message to its destination — a local service, or a peer
// daemon — and reports every outcome back to the sending client: an ack once
// the listening application has taken the message, or an error naming the
// node or service at fault. Nothing is dropped silently.
//
// Confirmation on consumption: every message handed to a listener — from a
// peer or from a local client — is delivered with a receipt, and its sender
// is confirmed (a CONFIRM to the peer, an ACK to the local client) only when
// the listener's client library says its application has taken it
// (CONSUMED). A listener that goes away first fails what it did not take.
//
// Backpressure, per destination: a client whose flow to a peer has a full
// queue (its window is used up: the listener over there does not keep up),
// or whose local listener is congested, is told to HOLD that destination
// until RESUME; it keeps sending everywhere else. Only a client that ignores
// the HOLD (send_queue_limit plus two maximum-size messages past it) is no
// longer read. The link from a peer is always drained: a message is queued
// for its listener at once; what a flow has waiting is bounded by its
// window. Past receive_memory_limit, a message for a listener that is
// itself congested is answered busy — the stuck flow fails its own
// messages; listeners that keep up, and the link, go on.
//
// Calls go one way: peers call the router from their service step; the
// router calls peers only to queue work (send, confirmLater), so it is never
// re-entered from its own calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/log_limit.h"
#include "config/config.h"
#include "daemon/local/local_handler.h"
#include "daemon/local/local_server.h"
#include "daemon/peer/mesh.h"
#include "daemon/peer/peer.h"
#include "daemon/pubsub/pubsub.h"
#include "daemon/status.h"

namespace rdmamsg {

using RouterCounters = status::RouterCounters;

class Router : public local::LocalHandler, public peer::PeerEvents {
 public:
  Router(const config::Config& cfg, loop::EventLoop& loop);
  void attach(local::LocalServer* server, peer::Mesh* mesh);

  // LocalHandler
  Status onRegister(local::SessionId session, std::string_view service) override;
  void onUnregister(local::SessionId session, std::string_view service) override;
  void onSend(local::SessionId session, const local::SendRequest& request) override;
  std::string onStatus(local::SessionId session) override;
  void onSessionClosed(local::SessionId session) override;
  Status onSubscribe(local::SessionId session, const local::SubscribeRequest& request) override;
  void onUnsubscribe(local::SessionId session, uint64_t subId) override;
  Status onPublish(local::SessionId session, const local::PublishRequest& request) override;
  Status onRespond(local::SessionId session, const local::RespondRequest& request) override;

  // PeerEvents
  peer::Delivery deliverIncoming(peer::Peer& from, uint64_t epoch, uint64_t seq,
                                 std::string_view srcService, std::string_view dstService,
                                 std::span<const std::byte> payload, DeliveryRoom* room) override;
  std::unique_ptr<DeliveryRoom> reserveIncoming(peer::Peer& from, std::string_view srcService,
                                                std::string_view dstService,
                                                uint64_t total) override;
  void connectionLost(peer::Peer& from) override;
  void outcome(uint64_t session, uint64_t msgId, const Status& status) override;
  void delivered(uint64_t session, uint64_t msgId, uint64_t count) override;
  void queueDrained(const peer::FlowKey& flow) override;
  void connectionUp(peer::Peer& from) override;
  Status interest(peer::Peer& from, peer::InterestOp op, std::string_view group,
                  std::string_view pattern) override;
  void pubResult(peer::Peer& from, uint64_t token, const peer::PubResultBody& result) override;

  // The local server's drained callback.
  void onSessionDrained(local::SessionId session);

  // The status: each layer fills its part of the snapshot (status.h).
  status::Snapshot snapshot() const;
  std::string statusJson() const;
  // The configuration's provenance, shown in status under "config".
  using ConfigState = status::ConfigState;
  void setConfigState(ConfigState s) { configState_ = std::move(s); }
  const RouterCounters& counters() const { return counters_; }
  const pubsub::PubSub& pubsub() const { return pubsub_; }
  size_t serviceCount() const { return services_.size(); }

 private:
  void fail(local::SessionId session, uint64_t msgId, Status why);
  // The session holding `service`, or nullptr. Remembers the last answer:
  // a stream names the same service message after message.
  const local::SessionId* findService(std::string_view service);
  // A delivery was taken by the application of `listener` (or lost with it).
  void onConsumed(local::SessionId listener, const local::Receipt& r, size_t bytes, Errc errc);
  // Clients told to HOLD a destination until what they wait for drains.
  struct Holder {
    local::SessionId session;
    std::string node, service;
    size_t overshoot = 0;  // bytes sent to it since the HOLD
    bool paused = false;   // no longer read: it ignored the HOLD
  };
  void hold(std::vector<Holder>& holders, local::SessionId session, std::string_view node,
            std::string_view service, size_t bytes);
  void release(std::vector<Holder>& holders);
  std::string servicesOf(local::SessionId session) const;

  const config::Config& config_;
  local::LocalServer* server_ = nullptr;
  peer::Mesh* mesh_ = nullptr;
  std::chrono::steady_clock::time_point started_;
  std::unordered_map<std::string, local::SessionId> services_;
  std::string lastService_;  // findService's memory; cleared when services_ changes
  local::SessionId lastServiceSession_ = 0;
  std::unordered_map<local::SessionId, std::vector<std::string>> sessionServices_;
  // Holders by what they wait for: a peer's flow, or a congested local listener.
  std::unordered_map<peer::FlowKey, std::vector<Holder>, peer::FlowKeyHash> heldOnPeer_;
  std::unordered_map<local::SessionId, std::vector<Holder>> heldOnSession_;
  LogLimit busyLog_;
  RouterCounters counters_;
  pubsub::PubSub pubsub_;
  ConfigState configState_;
};

}  // namespace rdmamsg
