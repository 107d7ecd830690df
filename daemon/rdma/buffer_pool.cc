// Registered buffer pools and sets (buffer_pool.h).
#include "daemon/rdma/buffer_pool.h"

#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace rdmamsg::rdma {

uint64_t BufferPool::registeredBytesFor(size_t bufferSize, uint32_t count) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return (uint64_t{bufferSize} * count + page - 1) / page * page;
}

BufferPool::BufferPool(ibv_pd* pd, size_t bufferSize, uint32_t count, int access)
    : bufferSize_(bufferSize), count_(count) {
  bytes_ = registeredBytesFor(bufferSize, count);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Not zeroed: registration pins (and so faults in) the pages, and every
  // byte sent or read was written first.
  memory_.reset(static_cast<std::byte*>(std::aligned_alloc(page, bytes_)));
  if (!memory_) throw std::system_error(ENOMEM, std::generic_category(), "buffer pool");
  mr_.reset(ibv_reg_mr(pd, memory_.get(), bytes_, access));
  if (!mr_) throw std::system_error(errno, std::generic_category(), "ibv_reg_mr");
}

ReceiveSet::ReceiveSet(ibv_pd* pd, size_t bufferSize, uint32_t count, uint64_t tag)
    : pool_(pd, bufferSize, count, IBV_ACCESS_LOCAL_WRITE), sges_(count), wrs_(count) {
  for (uint32_t i = 0; i < count; i++) {
    sges_[i] = {pool_.addr(i), static_cast<uint32_t>(bufferSize), pool_.lkey()};
    wrs_[i] = ibv_recv_wr{};
    wrs_[i].wr_id = tag | i;
    wrs_[i].sg_list = &sges_[i];
    wrs_[i].num_sge = 1;
  }
}

}  // namespace rdmamsg::rdma
