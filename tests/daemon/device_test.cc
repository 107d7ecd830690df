// Unit tests of a device's verbs resources (daemon/rdma/device.h) on
// softrdma: what it registers is taken from registered_memory_limit and
// given back when it goes; per-peer receive sets are kept and reused; the
// completion queue is sized within the device's max_cqe; and completions
// reach the sink attached for their QP number, while those of a QP no
// longer attached are counted and dropped.
#include "daemon/rdma/device.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <vector>

#include "tests/daemon/rdma_fixture.h"

namespace rdmamsg::rdma {
namespace {

using namespace std::chrono_literals;

using test::bytesFor;
using test::kBuffer;

PoolParams sharedPools() {
  PoolParams p;
  p.bufferSize = kBuffer;
  p.sendBuffers = 8;
  p.sharedReceive = true;
  p.initialGrant = 2;
  p.burst = 4;
  p.chunk = 4;
  p.startPeers = 2;
  return p;
}

PoolParams perPeerPools(uint32_t startPeers) {
  PoolParams p = sharedPools();
  p.sharedReceive = false;
  p.perPeerCount = 4;
  p.startPeers = startPeers;
  return p;
}

class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(open_.context) << "softrdma's device";
    budget_.limit = 1 << 30;
  }
  std::unique_ptr<Device> make(const PoolParams& pools, int cqEntries = 64) {
    return Device::open(loop_, open_.context.get(), cqEntries, pools, budget_, nullptr).value();
  }
  loop::EventLoop loop_;
  test::OpenDevice open_;
  MemoryBudget budget_;
};

TEST_F(DeviceTest, RegistersItsPoolsAtOpenWithinTheBudgetAndGivesThemBack) {
  {
    auto d = make(sharedPools());
    ASSERT_NE(d->srq(), nullptr);
    // startPeers' grants and the burst (2 x 2 + 4) are registered before any connection.
    EXPECT_EQ(d->srq()->stats().registered, 8u);
    EXPECT_EQ(budget_.used, bytesFor(8) + 2 * bytesFor(4));
    EXPECT_EQ(d->counters().registeredBytes, bytesFor(8)) << "the send pool";
    EXPECT_EQ(d->sendPool().count(), 8u);
  }
  EXPECT_EQ(budget_.used, 0u) << "a device that goes gives back all it registered";
}

TEST_F(DeviceTest, ABudgetThatCannotHoldTheSendPoolRefusesTheDevice) {
  budget_.limit = bytesFor(8) - 1;
  auto refused = Device::open(loop_, open_.context.get(), 64, sharedPools(), budget_, nullptr);
  ASSERT_FALSE(refused.ok()) << "a device whose send pool is over registered_memory_limit";
  EXPECT_EQ(refused.status().code(), Errc::busy);
  EXPECT_NE(refused.status().message().find("registered_memory_limit"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(budget_.used, 0u);
}

TEST_F(DeviceTest, WhatTheBudgetCannotHoldAtOpenWaitsForTheConnections) {
  budget_.limit = bytesFor(8) + bytesFor(4);  // the send pool and one set of four
  auto d = make(perPeerPools(3));
  EXPECT_EQ(d->counters().bufferSetsCreated, 1u) << "not three";
  EXPECT_EQ(budget_.used, budget_.limit);
}

TEST_F(DeviceTest, PerPeerReceiveSetsAreKeptAndReusedAcrossConnections) {
  auto d = make(perPeerPools(1));
  EXPECT_EQ(d->srq(), nullptr);
  EXPECT_EQ(d->counters().bufferSetsCreated, 1u) << "one set registered at open";
  const uint64_t atOpen = budget_.used;

  auto first = d->takeReceiveSet(4, kQpRecvTag).value();
  EXPECT_EQ(d->counters().bufferSetsReused, 1u) << "the one registered at open";
  EXPECT_EQ(budget_.used, atOpen);
  auto second = d->takeReceiveSet(4, kQpRecvTag).value();
  EXPECT_EQ(d->counters().bufferSetsCreated, 2u) << "none spare: a new one";
  EXPECT_EQ(budget_.used, atOpen + bytesFor(4));

  d->returnReceiveSet(std::move(first));
  d->returnReceiveSet(std::move(second));
  auto again = d->takeReceiveSet(4, kQpRecvTag).value();
  EXPECT_EQ(d->counters().bufferSetsCreated, 2u) << "a reconnect registers nothing";
  EXPECT_EQ(d->counters().bufferSetsReused, 2u);
  d->returnReceiveSet(std::move(again));
  d.reset();
  EXPECT_EQ(budget_.used, 0u) << "spare sets go back to the budget with the device";
}

TEST_F(DeviceTest, AReceiveSetOverTheBudgetIsRefusedWithTheReason) {
  budget_.limit = bytesFor(8) + bytesFor(4);
  auto d = make(perPeerPools(0));
  auto set = d->takeReceiveSet(4, kQpRecvTag).value();
  Result<std::unique_ptr<ReceiveSet>> refused = d->takeReceiveSet(4, kQpRecvTag);
  ASSERT_FALSE(refused.ok()) << "a receive set over registered_memory_limit";
  EXPECT_EQ(refused.status().code(), Errc::busy);
  EXPECT_NE(refused.status().message().find("registered_memory_limit"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(budget_.used, budget_.limit) << "the refused set took nothing";
  d->returnReceiveSet(std::move(set));
}

TEST_F(DeviceTest, TheCompletionQueueGrowsWithinMaxCqeOnly) {
  auto d = make(sharedPools(), 16);
  EXPECT_TRUE(d->growCq(8).ok()) << "already that large";
  EXPECT_TRUE(d->growCq(256).ok());
  EXPECT_GE(d->cqEntries(), 256);
  const uint64_t most = static_cast<uint64_t>(open_.attr.max_cqe);
  const std::string over = d->growCq(most + 1).message();
  EXPECT_NE(over.find("max_cqe of " + std::to_string(most)), std::string::npos) << over;
  EXPECT_GE(d->cqEntries(), 256);
}

TEST_F(DeviceTest, TheCompletionQueueIsCutToMaxCqe) {
  const int most = open_.attr.max_cqe;
  if (most > 65536) GTEST_SKIP() << "ctest runs this with SOFTRDMA_MAX_CQE=4096";
  auto d = make(sharedPools(), most + 1000);
  EXPECT_EQ(d->cqEntries(), most);
}

// Receives each completion of its QP.
struct Sink : CompletionSink {
  std::vector<ibv_wc> completions;
  void onCompletion(const ibv_wc& wc) override { completions.push_back(wc); }
  void onQpEvent(ibv_event_type) override {}
};

TEST_F(DeviceTest, CompletionsGoToTheSinkOfTheirQpAndThoseOfADetachedQpAreDropped) {
  CmEventPump pump(loop_);
  std::unique_ptr<Device> device;
  std::vector<std::byte> memory(2 * kBuffer);
  MrPtr mr;
  auto deviceFor = [&](ibv_context* ctx) -> Device& {
    if (!device) {
      device = Device::open(loop_, ctx, 64, perPeerPools(0), budget_, nullptr).value();
      mr.reset(ibv_reg_mr(device->pd(), memory.data(), memory.size(), IBV_ACCESS_LOCAL_WRITE));
    }
    return *device;
  };
  {
    test::Loopback link(loop_, pump, deviceFor);
    ASSERT_TRUE(link.connect());
    ASSERT_TRUE(mr);
    Sink client, server;
    device->attach(link.clientQp()->qp_num, &client);
    device->attach(link.serverQp()->qp_num, &server);

    auto post = [&](uint64_t wrId) {
      ibv_sge recvSge{reinterpret_cast<uint64_t>(memory.data()), static_cast<uint32_t>(kBuffer),
                      mr->lkey};
      ibv_recv_wr recv{};
      recv.wr_id = wrId;
      recv.sg_list = &recvSge;
      recv.num_sge = 1;
      ibv_recv_wr* badRecv = nullptr;
      ASSERT_EQ(ibv_post_recv(link.serverQp(), &recv, &badRecv), 0);
      ibv_sge sendSge{reinterpret_cast<uint64_t>(memory.data() + kBuffer), 64, mr->lkey};
      ibv_send_wr send{};
      send.wr_id = wrId;
      send.sg_list = &sendSge;
      send.num_sge = 1;
      send.opcode = IBV_WR_SEND;
      send.send_flags = IBV_SEND_SIGNALED;
      ibv_send_wr* badSend = nullptr;
      ASSERT_EQ(ibv_post_send(link.clientQp(), &send, &badSend), 0);
    };
    post(1);
    ASSERT_TRUE(test::stepUntil(
        loop_, [&] { return client.completions.size() == 1 && server.completions.size() == 1; }));
    EXPECT_EQ(client.completions[0].opcode, IBV_WC_SEND);
    EXPECT_EQ(server.completions[0].opcode, IBV_WC_RECV);
    EXPECT_EQ(server.completions[0].byte_len, 64u);
    EXPECT_EQ(device->counters().dropped, 0u);

    device->detach(link.serverQp()->qp_num);  // its connection is gone
    post(2);
    ASSERT_TRUE(test::stepUntil(
        loop_, [&] { return client.completions.size() == 2 && device->counters().dropped == 1; }));
    EXPECT_EQ(server.completions.size(), 1u) << "nothing for a detached QP";
    EXPECT_EQ(device->counters().completions, 4u);
    device->detach(link.clientQp()->qp_num);
  }
  mr.reset();
  device.reset();
  EXPECT_EQ(budget_.used, 0u);
}

}  // namespace
}  // namespace rdmamsg::rdma
