// One RDMA connection to a peer daemon: its rdma_cm id, RC queue pair,
// registered buffer pools, credit accounting and state machine.
//
// Active side:  idle → resolving-address → resolving-route → connecting → established
// Passive side: idle → accepting → established
// Both:         established → disconnecting → closed
//
// Receive buffers are posted before rdma_connect / rdma_accept. Every send
// fills one of the peer's receive buffers with a batch (protocol.h), so a
// send needs a credit; credits come back in batch headers. One credit is
// kept for batches that only return credits or confirm deliveries, so credit
// updates never deadlock and the peer never sees RNR. Sends are signaled
// every kSignalEvery batches; a signaled completion frees every send buffer
// posted before it.
//
// Teardown follows the seeds: rdma_disconnect (the QP goes to error and
// flushes), wait for DISCONNECTED and for every posted work request to come
// back, then the owner reaps the connection on a later loop turn: QP, id,
// memory regions, in that order.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/loop/events.h"
#include "daemon/peer/protocol.h"
#include "daemon/rdma/buffer_pool.h"
#include "daemon/rdma/cm_events.h"
#include "daemon/rdma/device.h"

namespace rdmamsg::peer {

enum class ConnState {
  kIdle,
  kResolvingAddress,
  kResolvingRoute,
  kConnecting,
  kAccepting,
  kEstablished,
  kDisconnecting,
  kClosed,
};
const char* toString(ConnState s);

struct ConnParams {
  size_t bufferSize = 64 * 1024;
  uint32_t recvBuffers = 64;
  uint32_t sendBuffers = 64;
  std::chrono::milliseconds connectTimeout{5000};
  Hello hello;  // what this daemon says about itself
};

struct ConnCounters {
  uint64_t sendsPosted = 0;  // RDMA send work requests
  uint64_t sendsSignaled = 0;
  uint64_t postSendCalls = 0;
  uint64_t recvsPosted = 0;
  uint64_t postRecvCalls = 0;
  uint64_t batchesReceived = 0;
  uint64_t creditStalls = 0;  // times data waited for credits
};

class Connection;

// What a connection tells the peer that owns it.
class ConnectionOwner {
 public:
  virtual ~ConnectionOwner() = default;
  virtual void onEstablished(Connection& c) = 0;
  // A record arrived. Return false to stop consuming (backpressure); the
  // same record is offered again after Connection::resumeReceive().
  virtual bool onRecord(Connection& c, const Record& r) = 0;
  // Credits or send buffers became available.
  virtual void onWritable(Connection& c) = 0;
  // The connection is about to post its batches (once per loop turn that
  // requested a flush): the last chance to add records to them.
  virtual void beforeFlush(Connection& c) = 0;
  // The connection is going down and carries nothing more (called once).
  virtual void onClosed(Connection& c, const std::string& why) = 0;
  // Teardown is complete: destroy the connection on a later loop turn.
  virtual void onReapable(Connection& c) = 0;
  // The peer rejected the connection (it is closed next).
  virtual void onRejected(Connection& c, RejectReason reason) = 0;
};

class Connection : public rdma::CmHandler, public rdma::CompletionSink {
 public:
  using DeviceFor = std::function<rdma::Device*(ibv_context*)>;

  // Active: resolves `dst` and connects. Passive: adopt an id from a
  // CONNECT_REQUEST; call accept() next.
  Connection(loop::EventLoop& loop, ConnectionOwner& owner, const ConnParams& params,
             DeviceFor devices, std::string name);
  ~Connection() override;

  bool startActive(rdma_event_channel* channel, const sockaddr* src, const sockaddr* dst);
  bool accept(rdma_cm_id* id, const Hello& remote);

  void close(const std::string& why);  // idempotent
  void onCmEvent(const rdma::CmEvent& e) override;
  void onCompletion(const ibv_wc& wc) override;

  ConnState state() const { return state_; }
  bool active() const { return active_; }
  const std::string& name() const { return name_; }
  const std::optional<Hello>& remote() const { return remote_; }
  const ConnCounters& counters() const { return counters_; }
  uint32_t credits() const { return credits_; }

  // --- sending: fill the open batch, then flush() once per loop turn.
  // Bytes a message record may use in a batch now (0: cannot add now).
  size_t messageRoom();
  // Opens a batch if needed; false when no send buffer or credit is available.
  bool openBatch(bool dataRecord);
  BatchWriter& batch() { return writer_; }
  bool hasOpenBatch() const { return open_; }
  void sealBatch();     // the open batch is full: queue it for posting
  void requestFlush();  // flush() at the end of this loop turn
  void flush();         // post every sealed batch and the open one
  bool wantsCreditReturn() const;
  std::chrono::steady_clock::time_point lastSent() const { return lastSent_; }
  std::chrono::steady_clock::time_point lastReceived() const { return lastReceived_; }

  void resumeReceive();

 private:
  void setState(ConnState s);
  bool createQp(rdma_cm_id* id);
  bool postReceives(uint32_t first, uint32_t n);
  void repostPending();
  void processReceived();
  void onSendDone(uint32_t index);
  void onRecvDone(uint32_t index, uint32_t bytes);
  void maybeFinishClose();
  void postBeacon();
  void fail(const std::string& why);

  loop::EventLoop& loop_;
  ConnectionOwner& owner_;
  ConnParams params_;
  DeviceFor devices_;
  std::string name_;
  bool active_ = false;
  ConnState state_ = ConnState::kIdle;
  std::optional<Hello> remote_;
  std::string closeReason_;

  rdma_cm_id* id_ = nullptr;
  rdma::Device* device_ = nullptr;
  std::unique_ptr<rdma::BufferPool> recvPool_, sendPool_;
  bool qpCreated_ = false;
  bool disconnected_ = false;  // DISCONNECTED seen (or never connected)
  bool beaconPosted_ = false;
  uint32_t postedSends_ = 0, postedRecvs_ = 0;

  // Send ring: buffers [sendTail_, sendHead_) are posted and not yet known
  // complete; the open batch (if open_) is buffer sendHead_ + sealed_.size().
  uint32_t sendHead_ = 0, sendTail_ = 0, sendUsed_ = 0;
  uint32_t unsignaled_ = 0;
  bool open_ = false;
  bool openOnReserve_ = false;  // the open batch used the reserved credit: no data
  BatchWriter writer_;
  std::vector<ibv_send_wr> wrScratch_;
  std::vector<ibv_sge> sgeScratch_;
  std::vector<std::pair<uint32_t, uint32_t>> sealed_;  // (buffer, bytes) not yet posted
  uint32_t credits_ = 0;                               // the peer's receive buffers we may fill
  uint32_t owedCredits_ = 0;                           // our reposted buffers not yet reported
  size_t batchCapacity_ = 0;

  // Receive: completed buffers not yet consumed (backpressure), in order.
  struct Received {
    uint32_t index, bytes;
    uint16_t nextRecord;
    bool creditsTaken;
  };
  std::deque<Received> received_;
  bool paused_ = false;
  std::vector<uint32_t> repost_;

  std::chrono::steady_clock::time_point lastSent_, lastReceived_;
  std::unique_ptr<loop::Timer> connectTimer_, closeTimer_;
  std::unique_ptr<loop::Deferred> flushLater_;
  ConnCounters counters_;
};

}  // namespace rdmamsg::peer
