// The router: where local clients and peer daemons meet.
//
// It keeps the registry of local services (one session per service name),
// sends each client message to its destination — a local service, or a peer
// daemon — and reports every outcome back to the sending client: an ack once
// the destination daemon has handed the message to a listener, or an error
// naming the node or service at fault. Nothing is dropped silently.
//
// Backpressure, per flow: a client whose flow to a peer has a full queue
// (its window is used up: the listener over there does not keep up), or
// whose local destination cannot keep up, is no longer read until that
// drains. A message from a peer goes to its listener's queue at once; while
// the listener keeps up it is confirmed at once, and once the listener is
// over its high-water mark it is confirmed when the listener has taken it
// (a receipt), which returns its bytes to the flow's window. So a listener
// that does not read holds at most its flows' windows (and its high-water
// mark), and other services and the link are not held up.
//
// Calls go one way: peers call the router from their service step; the
// router calls peers only to queue work (send, confirmLater, wakeAll), so
// it is never re-entered from its own calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "daemon/local/local_handler.h"
#include "daemon/local/local_server.h"
#include "daemon/peer/mesh.h"
#include "daemon/peer/peer.h"

namespace rdmamsg {

struct RouterCounters {
  uint64_t messagesRouted = 0;    // accepted from local clients
  uint64_t localDeliveries = 0;   // handed to a listener on this node
  uint64_t remoteDeliveries = 0;  // from peers, handed to a listener here
  uint64_t failures = 0;          // reported to senders as failed
  uint64_t unknownNode = 0;
  uint64_t unknownService = 0;
  uint64_t backpressurePauses = 0;
  uint64_t receiveMemoryFull = 0;  // times receive_memory_limit stopped the links
};

class Router : public local::LocalHandler, public peer::PeerEvents {
 public:
  explicit Router(const config::Config& cfg);
  void attach(local::LocalServer* server, peer::Mesh* mesh);

  // LocalHandler
  Status onRegister(local::SessionId session, std::string_view service) override;
  void onUnregister(local::SessionId session, std::string_view service) override;
  void onSend(local::SessionId session, const local::SendRequest& request) override;
  std::string onStatus(local::SessionId session) override;
  void onSessionClosed(local::SessionId session) override;

  // PeerEvents
  peer::Delivery deliverIncoming(peer::Peer& from, uint64_t epoch, uint64_t seq,
                                 std::string_view srcService, std::string_view dstService,
                                 std::span<const std::byte> payload) override;
  bool canHold() override;
  void connectionLost(peer::Peer& from) override;
  void outcome(uint64_t session, uint64_t msgId, const Status& status) override;
  void delivered(uint64_t session, uint64_t msgId, uint64_t count) override;
  void queueDrained(const void* waitKey) override;

  // The local server's drained callback.
  void onSessionDrained(local::SessionId session);

  std::string statusJson() const;
  // The configuration's provenance, shown in status under "config".
  struct ConfigState {
    uint64_t generation = 1;  // 1 at start, +1 for every reload applied
    std::string lastReload;   // "" (none yet), "applied", or why it was refused
    uint64_t reloadsFailed = 0;
    std::vector<std::string> restartPending;  // changes that wait for a restart
  };
  void setConfigState(ConfigState s) { configState_ = std::move(s); }
  const RouterCounters& counters() const { return counters_; }
  size_t serviceCount() const { return services_.size(); }

 private:
  void fail(local::SessionId session, uint64_t msgId, Status why);
  // The session holding `service`, or nullptr. Remembers the last answer:
  // a stream names the same service message after message.
  const local::SessionId* findService(std::string_view service);
  // A delivery from a peer was taken by its listener (or lost with it).
  void onConsumed(const local::Receipt& r, size_t bytes, Errc errc);

  const config::Config& config_;
  local::LocalServer* server_ = nullptr;
  peer::Mesh* mesh_ = nullptr;
  std::chrono::steady_clock::time_point started_;
  std::unordered_map<std::string, local::SessionId> services_;
  std::string lastService_;  // findService's memory; cleared when services_ changes
  local::SessionId lastServiceSession_ = 0;
  std::unordered_map<local::SessionId, std::vector<std::string>> sessionServices_;
  // Sessions not read until a peer's flow queue drains (by wait key), or a
  // local listener's output.
  std::unordered_map<const void*, std::vector<local::SessionId>> pausedOnPeer_;
  std::unordered_map<local::SessionId, std::vector<local::SessionId>> pausedOnSession_;
  bool linksHeldBack_ = false;  // canHold() said no: wake the peers when it says yes
  RouterCounters counters_;
  ConfigState configState_;
};

}  // namespace rdmamsg
