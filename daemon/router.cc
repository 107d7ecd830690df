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

Router::Router(const config::Config& cfg)
    : config_(cfg), started_(std::chrono::steady_clock::now()) {}

void Router::attach(local::LocalServer* server, peer::Mesh* mesh) {
  server_ = server;
  mesh_ = mesh;
  server_->setConsumedCallback([this](local::SessionId listener, const local::Receipt& r,
                                      size_t bytes,
                                      Errc errc) { onConsumed(listener, r, bytes, errc); });
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
}

// What a client may have written before it read a HOLD: its library's
// buffer (librdmamsg's send() waits above 4 MiB) and the socket's.
constexpr size_t kHoldSlack = 8u << 20;

void Router::hold(std::vector<Holder>& holders, local::SessionId session, std::string_view node,
                  std::string_view service, size_t bytes) {
  for (Holder& h : holders) {
    if (h.session != session || h.node != node || h.service != service) continue;
    // Sent before it read the HOLD, or ignoring it: a client that goes on
    // past a queue's worth and two messages is no longer read.
    h.overshoot += bytes;
    if (!h.paused &&
        h.overshoot > kHoldSlack + config_.sendQueueLimit + 2 * size_t{config_.maxMessageSize}) {
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
    if (server_->trackedBytes() >= config_.receiveMemoryLimit && server_->outputCongested(to)) {
      counters_.receiveMemoryFull++;
      return fail(session, r.msgId,
                  Status(Errc::busy,
                         "the listener of " + std::string(r.service) + " on " + config_.node +
                             " does not keep up and " + "receive_memory_limit (" +
                             std::to_string(config_.receiveMemoryLimit) + " bytes) is reached"));
    }
    // Acknowledged when the listener's application has taken it (onConsumed).
    const local::Receipt receipt{local::Receipt::Kind::local, session, 0, r.msgId, 1};
    server_->deliver(to, config_.node, r.fromService, r.service, r.payload, receipt);
    counters_.localDeliveries++;
    if (server_->outputCongested(to) && to != session)
      hold(heldOnSession_[to], session, r.node, r.service, r.payload.size());
    return;
  }
  peer::Peer* p = mesh_->peer(r.node);
  if (p == nullptr) {
    counters_.unknownNode++;
    return fail(session, r.msgId,
                Status(Errc::unknown_node, "unknown node " + std::string(r.node) +
                                               " (not in the peers of " + config_.node + ")"));
  }
  const void* waitKey = nullptr;
  Status st = p->send(session, r.msgId, r.fromService, r.service, r.payload, waitKey);
  if (!st.ok()) return fail(session, r.msgId, std::move(st));
  if (waitKey != nullptr) hold(heldOnPeer_[waitKey], session, r.node, r.service, r.payload.size());
}

void Router::outcome(uint64_t session, uint64_t msgId, const Status& status) {
  if (status.ok()) {
    server_->ack(session, msgId);
  } else {
    fail(session, msgId, status);
  }
}

void Router::delivered(uint64_t session, uint64_t msgId, uint64_t count) {
  server_->ack(session, msgId, count);
}

void Router::queueDrained(const void* waitKey) {
  if (auto waiting = heldOnPeer_.extract(waitKey); !waiting.empty()) release(waiting.mapped());
}

void Router::onSessionDrained(local::SessionId session) {
  if (auto waiting = heldOnSession_.extract(session); !waiting.empty()) release(waiting.mapped());
}

peer::Delivery Router::deliverIncoming(peer::Peer& from, uint64_t epoch, uint64_t seq,
                                       std::string_view srcService, std::string_view dstService,
                                       std::span<const std::byte> payload) {
  const local::SessionId* listener = findService(dstService);
  if (listener == nullptr) {
    counters_.unknownService++;
    return peer::Delivery::kUnknownService;
  }
  // The link is always drained. What a stuck listener holds is bounded by
  // its flows' windows; past receive_memory_limit in all, a listener that is
  // itself behind gets nothing more: its sender is answered busy.
  if (server_->trackedBytes() >= config_.receiveMemoryLimit &&
      server_->outputCongested(*listener)) {
    counters_.receiveMemoryFull++;
    if (busyLog_.admit())
      spdlog::warn(
          "receive_memory_limit ({} bytes) reached: a message from {} for {}, whose listener "
          "does not keep up, is answered busy{}",
          config_.receiveMemoryLimit, from.name(), dstService, busyLog_.suffix());
    return peer::Delivery::kBusy;
  }
  const local::Receipt receipt{local::Receipt::Kind::peer, mesh_->handleOf(from), epoch, seq, 1};
  if (!server_->deliver(*listener, from.name(), srcService, dstService, payload, receipt))
    return peer::Delivery::kUnknownService;
  counters_.remoteDeliveries++;
  return peer::Delivery::kAccepted;
}

void Router::onConsumed(local::SessionId listener, const local::Receipt& r, size_t bytes,
                        Errc errc) {
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

void Router::connectionLost(peer::Peer&) {
  // Deliveries already queued for listeners stay; their confirmations are
  // dropped by the peer (another epoch).
}

std::string Router::onStatus(local::SessionId) {
  return statusJson();
}

std::string Router::statusJson() const {
  using nlohmann::json;
  json j;
  j["node"] = config_.node;
  j["version"] = RDMAMSG_VERSION;
  j["listen"] = config_.listen.toString();
  j["socket"] = config_.socket;
  char inc[24];
  snprintf(inc, sizeof inc, "%016llx", static_cast<unsigned long long>(mesh_->incarnation()));
  j["incarnation"] = inc;
  j["uptime_seconds"] =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count();
  j["config"] = {
      {"file", config_.sourceFile},
      {"generation", configState_.generation},
      {"log_level", std::string(spdlog::level::to_string_view(spdlog::get_level()).data(),
                                spdlog::level::to_string_view(spdlog::get_level()).size())},
      {"last_reload", configState_.lastReload},
      {"reloads_failed", configState_.reloadsFailed},
      {"restart_pending", configState_.restartPending}};
  json peers = json::array();
  for (const peer::Peer* p : mesh_->configuredPeers()) {
    json e;
    e["name"] = p->name();
    e["address"] = p->address().toString();
    e["state"] = peer::toString(p->state());
    e["connect"] = config::toString(config_.connect);
    if (!p->lastError().empty()) e["last_error"] = p->lastError();
    e["queued_bytes"] = p->queuedBytes();
    e["in_flight"] = p->inFlight();
    const auto& c = p->counters();
    e["messages_sent"] = c.messagesSent;
    e["messages_received"] = c.messagesReceived;
    e["bytes_sent"] = c.bytesSent;
    e["bytes_received"] = c.bytesReceived;
    e["connects"] = c.connects;
    e["heartbeats_sent"] = c.heartbeatsSent;
    e["dials"] = c.dials;
    e["idle_closes"] = c.idleCloses;
    e["confirmed"] = p->confirmedCount();
    const LatencyHistogram& h = p->deliveryLatency();
    json buckets = json::array();
    uint64_t cumulative = 0;
    for (size_t i = 0; i < LatencyHistogram::kBounds.size(); i++)
      buckets.push_back({LatencyHistogram::kBounds[i], cumulative += h.bucket(i)});
    e["delivery_seconds"] = {
        {"buckets", std::move(buckets)}, {"count", h.count()}, {"sum", h.sum()}};
    e["failed"] = p->failedCount();
    json flows = json::array();
    for (const auto& f : p->flowStats())
      flows.push_back({{"service", f.service},
                       {"unconfirmed_bytes", f.unconfirmed},
                       {"queued_bytes", f.queuedBytes},
                       {"queued_messages", f.queuedMessages},
                       {"paused", f.paused}});
    e["flows"] = std::move(flows);
    if (const peer::Connection* conn = p->connection()) {
      const auto& k = conn->counters();
      snprintf(inc, sizeof inc, "%016llx", static_cast<unsigned long long>(p->remoteIncarnation()));
      e["incarnation"] = inc;
      if (conn->established()) {
        // Against the configuration as it is now: a reload may have rotated it.
        const std::string fp = conn->secretFingerprint();
        const char* how = "no";
        if (conn->authenticated()) {
          how = "a secret no longer configured";
          if (config_.secret && fp == config_.secret->fingerprint)
            how = "current secret";
          else if (config_.previousSecret && fp == config_.previousSecret->fingerprint)
            how = "previous secret";
        }
        e["authenticated"] = how;
      }
      e["rdma"] = {{"credits", conn->credits()},
                   {"send_wrs", k.sendsPosted},
                   {"send_wrs_signaled", k.sendsSignaled},
                   {"post_send_calls", k.postSendCalls},
                   {"recv_wrs", k.recvsPosted},
                   {"post_recv_calls", k.postRecvCalls},
                   {"batches_received", k.batchesReceived},
                   {"credit_stalls", k.creditStalls},
                   {"send_pool_waits", k.sendPoolWaits},
                   {"receive_allowance", conn->allowance()},
                   {"receive_lent", conn->lent()},
                   {"credits_lent", k.creditsLent},
                   {"credits_released", k.creditsReleased}};
    }
    peers.push_back(std::move(e));
  }
  j["peers"] = std::move(peers);
  std::vector<std::string> names;
  for (const auto& [name, session] : services_)
    names.push_back(name);
  std::sort(names.begin(), names.end());
  j["services"] = names;
  j["counters"] = {{"messages_routed", counters_.messagesRouted},
                   {"local_deliveries", counters_.localDeliveries},
                   {"remote_deliveries", counters_.remoteDeliveries},
                   {"failures", counters_.failures},
                   {"unknown_node", counters_.unknownNode},
                   {"unknown_service", counters_.unknownService},
                   {"backpressure_pauses", counters_.backpressurePauses},
                   {"holds_ignored", counters_.holdsIgnored},
                   {"receive_memory_full", counters_.receiveMemoryFull},
                   {"dropped_completions", mesh_->droppedCompletions()}};
  const local::PolicyCounters& pc = server_->policyCounters();
  j["local_policy"] = {
      {"enabled", config_.localPolicy.has_value()},
      {"permission_denied", {{"connect", pc.connect}, {"register", pc.reg}, {"send", pc.send}}},
      {"revoked_sessions", pc.revokedSessions}};
  j["log"] = {{"dropped", logging::dropped()}, {"suppressed", logging::suppressed()}};
  json rejected = json::object();
  const auto& r = mesh_->rejected();
  for (size_t i = 1; i < r.size(); i++)
    rejected[peer::keyOf(static_cast<peer::RejectReason>(i))] = r[i];
  j["rejected_connections"] = std::move(rejected);
  const auto fingerprint = [](const std::optional<config::Secret>& s) {
    return s ? json(s->fingerprint) : json(nullptr);
  };
  j["authentication"] = {{"secret", fingerprint(config_.secret)},
                         {"previous_secret", fingerprint(config_.previousSecret)}};
  j["unconsumed"] = {{"bytes", server_->trackedBytes()},
                     {"limit_bytes", config_.receiveMemoryLimit}};
  json devices = json::array();
  for (const auto& d : mesh_->deviceStats()) {
    json dev = {{"name", d.name},
                {"failed", d.failed},
                {"cq_entries", d.cqEntries},
                {"async_events", d.counters.asyncEvents},
                {"buffer_sets_created", d.counters.bufferSetsCreated},
                {"buffer_sets_reused", d.counters.bufferSetsReused},
                {"registered_bytes", d.counters.registeredBytes},
                {"send_buffers", {{"count", d.sendBuffers}, {"free", d.sendBuffersFree}}}};
    if (d.srq)
      dev["shared_receive_queue"] = {
          {"registered", d.srq->registered},    {"posted", d.srq->posted},
          {"reserved", d.srq->reserved},        {"connections", d.srq->connections},
          {"limit_events", d.srq->limitEvents}, {"refused", d.srq->refused}};
    devices.push_back(std::move(dev));
  }
  j["devices"] = std::move(devices);
  const rdma::MemoryPlan plan = mesh_->memoryPlan();
  j["registered_memory"] = {{"bytes", mesh_->registeredBytes()},
                            {"limit_bytes", plan.limit},
                            {"receive_queue", config::toString(config_.receiveQueue)},
                            {"per_peer_bytes", plan.perPeer},
                            {"send_pool_bytes", plan.sendPool},
                            {"lendable_bytes", plan.burst},
                            {"all_peers_bytes", plan.allPeers}};
  j["listening"] = mesh_->listening();
  const auto& sc = loop::syscalls();
  j["loop"] = {{"wakeups", sc.loopWakeups},
               {"socket_reads", sc.socketReads},
               {"socket_writes", sc.socketWrites},
               {"accepts", sc.accepts},
               {"cq_event_reads", sc.cqEventReads},
               {"cm_event_reads", sc.cmEventReads},
               {"syscalls", sc.total()}};
  j["rss_bytes"] = residentBytes();
  j["heap_allocations"] = heapAllocations();
  // Text from files and peers (a path, a reload problem) may not be UTF-8:
  // replaced, never thrown.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace rdmamsg
