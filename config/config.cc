// Config helpers: peer lookup and the one-line description logged at startup.
#include "config/config.h"

#include <cstdio>

namespace rdmamsg::config {

const Peer* Config::findPeer(std::string_view name) const {
  for (const Peer& peer : peers) {
    if (peer.name == name) return &peer;
  }
  return nullptr;
}

std::string describe(const Config& config) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(config.socketMode));
  std::string peers;
  for (const Peer& peer : config.peers) {
    peers += (peers.empty() ? "" : ",") + peer.name + "@" + peer.address.toString();
  }
  std::string out;
  out += "node=" + config.node;
  out += " listen=" + config.listen.toString();
  out += " socket=" + config.socket;
  out += " socket_mode=" + std::string(mode);
  out += " socket_group=" + config.socketGroup.value_or("-");
  out += " peers=" + std::to_string(config.peers.size()) + "[" + peers + "]";
  out += " buffer_size=" + formatSize(config.bufferSize);
  out += " buffer_count=" + std::to_string(config.bufferCount);
  out += " credits=" + std::to_string(config.grantedCredits());
  out += " max_message_size=" + formatSize(config.maxMessageSize);
  out += " send_queue_limit=" + formatSize(config.sendQueueLimit);
  out += " flow_window=" + formatSize(config.flowWindow);
  out += " receive_memory_limit=" + formatSize(config.receiveMemoryLimit);
  out += " heartbeat_interval=" + formatDuration(config.heartbeatInterval);
  out += " heartbeat_timeout=" + formatDuration(config.heartbeatTimeout);
  out += " reconnect_backoff_min=" + formatDuration(config.reconnectBackoffMin);
  out += " reconnect_backoff_max=" + formatDuration(config.reconnectBackoffMax);
  out += " connect_timeout=" + formatDuration(config.connectTimeout);
  out += " message_timeout=" + formatDuration(config.messageTimeout);
  out += " log_level=" + std::string(toString(config.logLevel));
  out += " file=" + config.sourceFile;
  return out;
}

}  // namespace rdmamsg::config
