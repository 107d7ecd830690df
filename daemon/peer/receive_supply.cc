// Where a connection's receive buffers come from (receive_supply.h).
#include "daemon/peer/receive_supply.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <system_error>

namespace rdmamsg::peer {

namespace {

// receive_queue: shared — the device's SRQ.
class SharedReceives final : public ReceiveSupply, public Lender {
 public:
  SharedReceives(rdma::SharedReceiveQueue& srq, uint32_t initialGrant, uint32_t maxCredits)
      : srq_(srq), initialGrant_(initialGrant), maxCredits_(maxCredits) {}

  void describe(ibv_qp_init_attr& a) const override {
    a.srq = srq_.srq();
    a.cap.max_recv_wr = 0;
    a.cap.max_recv_sge = 0;
  }
  // The SRQ's buffers are posted already.
  uint32_t start(const ibv_qp_cap&, std::vector<uint32_t>&) override { return initialGrant_; }
  uint32_t most() const override { return maxCredits_; }
  bool shared() const override { return true; }
  Lender* lender() override { return this; }
  uint32_t lend(uint32_t allowance, uint32_t max) override { return srq_.lend(allowance, max); }
  void giveBack(uint32_t n) override { srq_.giveBack(n); }

  std::byte* at(uint32_t index) const override { return srq_.at(index); }
  Status post(ibv_qp*, std::span<const uint32_t> indexes) override {
    for (uint32_t idx : indexes)
      srq_.release(idx);
    return srq_.refill();
  }
  uint64_t tag() const override { return rdma::kSrqRecvTag; }
  bool owns(uint32_t index) const override { return srq_.owns(index); }
  void completed() override {}  // the device counts what the SRQ has posted
  void discard(uint32_t index) override { srq_.release(index); }

  // A QP on the SRQ takes no more receives after IBV_EVENT_QP_LAST_WQE_REACHED.
  bool drained() const override { return lastWqe_; }
  void onLastWqe() override { lastWqe_ = true; }
  void forgetPosted() override { lastWqe_ = true; }
  void returnAll(std::span<const uint32_t> unread, uint32_t lent) override {
    for (uint32_t idx : unread)
      srq_.release(idx);
    srq_.giveBack(lent);
    srq_.releaseInitial();
    if (Status st = srq_.refill(); !st.ok())
      spdlog::error("shared receive queue: {}", st.message());
  }

 private:
  rdma::SharedReceiveQueue& srq_;
  uint32_t initialGrant_, maxCredits_;
  bool lastWqe_ = false;
};

// receive_queue: per_peer — a receive set on the connection's own QP.
class OwnReceives final : public ReceiveSupply {
 public:
  OwnReceives(rdma::Device& device, std::unique_ptr<rdma::ReceiveSet> set, uint32_t maxCredits)
      : device_(device), set_(std::move(set)), maxCredits_(maxCredits) {}

  void describe(ibv_qp_init_attr& a) const override {
    a.srq = nullptr;
    a.cap.max_recv_wr = maxCredits_;
    a.cap.max_recv_sge = 1;
  }
  uint32_t start(const ibv_qp_cap& granted, std::vector<uint32_t>& toPost) override {
    count_ = std::min(maxCredits_, granted.max_recv_wr);
    for (uint32_t i = 0; i < count_; i++)
      toPost.push_back(i);
    return count_;
  }
  uint32_t most() const override { return count_; }
  bool shared() const override { return false; }
  Lender* lender() override { return nullptr; }

  std::byte* at(uint32_t index) const override { return set_->pool().at(index); }
  // One list of the buffers' pre-built work requests.
  Status post(ibv_qp* qp, std::span<const uint32_t> indexes) override {
    for (size_t i = 0; i < indexes.size(); i++)
      set_->wr(indexes[i])->next = i + 1 < indexes.size() ? set_->wr(indexes[i + 1]) : nullptr;
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_recv(qp, set_->wr(indexes[0]), &bad); rc != 0)
      return Status(Errc::io_error,
                    "ibv_post_recv: " + std::error_code(rc, std::generic_category()).message());
    posted_ += static_cast<uint32_t>(indexes.size());
    return Status();
  }
  uint64_t tag() const override { return rdma::kQpRecvTag; }
  bool owns(uint32_t index) const override { return index < count_; }
  void completed() override { posted_--; }
  void discard(uint32_t) override {}  // the set goes back whole

  // The QP's own receives all flush back when it goes to error.
  bool drained() const override { return posted_ == 0; }
  void forgetPosted() override { posted_ = 0; }
  void returnAll(std::span<const uint32_t>, uint32_t) override {
    device_.returnReceiveSet(std::move(set_));
  }

 private:
  rdma::Device& device_;
  std::unique_ptr<rdma::ReceiveSet> set_;
  uint32_t maxCredits_, count_ = 0, posted_ = 0;
};

}  // namespace

Result<std::unique_ptr<ReceiveSupply>> ReceiveSupply::open(rdma::Device& device,
                                                           uint32_t maxCredits) {
  if (rdma::SharedReceiveQueue* srq = device.srq()) {
    if (Status st = srq->reserveInitial(); !st.ok()) return st;
    return std::unique_ptr<ReceiveSupply>(
        std::make_unique<SharedReceives>(*srq, device.pools().initialGrant, maxCredits));
  }
  Result<std::unique_ptr<rdma::ReceiveSet>> set =
      device.takeReceiveSet(maxCredits, rdma::kQpRecvTag);
  if (!set) return set.status();
  return std::unique_ptr<ReceiveSupply>(
      std::make_unique<OwnReceives>(device, std::move(set).value(), maxCredits));
}

}  // namespace rdmamsg::peer
