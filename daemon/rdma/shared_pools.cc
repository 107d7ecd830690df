// Buffers shared by a device's connections (shared_pools.h).
#include "daemon/rdma/shared_pools.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "config/units.h"

namespace rdmamsg::rdma {

std::string MemoryBudget::exhausted(uint64_t bytes) const {
  return "registered_memory_limit " + config::formatSize(limit) + " reached (" +
         config::formatSize(used) + " registered, " + config::formatSize(bytes) + " more needed)";
}

namespace {
uint64_t poolBytes(size_t bufferSize, uint32_t count) {
  return BufferPool::registeredBytesFor(bufferSize, count);
}
}  // namespace

Result<std::unique_ptr<SendPool>> SendPool::create(ibv_pd* pd, size_t bufferSize, uint32_t count,
                                                   MemoryBudget& budget) {
  const uint64_t bytes = poolBytes(bufferSize, count);
  if (!budget.take(bytes)) return Status(Errc::busy, budget.exhausted(bytes));
  Result<std::unique_ptr<BufferPool>> pool = BufferPool::create(pd, bufferSize, count, 0);
  if (!pool) {
    budget.give(bytes);
    return pool.status();
  }
  return std::make_unique<SendPool>(std::move(pool).value(), budget);
}

SendPool::SendPool(std::unique_ptr<BufferPool> pool, MemoryBudget& budget)
    : budget_(budget), pool_(std::move(pool)) {
  free_.reserve(pool_->count());
  for (uint32_t i = pool_->count(); i > 0; i--)
    free_.push_back(i - 1);
}

SendPool::~SendPool() {
  budget_.give(pool_->registeredBytes());
}

std::optional<uint32_t> SendPool::take(const loop::ServiceQueue::Waker& wake) {
  if (free_.empty()) {
    waits_++;
    waiting_.push_back(wake);
    return std::nullopt;
  }
  uint32_t i = free_.back();
  free_.pop_back();
  return i;
}

void SendPool::give(uint32_t index) {
  free_.push_back(index);
  if (waiting_.empty()) return;
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (const auto& w : waiting)
    w();
}

Result<std::unique_ptr<SharedReceiveQueue>> SharedReceiveQueue::create(ibv_pd* pd,
                                                                       const ibv_device_attr& attr,
                                                                       const Params& params,
                                                                       MemoryBudget& budget) {
  // Room for every buffer the budget could ever register, within the device's limit.
  const uint64_t most = budget.limit / params.bufferSize + std::max<uint32_t>(1, params.chunk);
  ibv_srq_init_attr a{};
  a.attr.max_wr = static_cast<uint32_t>(
      std::min<uint64_t>(most, attr.max_srq_wr > 0 ? uint64_t(attr.max_srq_wr) : most));
  a.attr.max_sge = 1;
  const uint32_t asked = a.attr.max_wr;
  SrqPtr srq(ibv_create_srq(pd, &a));
  if (!srq)
    return Status(Errc::io_error,
                  "ibv_create_srq: " + std::error_code(errno, std::generic_category()).message());
  return std::make_unique<SharedReceiveQueue>(pd, std::move(srq), std::min(asked, a.attr.max_wr),
                                              params, budget);
}

SharedReceiveQueue::SharedReceiveQueue(ibv_pd* pd, SrqPtr srq, uint32_t maxWr, const Params& params,
                                       MemoryBudget& budget)
    : pd_(pd),
      bufferSize_(params.bufferSize),
      initialGrant_(params.initialGrant),
      burst_(params.burst),
      chunk_(std::max<uint32_t>(1, params.chunk)),
      maxWr_(maxWr),
      tag_(params.tag),
      budget_(budget),
      srq_(std::move(srq)) {}

SharedReceiveQueue::~SharedReceiveQueue() {
  srq_.reset();  // before the chunks' memory regions
  for (const auto& c : chunks_)
    budget_.give(c.pool->registeredBytes());
}

std::byte* SharedReceiveQueue::at(uint32_t index) const {
  return chunks_[index / chunk_].pool->at(index % chunk_);
}

Status SharedReceiveQueue::grow(uint32_t needed) {
  while (registered_ < needed) {
    if (registered_ + chunk_ > maxWr_)
      return Status(Errc::busy,
                    "the shared receive queue is full (" + std::to_string(maxWr_) + " buffers)");
    const uint64_t bytes = poolBytes(bufferSize_, chunk_);
    if (!budget_.take(bytes)) return Status(Errc::busy, budget_.exhausted(bytes));
    Result<std::unique_ptr<BufferPool>> pool =
        BufferPool::create(pd_, bufferSize_, chunk_, IBV_ACCESS_LOCAL_WRITE);
    if (!pool) {
      budget_.give(bytes);
      return Status(pool.status().code(), "shared receive buffers: " + pool.status().message());
    }
    Chunk c;
    c.pool = std::move(pool).value();
    c.sges.resize(chunk_);
    c.wrs.resize(chunk_);
    for (uint32_t i = 0; i < chunk_; i++) {
      c.sges[i] = {c.pool->addr(i), static_cast<uint32_t>(bufferSize_), c.pool->lkey()};
      c.wrs[i] = ibv_recv_wr{};
      c.wrs[i].wr_id = tag_ | (registered_ + i);
      c.wrs[i].sg_list = &c.sges[i];
      c.wrs[i].num_sge = 1;
      pending_.push_back(registered_ + i);
    }
    chunks_.push_back(std::move(c));
    registered_ += chunk_;
  }
  return refill();
}

Status SharedReceiveQueue::reserveInitial() {
  if (Status st = grow(reserved_ + initialGrant_); !st.ok()) {
    refused_++;
    return st;
  }
  reserved_ += initialGrant_;
  connections_++;
  return Status();
}

void SharedReceiveQueue::releaseInitial() {
  reserved_ -= std::min(reserved_, initialGrant_);
  connections_ -= connections_ > 0 ? 1 : 0;
}

uint32_t SharedReceiveQueue::lend(uint32_t allowance, uint32_t max) {
  if (allowance >= max || lent_ >= burst_) return 0;
  uint32_t want = std::min({allowance, max - allowance, burst_ - lent_});
  // Lent from what is registered, registering more while the budget allows.
  if (reserved_ + want > registered_) {
    if (Status st = grow(reserved_ + want); !st.ok()) {
      if (st.code() == Errc::io_error) spdlog::error("{}", st.message());
      want = registered_ > reserved_ ? std::min(want, registered_ - reserved_) : 0;
    }
  }
  reserved_ += want;
  lent_ += want;
  return want;
}

void SharedReceiveQueue::giveBack(uint32_t n) {
  n = std::min(n, lent_);
  lent_ -= n;
  reserved_ -= std::min(reserved_, n);
}

Status SharedReceiveQueue::refill() {
  if (pending_.empty()) return Status();
  for (size_t i = 0; i < pending_.size(); i++) {
    uint32_t idx = pending_[i];
    ibv_recv_wr& w = chunks_[idx / chunk_].wrs[idx % chunk_];
    w.next = i + 1 < pending_.size()
                 ? &chunks_[pending_[i + 1] / chunk_].wrs[pending_[i + 1] % chunk_]
                 : nullptr;
  }
  uint32_t first = pending_.front();
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_srq_recv(srq_.get(), &chunks_[first / chunk_].wrs[first % chunk_], &bad);
      rc != 0)
    return Status(Errc::io_error,
                  "ibv_post_srq_recv: " + std::error_code(rc, std::generic_category()).message());
  posted_ += static_cast<uint32_t>(pending_.size());
  pending_.clear();
  arm();
  return Status();
}

// The limit is armed at half an initial grant: below it, nearly every
// buffer is held by batches not yet read (a receiver holding back) or
// waiting to be reposted.
void SharedReceiveQueue::arm() {
  ibv_srq_attr a{};
  a.srq_limit = std::max<uint32_t>(1, initialGrant_ / 2);
  if (posted_ <= a.srq_limit) return;
  if (int rc = ibv_modify_srq(srq_.get(), &a, IBV_SRQ_LIMIT); rc != 0)
    spdlog::debug("ibv_modify_srq(IBV_SRQ_LIMIT): {}",
                  std::error_code(rc, std::generic_category()).message());
}

void SharedReceiveQueue::onLimitReached() {
  limitEvents_++;
  spdlog::debug("shared receive queue: fewer than {} buffers posted ({} of {} registered)",
                std::max<uint32_t>(1, initialGrant_ / 2), posted_, registered_);
  if (!pending_.empty()) {
    if (Status st = refill(); !st.ok()) spdlog::error("shared receive queue: {}", st.message());
  } else
    arm();
}

SrqStats SharedReceiveQueue::stats() const {
  return {registered_, posted_, reserved_, connections_, limitEvents_, refused_};
}

}  // namespace rdmamsg::rdma
