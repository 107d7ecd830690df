// The verbs resources of one RDMA device context: a protection domain and
// one completion queue, with its completion channel, shared by every queue
// pair on the device. Completions are dispatched to their connection by
// wc.qp_num; completions of a QP that is gone are counted and dropped.
//
// The completion channel fd is nonblocking and registered edge-triggered.
// Every wakeup: ibv_get_cq_event until EAGAIN, ack them, re-arm with
// ibv_req_notify_cq, then ibv_poll_cq until it returns 0 — re-arming before
// the final poll, so that no completion is stranded without an event.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "daemon/loop/events.h"
#include "daemon/rdma/verbs.h"

namespace rdmamsg::rdma {

class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  virtual void onCompletion(const ibv_wc& wc) = 0;
};

struct DeviceCounters {
  uint64_t wakeups = 0;
  uint64_t cqEvents = 0;
  uint64_t completions = 0;
  uint64_t polls = 0;
  uint64_t dropped = 0;  // completions of a QP no longer attached
};

class Device {
 public:
  // Throws std::system_error when a resource cannot be created.
  Device(loop::EventLoop& loop, ibv_context* context, int cqEntries);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_.get(); }
  ibv_cq* cq() const { return cq_.get(); }
  const DeviceCounters& counters() const { return counters_; }

  void attach(uint32_t qpNum, CompletionSink* sink) { sinks_[qpNum] = sink; }
  void detach(uint32_t qpNum) { sinks_.erase(qpNum); }

 private:
  void onWakeup();
  ibv_context* context_;
  PdPtr pd_;
  CompChannelPtr channel_;
  CqPtr cq_;
  std::unique_ptr<loop::IoEvent> io_;
  std::unordered_map<uint32_t, CompletionSink*> sinks_;
  DeviceCounters counters_;
};

}  // namespace rdmamsg::rdma
