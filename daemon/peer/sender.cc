// The send side of one connection's QP (sender.h).
#include "daemon/peer/sender.h"

#include <algorithm>
#include <chrono>
#include <system_error>

namespace rdmamsg::peer {

void Sender::attach(rdma::SendPool& pool, uint32_t cap) {
  pool_ = &pool;
  batches_.setCap(cap);
}

bool Sender::open(bool forMessages) {
  if (batches_.hasOpen()) return ledger_.join(forMessages);
  if (!ledger_.mayOpen(forMessages) || batches_.full()) {
    if (forMessages) counters_.creditStalls++;
    return false;
  }
  std::optional<uint32_t> idx = pool_->take(wake_);
  if (!idx) {
    counters_.sendPoolWaits++;
    return false;
  }
  ledger_.open(forMessages);
  batches_.open(*idx);
  writer_.reset(pool_->buffers().at(*idx), batchCapacity_);
  return true;
}

Status Sender::seal() {
  if (!batches_.hasOpen()) return Status();
  const CreditLedger::Seal s = ledger_.seal(std::chrono::steady_clock::now());
  size_t bytes = writer_.finish(s.returned, s.released);
  // A batch posted in place has no trailer: the connection posts none in
  // place once it authenticates batches.
  Status st;
  if (auth_ != nullptr && auth_->active() && writer_.external() == 0) {
    Result<size_t> sealed = auth_->seal(pool_->buffers().at(batches_.openIndex()), bytes);
    if (sealed)
      bytes = *sealed;
    else
      st = sealed.status();  // the batch is queued (its buffer accounted) but must not be posted
  }
  batches_.seal(static_cast<uint32_t>(bytes));
  return st;
}

void Sender::sealBare() {
  if (!batches_.hasOpen()) return;
  ledger_.sealBare();
  batches_.seal(static_cast<uint32_t>(writer_.finish(0, 0)));
}

Status Sender::sealInPlace(const PayloadHandle& payload, std::span<const std::byte> bytes,
                           uint32_t lkey) {
  inPlace_[batches_.openIndex()] = {
      payload.share(),
      {reinterpret_cast<uint64_t>(bytes.data()), static_cast<uint32_t>(bytes.size()), lkey}};
  return seal();
}

void Sender::give(uint32_t index) {
  if (!inPlace_.empty()) inPlace_.erase(index);  // the send's hold on its payload ends
  pool_->give(index);
}

Status Sender::post(ibv_qp* qp) {
  const std::vector<SendBatches::Sealed>& sealed = batches_.sealed();
  if (sealed.empty()) return Status();
  wrs_.resize(sealed.size());
  sges_.resize(2 * sealed.size());
  rdma::BufferPool& buffers = pool_->buffers();
  // The last send that posts a client's memory in place is signaled: its
  // completion gives that memory (and all before it) back.
  size_t lastInPlace = sealed.size();
  if (!inPlace_.empty()) {
    for (size_t i = 0; i < sealed.size(); i++)
      if (inPlace_.contains(sealed[i].index)) lastInPlace = i;
  }
  for (size_t i = 0; i < sealed.size(); i++) {
    ibv_sge* sge = &sges_[2 * i];
    sge[0] = {buffers.addr(sealed[i].index), sealed[i].bytes, buffers.lkey()};
    ibv_send_wr& w = wrs_[i];
    w = ibv_send_wr{};
    w.wr_id = kTag | sealed[i].index;
    w.sg_list = sge;
    w.num_sge = 1;
    if (!inPlace_.empty()) {
      if (auto it = inPlace_.find(sealed[i].index); it != inPlace_.end()) {
        sge[0].length -= it->second.sge.length;  // the head; the payload from where it lies
        sge[1] = it->second.sge;
        w.num_sge = 2;
      }
    }
    w.opcode = IBV_WR_SEND;
    counters_.bytesPosted += sge[0].length + (w.num_sge == 2 ? sge[1].length : 0);
    const uint32_t unsignaled = batches_.unsignaled();
    if (batches_.signal(i, {buffers.count(), pool_->available(), pool_->unsignaled()},
                        i == lastInPlace)) {
      w.send_flags = IBV_SEND_SIGNALED;
      pool_->retireUnsignaled(unsignaled);
      counters_.sendsSignaled++;
    } else {
      pool_->addUnsignaled();
    }
    // Only the last send of a train is solicited (docs/architecture.md).
    const bool last = i + 1 == sealed.size();
    if (last) w.send_flags |= IBV_SEND_SOLICITED;
    w.next = last ? nullptr : &wrs_[i + 1];
  }
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp, wrs_.data(), &bad);
  counters_.postSendCalls++;
  if (rc != 0)
    return Status(Errc::io_error,
                  "ibv_post_send: " + std::error_code(rc, std::generic_category()).message());
  auto n = static_cast<uint32_t>(sealed.size());
  outstanding_ += n;
  counters_.sendsPosted += n;
  batches_.posted();
  return Status();
}

// A completion frees its buffer and every unsignaled one posted before it.
Status Sender::onCompleted(uint32_t index) {
  const uint32_t n = batches_.complete(index, [this](uint32_t idx) { give(idx); });
  outstanding_ -= std::min(outstanding_, n);
  if (n == 0)
    return Status(Errc::io_error, "send completion for a buffer that was not posted (buffer " +
                                      std::to_string(index) + ")");
  return Status();
}

void Sender::onBeacon() {
  pool_->retireUnsignaled(batches_.completeAll([this](uint32_t idx) { give(idx); }));
  outstanding_ = 0;
}

void Sender::giveBack() {
  if (pool_ == nullptr) return;
  pool_->retireUnsignaled(batches_.releaseAll([this](uint32_t idx) { give(idx); }));
}

void Sender::detach() {
  batches_.releaseAll([](uint32_t) {});
  inPlace_.clear();
  pool_ = nullptr;
}

}  // namespace rdmamsg::peer
