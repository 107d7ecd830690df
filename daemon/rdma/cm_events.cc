// Drains the rdma_cm event channel (cm_events.h).
#include "daemon/rdma/cm_events.h"

#include <event2/event.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "daemon/loop/counters.h"

namespace rdmamsg::rdma {

Status setNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return callFailed("fcntl(F_GETFL)", errno);
  if (fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return callFailed("fcntl(F_SETFL, O_NONBLOCK)", errno);
  return Status();
}

CmEventPump::CmEventPump(loop::EventLoop& loop) : channel_(rdma_create_event_channel()) {
  if (!channel_)
    throw std::system_error(errno, std::generic_category(), "rdma_create_event_channel");
  if (Status st = setNonBlocking(channel_->fd); !st.ok())
    throw std::runtime_error("event channel O_NONBLOCK: " + st.message());
  io_ = std::make_unique<loop::IoEvent>(loop, channel_->fd, EV_READ | EV_PERSIST | EV_ET,
                                        [this](short) { drain(); });
}

void CmEventPump::drain() {
  for (;;) {
    rdma_cm_event* ev = nullptr;
    int rc = rdma_get_cm_event(channel_.get(), &ev);
    loop::syscalls().cmEventReads++;
    if (rc != 0) {
      if (errno != EAGAIN && errno != EINTR)
        spdlog::error("rdma_get_cm_event: {}",
                      std::error_code(errno, std::generic_category()).message());
      if (errno == EINTR) continue;
      return;
    }
    CmEvent copy;
    copy.type = ev->event;
    copy.status = ev->status;
    copy.id = ev->id;
    copy.listenId = ev->listen_id;
    copy.param = ev->param.conn;
    if (ev->param.conn.private_data != nullptr && ev->param.conn.private_data_len > 0) {
      const auto* p = static_cast<const uint8_t*>(ev->param.conn.private_data);
      copy.privateData.assign(p, p + ev->param.conn.private_data_len);
    }
    copy.param.private_data = copy.privateData.data();
    rdma_ack_cm_event(ev);
    handled_++;
    auto* handler = static_cast<CmHandler*>(copy.id->context);
    if (handler != nullptr) handler->onCmEvent(copy);
  }
}

}  // namespace rdmamsg::rdma
