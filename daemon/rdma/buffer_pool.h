// Registered buffers. A BufferPool is a run of equal-sized buffers in one
// memory region: one registration per pool, never per message. Send pools
// need no remote access; receive pools only local write.
//
// A BufferSet is what one connection uses: a receive pool, a send pool, and
// the receive work requests built once (seed 004: pre-built work requests)
// and reposted as they are. Sets are allocated and registered once, kept by
// the device and reused across reconnects (Device::takeBuffers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "daemon/rdma/verbs.h"

namespace rdmamsg::rdma {

class BufferPool {
 public:
  // Throws std::system_error when the memory cannot be had or registered.
  BufferPool(ibv_pd* pd, size_t bufferSize, uint32_t count, int access);

  std::byte* at(uint32_t i) const { return memory_.get() + size_t{i} * bufferSize_; }
  uint64_t addr(uint32_t i) const { return reinterpret_cast<uint64_t>(at(i)); }
  uint32_t lkey() const { return mr_->lkey; }
  size_t bufferSize() const { return bufferSize_; }
  uint32_t count() const { return count_; }
  size_t registeredBytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  size_t bufferSize_;
  uint32_t count_;
  size_t bytes_;
  std::unique_ptr<std::byte, Free> memory_;  // before mr_: the MR goes first, then the memory
  MrPtr mr_;
};

struct BufferGeometry {
  size_t bufferSize = 0;
  uint32_t recvCount = 0;
  uint32_t sendCount = 0;
  bool operator==(const BufferGeometry&) const = default;
};

class BufferSet {
 public:
  // Receive work requests carry wr_id = recvTag | index.
  BufferSet(ibv_pd* pd, const BufferGeometry& g, uint64_t recvTag);
  const BufferGeometry& geometry() const { return geometry_; }
  BufferPool& recv() { return recv_; }
  BufferPool& send() { return send_; }
  // The pre-built receive work request of buffer i (its `next` is the caller's).
  ibv_recv_wr* recvWr(uint32_t i) { return &recvWrs_[i]; }
  size_t registeredBytes() const { return recv_.registeredBytes() + send_.registeredBytes(); }

 private:
  BufferGeometry geometry_;
  BufferPool recv_, send_;
  std::vector<ibv_sge> recvSges_;
  std::vector<ibv_recv_wr> recvWrs_;
};

}  // namespace rdmamsg::rdma
