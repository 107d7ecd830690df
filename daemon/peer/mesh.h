// The mesh: this daemon's rdma_cm listeners (one per rail: config.h), its
// RDMA devices, every configured peer and every connection, and the
// per-turn service step.
//
// Incoming CONNECT_REQUESTs are checked (handshake magic and version, meant
// for this node, from a configured peer) and then put to the peer's
// tie-break: exactly one connection per pair remains even when both ends
// dial at once — the connection initiated by the node with the lower name
// survives — and a peer that restarted (new incarnation) replaces its stale
// connection. Rejections carry the reason in the REJ's private data.
//
// The service step (loop/service_queue.h) runs once per loop turn for every
// peer something happened to: the peer observes its connection, reads and
// writes (Peer::service), then the mesh destroys the peer's connections
// whose teardown is complete — never inside their own callbacks.
//
// Devices: limits are checked against the configuration at start (a
// configuration that cannot fit is refused, LimitError). A removed or
// failed device (RDMA_CM_EVENT_DEVICE_REMOVAL, IBV_EVENT_DEVICE_FATAL,
// IBV_EVENT_CQ_ERR) has its connections torn down (their messages failed
// back to senders), its listener destroyed and its resources released; the
// mesh then listens again as soon as a device answers, and the peers dial.
// A port that goes down (IBV_EVENT_PORT_ERR) closes the device's
// connections; when it is active again the peers dial at once.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/state_machine.h"
#include "config/config.h"
#include "daemon/loop/events.h"
#include "daemon/loop/service_queue.h"
#include "daemon/peer/connection.h"
#include "daemon/peer/mesh_state.h"
#include "daemon/peer/peer.h"
#include "daemon/rdma/cm_events.h"
#include "daemon/rdma/device.h"
#include "daemon/rdma/device_set.h"
#include "daemon/rdma/limits.h"

namespace rdmamsg::peer {

// The configuration does not fit the device (the message names the key,
// its value and the limit): an operator's error, exit 78.
struct LimitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using rdma::DeviceStats;

// One rail's listener, for the status.
struct ListenerSnapshot {
  std::string address;
  bool listening = false;
  std::string device;  // the RDMA device it is bound to ("" for a wildcard or none)
};

// The mesh, for the status (daemon/status.h).
struct MeshSnapshot {
  uint64_t incarnation = 0;
  bool listening = false;                   // on at least one rail
  std::vector<ListenerSnapshot> listeners;  // one per rail
  std::vector<PeerSnapshot> peers;          // the configured ones
  std::vector<DeviceStats> devices;
  std::array<uint64_t, kRejectReasons> rejected{};  // by RejectReason
  uint64_t droppedCompletions = 0;
  uint64_t registeredBytes = 0;
  rdma::MemoryPlan plan;
};

class Mesh : public rdma::CmHandler, public rdma::DeviceListener {
 public:
  Mesh(loop::EventLoop& loop, const config::Config& cfg, PeerEvents& events, uint64_t incarnation);
  ~Mesh() override;

  // Binds and listens on every rail of config.listen, checks the device's limits, then
  // starts dialing. At start-up only, so it throws (docs/development.md,
  // "Errors"): LimitError or std::runtime_error, with a clear message.
  void start();
  MeshState state() const { return state_.get(); }
  // Closes every connection; `done` runs once they are all torn down (or
  // after a bounded wait).
  void shutdown(std::function<void()> done);

  // Reload, in two steps. First: problems that keep `next` from fitting the
  // RDMA devices (the CQs grow for added peers); empty when it fits: the
  // mesh is then reloading, and the caller makes `next` the configuration
  // this mesh reads and calls applyPeers().
  std::vector<std::string> prepareReload(const config::Config& next);
  // Then: peers no longer configured are retired (their messages in flight
  // failed), new ones created and dialed, readdressed ones redialed. Every
  // other peer is left alone. The mesh is running again.
  void applyPeers(const std::vector<std::string>& readdressed);

  // The configured peer named `name` (never a removed one), or nullptr;
  // with rail_policy spread, its lane 0 (Peer::lanes).
  Peer* peer(std::string_view name);
  // The lane of peer `name` that carries the flow from `srcService` to
  // `dstService` (the peer itself with one lane), or nullptr.
  Peer* route(std::string_view name, std::string_view srcService, std::string_view dstService) {
    Peer* p = peer(name);
    return p == nullptr ? nullptr : &p->laneFor(srcService, dstService);
  }
  // The configured peers (lane 0 of each), in the order they were added.
  std::vector<const Peer*> configuredPeers() const;
  // Peer objects alive: the configured ones and removed ones still closing.
  size_t peerObjectCount() const;
  // A handle that names one peer object and never another (receipts of
  // deliveries carry it: a slot and that slot's generation), and the peer it
  // names: nullptr once that peer was removed and freed, even if its slot
  // holds a newer peer.
  uint64_t handleOf(const Peer& peer) const { return peer.handle(); }
  Peer* peerByHandle(uint64_t handle) const;
  uint64_t incarnation() const { return incarnation_; }
  size_t connectionCount() const;
  // Bytes of buffers one connected peer registers: buffer_size x buffer_count,
  // to receive and as much to send.
  // Registered memory: what the configuration plans, and what is registered now.
  rdma::MemoryPlan memoryPlan() const { return rdma::memoryPlan(config_); }
  uint64_t registeredBytes() const { return devices_.registeredBytes(); }
  uint64_t droppedCompletions() const;
  // Incoming connections refused, by reason (index: RejectReason).
  const std::array<uint64_t, kRejectReasons>& rejected() const { return rejected_; }
  std::vector<DeviceStats> deviceStats() const;
  // Listening on at least one rail.
  bool listening() const;
  bool stopping() const {
    return state_.get() == MeshState::kStopping || state_.get() == MeshState::kStopped;
  }
  MeshSnapshot snapshot() const;
  // Marks every peer for the service step (e.g. the router has room again).
  void wakeAll();

  void onCmEvent(const rdma::CmEvent& e) override;
  void onDeviceEvent(rdma::Device& device, ibv_event_type type) override;

 private:
  // A listener that went away is set up again this often (and ten times
  // less often while the device cannot hold the configuration).
  static constexpr auto kRelistenEvery = std::chrono::milliseconds(500);
  // Service keys: the devices, then peer i at i + 1.
  static constexpr uint32_t kDevicesKey = 0;
  static uint32_t keyOf(uint32_t index) { return index + 1; }
  Peer& addPeer(const config::Peer& p, std::size_t lane);  // in a free slot, not started
  // The lanes the configuration wants for every configured peer: missing
  // ones added (and started with `start`), ones past the count retired;
  // then each peer's lane 0 learns its lanes.
  void fitLanes(bool start);
  // A new active connection for `peer` (possibly already down, if it failed
  // at once), when its service step asked for one.
  Connection* dial(Peer& peer);
  // The two ends of `rail` between this node and `peer`.
  void railEnds(const Peer& peer, std::size_t rail, sockaddr_storage& src,
                sockaddr_storage& dst) const;
  // Starts a probe of one of the peer's rails (rail_probe.h).
  std::unique_ptr<RailProbe> probe(Peer& peer, std::size_t rail);
  // Frees slot i's peer if it was removed and is closed (no connection left).
  void freeIfRetired(uint32_t i);
  template <typename F>
  void forEachPeer(F&& f) {
    for (auto& s : slots_)
      if (s.peer) f(*s.peer);
  }
  void setState(MeshState s);
  ConnParams paramsFor(const Peer& peer) const;
  // The device of `ctx`, opened if needed; nullptr when it cannot be had.
  rdma::Device* deviceFor(ibv_context* ctx);
  // Hands the devices that peer i's dialing connections asked for.
  void serveDeviceRequests(uint32_t i);
  Connection& newConnection(uint32_t index);
  // Listens on rail `rail` (config.listenRail). bad_request: the
  // configuration does not fit the device; io_error: no listener (yet).
  Status listen(std::size_t rail);
  // The rail whose listener is `id`; listeners_.size() when none.
  std::size_t railOf(const rdma_cm_id* id) const;
  void openAllDevices();
  void relisten();
  Status checkLimits(const ibv_device_attr& attr, const std::string& device);
  void service(uint32_t key);
  void serviceDevices();
  void closeConnectionsOn(rdma::Device& device, const std::string& why);
  void onConnectRequest(const rdma::CmEvent& e);
  void reject(rdma_cm_id* id, RejectReason reason, const std::string& who);
  void countAuthFailure(const Peer& peer, const Connection& c);
  void checkShutdownDone();
  // Warnings for what is not verified: peers whose address is not checked,
  // a mesh without a secret.
  void warnUnverified() const;

  loop::EventLoop& loop_;
  LogLimit rejectLog_;  // refused dialers (a misconfigured or hostile host): bounded lines
  std::array<uint64_t, kRejectReasons> rejected_{};
  const config::Config& config_;
  PeerEvents& events_;
  uint64_t incarnation_;
  StateMachine<MeshState> state_{MeshState::kCreated};
  // Declared parents first: destroyed children first.
  std::unique_ptr<rdma::CmEventPump> pump_;
  rdma::DeviceSet devices_;
  std::vector<rdma::CmIdPtr> listeners_;  // one per rail; null: not listening there (yet)
  loop::ServiceQueue queue_;              // keys: kDevicesKey, keyOf(peer index)
  // Peer slots: a removed peer is retired (its messages failed, its
  // connection closed) and freed once its last connection is reaped; its
  // slot is reused, under a new generation, by the next peer added. A
  // peer's handle is its slot and the slot's generation.
  struct Slot {
    std::unique_ptr<Peer> peer;  // nullptr: a free slot
    uint32_t generation = 0;
    // Its connections: the current one, and old ones still closing.
    std::vector<std::unique_ptr<Connection>> conns;
    bool posting = false;  // in toPost_
  };
  static uint32_t slotOf(const Peer& peer) { return static_cast<uint32_t>(peer.handle()); }
  std::vector<Slot> slots_;
  std::vector<uint32_t> freeSlots_;
  Peer* lastPeer_ = nullptr;  // peer()'s last answer
  bool checkedLimits_ = false;
  // Peers serviced this turn, posted by postStep_ after the turn's other
  // deferred output (what the local server writes to listeners goes first:
  // a post hands off to the device, and the listener is on the critical path).
  std::vector<uint32_t> toPost_;
  std::unique_ptr<loop::PhaseTask> postStep_;
  std::unique_ptr<loop::Timer> relistenTimer_;
  std::function<void()> shutdownDone_;
  std::unique_ptr<loop::Timer> shutdownTimer_;
};

}  // namespace rdmamsg::peer
