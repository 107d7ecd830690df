// Unit tests of where a connection's receive buffers come from
// (daemon/peer/receive_supply.h), on softrdma's device and real queue
// pairs. Per peer: a receive set of the buffers the QP was granted, posted
// on its own QP; a send lands in one of them; the QP's receives all flush
// back when it goes to error (then it is drained); the set goes back to the
// device and the next connection reuses it; a set over the budget is
// refused with the reason. Shared: the device's SRQ, the initial grant
// reserved at open (refused when the budget cannot hold it); read buffers
// go back to it; it lends busy peers more; drained only after the last WQE;
// returnAll gives back what was unread and lent, and the grant.
#include "daemon/peer/receive_supply.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/daemon/qp_link.h"

namespace rdmamsg::peer {
namespace {

using rdma::test::bytesFor;
using rdma::test::kBuffer;

rdma::PoolParams perPeer() {
  rdma::PoolParams p;
  p.bufferSize = kBuffer;
  p.sendBuffers = 4;
  p.sharedReceive = false;
  p.perPeerCount = 6;
  return p;
}

rdma::PoolParams shared() {
  rdma::PoolParams p = perPeer();
  p.sharedReceive = true;
  p.initialGrant = 2;
  p.burst = 4;
  p.chunk = 2;
  p.startPeers = 0;
  return p;
}

class ReceiveSupplyTest : public ::testing::Test {
 protected:
  // Connects the link, the server's receive side described by a supply of
  // `maxCredits` opened on the device as the server's QP is created.
  void connect(const rdma::PoolParams& pools, uint32_t maxCredits) {
    ASSERT_TRUE(link_.connect(pools, [&](ibv_qp_init_attr& a, bool server) {
      if (!server) return;
      Result<std::unique_ptr<ReceiveSupply>> s = ReceiveSupply::open(*link_.device, maxCredits);
      if (!s) throw std::runtime_error(s.status().toString());
      supply_ = std::move(s).value();
      supply_->describe(a);
    }));
    ASSERT_TRUE(supply_);
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(link_.serverQp(), &attr, IBV_QP_CAP, &init), 0);
    granted_ = init.cap;
    sendBuf_ = rdma::BufferPool::create(link_.device->pd(), kBuffer, 1, 0).value();
  }
  // A send of `text` from the client, signaled.
  void send(const std::string& text) {
    std::memcpy(sendBuf_->at(0), text.data(), text.size());
    ibv_sge sge{sendBuf_->addr(0), static_cast<uint32_t>(text.size()), sendBuf_->lkey()};
    ibv_send_wr w{};
    w.sg_list = &sge;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(link_.clientQp(), &w, &bad), 0);
  }
  void toError(ibv_qp* qp) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE), 0);
  }

  rdma::test::QpLink link_;
  std::unique_ptr<ReceiveSupply> supply_;
  ibv_qp_cap granted_{};
  std::unique_ptr<rdma::BufferPool> sendBuf_;
};

TEST_F(ReceiveSupplyTest, PerPeerASetOfTheGrantedBuffersOnTheQpsOwnQueue) {
  connect(perPeer(), 6);
  EXPECT_FALSE(supply_->shared());
  EXPECT_EQ(supply_->lender(), nullptr) << "a receive set lends nothing";
  EXPECT_EQ(supply_->tag(), rdma::kQpRecvTag);
  ibv_qp_init_attr a{};
  supply_->describe(a);
  EXPECT_EQ(a.srq, nullptr);
  EXPECT_EQ(a.cap.max_recv_wr, 6u);
  EXPECT_EQ(a.cap.max_recv_sge, 1u);

  ibv_qp_cap fewer = granted_;
  fewer.max_recv_wr = 4;  // the QP was granted less than asked
  std::vector<uint32_t> toPost;
  EXPECT_EQ(supply_->start(fewer, toPost), 4u) << "the peer may fill what the QP can hold";
  EXPECT_EQ(toPost, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(supply_->most(), 4u);
  EXPECT_TRUE(supply_->owns(3));
  EXPECT_FALSE(supply_->owns(4)) << "a buffer beyond the grant is none of its own";
  EXPECT_TRUE(supply_->drained()) << "nothing posted yet";

  ASSERT_TRUE(supply_->post(link_.serverQp(), toPost).ok());
  EXPECT_FALSE(supply_->drained());
  send("first");
  ASSERT_TRUE(link_.stepUntil([&] { return link_.server.completions.size() == 1; }));
  const ibv_wc wc = link_.server.completions[0];
  supply_->completed();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id & rdma::kWrTagMask, supply_->tag());
  const auto idx = static_cast<uint32_t>(wc.wr_id & 0xffffffff);
  EXPECT_EQ(idx, 0u) << "the first posted is the first filled";
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(supply_->at(idx)), wc.byte_len), "first");

  // The QP goes to error: its three other receives flush back.
  toError(link_.serverQp());
  ASSERT_TRUE(link_.stepUntil([&] { return link_.server.completions.size() == 4; }));
  for (size_t i = 1; i < 4; i++) {
    EXPECT_EQ(link_.server.completions[i].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_FALSE(supply_->drained()) << "receive " << i << " of 4";
    supply_->completed();
  }
  EXPECT_TRUE(supply_->drained());
}

TEST_F(ReceiveSupplyTest, PerPeerTheSetGoesBackToTheDeviceForTheNextConnection) {
  connect(perPeer(), 6);
  EXPECT_EQ(link_.device->counters().bufferSetsCreated, 1u);
  const uint64_t used = link_.budget.used;
  std::vector<uint32_t> toPost;
  supply_->start(granted_, toPost);
  supply_->forgetPosted();
  EXPECT_TRUE(supply_->drained());
  supply_->returnAll({}, 0);
  supply_.reset();

  Result<std::unique_ptr<ReceiveSupply>> next = ReceiveSupply::open(*link_.device, 6);
  ASSERT_TRUE(next.ok()) << next.status().toString();
  EXPECT_EQ(link_.device->counters().bufferSetsCreated, 1u) << "nothing registered again";
  EXPECT_EQ(link_.device->counters().bufferSetsReused, 1u);
  EXPECT_EQ(link_.budget.used, used);

  // Without returnAll (the device goes too), nothing goes back.
  (*next).reset();
  Result<std::unique_ptr<ReceiveSupply>> third = ReceiveSupply::open(*link_.device, 6);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(link_.device->counters().bufferSetsCreated, 2u);
}

TEST_F(ReceiveSupplyTest, PerPeerASetOverTheBudgetIsRefusedWithTheReason) {
  link_.budget.limit = bytesFor(4);  // the send pool alone
  ASSERT_TRUE(link_.openDevice(perPeer()));
  Result<std::unique_ptr<ReceiveSupply>> refused = ReceiveSupply::open(*link_.device, 6);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Errc::busy);
  EXPECT_NE(refused.status().message().find("registered_memory_limit"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(link_.budget.used, bytesFor(4));
}

TEST_F(ReceiveSupplyTest, SharedTheDevicesSrqWithTheInitialGrantReserved) {
  connect(shared(), 8);
  rdma::SharedReceiveQueue* srq = link_.device->srq();
  ASSERT_NE(srq, nullptr);
  EXPECT_TRUE(supply_->shared());
  EXPECT_EQ(supply_->tag(), rdma::kSrqRecvTag);
  ibv_qp_init_attr a{};
  supply_->describe(a);
  EXPECT_EQ(a.srq, srq->srq());
  EXPECT_EQ(a.cap.max_recv_wr, 0u) << "the QP takes its receives from the SRQ";
  EXPECT_EQ(srq->stats().connections, 1u);
  EXPECT_EQ(srq->reservedCount(), 2u) << "its initial grant";

  std::vector<uint32_t> toPost;
  EXPECT_EQ(supply_->start(granted_, toPost), 2u);
  EXPECT_TRUE(toPost.empty()) << "the SRQ's buffers are posted already";
  EXPECT_EQ(supply_->most(), 8u);

  const uint32_t posted = srq->stats().posted;
  send("over the srq");
  ASSERT_TRUE(link_.stepUntil([&] { return link_.server.completions.size() == 1; }));
  const ibv_wc wc = link_.server.completions[0];
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id & rdma::kWrTagMask, rdma::kSrqRecvTag);
  const auto idx = static_cast<uint32_t>(wc.wr_id & 0xffffffff);
  EXPECT_TRUE(supply_->owns(idx));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(supply_->at(idx)), wc.byte_len),
            "over the srq");
  EXPECT_EQ(srq->stats().posted, posted - 1);
  const uint32_t read[] = {idx};
  ASSERT_TRUE(supply_->post(link_.serverQp(), read).ok());
  EXPECT_EQ(srq->stats().posted, posted) << "the read buffer is back on the SRQ";

  EXPECT_FALSE(supply_->drained()) << "until the last WQE is reached";
  supply_->onLastWqe();
  EXPECT_TRUE(supply_->drained());
}

TEST_F(ReceiveSupplyTest, SharedLendsBusyPeersAndReturnAllGivesEverythingBack) {
  connect(shared(), 8);
  rdma::SharedReceiveQueue* srq = link_.device->srq();
  ASSERT_NE(srq, nullptr);
  Lender* lender = supply_->lender();
  ASSERT_NE(lender, nullptr);
  EXPECT_EQ(lender->lend(2, 8), 2u) << "as much again";
  EXPECT_EQ(srq->reservedCount(), 4u);

  send("unread");
  ASSERT_TRUE(link_.stepUntil([&] { return link_.server.completions.size() == 1; }));
  const auto idx = static_cast<uint32_t>(link_.server.completions[0].wr_id & 0xffffffff);
  const uint32_t posted = srq->stats().posted;
  const uint32_t unread[] = {idx};
  supply_->returnAll(unread, 2);
  EXPECT_EQ(srq->reservedCount(), 0u) << "what was lent and the grant";
  EXPECT_EQ(srq->stats().connections, 0u);
  EXPECT_EQ(srq->stats().posted, posted + 1) << "the unread buffer is reposted";
}

TEST_F(ReceiveSupplyTest, SharedARefusedGrantOpensNothing) {
  link_.budget.limit = bytesFor(4) + bytesFor(2);  // the send pool and one chunk of two
  rdma::PoolParams p = shared();
  p.burst = 0;
  ASSERT_TRUE(link_.openDevice(p));
  Result<std::unique_ptr<ReceiveSupply>> first = ReceiveSupply::open(*link_.device, 8);
  ASSERT_TRUE(first.ok()) << first.status().toString();
  Result<std::unique_ptr<ReceiveSupply>> refused = ReceiveSupply::open(*link_.device, 8);
  ASSERT_FALSE(refused.ok()) << "a second grant over registered_memory_limit";
  EXPECT_EQ(refused.status().code(), Errc::busy);
  EXPECT_NE(refused.status().message().find("registered_memory_limit"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(link_.device->srq()->stats().connections, 1u);
  EXPECT_EQ(link_.device->srq()->reservedCount(), 2u);
}

}  // namespace
}  // namespace rdmamsg::peer
