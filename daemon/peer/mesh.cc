// The mesh of peer connections (mesh.h).
#include "daemon/peer/mesh.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "config/units.h"
#include "daemon/logging.h"
#include "daemon/peer/admission.h"
#include "daemon/rdma/limits.h"

namespace rdmamsg::peer {

namespace {
constexpr auto kShutdownWait = std::chrono::seconds(3);
}  // namespace

// The one place the mesh changes state: every edge is checked.
void Mesh::setState(MeshState s) {
  state_.set(s, "mesh");
}

Mesh::Mesh(loop::EventLoop& loop, const config::Config& cfg, PeerEvents& events,
           uint64_t incarnation)
    : loop_(loop),
      config_(cfg),
      events_(events),
      incarnation_(incarnation),
      devices_(loop, cfg.buffers.registeredMemoryLimit, this),
      queue_(loop, [this](uint32_t key) { service(key); }),
      postStep_(std::make_unique<loop::PhaseTask>(loop, loop::Phase::post,
                                                  [this] {
                                                    for (uint32_t i : toPost_) {
                                                      slots_[i].posting = false;
                                                      if (slots_[i].peer) slots_[i].peer->post();
                                                    }
                                                    toPost_.clear();
                                                  })),
      relistenTimer_(std::make_unique<loop::Timer>(loop, [this] { relisten(); })) {
  fitLanes(/*start=*/false);
}

void Mesh::fitLanes(bool start) {
  for (const auto& c : config_.peers) {
    const std::size_t want = config_.lanesWith(c);
    std::vector<Peer*> lanes(want, nullptr);
    for (Slot& s : slots_) {
      if (!s.peer || s.peer->removed() || s.peer->name() != c.name) continue;
      if (s.peer->lane() < want) {
        lanes[s.peer->lane()] = s.peer.get();
      } else {
        s.peer->setLanes({});
        s.peer->retire("its lane " + std::to_string(s.peer->lane()) +
                       " is no longer kept (rails changed)");
        queue_.mark(keyOf(slotOf(*s.peer)));
      }
    }
    for (std::size_t lane = 0; lane < want; lane++)
      if (lanes[lane] == nullptr) {
        lanes[lane] = &addPeer(c, lane);
        if (start) lanes[lane]->start();
      }
    lanes[0]->setLanes(want > 1 ? lanes : std::vector<Peer*>{});
  }
}

Peer& Mesh::addPeer(const config::Peer& p, std::size_t lane) {
  uint32_t i;
  if (!freeSlots_.empty()) {
    i = freeSlots_.back();
    freeSlots_.pop_back();
  } else {
    i = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& slot = slots_[i];
  slot.peer = std::make_unique<Peer>(loop_, config_, p, events_, queue_.waker(keyOf(i)),
                                     uint64_t{slot.generation} << 32 | i, lane);
  return *slot.peer;
}

void Mesh::freeIfRetired(uint32_t i) {
  Slot& slot = slots_[i];
  Peer* p = slot.peer.get();
  if (p == nullptr || !p->removed() || p->state() != PeerState::kStopped || !slot.conns.empty())
    return;
  spdlog::debug("peer {}: removed and closed: freed", p->name());
  if (lastPeer_ == p) lastPeer_ = nullptr;
  slot.peer.reset();
  slot.generation++;  // receipts that name it name nobody now
  freeSlots_.push_back(i);
}

Peer* Mesh::peerByHandle(uint64_t handle) const {
  const auto i = static_cast<uint32_t>(handle);
  if (i >= slots_.size() || slots_[i].generation != static_cast<uint32_t>(handle >> 32))
    return nullptr;
  return slots_[i].peer.get();
}

std::vector<const Peer*> Mesh::configuredPeers() const {
  std::vector<const Peer*> out;
  for (const Slot& s : slots_)
    if (s.peer && !s.peer->removed() && s.peer->lane() == 0) out.push_back(s.peer.get());
  return out;
}

size_t Mesh::peerObjectCount() const {
  return slots_.size() - freeSlots_.size();
}

std::vector<std::string> Mesh::prepareReload(const config::Config& next) {
  // Sized for the new peers and the old ones still closing (two QPs each).
  size_t closing = 0;
  for (const Slot& s : slots_)
    if (s.peer && (s.peer->removed() ? !s.conns.empty() : next.findPeer(s.peer->name()) == nullptr))
      closing++;
  const size_t peers = next.laneCount() + closing;
  std::vector<std::string> problems;
  for (auto& [ctx, d] : devices_.all()) {
    if (d->failed()) continue;
    auto p = rdma::checkLimits(next, d->attr(), d->name(), peers);
    problems.insert(problems.end(), p.begin(), p.end());
  }
  if (!problems.empty()) return problems;
  for (auto& [ctx, d] : devices_.all())
    if (!d->failed())
      if (Status st = d->growCq(rdma::needsOf(next, peers).cqe); !st.ok())
        problems.push_back(st.message());
  if (problems.empty()) setState(MeshState::kReloading);
  return problems;
}

void Mesh::applyPeers(const std::vector<std::string>& readdressed) {
  if (state_.get() == MeshState::kReloading) setState(MeshState::kRunning);
  lastPeer_ = nullptr;
  for (uint32_t i = 0; i < slots_.size(); i++) {
    Peer* p = slots_[i].peer.get();
    if (p == nullptr || p->removed() || config_.findPeer(p->name()) != nullptr) continue;
    p->setLanes({});
    p->retire(p->name() + " was removed from the configuration of " + config_.node);
    queue_.mark(keyOf(i));  // the service step frees it once it is closed
  }
  // A peer configured again gets new objects (a removed one may still be
  // closing its connection); lanes follow the rails each shares now.
  if (!stopping()) fitLanes(/*start=*/true);
  for (const auto& name : readdressed)
    if (Peer* p = peer(name))
      for (Peer* lane : p->lanes().empty() ? std::vector<Peer*>{p} : p->lanes())
        lane->readdress(*config_.findPeer(name));
  if (config_.auth.secret)
    forEachPeer([](Peer& p) {
      if (!p.removed()) p.requireAuthentication();
    });
  forEachPeer([](Peer& p) { p.applyConnectMode(); });  // connect may have changed to always
  warnUnverified();
}

Mesh::~Mesh() {
  for (Slot& s : slots_)
    s.conns.clear();  // QPs and ids before the listener, the devices and the event channel
  slots_.clear();
  listeners_.clear();
  devices_.clear();
}

void Mesh::start() {
  setState(MeshState::kStarting);
  pump_ = std::make_unique<rdma::CmEventPump>(loop_);
  listeners_.resize(config_.railCount());
  for (std::size_t rail = 0; rail < listeners_.size(); rail++)
    if (Status st = listen(rail); !st.ok()) {
      listeners_.clear();
      if (st.code() == Errc::bad_request) throw LimitError(st.message());
      throw std::runtime_error(st.message());
    }
  setState(MeshState::kRunning);
  spdlog::info("listening for peers on {} (rdma_cm{})", toString(config_.listenRails()),
               listeners_.size() > 1 ? ", one listener per rail" : "");
  spdlog::info("{}", rdma::describe(memoryPlan(), config_, config_.laneCount()));
  if (config_.railPolicy == config::RailPolicy::kSpread)
    spdlog::info("rail_policy spread: {} connection(s) to {} peer(s), one per rail shared",
                 config_.laneCount(), config_.peers.size());
  warnUnverified();
  if (config_.connect == config::ConnectMode::kOnDemand)
    spdlog::info("connect: on_demand: peers are dialed at their first message{}",
                 config_.timers.idleTimeout.count() > 0
                     ? "; connections idle for " +
                           config::formatDuration(config_.timers.idleTimeout) + " are closed"
                     : "");
  forEachPeer([](Peer& p) { p.start(); });
}

void Mesh::warnUnverified() const {
  if (config_.listen.isWildcard() && !config_.ownAddress && !config_.peers.empty())
    spdlog::warn(
        "listen is {} and node {} has no entry in peers: connections to peers leave from "
        "the address routing picks, and peers refuse them unless it is the address "
        "they have for {}",
        config_.listen.toString(), config_.node, config_.node);
  if (!config_.auth.secret && !config_.peers.empty())
    spdlog::warn(
        "no secret_file: peers are not authenticated; a host that can reach this node's "
        "rdma_cm port from a peer's address can take that peer's place (docs/security.md)");
  for (const auto& c : config_.peers)
    if (!c.verifyAddress)
      spdlog::warn(
          "peer {}: verify_address is false: a connection from any address that claims "
          "to be {} is accepted as {}",
          c.name, c.name, c.name);
}

void Mesh::shutdown(std::function<void()> done) {
  setState(MeshState::kStopping);
  shutdownDone_ = std::move(done);
  relistenTimer_->cancel();
  forEachPeer([](Peer& p) { p.shutdown(); });
  shutdownTimer_ = std::make_unique<loop::Timer>(loop_, [this] {
    spdlog::warn("{} connection(s) did not finish their teardown in time", connectionCount());
    setState(MeshState::kStopped);
    if (auto d = std::move(shutdownDone_)) d();
  });
  shutdownTimer_->arm(kShutdownWait);
  checkShutdownDone();
}

void Mesh::checkShutdownDone() {
  if (state_.get() != MeshState::kStopping || !shutdownDone_ || connectionCount() != 0) return;
  shutdownTimer_->cancel();
  setState(MeshState::kStopped);
  auto d = std::move(shutdownDone_);
  shutdownDone_ = nullptr;
  d();
}

size_t Mesh::connectionCount() const {
  size_t n = 0;
  for (const Slot& s : slots_)
    n += s.conns.size();
  return n;
}

Peer* Mesh::peer(std::string_view name) {
  if (lastPeer_ != nullptr && lastPeer_->name() == name) return lastPeer_;
  for (Slot& s : slots_) {
    if (s.peer && s.peer->name() == name && !s.peer->removed() && s.peer->lane() == 0) {
      lastPeer_ = s.peer.get();
      return lastPeer_;
    }
  }
  return nullptr;
}

uint64_t Mesh::droppedCompletions() const {
  return devices_.droppedCompletions();
}

std::vector<DeviceStats> Mesh::deviceStats() const {
  return devices_.stats();
}

MeshSnapshot Mesh::snapshot() const {
  MeshSnapshot s;
  s.incarnation = incarnation_;
  s.listening = listening();
  for (std::size_t rail = 0; rail < config_.railCount(); rail++) {
    const rdma_cm_id* id = rail < listeners_.size() ? listeners_[rail].get() : nullptr;
    s.listeners.push_back(
        {config_.listenRail(rail).toString(), id != nullptr,
         id != nullptr && id->verbs != nullptr ? ibv_get_device_name(id->verbs->device) : ""});
  }
  for (const Peer* p : configuredPeers())
    s.peers.push_back(p->snapshot());
  s.devices = deviceStats();
  s.rejected = rejected_;
  s.droppedCompletions = droppedCompletions();
  s.registeredBytes = registeredBytes();
  s.plan = memoryPlan();
  return s;
}

void Mesh::wakeAll() {
  for (uint32_t i = 0; i < slots_.size(); i++)
    queue_.mark(keyOf(i));
}

// One CQ for every QP on the device, sized for all of them (each peer may
// briefly have two connections while a duplicate is resolved).
rdma::Device* Mesh::deviceFor(ibv_context* ctx) {
  rdma::PoolParams pools;
  pools.bufferSize = config_.buffers.bufferSize;
  pools.sendBuffers = config_.buffers.sendBuffers;
  pools.sharedReceive = config_.buffers.receiveQueue == config::ReceiveQueue::kShared;
  pools.initialGrant = config_.buffers.initialGrant();
  pools.burst = config_.buffers.sharedReceiveBuffers;
  pools.chunk = config_.buffers.bufferCount;
  pools.startPeers = config_.connect == config::ConnectMode::kAlways
                         ? static_cast<uint32_t>(config_.laneCount())
                         : 0;
  pools.perPeerCount = config_.buffers.bufferCount;
  const uint64_t cqe = rdma::needsOf(config_).cqe;
  return devices_.get(ctx, static_cast<int>(std::min<uint64_t>(cqe, 1u << 30)), pools);
}

void Mesh::serveDeviceRequests(uint32_t i) {
  for (auto& c : slots_[i].conns)
    if (ibv_context* ctx = c->wantsDevice()) c->useDevice(deviceFor(ctx));
}

ConnParams Mesh::paramsFor(const Peer& peer) const {
  ConnParams p;
  p.bufferSize = config_.buffers.bufferSize;
  p.maxCredits = config_.buffers.bufferCount;
  p.sendBuffers = config_.buffers.sendBuffersPerPeer();
  p.releaseAfter = config_.timers.heartbeatInterval;
  p.connectTimeout = config_.timers.connectTimeout;
  p.hello.nodeId = nodeId(config_.node);
  p.hello.targetId = peer.id();
  p.hello.incarnation = incarnation_;
  p.hello.bufferSize = static_cast<uint32_t>(config_.buffers.bufferSize);
  p.hello.maxMessage = config_.buffers.maxMessageSize;
  p.hello.flowWindow = static_cast<uint32_t>(config_.buffers.flowWindow);
  p.selfName = config_.node;
  p.tos = config_.tos;
  // Subjects go over lane 0 only; a lane names itself (spread).
  p.hello.flags |= kHelloIdleClose | laneFlags(peer.lane());
  if (peer.lane() == 0) p.hello.flags |= kHelloSubjects;
  if (peer.resumes()) p.hello.flags |= kHelloResume | kHelloResultAcks;
  if (peer.holdsSession()) p.hello.flags |= kHelloResuming;
  if (config_.auth.secret) {
    p.hello.flags |= kHelloAuthenticates | kHelloBatchMac;
    if (config_.auth.encryption) p.hello.flags |= kHelloEncrypts;
    p.encrypt = config_.auth.encryption;
    p.secrets.push_back(*config_.auth.secret);
    if (config_.auth.previousSecret) {
      p.secrets.push_back(*config_.auth.previousSecret);
    }
  }
  return p;
}

Connection& Mesh::newConnection(uint32_t index) {
  Peer& peer = *slots_[index].peer;
  auto c =
      std::make_unique<Connection>(loop_, paramsFor(peer), peer.name(), queue_.waker(keyOf(index)));
  slots_[index].conns.push_back(std::move(c));
  return *slots_[index].conns.back();
}

// Peers check that a connection comes from this node's address: leave
// from it (the rail's), also when listening on every address. Rail i of
// this node goes to rail i of the peer.
void Mesh::railEnds(const Peer& peer, std::size_t rail, sockaddr_storage& src,
                    sockaddr_storage& dst) const {
  const config::Address& from = rail == 0 && config_.listen.isWildcard() && config_.ownAddress
                                    ? *config_.ownAddress
                                    : config_.listenRail(rail);
  from.toSockaddr(src);
  reinterpret_cast<sockaddr_in*>(&src)->sin_port = 0;  // same offset for IPv6
  peer.config().rail(rail).toSockaddr(dst);
}

Connection* Mesh::dial(Peer& peer) {
  Connection& c = newConnection(slotOf(peer));
  sockaddr_storage src{}, dst{};
  const std::size_t rail = std::min(peer.rail(), config_.railsWith(peer.config()) - 1);
  railEnds(peer, rail, src, dst);
  spdlog::debug("peer {}: dialing {} (rail {})", peer.name(), peer.config().rail(rail).toString(),
                rail);
  c.startActive(pump_->channel(), reinterpret_cast<sockaddr*>(&src),
                reinterpret_cast<sockaddr*>(&dst));
  return &c;
}

std::unique_ptr<RailProbe> Mesh::probe(Peer& peer, std::size_t rail) {
  const ConnParams params = paramsFor(peer);
  auto p = std::make_unique<RailProbe>(
      loop_, rail, params.hello, params.tos,
      std::min(config_.timers.connectTimeout,
               std::max(config_.timers.railProbeInterval, std::chrono::milliseconds(200))),
      queue_.waker(keyOf(slotOf(peer))));
  sockaddr_storage src{}, dst{};
  railEnds(peer, rail, src, dst);
  p->start(pump_->channel(), reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst));
  return p;
}

// ------------------------------------------------------------ service step

void Mesh::service(uint32_t key) {
  if (key == kDevicesKey) {
    serviceDevices();
    return;
  }
  const uint32_t i = key - 1;
  if (!slots_[i].peer) return;  // freed; a wake-up of the peer it was
  Peer& p = *slots_[i].peer;
  serveDeviceRequests(i);
  p.service();
  if (p.takeDialRequest()) p.dialed(dial(p));
  while (const std::optional<std::size_t> rail = p.takeProbeRequest())
    p.probing(probe(p, *rail));
  if (!slots_[i].posting) {
    slots_[i].posting = true;
    toPost_.push_back(i);
    postStep_->schedule();
  }
  auto& conns = slots_[i].conns;
  // A connection on a failed device waits until serviceDevices() has released
  // its verbs objects: the device's resources go before its last id.
  std::erase_if(conns, [&](const auto& c) {
    bool reap =
        c->reapable() && !p.owns(c.get()) && (c->device() == nullptr || !c->device()->failed());
    if (reap && !c->authFailure().ok()) countAuthFailure(p, *c);
    return reap;
  });
  freeIfRetired(i);
  if (stopping()) checkShutdownDone();
  if (devices_.anyFailed()) queue_.mark(kDevicesKey);
}

// A failed device, in the order its context allows: the connections'
// QPs and buffers (nothing more completes: they are abandoned, their
// messages failed back by their peers), then the device's CQ, channel,
// memory regions and PD, then the ids — the listener's here, the
// connections' when they are reaped. The mesh listens again when a device
// answers, and the peers dial.
void Mesh::serviceDevices() {
  for (auto it = devices_.all().begin(); it != devices_.all().end();) {
    rdma::Device& d = *it->second;
    if (!d.failed()) {
      ++it;
      continue;
    }
    std::string why = "RDMA device " + d.name() + " failed or was removed";
    for (uint32_t i = 0; i < slots_.size(); i++)
      for (auto& c : slots_[i].conns)
        if (c->device() == &d) {
          c->releaseVerbs(why);
          queue_.mark(keyOf(i));
        }
    std::vector<rdma::CmIdPtr*> onIt;  // listeners bound to it: destroyed after its resources
    for (auto& id : listeners_)
      if (id && id->verbs == d.context()) onIt.push_back(&id);
    spdlog::warn("{}: its resources are released; waiting for a device to listen again", why);
    it = devices_.erase(it);
    for (rdma::CmIdPtr* id : onIt)
      id->reset();
    if (!onIt.empty()) relistenTimer_->arm(kRelistenEvery);
  }
}

void Mesh::closeConnectionsOn(rdma::Device& device, const std::string& why) {
  for (uint32_t i = 0; i < slots_.size(); i++)
    for (auto& c : slots_[i].conns)
      if (c->device() == &device && !c->down()) {
        c->close(why);
        queue_.mark(keyOf(i));
      }
}

void Mesh::onDeviceEvent(rdma::Device& device, ibv_event_type type) {
  switch (type) {
    case IBV_EVENT_DEVICE_FATAL:
    case IBV_EVENT_CQ_ERR:
      spdlog::error("RDMA device {}: {}: tearing down its connections", device.name(),
                    ibv_event_type_str(type));
      queue_.mark(kDevicesKey);
      return;
    case IBV_EVENT_PORT_ERR:
      spdlog::warn("RDMA device {}: port down: closing its connections", device.name());
      closeConnectionsOn(device, "RDMA port down");
      return;
    case IBV_EVENT_PORT_ACTIVE:
      spdlog::info("RDMA device {}: port active: dialing peers", device.name());
      forEachPeer([](Peer& p) { p.redialSoon(); });
      return;
    default:
      spdlog::info("RDMA device {}: {}", device.name(), ibv_event_type_str(type));
      return;
  }
}

// A connection whose peer failed to authenticate (or refused our proof):
// counted and logged once, with the address it came from or went to.
void Mesh::countAuthFailure(const Peer& peer, const Connection& c) {
  rejected_[static_cast<size_t>(RejectReason::kAuthentication)]++;
  if (rejectLog_.admit())
    spdlog::warn("peer {}: authentication failed on the connection {} {}: {}{}", peer.name(),
                 c.active() ? "to" : "from", c.remoteAddress(), c.authFailure().message(),
                 rejectLog_.suffix());
}

void Mesh::reject(rdma_cm_id* id, RejectReason reason, const std::string& who) {
  Hello h{};
  h.nodeId = nodeId(config_.node);
  h.incarnation = incarnation_;
  h.reason = reason;
  const rdma::CmIdPtr request(id);  // the connect request's id, destroyed once rejected
  rdma_reject(request.get(), &h, sizeof h);
  if (static_cast<size_t>(reason) < rejected_.size()) rejected_[static_cast<size_t>(reason)]++;
  if (reason == RejectReason::kDuplicate || reason == RejectReason::kProbed)
    spdlog::debug("rejected connection from {}: {}", who, toString(reason));
  else if (rejectLog_.admit())
    spdlog::warn("rejected connection from {}: {}{}", who, toString(reason), rejectLog_.suffix());
}

void Mesh::onConnectRequest(const rdma::CmEvent& e) {
  const Admission a = admitRequest(config_, e.privateData, rdma_get_peer_addr(e.id));
  if (a.reason != RejectReason::kNone) return reject(e.id, a.reason, a.who);
  Peer* peer = this->peer(a.peer->name);
  if (peer == nullptr) return reject(e.id, RejectReason::kUnknownPeer, a.who);
  if (const std::size_t lane = helloLane(a.hello.flags); lane > 0) {
    // A lane this node no longer keeps (a reload shrank its rails) is refused.
    if (lane >= peer->lanes().size()) return reject(e.id, RejectReason::kNoLane, a.who);
    peer = peer->lanes()[lane];
  }
  if (stopping()) return reject(e.id, RejectReason::kShuttingDown, peer->name());
  // A probe of a rail (rail_probe.h): answered, never a connection.
  if ((a.hello.flags & kHelloProbe) != 0) return reject(e.id, RejectReason::kProbed, peer->name());
  RejectReason r = peer->admit(a.hello, config_.node < peer->name());
  if (r != RejectReason::kNone) return reject(e.id, r, peer->name());
  Connection& c = newConnection(slotOf(*peer));
  peer->adopt(&c, a.hello, config::Address::textOf(rdma_get_peer_addr(e.id)));
  c.accept(e.id, a.hello, deviceFor(e.id->verbs));
}

}  // namespace rdmamsg::peer
