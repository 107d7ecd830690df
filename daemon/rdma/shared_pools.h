// The buffers a device shares among its connections (docs/scaling.md).
//
// MemoryBudget: registered_memory_limit. Every buffer the daemon registers
// (send pools, shared receive buffers, per-peer receive sets) is taken from
// it first; what does not fit is not registered, and the connection that
// needed it fails with the reason.
//
// SendPool: one registered pool of send buffers per device. A connection
// takes a buffer when it opens a batch and gives it back when the send's
// completion says it is done; a connection that found the pool empty is
// woken when buffers come back. Sends are selectively signaled, so the pool
// counts the buffers behind unsignaled sends: connections signal sooner
// when they are a quarter of the pool.
//
// SharedReceiveQueue: one SRQ per device, used by every QP on it. Its
// buffers are registered in chunks as connections need them. Each
// connection reserves an allowance (the buffers its peer may fill: the
// credits it holds, those in flight, and its batches not yet read); the sum
// of allowances never exceeds the buffers registered, so every credit a
// peer holds has a buffer posted for it and the peer never meets RNR.
// Allowances start at the initial grant (config initialGrant()) and grow,
// for busy peers, into `shared_receive_buffers` more; peers give growth back
// when they go idle. Read buffers are reposted in one list per service
// step. The SRQ limit (IBV_EVENT_SRQ_LIMIT_REACHED) is armed at a low
// watermark (half an initial grant): it fires when nearly every buffer is
// held by batches not yet read; it is counted, the SRQ is refilled with
// whatever was released, and the limit re-armed. The credits, not the
// event, keep peers from RNR.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/loop/service_queue.h"
#include "daemon/rdma/buffer_pool.h"
#include "daemon/rdma/verbs.h"

namespace rdmamsg::rdma {

struct MemoryBudget {
  uint64_t limit = 0;
  uint64_t used = 0;
  // Takes `bytes` if they fit; false (and nothing taken) if not.
  bool take(uint64_t bytes) {
    if (bytes > limit - std::min(limit, used)) return false;
    used += bytes;
    return true;
  }
  void give(uint64_t bytes) { used -= std::min(used, bytes); }
  std::string exhausted(uint64_t bytes) const;  // "registered_memory_limit 1GiB reached (...)"
};

struct SrqDeleter {
  void operator()(ibv_srq* s) const { ibv_destroy_srq(s); }
};
using SrqPtr = std::unique_ptr<ibv_srq, SrqDeleter>;

class SendPool {
 public:
  // busy when the budget cannot hold it, io_error when it cannot be
  // registered.
  static Result<std::unique_ptr<SendPool>> create(ibv_pd* pd, size_t bufferSize, uint32_t count,
                                                  MemoryBudget& budget);
  // Adopts a pool whose bytes `budget` holds.
  SendPool(std::unique_ptr<BufferPool> pool, MemoryBudget& budget);
  ~SendPool();
  SendPool(const SendPool&) = delete;
  SendPool& operator=(const SendPool&) = delete;

  // A free buffer, or nullopt (then `wake` is called once buffers come back).
  std::optional<uint32_t> take(const loop::ServiceQueue::Waker& wake);
  void give(uint32_t index);
  BufferPool& buffers() { return *pool_; }
  uint32_t count() const { return pool_->count(); }
  uint32_t available() const { return static_cast<uint32_t>(free_.size()); }
  uint64_t waits() const { return waits_; }
  // Sends posted unsignaled whose signaled successor is not posted yet: their
  // buffers come back only with it.
  uint32_t unsignaled() const { return unsignaled_; }
  void addUnsignaled() { unsignaled_++; }
  void retireUnsignaled(uint32_t n) { unsignaled_ -= std::min(unsignaled_, n); }

 private:
  MemoryBudget& budget_;
  std::unique_ptr<BufferPool> pool_;
  std::vector<uint32_t> free_;
  std::vector<loop::ServiceQueue::Waker> waiting_;
  uint64_t waits_ = 0;
  uint32_t unsignaled_ = 0;
};

struct SrqStats {
  uint32_t registered = 0;  // buffers registered (in chunks)
  uint32_t posted = 0;      // on the SRQ now
  uint32_t reserved = 0;    // allowances of the connections, in all
  uint32_t connections = 0;
  uint64_t limitEvents = 0;  // IBV_EVENT_SRQ_LIMIT_REACHED
  uint64_t refused = 0;      // reservations the budget could not hold
};

class SharedReceiveQueue {
 public:
  // Receive work requests carry wr_id = tag | index. `initialGrant`: what a
  // connection reserves; `burst`: buffers lent beyond the initial grants.
  // io_error when the SRQ cannot be created.
  struct Params {
    size_t bufferSize = 0;
    uint32_t initialGrant = 0, burst = 0, chunk = 1;
    uint64_t tag = 0;
  };
  static Result<std::unique_ptr<SharedReceiveQueue>> create(ibv_pd* pd, const ibv_device_attr& attr,
                                                            const Params& params,
                                                            MemoryBudget& budget);
  // Adopts an SRQ of `maxWr` work requests.
  SharedReceiveQueue(ibv_pd* pd, SrqPtr srq, uint32_t maxWr, const Params& params,
                     MemoryBudget& budget);
  ~SharedReceiveQueue();
  SharedReceiveQueue(const SharedReceiveQueue&) = delete;
  SharedReceiveQueue& operator=(const SharedReceiveQueue&) = delete;

  ibv_srq* srq() const { return srq_.get(); }
  size_t bufferSize() const { return bufferSize_; }
  bool owns(uint32_t index) const { return index < registered_; }
  std::byte* at(uint32_t index) const;

  // A new connection's allowance: the initial grant, registering a chunk if
  // needed; busy when the queue or the budget cannot hold it, io_error when
  // the registration failed.
  Status reserveInitial();
  // Registers (and posts) up to `buffers`, as the budget allows: at start,
  // so that connections find them registered.
  Status prepare(uint32_t buffers) { return grow(std::min(buffers, maxWr_)); }
  // The connection is gone (after giveBack() of what it was lent).
  void releaseInitial();
  // More for a busy connection holding `allowance` (up to `max`): up to as
  // much again, from the burst buffers (0: none left).
  uint32_t lend(uint32_t allowance, uint32_t max);
  // A connection gives `n` lent buffers back (idle, or gone).
  void giveBack(uint32_t n);
  // A receive completion took a buffer off the SRQ.
  void onReceived() { posted_ -= posted_ > 0 ? 1 : 0; }

  // A buffer was read (or arrived for nobody): reposted at the next refill().
  void release(uint32_t index) { pending_.push_back(index); }
  // Posts every released buffer in one list; io_error when ibv_post_srq_recv failed.
  Status refill();
  // IBV_EVENT_SRQ_LIMIT_REACHED: refill and re-arm.
  void onLimitReached();
  SrqStats stats() const;
  uint32_t reservedCount() const { return reserved_; }
  uint64_t registeredBytes() const {
    uint64_t n = 0;
    for (const auto& c : chunks_)
      n += c.pool->registeredBytes();
    return n;
  }

 private:
  // Registers chunks until `needed` buffers are registered, and posts them.
  Status grow(uint32_t needed);
  void arm();
  struct Chunk {
    std::unique_ptr<BufferPool> pool;
    std::vector<ibv_sge> sges;
    std::vector<ibv_recv_wr> wrs;
  };
  ibv_pd* pd_;
  size_t bufferSize_;
  uint32_t initialGrant_, burst_, chunk_, maxWr_;
  uint64_t tag_;
  MemoryBudget& budget_;
  SrqPtr srq_;
  std::vector<Chunk> chunks_;
  uint32_t registered_ = 0, posted_ = 0, reserved_ = 0, connections_ = 0;
  uint32_t lent_ = 0;  // allowances beyond the initial grants
  std::vector<uint32_t> pending_;
  uint64_t limitEvents_ = 0, refused_ = 0;
};

}  // namespace rdmamsg::rdma
