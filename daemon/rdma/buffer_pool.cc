// Registered buffer pools and sets (buffer_pool.h).
#include "daemon/rdma/buffer_pool.h"

#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace rdmamsg::rdma {

uint64_t BufferPool::registeredBytesFor(size_t bufferSize, uint32_t count) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return (uint64_t{bufferSize} * count + page - 1) / page * page;
}

Result<std::unique_ptr<BufferPool>> BufferPool::create(ibv_pd* pd, size_t bufferSize,
                                                       uint32_t count, int access) {
  const size_t bytes = registeredBytesFor(bufferSize, count);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Not zeroed: registration pins (and so faults in) the pages, and every
  // byte sent or read was written first.
  Memory memory(static_cast<std::byte*>(std::aligned_alloc(page, bytes)));
  if (!memory)
    return Status(Errc::io_error, "buffer pool: no memory for " + std::to_string(bytes) + " bytes");
  MrPtr mr(ibv_reg_mr(pd, memory.get(), bytes, access));
  if (!mr)
    return Status(Errc::io_error,
                  "ibv_reg_mr: " + std::error_code(errno, std::generic_category()).message());
  return std::make_unique<BufferPool>(bufferSize, count, bytes, std::move(memory), std::move(mr));
}

BufferPool::BufferPool(size_t bufferSize, uint32_t count, size_t bytes, Memory memory, MrPtr mr)
    : bufferSize_(bufferSize),
      count_(count),
      bytes_(bytes),
      memory_(std::move(memory)),
      mr_(std::move(mr)) {}

Result<std::unique_ptr<ReceiveSet>> ReceiveSet::create(ibv_pd* pd, size_t bufferSize,
                                                       uint32_t count, uint64_t tag) {
  Result<std::unique_ptr<BufferPool>> pool =
      BufferPool::create(pd, bufferSize, count, IBV_ACCESS_LOCAL_WRITE);
  if (!pool) return pool.status();
  return std::make_unique<ReceiveSet>(std::move(pool).value(), tag);
}

ReceiveSet::ReceiveSet(std::unique_ptr<BufferPool> pool, uint64_t tag)
    : pool_(std::move(pool)), sges_(pool_->count()), wrs_(pool_->count()) {
  for (uint32_t i = 0; i < pool_->count(); i++) {
    sges_[i] = {pool_->addr(i), static_cast<uint32_t>(pool_->bufferSize()), pool_->lkey()};
    wrs_[i] = ibv_recv_wr{};
    wrs_[i].wr_id = tag | i;
    wrs_[i].sg_list = &sges_[i];
    wrs_[i].num_sge = 1;
  }
}

}  // namespace rdmamsg::rdma
