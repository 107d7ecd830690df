// The mesh of peer connections (mesh.h).
#include "daemon/peer/mesh.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace rdmamsg::peer {

namespace {
constexpr int kListenBacklog = 128;
constexpr auto kShutdownWait = std::chrono::seconds(3);

std::string addrText(const sockaddr* a) {
  auto addr = config::Address::fromSockaddr(*a);
  return addr ? addr->toString() : "?";
}
}  // namespace

Mesh::Mesh(loop::EventLoop& loop, const config::Config& cfg, PeerEvents& events,
           uint64_t incarnation)
    : loop_(loop),
      config_(cfg),
      events_(events),
      incarnation_(incarnation),
      reaper_(std::make_unique<loop::Deferred>(loop, [this] {
        for (Connection* c : reapable_) {
          std::erase_if(conns_, [c](const auto& p) { return p.get() == c; });
        }
        reapable_.clear();
        checkShutdownDone();
      })) {
  for (const auto& p : cfg.peers)
    peers_.push_back(std::make_unique<Peer>(loop, *this, cfg, p, events));
}

Mesh::~Mesh() {
  conns_.clear();  // QPs and ids before the devices and the event channel
  peers_.clear();
  if (listenId_ != nullptr) rdma_destroy_id(listenId_);
}

void Mesh::start() {
  pump_ = std::make_unique<rdma::CmEventPump>(loop_);
  if (rdma_create_id(pump_->channel(), &listenId_, static_cast<rdma::CmHandler*>(this),
                     RDMA_PS_TCP) != 0)
    throw std::system_error(errno, std::generic_category(), "rdma_create_id");
  sockaddr_storage addr{};
  config_.listen.toSockaddr(addr);
  if (rdma_bind_addr(listenId_, reinterpret_cast<sockaddr*>(&addr)) != 0)
    throw std::runtime_error("cannot bind rdma_cm to " + config_.listen.toString() + ": " +
                             std::error_code(errno, std::generic_category()).message());
  if (rdma_listen(listenId_, kListenBacklog) != 0)
    throw std::runtime_error("cannot listen on " + config_.listen.toString() + ": " +
                             std::error_code(errno, std::generic_category()).message());
  if (listenId_->verbs != nullptr) deviceFor(listenId_->verbs);
  spdlog::info("listening for peers on {} (rdma_cm)", config_.listen.toString());
  for (auto& p : peers_)
    p->start();
}

void Mesh::shutdown(std::function<void()> done) {
  shutdownDone_ = std::move(done);
  for (auto& p : peers_)
    p->shutdown();
  shutdownTimer_ = std::make_unique<loop::Timer>(loop_, [this] {
    spdlog::warn("{} connection(s) did not finish their teardown in time", conns_.size());
    if (auto d = std::move(shutdownDone_)) d();
  });
  shutdownTimer_->arm(kShutdownWait);
  checkShutdownDone();
}

void Mesh::checkShutdownDone() {
  if (!shutdownDone_ || !conns_.empty()) return;
  shutdownTimer_->cancel();
  auto d = std::move(shutdownDone_);
  shutdownDone_ = nullptr;
  d();
}

Peer* Mesh::peer(std::string_view name) {
  if (lastPeer_ != nullptr && lastPeer_->name() == name) return lastPeer_;
  for (auto& p : peers_) {
    if (p->name() == name) {
      lastPeer_ = p.get();
      return lastPeer_;
    }
  }
  return nullptr;
}

uint64_t Mesh::droppedCompletions() const {
  uint64_t n = 0;
  for (const auto& [ctx, d] : devices_)
    n += d->counters().dropped;
  return n;
}

void Mesh::resumeReceiving() {
  for (auto& p : peers_)
    p->resumeReceiving();
}

rdma::Device* Mesh::deviceFor(ibv_context* ctx) {
  auto it = devices_.find(ctx);
  if (it != devices_.end()) return it->second.get();
  // One CQ for every QP on the device, sized for all of them (each peer may
  // briefly have two connections while a duplicate is resolved).
  size_t perConn = size_t{config_.bufferCount} * 2 + 2;  // sends, receives, beacon
  int cqe = static_cast<int>(std::min<size_t>(perConn * (2 * peers_.size() + 2), 1 << 20));
  auto d = std::make_unique<rdma::Device>(loop_, ctx, cqe);
  rdma::Device* raw = d.get();
  devices_.emplace(ctx, std::move(d));
  return raw;
}

ConnParams Mesh::paramsFor(const Peer& peer) const {
  ConnParams p;
  p.bufferSize = config_.bufferSize;
  p.recvBuffers = config_.bufferCount;
  p.sendBuffers = config_.bufferCount;
  p.connectTimeout = config_.connectTimeout;
  p.hello.nodeId = nodeId(config_.node);
  p.hello.targetId = peer.id();
  p.hello.incarnation = incarnation_;
  p.hello.bufferSize = static_cast<uint32_t>(config_.bufferSize);
  p.hello.bufferCount = config_.bufferCount;
  p.hello.maxMessage = config_.maxMessageSize;
  return p;
}

Connection* Mesh::dial(Peer& peer) {
  auto c = std::make_unique<Connection>(
      loop_, peer, paramsFor(peer), [this](ibv_context* ctx) { return deviceFor(ctx); },
      peer.name());
  Connection* raw = c.get();
  conns_.push_back(std::move(c));
  sockaddr_storage src{}, dst{};
  config_.listen.toSockaddr(src);
  reinterpret_cast<sockaddr_in*>(&src)->sin_port = 0;  // same offset for IPv6
  peer.address().toSockaddr(dst);
  spdlog::debug("peer {}: dialing {}", peer.name(), peer.address().toString());
  raw->startActive(pump_->channel(), reinterpret_cast<sockaddr*>(&src),
                   reinterpret_cast<sockaddr*>(&dst));
  // A failure to start closes the connection at once; the peer then retries.
  return raw->state() == ConnState::kDisconnecting || raw->state() == ConnState::kClosed ? nullptr
                                                                                         : raw;
}

void Mesh::reap(Connection* c) {
  reapable_.push_back(c);
  reaper_->schedule();
}

void Mesh::onCmEvent(const rdma::CmEvent& e) {
  if (e.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
    onConnectRequest(e);
    return;
  }
  spdlog::warn("rdma_cm listener: unexpected event {}", rdma_event_str(e.type));
}

void Mesh::reject(rdma_cm_id* id, RejectReason reason, const std::string& who) {
  Hello h{};
  h.nodeId = nodeId(config_.node);
  h.incarnation = incarnation_;
  h.reason = reason;
  rdma_reject(id, &h, sizeof h);
  rdma_destroy_id(id);
  if (reason == RejectReason::kDuplicate)
    spdlog::debug("rejected connection from {}: {}", who, toString(reason));
  else
    spdlog::warn("rejected connection from {}: {}", who, toString(reason));
}

void Mesh::onConnectRequest(const rdma::CmEvent& e) {
  std::string from = addrText(rdma_get_peer_addr(e.id));
  auto hello = decodeHello(e.privateData.data(), e.privateData.size());
  if (!hello) return reject(e.id, RejectReason::kBadHandshake, from);
  if (hello->version != kProtocolVersion) return reject(e.id, RejectReason::kVersion, from);
  if (hello->targetId != nodeId(config_.node))
    return reject(e.id, RejectReason::kWrongTarget, from);
  Peer* peer = nullptr;
  for (auto& p : peers_)
    if (p->id() == hello->nodeId) peer = p.get();
  if (peer == nullptr) return reject(e.id, RejectReason::kUnknownPeer, from);
  if (shutdownDone_) return reject(e.id, RejectReason::kShuttingDown, peer->name());
  RejectReason r = peer->admit(*hello, config_.node < peer->name());
  if (r != RejectReason::kNone) return reject(e.id, r, peer->name());
  auto c = std::make_unique<Connection>(
      loop_, *peer, paramsFor(*peer), [this](ibv_context* ctx) { return deviceFor(ctx); },
      peer->name());
  Connection* raw = c.get();
  conns_.push_back(std::move(c));
  peer->adopt(raw);
  raw->accept(e.id, *hello);
}

}  // namespace rdmamsg::peer
