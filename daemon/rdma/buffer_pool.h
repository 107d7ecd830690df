// A pool of equal-sized buffers in one memory region: one registration per
// pool, never per message. Send pools need no remote access; receive pools
// only local write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "daemon/rdma/verbs.h"

namespace rdmamsg::rdma {

class BufferPool {
 public:
  // Throws std::system_error when the memory cannot be registered.
  BufferPool(ibv_pd* pd, size_t bufferSize, uint32_t count, int access);

  std::byte* at(uint32_t i) const { return memory_.get() + size_t{i} * bufferSize_; }
  uint64_t addr(uint32_t i) const { return reinterpret_cast<uint64_t>(at(i)); }
  uint32_t lkey() const { return mr_->lkey; }
  size_t bufferSize() const { return bufferSize_; }
  uint32_t count() const { return count_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  size_t bufferSize_;
  uint32_t count_;
  std::unique_ptr<std::byte, Free> memory_;  // before mr_: the MR goes first, then the memory
  MrPtr mr_;
};

}  // namespace rdmamsg::rdma
