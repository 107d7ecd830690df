// Registered buffer pools and sets (buffer_pool.h).
#include "daemon/rdma/buffer_pool.h"

#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace rdmamsg::rdma {

BufferPool::BufferPool(ibv_pd* pd, size_t bufferSize, uint32_t count, int access)
    : bufferSize_(bufferSize), count_(count) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bytes_ = (bufferSize * count + page - 1) / page * page;
  // Not zeroed: registration pins (and so faults in) the pages, and every
  // byte sent or read was written first.
  memory_.reset(static_cast<std::byte*>(std::aligned_alloc(page, bytes_)));
  if (!memory_) throw std::system_error(ENOMEM, std::generic_category(), "buffer pool");
  mr_.reset(ibv_reg_mr(pd, memory_.get(), bytes_, access));
  if (!mr_) throw std::system_error(errno, std::generic_category(), "ibv_reg_mr");
}

BufferSet::BufferSet(ibv_pd* pd, const BufferGeometry& g, uint64_t recvTag)
    : geometry_(g),
      recv_(pd, g.bufferSize, g.recvCount, IBV_ACCESS_LOCAL_WRITE),
      send_(pd, g.bufferSize, g.sendCount, 0),
      recvSges_(g.recvCount),
      recvWrs_(g.recvCount) {
  for (uint32_t i = 0; i < g.recvCount; i++) {
    recvSges_[i] = {recv_.addr(i), static_cast<uint32_t>(g.bufferSize), recv_.lkey()};
    recvWrs_[i] = ibv_recv_wr{};
    recvWrs_[i].wr_id = recvTag | i;
    recvWrs_[i].sg_list = &recvSges_[i];
    recvWrs_[i].num_sge = 1;
  }
}

}  // namespace rdmamsg::rdma
