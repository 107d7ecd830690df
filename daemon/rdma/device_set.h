// The RDMA devices a daemon has opened, by context, and the memory budget
// they share (registered_memory_limit). A device is opened the first time a
// listener or connection needs its context and kept until it fails: a
// failed one creates nothing more and is erased by its owner (the mesh)
// once its connections have released their verbs objects.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/loop/events.h"
#include "daemon/rdma/device.h"

namespace rdmamsg::rdma {

struct DeviceStats {
  std::string name;
  bool failed = false;
  int cqEntries = 0;
  DeviceCounters counters;
  uint32_t sendBuffers = 0, sendBuffersFree = 0;
  std::optional<SrqStats> srq;  // receive_queue: shared
};

class DeviceSet {
 public:
  using Map = std::map<ibv_context*, std::unique_ptr<Device>>;

  DeviceSet(loop::EventLoop& loop, uint64_t registeredMemoryLimit, DeviceListener* listener);
  ~DeviceSet();
  DeviceSet(const DeviceSet&) = delete;
  DeviceSet& operator=(const DeviceSet&) = delete;

  // The device of `ctx`, opened now (with a CQ of `cqEntries` and `pools`)
  // if it is not yet; nullptr when it failed, or cannot be opened (logged
  // once, here, with the reason).
  Device* get(ibv_context* ctx, int cqEntries, const PoolParams& pools);
  // An open device (failed or not), or nullptr.
  Device* find(ibv_context* ctx) const;
  bool anyFailed() const;
  // Erases a device (its connections released their verbs objects first).
  Map::iterator erase(Map::iterator it) { return devices_.erase(it); }
  void clear() { devices_.clear(); }
  Map& all() { return devices_; }
  const Map& all() const { return devices_; }

  MemoryBudget& budget() { return budget_; }
  uint64_t registeredBytes() const { return budget_.used; }
  uint64_t droppedCompletions() const;
  std::vector<DeviceStats> stats() const;

 private:
  loop::EventLoop& loop_;
  DeviceListener* listener_;
  MemoryBudget budget_;  // before the devices: they give their bytes back to it
  Map devices_;
};

}  // namespace rdmamsg::rdma
