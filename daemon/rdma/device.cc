// The shared completion queue of a device and its drain recipe (device.h).
#include "daemon/rdma/device.h"

#include <event2/event.h>
#include <spdlog/spdlog.h>

#include "daemon/loop/counters.h"

#include <cerrno>
#include <system_error>

namespace rdmamsg::rdma {

namespace {
[[noreturn]] void fail(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}
}  // namespace

Device::Device(loop::EventLoop& loop, ibv_context* context, int cqEntries) : context_(context) {
  pd_.reset(ibv_alloc_pd(context));
  if (!pd_) fail("ibv_alloc_pd");
  channel_.reset(ibv_create_comp_channel(context));
  if (!channel_) fail("ibv_create_comp_channel");
  if (!setNonBlocking(channel_->fd)) fail("completion channel O_NONBLOCK");
  cq_.reset(ibv_create_cq(context, cqEntries, this, channel_.get(), 0));
  if (!cq_) fail("ibv_create_cq");
  if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0) {
    errno = rc;
    fail("ibv_req_notify_cq");
  }
  io_ = std::make_unique<loop::IoEvent>(loop, channel_->fd, EV_READ | EV_PERSIST | EV_ET,
                                        [this](short) { onWakeup(); });
}

Device::~Device() {
  io_.reset();
  // Every event gotten was acked in onWakeup, so destroying the CQ cannot block.
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
  if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0)
    spdlog::error("ibv_req_notify_cq: {}", std::error_code(rc, std::generic_category()).message());
  ibv_wc wcs[32];
  for (;;) {
    int n = ibv_poll_cq(cq_.get(), 32, wcs);
    counters_.polls++;
    if (n < 0) {
      spdlog::critical("ibv_poll_cq failed ({}): completion queue unusable", n);
      return;
    }
    for (int i = 0; i < n; i++) {
      counters_.completions++;
      auto it = sinks_.find(wcs[i].qp_num);
      if (it == sinks_.end()) {
        counters_.dropped++;
        continue;
      }
      it->second->onCompletion(wcs[i]);
    }
    if (n == 0) return;
  }
}

}  // namespace rdmamsg::rdma
