// Planning a configuration reload (reload.h).
#include "config/reload.h"

#include <algorithm>

namespace rdmamsg::config {

namespace {

bool isRestartKey(std::string_view key) {
  return std::find(std::begin(kRestartKeys), std::end(kRestartKeys), key) != std::end(kRestartKeys);
}

}  // namespace

std::variant<ReloadPlan, std::string> planReload(const Config& running, const Config& file) {
  if (file.node != running.node)
    return "node: the file names this node '" + file.node + "', but it runs as '" + running.node +
           "'; a node cannot be renamed while it runs: restart it";
  ReloadPlan plan;
  plan.next = file;
  plan.next.listen = running.listen;
  plan.next.extraListen = running.extraListen;
  plan.next.local.socket = running.local.socket;
  plan.next.local.socketMode = running.local.socketMode;
  plan.next.local.socketGroup = running.local.socketGroup;
  plan.next.buffers.bufferSize = running.buffers.bufferSize;
  plan.next.buffers.bufferCount = running.buffers.bufferCount;
  plan.next.buffers.receiveQueue = running.buffers.receiveQueue;
  plan.next.buffers.sharedReceiveBuffers = running.buffers.sharedReceiveBuffers;
  plan.next.buffers.sendBuffers = running.buffers.sendBuffers;
  plan.next.buffers.registeredMemoryLimit = running.buffers.registeredMemoryLimit;
  plan.next.buffers.maxMessageSize = running.buffers.maxMessageSize;
  plan.next.buffers.flowWindow = running.buffers.flowWindow;
  plan.next.metricsListen = running.metricsListen;
  plan.next.idleStrategy = running.idleStrategy;
  plan.next.auth.encryption = running.auth.encryption;
  plan.next.tos = running.tos;
  plan.next.railPolicy = running.railPolicy;
  plan.next.subjects.maxSubscriptions = running.subjects.maxSubscriptions;
  plan.next.subjects.maxPeerInterest = running.subjects.maxPeerInterest;
  plan.next.ownAddress = running.ownAddress;  // goes with listen

  const auto before = settings(running), inFile = settings(file), after = settings(plan.next);
  for (size_t i = 0; i < before.size(); i++) {
    const std::string& key = before[i].key;
    if (key == "peers" || key == "credits") continue;  // peers: below; credits: derived
    if (inFile[i].value == before[i].value) continue;
    std::string change = key + ": " + before[i].value + " -> " + inFile[i].value;
    if (isRestartKey(key))
      plan.restartPending.push_back(std::move(change));
    else if (after[i].value != before[i].value)
      plan.changed.push_back(std::move(change));
  }

  for (const Peer& p : running.peers) {
    const Peer* now = file.findPeer(p.name);
    if (now == nullptr)
      plan.removed.push_back(p.name);
    else if (now->rails() != p.rails())
      plan.readdressed.push_back(p.name);
    if (now != nullptr && now->verifyAddress != p.verifyAddress)
      plan.changed.push_back("peers[" + p.name +
                             "].verify_address: " + (p.verifyAddress ? "true" : "false") + " -> " +
                             (now->verifyAddress ? "true" : "false"));
  }
  for (const Peer& p : file.peers)
    if (running.findPeer(p.name) == nullptr) plan.added.push_back(p.name);
  return plan;
}

}  // namespace rdmamsg::config
