// The daemon's status as one typed snapshot: plain values, filled by each
// layer for its own objects — the router its counters and services, the
// local server its policy counters and unconsumed bytes, the mesh its
// peers, devices and memory (peer/mesh.h, MeshSnapshot), each peer itself
// and its connection (peer/peer.h, PeerSnapshot). Renderers read only the
// snapshot: toJson() here is what `rdmamsg status --json` receives, and
// what the text status and OpenMetrics (common/openmetrics.h) are rendered
// from, in the daemon and in the CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/local/local_server.h"
#include "daemon/loop/counters.h"
#include "daemon/peer/mesh.h"
#include "daemon/pubsub/pubsub.h"

namespace rdmamsg::status {

struct RouterCounters {
  uint64_t messagesRouted = 0;    // accepted from local clients
  uint64_t localDeliveries = 0;   // handed to a listener on this node
  uint64_t remoteDeliveries = 0;  // from peers, handed to a listener here
  uint64_t failures = 0;          // reported to senders as failed
  uint64_t unknownNode = 0;
  uint64_t unknownService = 0;
  uint64_t backpressurePauses = 0;  // HOLDs sent to clients
  uint64_t holdsIgnored = 0;        // clients no longer read: they went on sending past a HOLD
  uint64_t receiveMemoryFull = 0;   // messages answered busy at receive_memory_limit
};

// The configuration's provenance.
struct ConfigState {
  uint64_t generation = 1;  // 1 at start, +1 for every reload applied
  std::string lastReload;   // "" (none yet), "applied", or why it was refused
  uint64_t reloadsFailed = 0;
  std::vector<std::string> restartPending;  // changes that wait for a restart
};

struct Snapshot {
  // This daemon and its configuration.
  std::string node, version, listen, socket, configFile, logLevel;
  std::string connectMode, receiveQueue;
  uint64_t uptimeSeconds = 0;
  ConfigState config;
  std::optional<std::string> secret, previousSecret;  // fingerprints
  // The router.
  std::vector<std::string> services;  // sorted
  RouterCounters counters;
  // The local server.
  bool localPolicy = false;
  local::PolicyCounters policy;
  uint64_t unconsumedBytes = 0, receiveMemoryLimit = 0;
  // The mesh, its peers and devices.
  peer::MeshSnapshot mesh;
  // Subjects.
  pubsub::PubSubSnapshot subjects;
  // The process.
  uint64_t logDropped = 0, logSuppressed = 0;
  loop::SyscallCounters loop;
  loop::CopyCounters copies;
  loop::IdleCounters idle;
  std::string idleStrategy;
  uint64_t rssBytes = 0, heapAllocations = 0;
};

// The JSON form (docs/operations.md lists its keys).
nlohmann::json toJson(const Snapshot& s);

}  // namespace rdmamsg::status
