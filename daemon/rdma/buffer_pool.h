// Registered buffers. A BufferPool is a run of equal-sized buffers in one
// memory region: one registration per pool, never per message. Send pools
// need no remote access; receive pools only local write. The pools a device
// shares among its connections are in shared_pools.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "common/status.h"
#include "daemon/rdma/verbs.h"

namespace rdmamsg::rdma {

class BufferPool {
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  using Memory = std::unique_ptr<std::byte, Free>;

 public:
  // io_error when the memory cannot be had or registered.
  static Result<std::unique_ptr<BufferPool>> create(ibv_pd* pd, size_t bufferSize, uint32_t count,
                                                    int access);
  // Adopts memory and its registration (create() makes them).
  BufferPool(size_t bufferSize, uint32_t count, size_t bytes, Memory memory, MrPtr mr);

  std::byte* at(uint32_t i) const { return memory_.get() + size_t{i} * bufferSize_; }
  uint64_t addr(uint32_t i) const { return reinterpret_cast<uint64_t>(at(i)); }
  uint32_t lkey() const { return mr_->lkey; }
  size_t bufferSize() const { return bufferSize_; }
  uint32_t count() const { return count_; }
  size_t registeredBytes() const { return bytes_; }
  // What a pool of `count` buffers registers (whole pages).
  static uint64_t registeredBytesFor(size_t bufferSize, uint32_t count);

 private:
  size_t bufferSize_;
  uint32_t count_;
  size_t bytes_;
  Memory memory_;  // before mr_: the MR goes first, then the memory
  MrPtr mr_;
};

// The receive buffers of one connection when the device has no shared
// receive queue (receive_queue: per_peer), with their work requests built
// once (seed 004: pre-built work requests) and reposted as they are. Sets
// are registered once, kept by the device and reused across reconnects
// (Device::takeReceiveSet).
class ReceiveSet {
 public:
  // Receive work requests carry wr_id = tag | index. io_error when the
  // buffers cannot be registered.
  static Result<std::unique_ptr<ReceiveSet>> create(ibv_pd* pd, size_t bufferSize, uint32_t count,
                                                    uint64_t tag);
  ReceiveSet(std::unique_ptr<BufferPool> pool, uint64_t tag);
  BufferPool& pool() { return *pool_; }
  // The pre-built receive work request of buffer i (its `next` is the caller's).
  ibv_recv_wr* wr(uint32_t i) { return &wrs_[i]; }
  size_t registeredBytes() const { return pool_->registeredBytes(); }

 private:
  std::unique_ptr<BufferPool> pool_;
  std::vector<ibv_sge> sges_;
  std::vector<ibv_recv_wr> wrs_;
};

}  // namespace rdmamsg::rdma
