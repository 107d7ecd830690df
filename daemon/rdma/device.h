// The verbs resources of one RDMA device context: its limits
// (ibv_query_device), a protection domain, one completion queue with its
// completion channel shared by every queue pair on the device, the buffer
// sets of its connections (kept and reused across reconnects), and its
// asynchronous events.
//
// Completions are dispatched to their connection by wc.qp_num; those of a QP
// that is gone are counted and dropped. The completion channel fd is
// nonblocking and registered edge-triggered. Every wakeup: ibv_get_cq_event
// until EAGAIN, ack them, re-arm with ibv_req_notify_cq, then ibv_poll_cq
// until it returns 0 — re-arming before the final poll, so that no
// completion is stranded without an event.
//
// The async fd is nonblocking and edge-triggered too: ibv_get_async_event
// until EAGAIN, each event acked. QP events go to the QP's sink; device,
// port and CQ events go to the DeviceListener (the mesh), which tears down
// and reopens. After a fatal event the device is `failed()`: it creates
// nothing more and is destroyed once its connections are gone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/loop/events.h"
#include "daemon/rdma/buffer_pool.h"
#include "daemon/rdma/verbs.h"

namespace rdmamsg::rdma {

class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  virtual void onCompletion(const ibv_wc& wc) = 0;
  // An asynchronous event for this sink's QP (IBV_EVENT_QP_FATAL, …).
  virtual void onQpEvent(ibv_event_type type) = 0;
};

class Device;
class DeviceListener {
 public:
  virtual ~DeviceListener() = default;
  // IBV_EVENT_DEVICE_FATAL, IBV_EVENT_CQ_ERR, IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE, ...
  virtual void onDeviceEvent(Device& device, ibv_event_type type) = 0;
};

struct DeviceCounters {
  uint64_t wakeups = 0;
  uint64_t cqEvents = 0;
  uint64_t completions = 0;
  uint64_t polls = 0;
  uint64_t dropped = 0;  // completions of a QP no longer attached
  uint64_t asyncEvents = 0;
  uint64_t bufferSetsCreated = 0;
  uint64_t bufferSetsReused = 0;
  uint64_t registeredBytes = 0;
};

class Device {
 public:
  // Throws std::system_error when a resource cannot be created. The CQ gets
  // `cqEntries`, or the device's max_cqe if that is lower.
  Device(loop::EventLoop& loop, ibv_context* context, int cqEntries, DeviceListener* listener);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  ibv_context* context() const { return context_; }
  std::string name() const;
  const ibv_device_attr& attr() const { return attr_; }
  ibv_pd* pd() const { return pd_.get(); }
  ibv_cq* cq() const { return cq_.get(); }
  int cqEntries() const { return cq_->cqe; }  // what the device granted
  const DeviceCounters& counters() const { return counters_; }
  // Makes the CQ hold at least `entries` (ibv_resize_cq), e.g. for peers
  // added by a reload; "" when it does, else why not.
  std::string growCq(uint64_t entries);
  bool failed() const { return failed_; }
  // The device is gone or unusable: stop watching its fds (they close with
  // its context) and create nothing more on it.
  void markFailed();

  void attach(uint32_t qpNum, CompletionSink* sink) { sinks_[qpNum] = sink; }
  void detach(uint32_t qpNum) { sinks_.erase(qpNum); }

  // A set of the given geometry: a spare one if there is, else a new one
  // (allocated and registered now). Throws std::system_error.
  std::unique_ptr<BufferSet> takeBuffers(const BufferGeometry& g, uint64_t recvTag);
  // Keeps a set for the next connection (its work requests are all back).
  void returnBuffers(std::unique_ptr<BufferSet> set);

 private:
  void onWakeup();
  void onAsyncEvents();
  ibv_context* context_;
  DeviceListener* listener_;
  ibv_device_attr attr_{};
  // Declared parents first: destroyed children first.
  PdPtr pd_;
  CompChannelPtr channel_;
  CqPtr cq_;
  std::vector<std::unique_ptr<BufferSet>> spare_;
  std::unique_ptr<loop::IoEvent> io_, asyncIo_;
  std::unordered_map<uint32_t, CompletionSink*> sinks_;
  DeviceCounters counters_;
  bool failed_ = false;
};

}  // namespace rdmamsg::rdma
