// The rdma_cm event channel of the daemon, registered on the event loop
// edge-triggered: every wakeup gets events until EAGAIN. Each event is
// copied (with its private data), acknowledged at once — one ack per get —
// and then dispatched to the CmHandler found in the id's context. Acking
// before dispatch means a handler may destroy its id safely (deferred).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "daemon/loop/events.h"
#include "daemon/rdma/verbs.h"

namespace rdmamsg::rdma {

// A CM event, copied out of rdma-core's before the ack.
struct CmEvent {
  rdma_cm_event_type type;
  int status;
  rdma_cm_id* id;
  rdma_cm_id* listenId;
  rdma_conn_param param;  // private_data points into `privateData`
  std::vector<uint8_t> privateData;
};

class CmHandler {
 public:
  virtual ~CmHandler() = default;
  virtual void onCmEvent(const CmEvent& event) = 0;
};

class CmEventPump {
 public:
  explicit CmEventPump(loop::EventLoop& loop);  // throws std::system_error or std::runtime_error
  rdma_event_channel* channel() const { return channel_.get(); }
  uint64_t eventsHandled() const { return handled_; }

 private:
  void drain();
  EventChannelPtr channel_;
  std::unique_ptr<loop::IoEvent> io_;
  uint64_t handled_ = 0;
};

}  // namespace rdmamsg::rdma
