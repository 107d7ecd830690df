// Registered buffer pools (buffer_pool.h).
#include "daemon/rdma/buffer_pool.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace rdmamsg::rdma {

BufferPool::BufferPool(ibv_pd* pd, size_t bufferSize, uint32_t count, int access)
    : bufferSize_(bufferSize), count_(count) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t bytes = (bufferSize * count + page - 1) / page * page;
  memory_.reset(static_cast<std::byte*>(std::aligned_alloc(page, bytes)));
  if (!memory_) throw std::system_error(ENOMEM, std::generic_category(), "buffer pool");
  std::memset(memory_.get(), 0, bytes);
  mr_.reset(ibv_reg_mr(pd, memory_.get(), bytes, access));
  if (!mr_) throw std::system_error(errno, std::generic_category(), "ibv_reg_mr");
}

}  // namespace rdmamsg::rdma
