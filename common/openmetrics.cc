// OpenMetrics exposition of the status (openmetrics.h).
#include "common/openmetrics.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

namespace rdmamsg::metrics {

namespace {

using nlohmann::json;

// Families in the order they are first declared, each with its samples, so
// that a family's samples stay together as OpenMetrics requires.
class Exposition {
 public:
  void family(const std::string& name, const char* type, const char* help) {
    if (index_.count(name) != 0) return;
    index_[name] = families_.size();
    families_.push_back({name, type, help, {}});
  }
  // A sample of family `name`: name + suffix, labels ("k=\"v\",..."), value.
  void sample(const std::string& name, const std::string& suffix, const std::string& labels,
              const std::string& value) {
    auto& f = families_[index_.at(name)];
    f.samples.push_back(name + suffix + (labels.empty() ? "" : "{" + labels + "}") + " " + value);
  }
  std::string text() const {
    std::string out;
    for (const auto& f : families_) {
      if (f.samples.empty()) continue;
      out += "# TYPE " + f.name + " " + f.type + "\n# HELP " + f.name + " " + f.help + "\n";
      for (const auto& s : f.samples)
        out += s + "\n";
    }
    return out + "# EOF\n";
  }

 private:
  struct Family {
    std::string name, type, help;
    std::vector<std::string> samples;
  };
  std::vector<Family> families_;
  std::map<std::string, size_t> index_;
};

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"')
      out += {'\\', c};
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// Python's repr of a float, which OpenMetrics parsers take as canonical for
// `le`: shortest round trip, and ".0" on whole numbers.
std::string canonical(double v) {
  char buf[64];
  const double a = v < 0 ? -v : v;
  const auto format =
      a == 0 || (a >= 1e-4 && a < 1e16) ? std::chars_format::fixed : std::chars_format::scientific;
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, format);
  std::string s(buf, ec == std::errc() ? end : buf);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  // Python writes a two-digit exponent at least: 2.5e-05, not 2.5e-5.
  if (auto e = s.find('e'); e != std::string::npos && s.size() - e == 3) s.insert(e + 2, "0");
  return s;
}

std::string label(const char* key, const std::string& value) {
  return std::string(key) + "=\"" + escape(value) + "\"";
}

std::string number(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v.get<double>());
  return buf;
}

// A metric read from one field of a JSON object.
struct Field {
  const char* key;   // in the object
  const char* name;  // family name (counters without _total)
  const char* type;  // counter | gauge
  const char* help;
};

void fields(Exposition& e, const json& obj, const std::vector<Field>& list,
            const std::string& labels) {
  for (const auto& f : list) {
    e.family(f.name, f.type, f.help);
    if (!obj.contains(f.key) || !(obj[f.key].is_number() || obj[f.key].is_boolean())) continue;
    e.sample(f.name, std::string(f.type) == "counter" ? "_total" : "", labels, number(obj[f.key]));
  }
}

const std::vector<Field> kDaemon = {
    {"uptime_seconds", "rdmamsg_uptime_seconds", "gauge", "Seconds since rdmamsgd started."},
    {"rss_bytes", "rdmamsg_resident_memory_bytes", "gauge", "Resident memory of rdmamsgd."},
    {"heap_allocations", "rdmamsg_heap_allocations", "counter", "Heap allocations made."},
    {"listening", "rdmamsg_listening", "gauge",
     "1 while an rdma_cm listener is up on at least one rail (0: waiting for a device)."},
    {"probes_answered", "rdmamsg_probes_answered", "counter",
     "Probes of this node's rails by its peers, answered."},
};
const std::vector<Field> kConfig = {
    {"generation", "rdmamsg_config_generation", "gauge",
     "Configuration generation: 1 at start, one more per reload applied."},
    {"reloads_failed", "rdmamsg_config_reloads_failed", "counter",
     "Reloads refused because the file had problems."},
};
const std::vector<Field> kCounters = {
    {"messages_routed", "rdmamsg_messages_routed", "counter",
     "Messages accepted from local clients."},
    {"local_deliveries", "rdmamsg_local_deliveries", "counter",
     "Messages from local clients handed to a listener on this node."},
    {"remote_deliveries", "rdmamsg_remote_deliveries", "counter",
     "Messages from peers handed to a listener on this node."},
    {"failures", "rdmamsg_send_failures", "counter",
     "Messages reported to their senders as failed, for any reason."},
    {"backpressure_pauses", "rdmamsg_backpressure_pauses", "counter",
     "HOLDs sent to clients: a destination's flow queue was full."},
    {"holds_ignored", "rdmamsg_holds_ignored", "counter",
     "Clients no longer read because they went on sending past a HOLD."},
    {"receive_memory_full", "rdmamsg_receive_memory_full", "counter",
     "Messages answered busy at receive_memory_limit (their listener was behind)."},
    {"dropped_completions", "rdmamsg_dropped_completions", "counter",
     "Work completions for connections already gone."},
};
const std::vector<Field> kLog = {
    {"dropped", "rdmamsg_log_lines_dropped", "counter",
     "Log lines dropped because the log writer fell behind."},
    {"suppressed", "rdmamsg_log_lines_suppressed", "counter",
     "Repeated warnings left out by rate limits."},
};
const std::vector<Field> kUnconsumed = {
    {"bytes", "rdmamsg_unconsumed_bytes", "gauge",
     "Bytes accepted for listeners that have not taken them yet."},
    {"limit_bytes", "rdmamsg_receive_memory_limit_bytes", "gauge", "receive_memory_limit."},
};
const std::vector<Field> kPeer = {
    {"queued_bytes", "rdmamsg_peer_queued_bytes", "gauge", "Bytes queued for the peer."},
    {"in_flight", "rdmamsg_peer_in_flight_messages", "gauge",
     "Messages sent to the peer and not confirmed."},
    {"messages_sent", "rdmamsg_peer_messages_sent", "counter", "Messages sent to the peer."},
    {"messages_received", "rdmamsg_peer_messages_received", "counter",
     "Messages received from the peer."},
    {"bytes_sent", "rdmamsg_peer_bytes_sent", "counter", "Payload bytes sent to the peer."},
    {"bytes_received", "rdmamsg_peer_bytes_received", "counter",
     "Payload bytes received from the peer."},
    {"confirmed", "rdmamsg_peer_messages_confirmed", "counter",
     "Messages whose outcome the peer confirmed."},
    {"failed", "rdmamsg_peer_messages_failed", "counter",
     "Messages that timed out or were lost with a connection."},
    {"connects", "rdmamsg_peer_connects", "counter", "Connections established with the peer."},
    {"dials", "rdmamsg_peer_dials", "counter", "Connection attempts made to the peer."},
    {"idle_closes", "rdmamsg_peer_idle_closes", "counter",
     "Connections to the peer closed by agreement for being idle (connect: on_demand)."},
    {"heartbeats_sent", "rdmamsg_peer_heartbeats_sent", "counter", "Heartbeats sent to the peer."},
    {"rail_failovers", "rdmamsg_peer_rail_failovers", "counter",
     "Times an established connection was lost and the peer dialed over its next rail at once."},
    {"sessions_resumed", "rdmamsg_peer_sessions_resumed", "counter",
     "Times the session with the peer went on over a new connection (rails) without losing a "
     "message."},
    {"messages_resent", "rdmamsg_peer_messages_resent", "counter",
     "Messages sent again on a resumed session: unconfirmed, and not received whole by the peer, "
     "when a connection was lost."},
    {"rail", "rdmamsg_peer_rail", "gauge",
     "The rail (0, 1, ...: its address in the peer's list) the current connection runs over."},
    {"rail_failbacks", "rdmamsg_peer_rail_failbacks", "counter",
     "Times the session moved back to a rail before the one in use once it was healthy again."},
};
// One per rail a peer shares with this node (label rail: its index).
const std::vector<Field> kRail = {
    {"health", "rdmamsg_rail_health", "gauge",
     "The rail's health, 0 to 1000: 100 off per failure over it, 100 back per success."},
    {"connects", "rdmamsg_rail_connects", "counter", "Connections established over the rail."},
    {"failures", "rdmamsg_rail_failures", "counter",
     "Dials, connections and probes that failed over the rail."},
    {"failovers", "rdmamsg_rail_failovers", "counter",
     "Times the peer's connection left the rail because it failed."},
    {"failbacks", "rdmamsg_rail_failbacks", "counter",
     "Times the session moved back to the rail once it was healthy again."},
    {"failbacks_failed", "rdmamsg_rail_failbacks_failed", "counter",
     "Failbacks to the rail that failed within their probation (the rail was held down)."},
    {"held_down_ms", "rdmamsg_rail_held_down_milliseconds", "gauge",
     "How much longer the session does not move back to the rail (failback hold-down)."},
    {"probes", "rdmamsg_rail_probes", "counter", "Probes of the rail while another was in use."},
    {"probes_failed", "rdmamsg_rail_probes_failed", "counter", "Probes of the rail that failed."},
    {"batches_sent", "rdmamsg_rail_batches_sent", "counter", "Batches sent over the rail."},
    {"batches_received", "rdmamsg_rail_batches_received", "counter",
     "Batches received over the rail."},
    {"bytes_sent", "rdmamsg_rail_bytes_sent", "counter", "Bytes of batches sent over the rail."},
    {"bytes_received", "rdmamsg_rail_bytes_received", "counter",
     "Bytes of batches received over the rail."},
    {"messages_received", "rdmamsg_rail_messages_received", "counter",
     "Messages received whole over the rail."},
    {"messages_confirmed", "rdmamsg_rail_messages_confirmed", "counter",
     "Outcomes of this node's messages confirmed over the rail."},
    {"messages_resent", "rdmamsg_rail_messages_resent", "counter",
     "Messages sent again over the rail when a session resumed on it."},
};
const std::vector<Field> kRdma = {
    {"credits", "rdmamsg_peer_send_credits", "gauge", "Send credits of the current connection."},
    {"send_wrs", "rdmamsg_peer_send_work_requests", "counter",
     "Send work requests posted on the current connection."},
    {"post_send_calls", "rdmamsg_peer_post_send_calls", "counter",
     "ibv_post_send calls on the current connection."},
    {"recv_wrs", "rdmamsg_peer_recv_work_requests", "counter",
     "Receive work requests posted on the current connection."},
    {"post_recv_calls", "rdmamsg_peer_post_recv_calls", "counter",
     "ibv_post_recv calls on the current connection."},
    {"batches_received", "rdmamsg_peer_batches_received", "counter",
     "Batches received on the current connection."},
    {"credit_stalls", "rdmamsg_peer_credit_stalls", "counter",
     "Times sending waited for credits on the current connection."},
    {"send_pool_waits", "rdmamsg_peer_send_pool_waits", "counter",
     "Times a batch waited for the device's send pool on the current connection."},
    {"receive_allowance", "rdmamsg_peer_receive_allowance", "gauge",
     "Receive buffers the peer may fill on the current connection."},
    {"credits_lent", "rdmamsg_peer_credits_lent", "counter",
     "Shared receive buffers lent to the peer beyond its initial grant."},
    {"credits_released", "rdmamsg_peer_credits_released", "counter",
     "Credits the peer gave back when idle."},
};
const std::vector<Field> kFlow = {
    {"unconfirmed_bytes", "rdmamsg_flow_unconfirmed_bytes", "gauge",
     "Window bytes of the flow sent and not confirmed."},
    {"queued_bytes", "rdmamsg_flow_queued_bytes", "gauge", "Bytes queued in the flow."},
    {"queued_messages", "rdmamsg_flow_queued_messages", "gauge", "Messages queued in the flow."},
    {"paused", "rdmamsg_flow_paused", "gauge", "1 while the flow holds its senders back."},
};
const std::vector<Field> kDevice = {
    {"failed", "rdmamsg_device_failed", "gauge", "1 when the RDMA device failed or was removed."},
    {"cq_entries", "rdmamsg_device_cq_entries", "gauge", "Entries of the device's shared CQ."},
    {"async_events", "rdmamsg_device_async_events", "counter", "Asynchronous device events."},
    {"buffer_sets_created", "rdmamsg_device_buffer_sets_created", "counter",
     "Buffer sets allocated and registered."},
    {"buffer_sets_reused", "rdmamsg_device_buffer_sets_reused", "counter",
     "Buffer sets reused by a new connection."},
    {"registered_bytes", "rdmamsg_device_registered_bytes", "gauge",
     "Memory registered with the device."},
};
const std::vector<Field> kSendPool = {
    {"count", "rdmamsg_device_send_buffers", "gauge", "Send buffers of the device's pool."},
    {"free", "rdmamsg_device_send_buffers_free", "gauge", "Send buffers free in the pool."},
};
const std::vector<Field> kSrq = {
    {"registered", "rdmamsg_device_srq_buffers", "gauge",
     "Buffers registered for the shared receive queue."},
    {"posted", "rdmamsg_device_srq_posted", "gauge", "Buffers posted on the shared receive queue."},
    {"reserved", "rdmamsg_device_srq_reserved", "gauge",
     "Shared receive buffers reserved by the connections' allowances."},
    {"limit_events", "rdmamsg_device_srq_limit_events", "counter",
     "Times the shared receive queue ran below its watermark."},
    {"refused", "rdmamsg_device_srq_refused", "counter",
     "Connections refused receive buffers (registered_memory_limit, or the queue full)."},
};
const std::vector<Field> kRegistered = {
    {"bytes", "rdmamsg_registered_bytes", "gauge", "Memory registered with RDMA devices."},
    {"limit_bytes", "rdmamsg_registered_memory_limit_bytes", "gauge", "registered_memory_limit."},
};

const json kEmpty = json::object();
const json kNone = json::array();
const json& at(const json& obj, const char* key) {
  return obj.contains(key) && obj[key].is_object() ? obj[key] : kEmpty;
}
const json& listAt(const json& obj, const char* key) {
  return obj.contains(key) && obj[key].is_array() ? obj[key] : kNone;
}

}  // namespace

namespace {

void daemonFamilies(Exposition& e, const json& s) {
  e.family("rdmamsg_build", "info", "The daemon's node name, version and incarnation.");
  e.sample("rdmamsg_build", "_info",
           label("node", s.value("node", "")) + "," + label("version", s.value("version", "")) +
               "," + label("incarnation", s.value("incarnation", "")),
           "1");
  fields(e, s, kDaemon, "");
  fields(e, at(s, "config"), kConfig, "");
  fields(e, at(s, "counters"), kCounters, "");
  const json& c = at(s, "counters");
  e.family("rdmamsg_send_failures_by_cause", "counter",
           "Messages failed because their destination does not exist.");
  for (const char* cause : {"unknown_node", "unknown_service"})
    if (c.contains(cause))
      e.sample("rdmamsg_send_failures_by_cause", "_total", label("cause", cause), number(c[cause]));
  fields(e, at(s, "log"), kLog, "");
  e.family("rdmamsg_rejected_connections", "counter",
           "Incoming peer connections refused, by reason (wrong_address: not from the "
           "claimed node's configured address).");
  for (const auto& [reason, count] : at(s, "rejected_connections").items())
    if (count.is_number())
      e.sample("rdmamsg_rejected_connections", "_total", label("reason", reason), number(count));
  fields(e, at(s, "unconsumed"), kUnconsumed, "");
  e.family("rdmamsg_listener_up", "gauge",
           "1 while the rdma_cm listener of the rail (listen address) is up.");
  if (s.contains("listeners") && s["listeners"].is_array())
    for (const auto& l : s["listeners"])
      e.sample("rdmamsg_listener_up", "", label("address", l.value("address", "")),
               l.value("listening", false) ? "1" : "0");
  if (s.contains("services") && s["services"].is_array()) {
    e.family("rdmamsg_services", "gauge", "Services registered by local clients.");
    e.sample("rdmamsg_services", "", "", std::to_string(s["services"].size()));
  }
}

void policyFamilies(Exposition& e, const json& s) {
  const json& policy = at(s, "local_policy");
  e.family("rdmamsg_permission_denied", "counter",
           "Local client requests refused by local_policy, by action (connect, register, send, "
           "publish, subscribe).");
  for (const auto& [action, count] : at(policy, "permission_denied").items())
    if (count.is_number())
      e.sample("rdmamsg_permission_denied", "_total", label("action", action), number(count));
  e.family("rdmamsg_local_policy_revoked_sessions", "counter",
           "Local clients closed by a reload whose local_policy no longer allows what they held.");
  if (policy.contains("revoked_sessions"))
    e.sample("rdmamsg_local_policy_revoked_sessions", "_total", "",
             number(policy["revoked_sessions"]));
}

void loopFamilies(Exposition& e, const json& s) {
  const json& loop = at(s, "loop");
  e.family("rdmamsg_loop_wakeups", "counter", "Event loop iterations that handled events.");
  if (loop.contains("wakeups"))
    e.sample("rdmamsg_loop_wakeups", "_total", "", number(loop["wakeups"]));
  e.family("rdmamsg_loop_spins", "counter",
           "Passes of a spinning event loop over its rings and completion queues "
           "(idle_strategy adaptive or busy).");
  if (loop.contains("spins")) e.sample("rdmamsg_loop_spins", "_total", "", number(loop["spins"]));
  e.family("rdmamsg_loop_sleeps", "counter", "Blocking waits of the event loop in epoll_wait.");
  if (loop.contains("sleeps"))
    e.sample("rdmamsg_loop_sleeps", "_total", "", number(loop["sleeps"]));
  e.family("rdmamsg_loop_syscalls", "counter", "System calls made by the event loop, by call.");
  for (const char* call : {"timer_sets", "socket_reads", "socket_writes", "accepts",
                           "cq_event_reads", "cm_event_reads", "doorbell_rings", "doorbell_reads"})
    if (loop.contains(call))
      e.sample("rdmamsg_loop_syscalls", "_total", label("call", call), number(loop[call]));
  const json& copies = at(s, "copies");
  e.family("rdmamsg_bytes_copied", "counter",
           "Bytes the daemon copied, by stage of a message's way through it.");
  for (const char* stage : {"client_in", "flow_queue", "send_buffer", "reassembly", "deliver",
                            "client_out", "kept_for_resume"}) {
    const std::string key = std::string(stage) + "_bytes";
    if (copies.contains(key))
      e.sample("rdmamsg_bytes_copied", "_total", label("stage", stage), number(copies[key]));
  }
  if (copies.contains("sent_in_place_bytes")) {
    e.family("rdmamsg_bytes_sent_in_place", "counter",
             "Payload bytes posted to the NIC straight from a client's shared-memory ring.");
    e.sample("rdmamsg_bytes_sent_in_place", "_total", {}, number(copies["sent_in_place_bytes"]));
  }
  if (copies.contains("delivered_in_area_bytes")) {
    e.family("rdmamsg_bytes_delivered_in_area", "counter",
             "Payload bytes written into a client's shared-memory delivery area, which the "
             "client reads in place (counted in the deliver stage too).");
    e.sample("rdmamsg_bytes_delivered_in_area", "_total", {},
             number(copies["delivered_in_area_bytes"]));
  }
}

// Every peer entry of the status, and with rail_policy spread each of its
// lanes, whose samples carry a lane label besides the peer's name.
json peerEntries(const json& s) {
  json peers = json::array();
  for (const auto& p : listAt(s, "peers")) {
    peers.push_back(p);
    for (const auto& lane : listAt(p, "lanes"))
      peers.push_back(lane);
  }
  return peers;
}

std::string peerLabel(const json& p) {
  std::string l = label("peer", p.value("name", ""));
  if (p.contains("lane") && p["lane"].is_number())
    l += "," + label("lane", std::to_string(p["lane"].get<uint64_t>()));
  return l;
}

void deliveryHistograms(Exposition& e, const json& peers) {
  e.family("rdmamsg_peer_delivery_seconds", "histogram",
           "Time from a message's first fragment on the link to the peer's confirmation that "
           "its listener has it (1 in 16 messages).");
  for (const auto& p : peers) {
    const json& h = at(p, "delivery_seconds");
    if (!h.contains("buckets")) continue;
    const std::string pl = peerLabel(p);
    for (const auto& b : h["buckets"])
      e.sample("rdmamsg_peer_delivery_seconds", "_bucket",
               pl + "," + label("le", canonical(b[0].get<double>())), number(b[1]));
    e.sample("rdmamsg_peer_delivery_seconds", "_bucket", pl + "," + label("le", "+Inf"),
             number(h["count"]));
    e.sample("rdmamsg_peer_delivery_seconds", "_count", pl, number(h["count"]));
    e.sample("rdmamsg_peer_delivery_seconds", "_sum", pl, number(h["sum"]));
  }
}

void peerFamilies(Exposition& e, const json& s) {
  const json peers = peerEntries(s);
  e.family("rdmamsg_peer_up", "gauge", "1 while the connection to the peer is established.");
  for (const auto& p : peers) {
    const std::string pl = peerLabel(p);
    e.sample("rdmamsg_peer_up", "", pl, p.value("state", "") == "established" ? "1" : "0");
  }
  for (const auto& p : peers)
    fields(e, p, kPeer, peerLabel(p));
  for (const auto& p : peers)
    fields(e, at(p, "rdma"), kRdma, peerLabel(p));
  e.family("rdmamsg_peer_batches_rejected", "counter",
           "Batches from the peer that failed verification under the connection's session keys, "
           "by reason (bad_mac, replayed, reordered, truncated); each closed its connection.");
  for (const auto& p : peers)
    for (const auto& [reason, count] : at(p, "batches_rejected").items())
      if (count.is_number())
        e.sample("rdmamsg_peer_batches_rejected", "_total",
                 peerLabel(p) + "," + label("reason", reason), number(count));
  e.family("rdmamsg_rail_active", "gauge", "1 while the peer's connection runs over the rail.");
  for (const auto& p : peers)
    for (const auto& r : listAt(p, "rails"))
      e.sample("rdmamsg_rail_active", "",
               peerLabel(p) + "," + label("rail", std::to_string(r.value("rail", 0))),
               r.value("state", "") == "active" ? "1" : "0");
  for (const auto& p : peers)
    for (const auto& r : listAt(p, "rails"))
      fields(e, r, kRail, peerLabel(p) + "," + label("rail", std::to_string(r.value("rail", 0))));
  for (const auto& p : peers) {
    if (!p.contains("flows") || !p["flows"].is_array()) continue;
    for (const auto& f : p["flows"])
      fields(e, f, kFlow, peerLabel(p) + "," + label("service", f.value("service", "")));
  }
  deliveryHistograms(e, peers);
}

const std::vector<Field> kSubjects = {
    {"subscriptions", "rdmamsg_subscriptions", "gauge", "Subscriptions held by local clients."},
    {"pending_publishes", "rdmamsg_publishes_pending", "gauge",
     "Publishes and requests of local clients not yet answered."},
};
const std::vector<Field> kSubjectCounters = {
    {"published", "rdmamsg_publishes", "counter", "Publishes accepted from local clients."},
    {"no_subscribers", "rdmamsg_publishes_no_subscribers", "counter",
     "Publishes answered no_subscribers: no subscription in the mesh matched."},
    {"fanned_out", "rdmamsg_subject_fanouts", "counter",
     "Publishes delivered to this host's subscribers (one per publish and host)."},
    {"delivered", "rdmamsg_subject_deliveries", "counter", "MSG frames delivered to subscribers."},
    {"dropped", "rdmamsg_subject_dropped", "counter",
     "Messages dropped for a subscription: over its pending limit, or its client gone."},
    {"late_replies", "rdmamsg_late_replies", "counter",
     "Replies refused: their request was answered already or past its deadline."},
    {"interest_refused", "rdmamsg_peer_interest_refused", "counter",
     "Peer connections closed for announcing more than max_peer_interest patterns."},
};

void subjectFamilies(Exposition& e, const json& s) {
  const json& subjects = at(s, "subjects");
  fields(e, subjects, kSubjects, "");
  const json& c = at(subjects, "counters");
  fields(e, c, kSubjectCounters, "");
  e.family("rdmamsg_requests", "counter",
           "Requests of local clients, by outcome (reply, no_responders, timeout, "
           "peer_unreachable).");
  for (const auto& [outcome, key] :
       {std::pair{"reply", "replies"}, std::pair{"no_responders", "no_responders"},
        std::pair{"timeout", "timeouts"}, std::pair{"peer_unreachable", "unreachable"}})
    if (c.contains(key))
      e.sample("rdmamsg_requests", "_total", label("outcome", outcome), number(c[key]));
  e.family("rdmamsg_peer_interest_patterns", "gauge",
           "Subscription patterns the peer announced for its clients.");
  if (subjects.contains("interest") && subjects["interest"].is_array())
    for (const auto& i : subjects["interest"])
      e.sample("rdmamsg_peer_interest_patterns", "", label("peer", i.value("peer", "")),
               number(i["patterns"]));
}

void deviceFamilies(Exposition& e, const json& s) {
  if (s.contains("devices") && s["devices"].is_array())
    for (const auto& d : s["devices"]) {
      const std::string dl = label("device", d.value("name", ""));
      fields(e, d, kDevice, dl);
      fields(e, at(d, "send_buffers"), kSendPool, dl);
      fields(e, at(d, "shared_receive_queue"), kSrq, dl);
    }
  fields(e, at(s, "registered_memory"), kRegistered, "");
}

}  // namespace

std::string render(const json& s) {
  Exposition e;
  daemonFamilies(e, s);
  policyFamilies(e, s);
  loopFamilies(e, s);
  peerFamilies(e, s);
  subjectFamilies(e, s);
  deviceFamilies(e, s);
  return e.text();
}

}  // namespace rdmamsg::metrics
