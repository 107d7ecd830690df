// The status snapshot's JSON form (status.h).
#include "daemon/status.h"

#include <cstdio>

namespace rdmamsg::status {

using nlohmann::json;

namespace {

std::string hex16(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

json histogramJson(const LatencyHistogram& h) {
  json buckets = json::array();
  uint64_t cumulative = 0;
  for (size_t i = 0; i < LatencyHistogram::kBounds.size(); i++)
    buckets.push_back({LatencyHistogram::kBounds[i], cumulative += h.bucket(i)});
  return {{"buckets", std::move(buckets)}, {"count", h.count()}, {"sum", h.sum()}};
}

json flowsJson(const std::vector<peer::OutFlowStats>& flows) {
  json out = json::array();
  for (const auto& f : flows)
    out.push_back({{"service", f.service},
                   {"unconfirmed_bytes", f.unconfirmed},
                   {"queued_bytes", f.queuedBytes},
                   {"queued_messages", f.queuedMessages},
                   {"paused", f.paused}});
  return out;
}

// How an established connection was authenticated, against the
// configuration as it is now (a reload may have rotated the secrets).
const char* authenticatedText(const Snapshot& s, const peer::LinkSnapshot& l) {
  if (!l.authenticated) return "no";
  if (s.secret && l.secretFingerprint == *s.secret) return "current secret";
  if (s.previousSecret && l.secretFingerprint == *s.previousSecret) return "previous secret";
  return "a secret no longer configured";
}

json rdmaJson(const peer::LinkSnapshot& l) {
  const peer::ConnCounters& k = l.counters;
  return {{"credits", l.credits},
          {"send_wrs", k.sendsPosted},
          {"send_wrs_signaled", k.sendsSignaled},
          {"post_send_calls", k.postSendCalls},
          {"recv_wrs", k.recvsPosted},
          {"post_recv_calls", k.postRecvCalls},
          {"batches_received", k.batchesReceived},
          {"credit_stalls", k.creditStalls},
          {"send_pool_waits", k.sendPoolWaits},
          {"receive_allowance", l.allowance},
          {"receive_lent", l.lent},
          {"credits_lent", k.creditsLent},
          {"credits_released", k.creditsReleased}};
}

json railsJson(const std::vector<peer::RailSnapshot>& rails) {
  json out = json::array();
  for (const auto& r : rails) {
    const peer::RailStats& k = r.stats;
    json e = {{"rail", r.index},
              {"local_address", r.local},
              {"address", r.remote},
              {"state", peer::toString(r.state)},
              {"health", k.health},
              {"connects", k.connects},
              {"failures", k.failures},
              {"failovers", k.failovers},
              {"failbacks", k.failbacks},
              {"probes", k.probes},
              {"probes_failed", k.probesFailed},
              {"batches_sent", k.traffic.batchesSent},
              {"batches_received", k.traffic.batchesReceived},
              {"bytes_sent", k.traffic.bytesSent},
              {"bytes_received", k.traffic.bytesReceived},
              {"messages_received", k.traffic.messagesReceived},
              {"messages_confirmed", k.traffic.messagesConfirmed},
              {"messages_resent", k.traffic.messagesResent}};
    if (!k.device.empty()) e["device"] = k.device;
    if (!k.lastFailure.empty()) e["last_failure"] = k.lastFailure;
    e["failbacks_failed"] = k.failbacksFailed;
    e["held_down_ms"] = r.heldDownMs;
    out.push_back(std::move(e));
  }
  return out;
}

json peerJson(const Snapshot& s, const peer::PeerSnapshot& p) {
  const peer::PeerCounters& c = p.counters;
  json e = {{"name", p.name},
            {"address", p.address},
            {"state", peer::toString(p.state)},
            {"connect", s.connectMode},
            {"queued_bytes", p.queuedBytes},
            {"in_flight", p.inFlight},
            {"messages_sent", c.messagesSent},
            {"messages_received", c.messagesReceived},
            {"bytes_sent", c.bytesSent},
            {"bytes_received", c.bytesReceived},
            {"connects", c.connects},
            {"heartbeats_sent", c.heartbeatsSent},
            {"dials", c.dials},
            {"idle_closes", c.idleCloses},
            {"rail_failovers", c.railFailovers},
            {"sessions_resumed", c.sessionsResumed},
            {"messages_resent", c.messagesResent},
            {"confirmed", p.confirmed},
            {"delivery_seconds", histogramJson(p.deliveryLatency)},
            {"failed", p.failed},
            {"flows", flowsJson(p.flows)}};
  json rejected = json::object();
  for (size_t i = 0; i < peer::kBatchRejects; i++)
    rejected[peer::keyOf(static_cast<peer::BatchReject>(i))] = c.batchesRejected[i];
  e["batches_rejected"] = std::move(rejected);
  if (!p.lastError.empty()) e["last_error"] = p.lastError;
  e["rail_failbacks"] = c.railFailbacks;
  e["rails"] = railsJson(p.rails);
  if (p.link) {
    e["incarnation"] = hex16(p.link->remoteIncarnation);
    if (p.link->established) e["authenticated"] = authenticatedText(s, *p.link);
    if (p.link->batchProtection != nullptr) {
      e["batch_protection"] = p.link->batchProtection;
      e["key_rotations"] = p.link->keyRotations;
    }
    if (!p.link->device.empty()) e["device"] = p.link->device;
    if (p.link->trafficClass) e["traffic_class"] = *p.link->trafficClass;
    if (!p.link->remoteAddress.empty()) e["remote_address"] = p.link->remoteAddress;
    if (p.link->rail) e["rail"] = *p.link->rail;
    e["rdma"] = rdmaJson(*p.link);
  }
  if (!p.lanes.empty() || p.lane > 0) e["lane"] = p.lane;
  if (!p.lanes.empty()) {
    json lanes = json::array();
    for (const auto& l : p.lanes)
      lanes.push_back(peerJson(s, l));
    e["lanes"] = std::move(lanes);
  }
  return e;
}

json deviceJson(const peer::DeviceStats& d) {
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
  return dev;
}

void meshJson(const Snapshot& s, json& j) {
  json peers = json::array();
  for (const auto& p : s.mesh.peers)
    peers.push_back(peerJson(s, p));
  j["peers"] = std::move(peers);
  json devices = json::array();
  for (const auto& d : s.mesh.devices)
    devices.push_back(deviceJson(d));
  j["devices"] = std::move(devices);
  json rejected = json::object();
  for (size_t i = 1; i < s.mesh.rejected.size(); i++)
    if (static_cast<peer::RejectReason>(i) != peer::RejectReason::kProbed)
      rejected[peer::keyOf(static_cast<peer::RejectReason>(i))] = s.mesh.rejected[i];
  j["probes_answered"] = s.mesh.rejected[static_cast<size_t>(peer::RejectReason::kProbed)];
  j["rejected_connections"] = std::move(rejected);
  const rdma::MemoryPlan& plan = s.mesh.plan;
  j["registered_memory"] = {{"bytes", s.mesh.registeredBytes},  {"limit_bytes", plan.limit},
                            {"receive_queue", s.receiveQueue},  {"per_peer_bytes", plan.perPeer},
                            {"send_pool_bytes", plan.sendPool}, {"lendable_bytes", plan.burst},
                            {"all_peers_bytes", plan.allPeers}};
  j["listening"] = s.mesh.listening;
  json listeners = json::array();
  for (const auto& l : s.mesh.listeners) {
    json e = {{"address", l.address}, {"listening", l.listening}};
    if (!l.device.empty()) e["device"] = l.device;
    listeners.push_back(std::move(e));
  }
  j["listeners"] = std::move(listeners);
  j["incarnation"] = hex16(s.mesh.incarnation);
}

json countersJson(const Snapshot& s) {
  const RouterCounters& c = s.counters;
  return {{"messages_routed", c.messagesRouted},
          {"local_deliveries", c.localDeliveries},
          {"remote_deliveries", c.remoteDeliveries},
          {"failures", c.failures},
          {"unknown_node", c.unknownNode},
          {"unknown_service", c.unknownService},
          {"backpressure_pauses", c.backpressurePauses},
          {"holds_ignored", c.holdsIgnored},
          {"receive_memory_full", c.receiveMemoryFull},
          {"dropped_completions", s.mesh.droppedCompletions}};
}

void processJson(const Snapshot& s, json& j) {
  const loop::SyscallCounters& sc = s.loop;
  j["loop"] = {{"wakeups", sc.loopWakeups},
               {"timer_sets", sc.timerSets},
               {"socket_reads", sc.socketReads},
               {"socket_writes", sc.socketWrites},
               {"accepts", sc.accepts},
               {"cq_event_reads", sc.cqEventReads},
               {"cm_event_reads", sc.cmEventReads},
               {"doorbell_rings", sc.doorbellRings},
               {"doorbell_reads", sc.doorbellReads},
               {"syscalls", sc.total()},
               {"idle_strategy", s.idleStrategy},
               {"spins", s.idle.spins},
               {"sleeps", s.idle.sleeps},
               {"libevent_passes", s.idle.libeventPasses}};
  const loop::CopyCounters& cc = s.copies;
  j["copies"] = {{"client_in_bytes", cc.clientIn},
                 {"flow_queue_bytes", cc.flowQueue},
                 {"send_buffer_bytes", cc.sendBuffers},
                 {"reassembly_bytes", cc.reassembly},
                 {"deliver_bytes", cc.deliver},
                 {"client_out_bytes", cc.clientOut},
                 {"kept_for_resume_bytes", cc.keptForResume},
                 {"bytes", cc.total()},
                 {"sent_in_place_bytes", cc.sentInPlace},
                 {"delivered_in_area_bytes", cc.deliveredInArea}};
  j["log"] = {{"dropped", s.logDropped}, {"suppressed", s.logSuppressed}};
  j["rss_bytes"] = s.rssBytes;
  j["heap_allocations"] = s.heapAllocations;
}

json subjectsJson(const pubsub::PubSubSnapshot& s) {
  json patterns = json::array();
  for (const auto& p : s.patterns)
    patterns.push_back({{"pattern", p.pattern},
                        {"group", p.group},
                        {"subscriptions", p.subscriptions},
                        {"pending", p.pending},
                        {"delivered", p.delivered},
                        {"taken", p.taken},
                        {"dropped", p.dropped}});
  json interest = json::array();
  for (const auto& [peer, patternCount] : s.interest)
    interest.push_back({{"peer", peer}, {"patterns", patternCount}});
  const pubsub::PubSubCounters& c = s.counters;
  return {{"subscriptions", s.subscriptions},
          {"patterns", std::move(patterns)},
          {"patterns_truncated", s.truncated},
          {"interest", std::move(interest)},
          {"pending_publishes", s.pendingPublishes},
          {"counters",
           {{"published", c.published},
            {"no_subscribers", c.noSubscribers},
            {"fanned_out", c.fannedOut},
            {"delivered", c.delivered},
            {"dropped", c.dropped},
            {"requests", c.requests},
            {"replies", c.replies},
            {"no_responders", c.noResponders},
            {"timeouts", c.timeouts},
            {"unreachable", c.unreachable},
            {"late_replies", c.lateReplies},
            {"interest_refused", c.interestRefused}}}};
}

}  // namespace

json toJson(const Snapshot& s) {
  json j;
  j["node"] = s.node;
  j["version"] = s.version;
  j["listen"] = s.listen;
  j["socket"] = s.socket;
  j["uptime_seconds"] = s.uptimeSeconds;
  j["config"] = {{"file", s.configFile},
                 {"generation", s.config.generation},
                 {"log_level", s.logLevel},
                 {"last_reload", s.config.lastReload},
                 {"reloads_failed", s.config.reloadsFailed},
                 {"restart_pending", s.config.restartPending}};
  j["services"] = s.services;
  j["counters"] = countersJson(s);
  j["local_policy"] = {{"enabled", s.localPolicy},
                       {"permission_denied",
                        {{"connect", s.policy.connect},
                         {"register", s.policy.reg},
                         {"send", s.policy.send},
                         {"publish", s.policy.publish},
                         {"subscribe", s.policy.subscribe}}},
                       {"revoked_sessions", s.policy.revokedSessions}};
  const auto fingerprint = [](const std::optional<std::string>& f) {
    return f ? json(*f) : json(nullptr);
  };
  j["authentication"] = {{"secret", fingerprint(s.secret)},
                         {"previous_secret", fingerprint(s.previousSecret)}};
  j["unconsumed"] = {{"bytes", s.unconsumedBytes}, {"limit_bytes", s.receiveMemoryLimit}};
  j["subjects"] = subjectsJson(s.subjects);
  meshJson(s, j);
  processJson(s, j);
  return j;
}

}  // namespace rdmamsg::status
