// Config helpers: peer lookup and the one-line description logged at startup.
#include "config/config.h"

#include <cstdio>

namespace rdmamsg::config {

const char* toString(ReceiveQueue q) {
  return q == ReceiveQueue::kShared ? "shared" : "per_peer";
}

const char* toString(ConnectMode mode) {
  return mode == ConnectMode::kOnDemand ? "on_demand" : "always";
}

const char* toString(RailPolicy policy) {
  return policy == RailPolicy::kSpread ? "spread" : "active-standby";
}

std::size_t Config::laneCount() const {
  std::size_t n = 0;
  for (const Peer& peer : peers)
    n += lanesWith(peer);
  return n;
}

const Peer* Config::findPeer(std::string_view name) const {
  for (const Peer& peer : peers) {
    if (peer.name == name) return &peer;
  }
  return nullptr;
}

std::vector<Address> Peer::rails() const {
  std::vector<Address> all{address};
  all.insert(all.end(), extraRails.begin(), extraRails.end());
  return all;
}

std::vector<Address> Config::listenRails() const {
  std::vector<Address> all{listen};
  all.insert(all.end(), extraListen.begin(), extraListen.end());
  return all;
}

std::string toString(const std::vector<Address>& rails) {
  std::string text;
  for (const Address& a : rails)
    text += (text.empty() ? "" : ", ") + a.toString();
  return rails.size() == 1 ? text : "[" + text + "]";
}

std::vector<Setting> settings(const Config& config) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(config.local.socketMode));
  std::string peers;
  for (const Peer& peer : config.peers) {
    peers += (peers.empty() ? "" : ",") + peer.name + "@" + toString(peer.rails()) +
             (peer.verifyAddress ? "" : "(any address)");
  }
  const auto secretText = [](const std::optional<Secret>& s) {
    return s ? s->file + " (fingerprint " + s->fingerprint + ")" : std::string("-");
  };
  return {
      {"node", config.node},
      {"listen", toString(config.listenRails())},
      {"socket", config.local.socket},
      {"socket_mode", mode},
      {"socket_group", config.local.socketGroup.value_or("-")},
      {"local_policy", describe(config.local.localPolicy)},
      {"shared_memory", config.local.sharedMemory ? "true" : "false"},
      {"idle_strategy", idle::toString(config.idleStrategy)},
      {"peers", std::to_string(config.peers.size()) + "[" + peers + "]"},
      {"secret_file", secretText(config.auth.secret)},
      {"previous_secret_file", secretText(config.auth.previousSecret)},
      {"encryption", config.auth.encryption ? "on" : "off"},
      {"tos", config.tos ? std::to_string(*config.tos) : std::string("-")},
      {"rail_policy", toString(config.railPolicy)},
      {"buffer_size", formatSize(config.buffers.bufferSize)},
      {"buffer_count", std::to_string(config.buffers.bufferCount)},
      {"credits", std::to_string(config.buffers.grantedCredits())},
      {"receive_queue", toString(config.buffers.receiveQueue)},
      {"shared_receive_buffers", std::to_string(config.buffers.sharedReceiveBuffers)},
      {"send_buffers", std::to_string(config.buffers.sendBuffers)},
      {"registered_memory_limit", formatSize(config.buffers.registeredMemoryLimit)},
      {"max_message_size", formatSize(config.buffers.maxMessageSize)},
      {"send_queue_limit", formatSize(config.buffers.sendQueueLimit)},
      {"flow_window", formatSize(config.buffers.flowWindow)},
      {"receive_memory_limit", formatSize(config.buffers.receiveMemoryLimit)},
      {"max_subscriptions", std::to_string(config.subjects.maxSubscriptions)},
      {"pending_limit", std::to_string(config.subjects.pendingLimit)},
      {"max_peer_interest", std::to_string(config.subjects.maxPeerInterest)},
      {"heartbeat_interval", formatDuration(config.timers.heartbeatInterval)},
      {"heartbeat_timeout", formatDuration(config.timers.heartbeatTimeout)},
      {"reconnect_backoff_min", formatDuration(config.timers.reconnectBackoffMin)},
      {"reconnect_backoff_max", formatDuration(config.timers.reconnectBackoffMax)},
      {"connect_timeout", formatDuration(config.timers.connectTimeout)},
      {"message_timeout", formatDuration(config.timers.messageTimeout)},
      {"rail_probe_interval", formatDuration(config.timers.railProbeInterval)},
      {"connect", toString(config.connect)},
      {"idle_timeout", config.timers.idleTimeout.count() == 0
                           ? std::string("off")
                           : formatDuration(config.timers.idleTimeout)},
      {"log_level", std::string(toString(config.logLevel))},
      {"metrics_listen", config.metricsListen ? config.metricsListen->toString() : "-"},
  };
}

std::string describe(const Config& config) {
  std::string out;
  for (const auto& [key, value] : settings(config))
    out += key + "=" + value + " ";
  return out + "file=" + config.sourceFile;
}

}  // namespace rdmamsg::config
