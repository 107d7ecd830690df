// The router (router.h).
#include "daemon/router.h"

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
  for (auto& [peer, sessions] : pausedOnPeer_)
    std::erase(sessions, session);
  for (auto& [target, sessions] : pausedOnSession_)
    std::erase(sessions, session);
  if (auto waiting = pausedOnSession_.extract(session); !waiting.empty())
    for (auto s : waiting.mapped())
      server_->resumeReading(s);
  mesh_->resumeReceiving();  // messages held for its services are now answered
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
    server_->deliver(to, config_.node, r.fromService, r.service, r.payload);
    counters_.localDeliveries++;
    server_->ack(session, r.msgId);
    if (server_->outputCongested(to) && to != session) {
      counters_.backpressurePauses++;
      server_->pauseReading(session);
      pausedOnSession_[to].push_back(session);
    }
    return;
  }
  peer::Peer* p = mesh_->peer(r.node);
  if (p == nullptr) {
    counters_.unknownNode++;
    return fail(session, r.msgId,
                Status(Errc::unknown_node, "unknown node " + std::string(r.node) +
                                               " (not in the peers of " + config_.node + ")"));
  }
  bool overLimit = false;
  Status st = p->send(session, r.msgId, r.fromService, r.service, r.payload, overLimit);
  if (!st.ok()) return fail(session, r.msgId, std::move(st));
  if (overLimit) {
    counters_.backpressurePauses++;
    server_->pauseReading(session);
    pausedOnPeer_[p].push_back(session);
  }
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

void Router::queueDrained(peer::Peer& peer) {
  auto it = pausedOnPeer_.find(&peer);
  if (it == pausedOnPeer_.end()) return;
  for (auto s : it->second)
    server_->resumeReading(s);
  pausedOnPeer_.erase(it);
}

void Router::onSessionDrained(local::SessionId session) {
  if (auto waiting = pausedOnSession_.extract(session); !waiting.empty())
    for (auto s : waiting.mapped())
      server_->resumeReading(s);
  mesh_->resumeReceiving();
}

peer::Delivery Router::deliverIncoming(peer::Peer& from, std::string_view srcService,
                                       std::string_view dstService,
                                       std::span<const std::byte> payload) {
  const local::SessionId* listener = findService(dstService);
  if (listener == nullptr) {
    counters_.unknownService++;
    return peer::Delivery::kUnknownService;
  }
  if (server_->outputCongested(*listener)) return peer::Delivery::kCongested;
  server_->deliver(*listener, from.name(), srcService, dstService, payload);
  counters_.remoteDeliveries++;
  return peer::Delivery::kDelivered;
}

std::string Router::onStatus(local::SessionId) {
  return statusJson();
}

std::string Router::statusJson() const {
  using nlohmann::json;
  json j;
  j["node"] = config_.node;
  j["listen"] = config_.listen.toString();
  j["socket"] = config_.socket;
  char inc[24];
  snprintf(inc, sizeof inc, "%016llx", static_cast<unsigned long long>(mesh_->incarnation()));
  j["incarnation"] = inc;
  j["uptime_seconds"] =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count();
  json peers = json::array();
  for (const auto& p : mesh_->peers()) {
    json e;
    e["name"] = p->name();
    e["address"] = p->address().toString();
    e["state"] = p->state();
    if (!p->lastError().empty()) e["last_error"] = p->lastError();
    e["queued_bytes"] = p->queuedBytes();
    e["in_flight"] = p->inFlight();
    const auto& c = p->counters();
    e["messages_sent"] = c.messagesSent;
    e["messages_received"] = c.messagesReceived;
    e["bytes_sent"] = c.bytesSent;
    e["bytes_received"] = c.bytesReceived;
    e["confirmed"] = c.confirmed;
    e["failed"] = c.failed;
    e["connects"] = c.connects;
    e["heartbeats_sent"] = c.heartbeatsSent;
    if (const peer::Connection* conn = p->connection()) {
      const auto& k = conn->counters();
      snprintf(inc, sizeof inc, "%016llx", static_cast<unsigned long long>(p->remoteIncarnation()));
      e["incarnation"] = inc;
      e["rdma"] = {{"credits", conn->credits()},
                   {"send_wrs", k.sendsPosted},
                   {"send_wrs_signaled", k.sendsSignaled},
                   {"post_send_calls", k.postSendCalls},
                   {"recv_wrs", k.recvsPosted},
                   {"post_recv_calls", k.postRecvCalls},
                   {"batches_received", k.batchesReceived},
                   {"credit_stalls", k.creditStalls}};
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
                   {"dropped_completions", mesh_->droppedCompletions()}};
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
  return j.dump();
}

}  // namespace rdmamsg
