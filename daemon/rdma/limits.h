// Device limits against the configuration: what rdmamsgd asks of an RDMA
// device (queue pair depth, completion queue entries, scatter/gather
// entries, message size), computed from the configuration, and the check
// that refuses a configuration the device cannot hold — at start and in
// --check-config — naming the key, its value and the device's limit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "daemon/rdma/verbs.h"

namespace rdmamsg::rdma {

// What the daemon creates on a device for `config`.
struct Needs {
  uint32_t sendWr;        // per QP: one per send buffer it may hold, plus the teardown beacon
  uint32_t recvWr;        // per QP: one per receive buffer (0 with a shared receive queue)
  uint64_t srqWr;         // the shared receive queue at most (0: per-peer receive queues)
  uint32_t sge;           // per work request
  uint64_t cqe;           // the shared CQ: every QP's sends and receives, two QPs per peer at most
  uint64_t messageBytes;  // largest single RDMA send (buffer_size)
};
// `peers`: the peers to size for, when not those of `config` (a reload
// sizes for the new peers and those still closing).
Needs needsOf(const config::Config& config, std::optional<size_t> peers = std::nullopt);

// Registered memory (docs/scaling.md): per device, the send pool; with a
// shared receive queue the burst buffers and each connected peer's initial
// grant; per-peer receive queues buffer_count buffers for each peer. All of
// it within registered_memory_limit.
struct MemoryPlan {
  uint64_t sendPool = 0;  // send_buffers x buffer_size
  uint64_t burst = 0;     // shared_receive_buffers x buffer_size, lent to busy peers
  uint64_t perPeer = 0;   // what one more connected peer registers
  uint64_t allPeers = 0;  // everything, with every configured peer connected (at most)
  uint64_t limit = 0;     // registered_memory_limit
  // Peers that can be connected at once within the limit.
  uint64_t peersWithinLimit() const {
    return limit > sendPool + burst ? (limit - sendPool - burst) / std::max<uint64_t>(1, perPeer)
                                    : 0;
  }
};
MemoryPlan memoryPlan(const config::Config& config, std::optional<size_t> peers = std::nullopt);
// One sentence: "registered memory: 512KiB per connected peer (...), ..."
std::string describe(const MemoryPlan& plan, const config::Config& config, size_t peers);

// Problems, one sentence each ("buffer_count: 16384 needs ..."); empty when it fits.
std::vector<std::string> checkLimits(const config::Config& config, const ibv_device_attr& attr,
                                     const std::string& device,
                                     std::optional<size_t> peers = std::nullopt);

// The device that `config.listen` binds to (the first device for a wildcard
// address), queried through rdma_cm; io_error, with the reason, when no
// device can be found.
struct DeviceInfo {
  std::string name;
  ibv_device_attr attr{};
};
Result<DeviceInfo> probeDevice(const config::Address& listen);

}  // namespace rdmamsg::rdma
