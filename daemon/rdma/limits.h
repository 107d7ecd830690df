// Device limits against the configuration: what rdmamsgd asks of an RDMA
// device (queue pair depth, completion queue entries, scatter/gather
// entries, message size), computed from the configuration, and the check
// that refuses a configuration the device cannot hold — at start and in
// --check-config — naming the key, its value and the device's limit.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "daemon/rdma/verbs.h"

namespace rdmamsg::rdma {

// What the daemon creates on a device for `config`.
struct Needs {
  uint32_t sendWr;        // per QP: one per send buffer, plus the teardown beacon
  uint32_t recvWr;        // per QP: one per receive buffer
  uint32_t sge;           // per work request
  uint64_t cqe;           // the shared CQ: every QP's sends and receives, two QPs per peer at most
  uint64_t messageBytes;  // largest single RDMA send (buffer_size)
};
// `peers`: the peers to size for, when not those of `config` (a reload
// sizes for the new peers and those still closing).
Needs needsOf(const config::Config& config, std::optional<size_t> peers = std::nullopt);

// Problems, one sentence each ("buffer_count: 16384 needs ..."); empty when it fits.
std::vector<std::string> checkLimits(const config::Config& config, const ibv_device_attr& attr,
                                     const std::string& device,
                                     std::optional<size_t> peers = std::nullopt);

// The device that `config.listen` binds to (the first device for a wildcard
// address), queried through rdma_cm. nullopt with `error` set when no
// device can be found.
struct DeviceInfo {
  std::string name;
  ibv_device_attr attr{};
};
std::optional<DeviceInfo> probeDevice(const config::Address& listen, std::string& error);

}  // namespace rdmamsg::rdma
