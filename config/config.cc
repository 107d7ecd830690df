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

const Peer* Config::findPeer(std::string_view name) const {
  for (const Peer& peer : peers) {
    if (peer.name == name) return &peer;
  }
  return nullptr;
}

std::vector<Setting> settings(const Config& config) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(config.socketMode));
  std::string peers;
  for (const Peer& peer : config.peers) {
    peers += (peers.empty() ? "" : ",") + peer.name + "@" + peer.address.toString() +
             (peer.verifyAddress ? "" : "(any address)");
  }
  const auto secretText = [](const std::optional<Secret>& s) {
    return s ? s->file + " (fingerprint " + s->fingerprint + ")" : std::string("-");
  };
  return {
      {"node", config.node},
      {"listen", config.listen.toString()},
      {"socket", config.socket},
      {"socket_mode", mode},
      {"socket_group", config.socketGroup.value_or("-")},
      {"local_policy", describe(config.localPolicy)},
      {"shared_memory", config.sharedMemory ? "true" : "false"},
      {"idle_strategy", idle::toString(config.idleStrategy)},
      {"peers", std::to_string(config.peers.size()) + "[" + peers + "]"},
      {"secret_file", secretText(config.secret)},
      {"previous_secret_file", secretText(config.previousSecret)},
      {"encryption", config.encryption ? "on" : "off"},
      {"tos", config.tos ? std::to_string(*config.tos) : std::string("-")},
      {"buffer_size", formatSize(config.bufferSize)},
      {"buffer_count", std::to_string(config.bufferCount)},
      {"credits", std::to_string(config.grantedCredits())},
      {"receive_queue", toString(config.receiveQueue)},
      {"shared_receive_buffers", std::to_string(config.sharedReceiveBuffers)},
      {"send_buffers", std::to_string(config.sendBuffers)},
      {"registered_memory_limit", formatSize(config.registeredMemoryLimit)},
      {"max_message_size", formatSize(config.maxMessageSize)},
      {"send_queue_limit", formatSize(config.sendQueueLimit)},
      {"flow_window", formatSize(config.flowWindow)},
      {"receive_memory_limit", formatSize(config.receiveMemoryLimit)},
      {"max_subscriptions", std::to_string(config.maxSubscriptions)},
      {"pending_limit", std::to_string(config.pendingLimit)},
      {"max_peer_interest", std::to_string(config.maxPeerInterest)},
      {"heartbeat_interval", formatDuration(config.heartbeatInterval)},
      {"heartbeat_timeout", formatDuration(config.heartbeatTimeout)},
      {"reconnect_backoff_min", formatDuration(config.reconnectBackoffMin)},
      {"reconnect_backoff_max", formatDuration(config.reconnectBackoffMax)},
      {"connect_timeout", formatDuration(config.connectTimeout)},
      {"message_timeout", formatDuration(config.messageTimeout)},
      {"connect", toString(config.connect)},
      {"idle_timeout",
       config.idleTimeout.count() == 0 ? std::string("off") : formatDuration(config.idleTimeout)},
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
