// The devices a daemon has opened (device_set.h).
#include "daemon/rdma/device_set.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace rdmamsg::rdma {

DeviceSet::DeviceSet(loop::EventLoop& loop, uint64_t registeredMemoryLimit,
                     DeviceListener* listener)
    : loop_(loop), listener_(listener) {
  budget_.limit = registeredMemoryLimit;
}

DeviceSet::~DeviceSet() = default;

Device* DeviceSet::get(ibv_context* ctx, int cqEntries, const PoolParams& pools) {
  if (ctx == nullptr) return nullptr;
  auto it = devices_.find(ctx);
  if (it != devices_.end()) return it->second->failed() ? nullptr : it->second.get();
  Result<std::unique_ptr<Device>> d =
      Device::open(loop_, ctx, cqEntries, pools, budget_, listener_);
  if (!d) {
    spdlog::error("RDMA device: {}", d.status().message());
    return nullptr;
  }
  Device* raw = d->get();
  spdlog::info("RDMA device {}: max_qp_wr {}, max_cqe {}, max_sge {}; CQ of {} entries",
               raw->name(), raw->attr().max_qp_wr, raw->attr().max_cqe, raw->attr().max_sge,
               raw->cqEntries());
  devices_.emplace(ctx, std::move(d).value());
  return raw;
}

Device* DeviceSet::find(ibv_context* ctx) const {
  auto it = devices_.find(ctx);
  return it != devices_.end() ? it->second.get() : nullptr;
}

bool DeviceSet::anyFailed() const {
  return std::any_of(devices_.begin(), devices_.end(),
                     [](const auto& d) { return d.second->failed(); });
}

uint64_t DeviceSet::droppedCompletions() const {
  uint64_t n = 0;
  for (const auto& [ctx, d] : devices_)
    n += d->counters().dropped;
  return n;
}

std::vector<DeviceStats> DeviceSet::stats() const {
  std::vector<DeviceStats> out;
  for (const auto& [ctx, d] : devices_) {
    DeviceStats st{d->name(),     d->failed(),           d->cqEntries(),
                   d->counters(), d->sendPool().count(), d->sendPool().available(),
                   std::nullopt};
    if (const SharedReceiveQueue* q = d->srq()) {
      st.srq = q->stats();
      st.counters.registeredBytes += q->registeredBytes();
    }
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace rdmamsg::rdma
