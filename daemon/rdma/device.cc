// A device's shared completion queue, buffers and async events (device.h).
#include "daemon/rdma/device.h"

#include <event2/event.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "daemon/loop/counters.h"
#include "daemon/loop/event_loop.h"

namespace rdmamsg::rdma {

namespace {
Status ioError(const char* what, int err = errno) {
  return Status(Errc::io_error,
                std::string(what) + ": " + std::error_code(err, std::generic_category()).message());
}
}  // namespace

Result<std::unique_ptr<Device>> Device::open(loop::EventLoop& loop, ibv_context* context,
                                             int cqEntries, const PoolParams& pools,
                                             MemoryBudget& budget, DeviceListener* listener) {
  auto d = std::make_unique<Device>(Token{}, context, pools, budget, listener);
  if (Status st = d->create(loop, cqEntries); !st.ok()) return st;
  return d;
}

Device::Device(Token, ibv_context* context, const PoolParams& pools, MemoryBudget& budget,
               DeviceListener* listener)
    : context_(context), listener_(listener), pools_(pools), budget_(budget) {}

// What a device's connections share, created parents first.
Status Device::create(loop::EventLoop& loop, int cqEntries) {
  if (int rc = ibv_query_device(context_, &attr_); rc != 0) return ioError("ibv_query_device", rc);
  pd_.reset(ibv_alloc_pd(context_));
  if (!pd_) return ioError("ibv_alloc_pd");
  external_ = std::make_shared<ExternalRegistrations>(pd_.get(), budget_, counters_);
  channel_.reset(ibv_create_comp_channel(context_));
  if (!channel_) return ioError("ibv_create_comp_channel");
  if (Status st = setNonBlocking(channel_->fd); !st.ok())
    return Status(st.code(), "completion channel O_NONBLOCK: " + st.message());
  int entries = std::max(1, std::min(cqEntries, attr_.max_cqe));
  cq_.reset(ibv_create_cq(context_, entries, this, channel_.get(), 0));
  if (!cq_) return ioError("ibv_create_cq");
  if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0) return ioError("ibv_req_notify_cq", rc);
  cqArmed_ = true;
  loop_ = &loop;
  if (Status st = createPools(); !st.ok()) return st;
  if (Status st = registerAtStart(); !st.ok()) return st;
  io_ = std::make_unique<loop::IoEvent>(loop, channel_->fd, EV_READ | EV_PERSIST | EV_ET,
                                        [this](short) { onWakeup(); });
  spinner_ = std::make_unique<loop::Spinner>(
      loop, loop::SpinHooks{[this] { return !failed_ && pollCompletions(); },
                            [this] { return failed_ || armBeforeSleep(); },
                            {}});
  if (Status st = setNonBlocking(context_->async_fd); st.ok())
    asyncIo_ = std::make_unique<loop::IoEvent>(
        loop, context_->async_fd, EV_READ | EV_PERSIST | EV_ET, [this](short) { onAsyncEvents(); });
  else
    spdlog::warn(
        "RDMA device {}: async events fd cannot be made nonblocking ({}); device events "
        "are not watched",
        name(), st.message());
  return Status();
}

Status Device::createPools() {
  Result<std::unique_ptr<SendPool>> send =
      SendPool::create(pd_.get(), pools_.bufferSize, pools_.sendBuffers, budget_);
  if (!send) return send.status();
  sendPool_ = std::move(send).value();
  counters_.registeredBytes += sendPool_->buffers().registeredBytes();
  if (!pools_.sharedReceive) return Status();
  if (attr_.max_srq == 0 || attr_.max_srq_wr == 0)
    return Status(Errc::bad_request,
                  "RDMA device " + name() +
                      " has no shared receive queues (max_srq 0): set receive_queue: per_peer");
  SharedReceiveQueue::Params p;
  p.bufferSize = pools_.bufferSize;
  p.initialGrant = pools_.initialGrant;
  p.burst = pools_.burst;
  p.chunk = pools_.chunk;
  p.tag = kSrqRecvTag;
  Result<std::unique_ptr<SharedReceiveQueue>> srq =
      SharedReceiveQueue::create(pd_.get(), attr_, p, budget_);
  if (!srq) return srq.status();
  srq_ = std::move(srq).value();
  return Status();
}

Device::~Device() {
  io_.reset();
  asyncIo_.reset();
  for (const auto& set : spare_)
    budget_.give(set->registeredBytes());
  // Every event gotten was acked in onWakeup, so destroying the CQ cannot block.
}

ExternalRegistrations::~ExternalRegistrations() {
  for (auto& [area, e] : areas_)
    budget_.give(e.bytes);
}

const Result<uint32_t>& ExternalRegistrations::lkey(
    const std::shared_ptr<ExternalRegistrations>& self, ExternalArea& area) {
  auto it = self->areas_.find(&area);
  if (it == self->areas_.end()) {
    Entry e;
    const std::span<const std::byte> bytes = area.bytes();
    if (!self->budget_.take(bytes.size())) {
      e.lkey = Status(Errc::busy, "a client's shared memory of " + std::to_string(bytes.size()) +
                                      " bytes is not registered (" +
                                      self->budget_.exhausted(bytes.size()) + ")");
    } else {
      // Only read by the device (local read needs no access flag).
      e.mr.reset(ibv_reg_mr(self->pd_, const_cast<std::byte*>(bytes.data()), bytes.size(), 0));
      if (!e.mr) {
        const int err = errno;
        e.lkey = Status(Errc::io_error,
                        "ibv_reg_mr of a client's shared memory of " +
                            std::to_string(bytes.size()) + " bytes failed (" +
                            std::error_code(err, std::generic_category()).message() + ")");
        self->budget_.give(bytes.size());
      } else {
        e.lkey = e.mr->lkey;
        e.bytes = bytes.size();
        self->counters_.clientBytesRegistered += e.bytes;
        self->counters_.clientRegistrations++;
      }
    }
    if (!e.lkey) spdlog::warn("{}: its messages are copied", e.lkey.status().message());
    it = self->areas_.emplace(&area, std::move(e)).first;
    area.onDeath([weak = std::weak_ptr<ExternalRegistrations>(self), key = &area] {
      if (auto regs = weak.lock()) regs->forget(key);
    });
  }
  return it->second.lkey;
}

void ExternalRegistrations::forget(const ExternalArea* area) {
  auto it = areas_.find(area);
  if (it == areas_.end()) return;
  budget_.give(it->second.bytes);
  counters_.clientBytesRegistered -= it->second.bytes;
  areas_.erase(it);
}

Status Device::growCq(uint64_t entries) {
  if (entries <= static_cast<uint64_t>(cq_->cqe)) return Status();
  if (entries > static_cast<uint64_t>(attr_.max_cqe))
    return Status(Errc::bad_request, "a completion queue of " + std::to_string(entries) +
                                         " entries is over the max_cqe of " +
                                         std::to_string(attr_.max_cqe) + " on RDMA device " +
                                         name());
  const int before = cq_->cqe;
  if (int rc = ibv_resize_cq(cq_.get(), static_cast<int>(entries)); rc != 0)
    return Status(Errc::io_error, "ibv_resize_cq to " + std::to_string(entries) +
                                      " entries on RDMA device " + name() + ": " +
                                      std::strerror(rc));
  spdlog::info("RDMA device {}: CQ resized from {} to {} entries", name(), before, cq_->cqe);
  return Status();
}

void Device::markFailed() {
  failed_ = true;
  if (io_) io_->disable();
  if (asyncIo_) asyncIo_->disable();
}

std::string Device::name() const {
  const char* n = context_->device != nullptr ? ibv_get_device_name(context_->device) : nullptr;
  return n != nullptr ? n : "?";
}

Result<std::unique_ptr<ReceiveSet>> Device::takeReceiveSet(uint32_t count, uint64_t tag) {
  auto it = std::find_if(spare_.begin(), spare_.end(),
                         [&](const auto& s) { return s->pool().count() == count; });
  if (it != spare_.end()) {
    auto set = std::move(*it);
    spare_.erase(it);
    counters_.bufferSetsReused++;
    return set;
  }
  const uint64_t bytes = BufferPool::registeredBytesFor(pools_.bufferSize, count);
  if (!budget_.take(bytes)) return Status(Errc::busy, budget_.exhausted(bytes));
  Result<std::unique_ptr<ReceiveSet>> set =
      ReceiveSet::create(pd_.get(), pools_.bufferSize, count, tag);
  if (!set) {
    budget_.give(bytes);
    return set.status();
  }
  counters_.bufferSetsCreated++;
  counters_.registeredBytes += (*set)->registeredBytes();
  return set;
}

// Pools are registered once, at start, not when the first connections need
// them or a busy peer is first lent buffers (the memory plan counts the
// burst): what the budget cannot hold waits for them.
Status Device::registerAtStart() {
  if (srq_) {
    Status st = srq_->prepare(pools_.startPeers * pools_.initialGrant + pools_.burst);
    return st.code() == Errc::busy ? Status() : st;
  }
  const uint64_t bytes = BufferPool::registeredBytesFor(pools_.bufferSize, pools_.perPeerCount);
  for (uint32_t i = 0; i < pools_.startPeers && pools_.perPeerCount > 0; i++) {
    if (!budget_.take(bytes)) return Status();
    Result<std::unique_ptr<ReceiveSet>> set =
        ReceiveSet::create(pd_.get(), pools_.bufferSize, pools_.perPeerCount, kQpRecvTag);
    if (!set) {
      budget_.give(bytes);
      return set.status();
    }
    spare_.push_back(std::move(set).value());
    counters_.bufferSetsCreated++;
    counters_.registeredBytes += spare_.back()->registeredBytes();
  }
  return Status();
}

void Device::returnReceiveSet(std::unique_ptr<ReceiveSet> set) {
  if (set) spare_.push_back(std::move(set));
}

void Device::onWakeup() {
  counters_.wakeups++;
  unsigned events = 0;
  for (;;) {
    ibv_cq* cq;
    void* ctx;
    int rc = ibv_get_cq_event(channel_.get(), &cq, &ctx);
    loop::syscalls().cqEventReads++;
    if (rc != 0) break;  // EAGAIN: drained
    events++;
  }
  if (events > 0) {
    ibv_ack_cq_events(cq_.get(), events);
    counters_.cqEvents += events;
  }
  if (events > 0) cqArmed_ = false;  // the event came: the CQ asks for no other
  if (loop_->idleStrategy() == loop::IdleStrategy::sleep) {
    // Unarmed, the CQ would never wake the loop again: the device is failed.
    if (Status st = armCq(); !st.ok()) return failCq(st);
  }
  if (!pollCompletions()) refillSharedQueue();  // (after completions, it refilled already)
}

Status Device::armCq() {
  if (cqArmed_) return Status();
  if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0) return ioError("ibv_req_notify_cq", rc);
  cqArmed_ = true;
  return Status();
}

bool Device::armBeforeSleep() {
  if (Status st = armCq(); !st.ok()) {
    failCq(st);
    return true;  // nothing more to wait for from it
  }
  return !pollCompletions();
}

void Device::failCq(const Status& why) {
  spdlog::critical("RDMA device {}: {}: its completion queue is unusable", name(), why.message());
  markFailed();
  if (listener_ != nullptr) listener_->onDeviceEvent(*this, IBV_EVENT_CQ_ERR);
}

void Device::refillSharedQueue() {
  if (srq_)
    if (Status st = srq_->refill(); !st.ok())
      spdlog::error("RDMA device {}: {}", name(), st.message());
}

// Every completion, in batches, to its sink; then the shared receive queue
// refilled. A userspace call on a NIC: a spinning loop calls it directly,
// and arms the CQ only before it sleeps (armBeforeSleep).
bool Device::pollCompletions() {
  bool any = false;
  ibv_wc wcs[32];
  for (;;) {
    int n = ibv_poll_cq(cq_.get(), 32, wcs);
    counters_.polls++;
    if (n < 0) {
      failCq(Status(Errc::io_error, "ibv_poll_cq failed (" + std::to_string(n) + ")"));
      return true;
    }
    any = any || n > 0;
    for (int i = 0; i < n; i++) {
      counters_.completions++;
      const bool fromSrq = srq_ && (wcs[i].wr_id & kWrTagMask) == kSrqRecvTag;
      if (fromSrq) srq_->onReceived();
      auto it = sinks_.find(wcs[i].qp_num);
      if (it == sinks_.end()) {
        counters_.dropped++;
        // A shared buffer that arrived for a QP that is gone: back to the SRQ.
        auto idx = static_cast<uint32_t>(wcs[i].wr_id & ~kWrTagMask);
        if (fromSrq && srq_->owns(idx)) srq_->release(idx);
        continue;
      }
      it->second->onCompletion(wcs[i]);
    }
    if (n == 0) break;
  }
  if (any) refillSharedQueue();
  return any;
}

void Device::onAsyncEvents() {
  for (;;) {
    ibv_async_event ev;
    if (ibv_get_async_event(context_, &ev) != 0) return;  // EAGAIN: drained
    counters_.asyncEvents++;
    ibv_event_type type = ev.event_type;
    switch (type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_PATH_MIG_ERR: {
        uint32_t qpNum = ev.element.qp->qp_num;
        ibv_ack_async_event(&ev);
        spdlog::warn("RDMA device {}: {} on QP {}", name(), ibv_event_type_str(type), qpNum);
        if (auto it = sinks_.find(qpNum); it != sinks_.end()) it->second->onQpEvent(type);
        break;
      }
      case IBV_EVENT_QP_LAST_WQE_REACHED: {
        uint32_t qpNum = ev.element.qp->qp_num;
        ibv_ack_async_event(&ev);
        onWakeup();  // the QP's last receives are in the CQ: seen before the sink hears
        if (auto it = sinks_.find(qpNum); it != sinks_.end()) it->second->onQpEvent(type);
        break;
      }
      case IBV_EVENT_SRQ_LIMIT_REACHED:
        ibv_ack_async_event(&ev);
        if (srq_) srq_->onLimitReached();
        break;
      case IBV_EVENT_SRQ_ERR:
        ibv_ack_async_event(&ev);
        spdlog::critical("RDMA device {}: shared receive queue error", name());
        markFailed();
        if (listener_ != nullptr) listener_->onDeviceEvent(*this, type);
        return;
      case IBV_EVENT_DEVICE_FATAL:
      case IBV_EVENT_CQ_ERR:
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_LID_CHANGE:
      case IBV_EVENT_GID_CHANGE:
        ibv_ack_async_event(&ev);
        if (type == IBV_EVENT_DEVICE_FATAL || type == IBV_EVENT_CQ_ERR) markFailed();
        if (listener_ != nullptr) listener_->onDeviceEvent(*this, type);
        if (failed_) return;
        break;
      default:
        ibv_ack_async_event(&ev);
        spdlog::debug("RDMA device {}: async event {}", name(), ibv_event_type_str(type));
        break;
    }
  }
}

}  // namespace rdmamsg::rdma
