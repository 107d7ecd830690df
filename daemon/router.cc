// The router (router.h).
#include "daemon/router.h"

#include "daemon/logging.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "daemon/alloc_counter.h"
#include "daemon/loop/counters.h"

namespace rdmamsg {

namespace {
// Resident set size of this process, from /proc/self/statm.
uint64_t residentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}
}  // namespace

Router::Router(const config::Config& cfg, loop::EventLoop& loop)
    : config_(cfg), started_(std::chrono::steady_clock::now()), pubsub_(loop, cfg) {}

void Router::attach(local::LocalServer* server, peer::Mesh* mesh) {
  server_ = server;
  mesh_ = mesh;
  server_->setConsumedCallback([this](local::SessionId listener, const local::Receipt& r,
                                      size_t bytes,
                                      Errc errc) { onConsumed(listener, r, bytes, errc); });
  pubsub_.attach(server, mesh);
}

Status Router::onSubscribe(local::SessionId session, const local::SubscribeRequest& request) {
  return pubsub_.subscribe(session, request);
}

void Router::onUnsubscribe(local::SessionId session, uint64_t subId) {
  pubsub_.unsubscribe(session, subId);
}

Status Router::onPublish(local::SessionId session, const local::PublishRequest& request) {
  return pubsub_.publish(session, request);
}

Status Router::onRespond(local::SessionId session, const local::RespondRequest& request) {
  return pubsub_.respond(session, request);
}

void Router::connectionUp(peer::Peer& from) {
  pubsub_.connectionUp(from);
}

Status Router::interest(peer::Peer& from, peer::InterestOp op, std::string_view group,
                        std::string_view pattern) {
  return pubsub_.interest(from, op, group, pattern);
}

void Router::pubResult(peer::Peer& from, uint64_t token, const peer::PubResultBody& result) {
  pubsub_.pubResult(from, token, result);
}

Status Router::onRegister(local::SessionId session, std::string_view service) {
  lastService_.clear();
  auto [it, inserted] = services_.try_emplace(std::string(service), session);
  if (!inserted) {
    if (it->second == session) return Status();
    return Status(Errc::duplicate_service,
                  "service " + std::string(service) + " is already registered on " + config_.node);
  }
  sessionServices_[session].push_back(it->first);
  spdlog::info("client {}: registered service {}", session, service);
  return Status();
}

void Router::onUnregister(local::SessionId session, std::string_view service) {
  auto it = services_.find(std::string(service));
  if (it == services_.end() || it->second != session) return;
  services_.erase(it);
  lastService_.clear();
  std::erase(sessionServices_[session], std::string(service));
  spdlog::info("client {}: unregistered service {}", session, service);
}

const local::SessionId* Router::findService(std::string_view service) {
  if (!lastService_.empty() && service == lastService_) return &lastServiceSession_;
  auto it = services_.find(std::string(service));
  if (it == services_.end()) return nullptr;
  lastService_ = it->first;
  lastServiceSession_ = it->second;
  return &lastServiceSession_;
}

void Router::onSessionClosed(local::SessionId session) {
  auto it = sessionServices_.find(session);
  if (it != sessionServices_.end()) {
    lastService_.clear();
    for (const auto& s : it->second) {
      services_.erase(s);
      spdlog::info("client {}: service {} gone", session, s);
    }
    sessionServices_.erase(it);
  }
  const auto bySession = [session](const Holder& h) { return h.session == session; };
  for (auto& [key, holders] : heldOnPeer_)
    std::erase_if(holders, bySession);
  for (auto& [listener, holders] : heldOnSession_)
    std::erase_if(holders, bySession);
  // Its senders may go on: their next messages find no listener.
  if (auto waiting = heldOnSession_.extract(session); !waiting.empty()) release(waiting.mapped());
  pubsub_.sessionClosed(session);
}

void Router::hold(std::vector<Holder>& holders, local::SessionId session, std::string_view node,
                  std::string_view service, size_t bytes) {
  for (Holder& h : holders) {
    if (h.session != session || h.node != node || h.service != service) continue;
    // Sent before it read the HOLD, or ignoring it: a client that goes on
    // past a queue's worth and two messages is no longer read.
    h.overshoot += bytes;
    if (!h.paused && h.overshoot > server_->holdSlack(session) + config_.buffers.sendQueueLimit +
                                       2 * size_t{config_.buffers.maxMessageSize}) {
      h.paused = true;
      counters_.holdsIgnored++;
      server_->pauseReading(session);
    }
    return;
  }
  counters_.backpressurePauses++;
  holders.push_back({session, std::string(node), std::string(service)});
  server_->hold(session, node, service);
}

void Router::release(std::vector<Holder>& holders) {
  for (const Holder& h : holders) {
    server_->resume(h.session, h.node, h.service);
    if (h.paused) server_->resumeReading(h.session);
  }
  holders.clear();
}

std::string Router::servicesOf(local::SessionId session) const {
  std::string names;
  if (auto it = sessionServices_.find(session); it != sessionServices_.end())
    for (const auto& s : it->second)
      names += (names.empty() ? "" : ", ") + s;
  return names.empty() ? "its service" : names;
}

void Router::fail(local::SessionId session, uint64_t msgId, Status why) {
  counters_.failures++;
  server_->fail(session, msgId, why);
}

void Router::onSend(local::SessionId session, const local::SendRequest& r) {
  counters_.messagesRouted++;
  if (r.node == config_.node) {
    const local::SessionId* listener = findService(r.service);
    if (listener == nullptr) {
      counters_.unknownService++;
      return fail(
          session, r.msgId,
          Status(Errc::unknown_service,
                 "no listener for service " + std::string(r.service) + " on " + config_.node));
    }
    const local::SessionId to = *listener;
    // Other local senders are held (HOLD) while the listener is congested;
    // a client sending to its own service cannot be (it would wait for
    // itself). Past receive_memory_limit, a message for a listener that does
    // not keep up is answered busy, as from a peer.
    if (server_->trackedBytes() >= config_.buffers.receiveMemoryLimit &&
        server_->outputCongested(to)) {
      counters_.receiveMemoryFull++;
      return fail(
          session, r.msgId,
          Status(Errc::busy, "the listener of " + std::string(r.service) + " on " + config_.node +
                                 " does not keep up and " + "receive_memory_limit (" +
                                 std::to_string(config_.buffers.receiveMemoryLimit) +
                                 " bytes) is reached"));
    }
    // Acknowledged when the listener's application has taken it (onConsumed).
    const local::Receipt receipt{local::Receipt::Kind::local, session, 0, r.msgId, 1};
    server_->deliver(to, config_.node, r.fromService, r.service, r.payload, receipt);
    counters_.localDeliveries++;
    if (server_->outputCongested(to) && to != session)
      hold(heldOnSession_[to], session, r.node, r.service, r.payload.size());
    return;
  }
  peer::Peer* p = mesh_->route(r.node, r.fromService, r.service);
  if (p == nullptr) {
    counters_.unknownNode++;
    return fail(session, r.msgId,
                Status(Errc::unknown_node, "unknown node " + std::string(r.node) +
                                               " (not in the peers of " + config_.node + ")"));
  }
  Result<peer::Admitted> admitted =
      p->send(session, r.msgId, r.fromService, r.service, r.payload, r.inPlace);
  if (!admitted) return fail(session, r.msgId, admitted.status());
  if (admitted->holdOn)
    hold(heldOnPeer_[*admitted->holdOn], session, r.node, r.service, r.payload.size());
}

void Router::outcome(uint64_t session, uint64_t msgId, const Status& status) {
  if (session & pubsub::PubSub::kHostSessions)
    return pubsub_.hostOutcome(session & ~pubsub::PubSub::kHostSessions, msgId, status);
  if (status.ok()) {
    server_->ack(session, msgId);
  } else {
    fail(session, msgId, status);
  }
}

void Router::delivered(uint64_t session, uint64_t msgId, uint64_t count) {
  if (session & pubsub::PubSub::kHostSessions) return;  // the host has it: its result follows
  server_->ack(session, msgId, count);
}

void Router::queueDrained(const peer::FlowKey& flow) {
  if (auto waiting = heldOnPeer_.extract(flow); !waiting.empty()) release(waiting.mapped());
  pubsub_.queueDrained(flow);
}

void Router::onSessionDrained(local::SessionId session) {
  if (auto waiting = heldOnSession_.extract(session); !waiting.empty()) release(waiting.mapped());
  pubsub_.sessionDrained(session);
}

peer::Delivery Router::deliverIncoming(peer::Peer& from, uint64_t epoch, uint64_t seq,
                                       std::string_view srcService, std::string_view dstService,
                                       std::span<const std::byte> payload, DeliveryRoom* room) {
  if (dstService.starts_with('$')) {  // subjects: "$pub", "$reply"
    if (room != nullptr) loop::copies().reassembly += payload.size();
    return pubsub_.incoming(from, epoch, seq, dstService, payload);
  }
  const local::SessionId* listener = findService(dstService);
  // A room not delivered in was a reassembly buffer after all.
  auto notDelivered = [&] {
    if (room != nullptr) loop::copies().reassembly += payload.size();
  };
  if (listener == nullptr) {
    notDelivered();
    counters_.unknownService++;
    return peer::Delivery::kUnknownService;
  }
  // The link is always drained. What a stuck listener holds is bounded by
  // its flows' windows; past receive_memory_limit in all, a listener that is
  // itself behind gets nothing more: its sender is answered busy.
  if (server_->trackedBytes() >= config_.buffers.receiveMemoryLimit &&
      server_->outputCongested(*listener)) {
    counters_.receiveMemoryFull++;
    if (busyLog_.admit())
      spdlog::warn(
          "receive_memory_limit ({} bytes) reached: a message from {} for {}, whose listener "
          "does not keep up, is answered busy{}",
          config_.buffers.receiveMemoryLimit, from.name(), dstService, busyLog_.suffix());
    notDelivered();
    return peer::Delivery::kBusy;
  }
  const local::Receipt receipt{local::Receipt::Kind::peer, mesh_->handleOf(from), epoch, seq, 1};
  if (!server_->deliver(*listener, from.name(), srcService, dstService, payload, receipt, room))
    return peer::Delivery::kUnknownService;
  counters_.remoteDeliveries++;
  return peer::Delivery::kAccepted;
}

// A message that comes in fragments is put together where its listener
// will read it, when it can be (LocalServer::reserveDelivery).
std::unique_ptr<DeliveryRoom> Router::reserveIncoming(peer::Peer& from, std::string_view srcService,
                                                      std::string_view dstService, uint64_t total) {
  if (dstService.starts_with('$')) return nullptr;  // put together in the peer's buffer
  const local::SessionId* listener = findService(dstService);
  if (listener == nullptr) return nullptr;
  return server_->reserveDelivery(*listener, from.name(), srcService, dstService, total);
}

void Router::onConsumed(local::SessionId listener, const local::Receipt& r, size_t bytes,
                        Errc errc) {
  if (r.kind == local::Receipt::Kind::pub) return pubsub_.consumed(r, errc);
  if (r.kind == local::Receipt::Kind::peer) {
    // Confirmations of what listeners took ride with the next batch to
    // that peer (a reply usually follows at once), or go within 1 ms, or
    // once a quarter of a window is due.
    if (peer::Peer* p = mesh_->peerByHandle(r.owner))
      p->confirmLater(r.epoch, r.seq, r.count, errc, std::max<size_t>(bytes, 1));
    return;
  }
  if (errc == Errc::ok) {
    server_->ack(r.owner, r.seq, r.count);
    return;
  }
  const Status why(errc, "the listener of " + servicesOf(listener) + " on " + config_.node +
                             " went away before taking the message");
  for (uint64_t i = 0; i < r.count; i++)
    fail(r.owner, r.seq + i, why);
}

void Router::connectionLost(peer::Peer& from) {
  // Deliveries already queued for listeners stay; their confirmations are
  // dropped by the peer (another epoch).
  pubsub_.connectionLost(from);
}

std::string Router::onStatus(local::SessionId) {
  return statusJson();
}

status::Snapshot Router::snapshot() const {
  status::Snapshot s;
  s.node = config_.node;
  s.version = RDMAMSG_VERSION;
  s.listen = config::toString(config_.listenRails());
  s.socket = config_.local.socket;
  s.configFile = config_.sourceFile;
  const auto level = spdlog::level::to_string_view(spdlog::get_level());
  s.logLevel.assign(level.data(), level.size());
  s.connectMode = config::toString(config_.connect);
  s.receiveQueue = config::toString(config_.buffers.receiveQueue);
  s.uptimeSeconds = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count());
  s.config = configState_;
  if (config_.auth.secret) s.secret = config_.auth.secret->fingerprint;
  if (config_.auth.previousSecret) s.previousSecret = config_.auth.previousSecret->fingerprint;
  for (const auto& [name, session] : services_)
    s.services.push_back(name);
  std::sort(s.services.begin(), s.services.end());
  s.counters = counters_;
  s.localPolicy = config_.local.localPolicy.has_value();
  s.policy = server_->policyCounters();
  s.unconsumedBytes = server_->trackedBytes();
  s.receiveMemoryLimit = config_.buffers.receiveMemoryLimit;
  s.mesh = mesh_->snapshot();
  s.subjects = pubsub_.snapshot();
  s.logDropped = logging::dropped();
  s.logSuppressed = logging::suppressed();
  s.loop = loop::syscalls();
  s.copies = loop::copies();
  s.idle = loop::idleCounters();
  s.idleStrategy = idle::toString(config_.idleStrategy);
  s.rssBytes = residentBytes();
  s.heapAllocations = heapAllocations();
  return s;
}

std::string Router::statusJson() const {
  // Text from files and peers (a path, a reload problem) may not be UTF-8:
  // replaced, never thrown.
  return status::toJson(snapshot()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace rdmamsg
