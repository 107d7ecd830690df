// The verbs resources of one RDMA device context: its limits
// (ibv_query_device), a protection domain, one completion queue with its
// completion channel shared by every queue pair on the device, the buffers
// its connections share (a send pool, and a shared receive queue or the
// per-peer receive sets, kept and reused across reconnects; shared_pools.h),
// and its asynchronous events.
//
// Completions are dispatched to their connection by wc.qp_num; those of a QP
// that is gone are counted and dropped. The completion channel fd is
// nonblocking and registered edge-triggered. Every wakeup: ibv_get_cq_event
// until EAGAIN, ack them, re-arm with ibv_req_notify_cq, then ibv_poll_cq
// until it returns 0 — re-arming before the final poll, so that no
// completion is stranded without an event.
//
// Receive completions from the shared receive queue whose QP is gone give
// their buffer back to the SRQ. IBV_EVENT_QP_LAST_WQE_REACHED (a QP on the
// SRQ in error will take no more receives) goes to the QP's sink after the
// CQ is drained, so that its last receives are seen before it is destroyed.
//
// The async fd is nonblocking and edge-triggered too: ibv_get_async_event
// until EAGAIN, each event acked. QP events go to the QP's sink; device,
// port and CQ events go to the DeviceListener (the mesh), which tears down
// and reopens. After a fatal event the device is `failed()`: it creates
// nothing more and is destroyed once its connections are gone.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/external_payload.h"
#include "daemon/loop/events.h"
#include "daemon/loop/spin.h"
#include "daemon/rdma/buffer_pool.h"
#include "daemon/rdma/shared_pools.h"
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
  uint64_t bufferSetsCreated = 0;  // per-peer receive sets
  uint64_t bufferSetsReused = 0;
  uint64_t registeredBytes = 0;        // send pool, shared receive chunks and receive sets
  uint64_t clientBytesRegistered = 0;  // clients' rings registered now (ExternalRegistrations)
  uint64_t clientRegistrations = 0;    // ibv_reg_mr of a client's ring, ever
};

// Clients' memory that sends post from in place (daemon/external_payload.h):
// one memory region per area, registered with the device's protection
// domain at its first use — within registered_memory_limit, else its
// payloads are copied — and deregistered when the area dies or the device
// closes, whichever comes first.
class ExternalRegistrations {
 public:
  ExternalRegistrations(ibv_pd* pd, MemoryBudget& budget, DeviceCounters& counters)
      : pd_(pd), budget_(budget), counters_(counters) {}
  ~ExternalRegistrations();
  ExternalRegistrations(const ExternalRegistrations&) = delete;
  ExternalRegistrations& operator=(const ExternalRegistrations&) = delete;

  // The area's lkey, registering it the first time; why it cannot be when
  // it cannot (busy: the registered_memory_limit; io_error: ibv_reg_mr).
  // Decided once per area, and logged then (a warning: its messages are
  // copied instead); the same answer after, without building it again.
  // The reference lives as long as the area: use it at once, never keep it
  // across a send or a service step.
  static const Result<uint32_t>& lkey(const std::shared_ptr<ExternalRegistrations>& self,
                                      ExternalArea& area);

 private:
  void forget(const ExternalArea* area);
  struct Entry {
    MrPtr mr;  // null: the area cannot be registered (copied instead)
    size_t bytes = 0;
    Result<uint32_t> lkey{0u};
  };
  ibv_pd* pd_;
  MemoryBudget& budget_;
  DeviceCounters& counters_;
  std::unordered_map<const ExternalArea*, Entry> areas_;
};

// The buffers a device's connections share (config: buffer_size,
// send_buffers, receive_queue, shared_receive_buffers).
struct PoolParams {
  size_t bufferSize = 64 * 1024;
  uint32_t sendBuffers = 32;
  bool sharedReceive = true;
  uint32_t initialGrant = 2;
  uint32_t burst = 32;
  uint32_t chunk = 16;
  // Registered when the device opens, so that connecting registers nothing
  // (within the budget): this many peers' initial grants on the shared
  // receive queue, or this many per-peer receive sets of `perPeerCount`
  // buffers.
  uint32_t startPeers = 0;
  uint32_t perPeerCount = 0;
};

// wr_id tag of a QP's own receive work requests (| buffer index).
inline constexpr uint64_t kQpRecvTag = 2ULL << 32;

// wr_id tag of the shared receive queue's work requests (| buffer index).
inline constexpr uint64_t kSrqRecvTag = 4ULL << 32;
inline constexpr uint64_t kWrTagMask = ~0xffffffffULL;

class Device {
  struct Token {  // only open() makes a Device
    explicit Token() = default;
  };

 public:
  // The device's resources, or why not: io_error when one cannot be
  // created, busy when `budget` cannot hold the send pool, bad_request when
  // the device has no shared receive queue and `pools` asks for one. The CQ
  // gets `cqEntries`, or the device's max_cqe if that is lower.
  static Result<std::unique_ptr<Device>> open(loop::EventLoop& loop, ibv_context* context,
                                              int cqEntries, const PoolParams& pools,
                                              MemoryBudget& budget, DeviceListener* listener);
  Device(Token, ibv_context* context, const PoolParams& pools, MemoryBudget& budget,
         DeviceListener* listener);
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
  // added by a reload; bad_request when it is over the device's max_cqe,
  // io_error when the resize failed.
  Status growCq(uint64_t entries);
  bool failed() const { return failed_; }
  // The device is gone or unusable: stop watching its fds (they close with
  // its context) and create nothing more on it.
  void markFailed();

  void attach(uint32_t qpNum, CompletionSink* sink) { sinks_[qpNum] = sink; }
  void detach(uint32_t qpNum) { sinks_.erase(qpNum); }

  SendPool& sendPool() { return *sendPool_; }
  // The lkey of a client's memory on this device (ExternalRegistrations).
  const Result<uint32_t>& lkeyFor(ExternalArea& area) {
    return ExternalRegistrations::lkey(external_, area);
  }
  // The shared receive queue; nullptr with receive_queue: per_peer.
  SharedReceiveQueue* srq() { return srq_.get(); }
  const SharedReceiveQueue* srq() const { return srq_.get(); }
  const PoolParams& pools() const { return pools_; }

  // Per-peer receive buffers: a spare set if there is, else a new one
  // (registered now, within the budget): busy when the budget cannot hold
  // it, io_error when it cannot be registered.
  Result<std::unique_ptr<ReceiveSet>> takeReceiveSet(uint32_t count, uint64_t tag);
  // Keeps a set for the next connection (its work requests are all back).
  void returnReceiveSet(std::unique_ptr<ReceiveSet> set);

 private:
  Status create(loop::EventLoop& loop, int cqEntries);
  Status createPools();
  void onWakeup();
  bool pollCompletions();  // true when any completion came
  // Asks for the CQ's next completion event (ibv_req_notify_cq), once; an
  // io_error when that failed.
  [[nodiscard]] Status armCq();
  // The CQ cannot be polled or armed (`why`): logged once, the device
  // failed and its listener told, as on IBV_EVENT_CQ_ERR.
  void failCq(const Status& why);
  // The spinner's arm hook, before a spinning loop sleeps: the CQ armed,
  // then polled once more (a completion that came before the arm leaves no
  // event); false when one came: the loop does not sleep. A CQ that cannot
  // be armed is unusable: the device is marked failed.
  bool armBeforeSleep();
  void refillSharedQueue();
  void onAsyncEvents();
  Status registerAtStart();
  ibv_context* context_;
  DeviceListener* listener_;
  ibv_device_attr attr_{};
  // Declared parents first: destroyed children first.
  PdPtr pd_;
  std::shared_ptr<ExternalRegistrations> external_;
  CompChannelPtr channel_;
  CqPtr cq_;
  PoolParams pools_;
  MemoryBudget& budget_;
  std::unique_ptr<SendPool> sendPool_;
  std::unique_ptr<SharedReceiveQueue> srq_;
  std::vector<std::unique_ptr<ReceiveSet>> spare_;
  std::unique_ptr<loop::IoEvent> io_, asyncIo_;
  std::unique_ptr<loop::Spinner> spinner_;  // polls the CQ while the loop spins
  loop::EventLoop* loop_ = nullptr;
  // Whether a completion event is asked for. A loop that spins polls the
  // CQ itself and asks for events only before it sleeps: the completions
  // it takes meanwhile make none (on a NIC an interrupt each, over
  // softrdma a write and a read of the channel).
  bool cqArmed_ = false;
  std::unordered_map<uint32_t, CompletionSink*> sinks_;
  DeviceCounters counters_;
  bool failed_ = false;
};

}  // namespace rdmamsg::rdma
