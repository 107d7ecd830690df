// Unit tests of the buffers a device shares among its connections
// (daemon/rdma/shared_pools.h), registered on softrdma's device: the send
// pool hands out at most its buffers, wakes who waited when they come back,
// and a connection holds at most its cap of them; the shared receive queue
// grows in chunks for new connections within registered_memory_limit and
// the device's max_srq_wr, refuses beyond them with the reason, and lends
// busy peers at most its burst. Every byte taken from the budget goes back.
#include "daemon/rdma/shared_pools.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <stdexcept>
#include <vector>

#include "daemon/loop/event_loop.h"
#include "daemon/peer/sender.h"
#include "tests/daemon/rdma_fixture.h"

namespace rdmamsg::rdma {
namespace {

using namespace std::chrono_literals;

using test::bytesFor;
using test::kBuffer;

class SharedPoolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(device_.pd) << "softrdma's device";
    budget_.limit = 1 << 30;
  }
  test::OpenDevice device_;
  MemoryBudget budget_;
};

using SendPoolTest = SharedPoolsTest;

TEST_F(SendPoolTest, HandsOutAtMostItsBuffersAndTakesThemBack) {
  loop::EventLoop loop;
  std::vector<uint32_t> woken;
  loop::ServiceQueue q(loop, [&](uint32_t key) { woken.push_back(key); });
  auto made = SendPool::create(device_.pd.get(), kBuffer, 4, budget_);
  ASSERT_TRUE(made.ok()) << made.status().toString();
  SendPool& pool = **made;
  std::set<uint32_t> taken;
  for (int i = 0; i < 4; i++) {
    auto idx = pool.take(q.waker(0));
    ASSERT_TRUE(idx);
    EXPECT_LT(*idx, 4u);
    EXPECT_TRUE(taken.insert(*idx).second) << "buffer " << *idx << " handed out twice";
  }
  EXPECT_EQ(pool.available(), 0u);
  EXPECT_FALSE(pool.take(q.waker(1))) << "four buffers, four takers";
  EXPECT_FALSE(pool.take(q.waker(2)));
  EXPECT_EQ(pool.waits(), 2u);
  loop.runOnce();
  EXPECT_TRUE(woken.empty()) << "nobody is woken before a buffer comes back";

  pool.give(*taken.begin());
  loop.runOnce();
  EXPECT_EQ(woken, (std::vector<uint32_t>{1, 2})) << "every waiter is woken, once";
  auto again = pool.take(q.waker(1));
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *taken.begin());
  pool.give(*again);
  loop.runOnce();
  EXPECT_EQ(woken.size(), 2u) << "a waiter woken is no longer waiting";
}

TEST_F(SendPoolTest, IsRegisteredWithinTheBudgetAndGivesItBack) {
  budget_.limit = bytesFor(8);
  {
    auto pool = SendPool::create(device_.pd.get(), kBuffer, 8, budget_);
    ASSERT_TRUE(pool.ok()) << pool.status().toString();
    EXPECT_EQ(budget_.used, bytesFor(8));
    EXPECT_EQ((*pool)->buffers().registeredBytes(), bytesFor(8));
  }
  EXPECT_EQ(budget_.used, 0u);

  budget_.limit = bytesFor(8) - 1;
  auto refused = SendPool::create(device_.pd.get(), kBuffer, 8, budget_);
  ASSERT_FALSE(refused.ok()) << "a send pool over registered_memory_limit";
  EXPECT_EQ(refused.status().code(), Errc::busy);
  EXPECT_NE(refused.status().message().find("registered_memory_limit"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(budget_.used, 0u) << "nothing taken for a pool that was refused";
}

TEST_F(SendPoolTest, AConnectionHoldsAtMostItsCapOfThePool) {
  loop::EventLoop loop;
  loop::ServiceQueue q(loop, [](uint32_t) {});
  auto made = SendPool::create(device_.pd.get(), kBuffer, 8, budget_);
  ASSERT_TRUE(made.ok()) << made.status().toString();
  SendPool& pool = **made;
  peer::CreditLedger ledger(16, 1s, std::chrono::steady_clock::now());
  peer::Hello remote;
  remote.bufferCount = 16;
  remote.maxCredits = 16;
  ledger.knowPeer(remote);
  ASSERT_TRUE(ledger.takeInitialCredits().ok());
  peer::Sender sender(ledger, q.waker(0));
  sender.attach(pool, 3);
  sender.setBatchCapacity(kBuffer);
  int opened = 0;
  for (int i = 0; i < 8 && sender.open(true); i++) {
    opened++;
    EXPECT_TRUE(sender.seal().ok());
  }
  EXPECT_EQ(opened, 3) << "its cap, with credits and buffers to spare";
  EXPECT_EQ(pool.available(), 5u) << "the rest of the pool stays for the other connections";
  sender.giveBack();
  EXPECT_EQ(pool.available(), 8u);
}

using SrqTest = SharedPoolsTest;

SharedReceiveQueue::Params params(uint32_t initialGrant, uint32_t burst, uint32_t chunk,
                                  uint64_t tag) {
  SharedReceiveQueue::Params p;
  p.bufferSize = kBuffer;
  p.initialGrant = initialGrant;
  p.burst = burst;
  p.chunk = chunk;
  p.tag = tag;
  return p;
}

TEST_F(SrqTest, ConnectionsReserveTheirGrantGrowingInChunksWithinTheBudget) {
  budget_.limit = 2 * bytesFor(4);  // two chunks of four
  {
    auto madeSrq =
        SharedReceiveQueue::create(device_.pd.get(), device_.attr, params(3, 4, 4, 0), budget_);
    ASSERT_TRUE(madeSrq.ok()) << madeSrq.status().toString();
    SharedReceiveQueue& srq = **madeSrq;
    EXPECT_TRUE(srq.reserveInitial().ok());
    EXPECT_EQ(srq.stats().registered, 4u) << "one chunk for a grant of three";
    EXPECT_EQ(srq.stats().posted, 4u) << "registered buffers are posted";
    EXPECT_TRUE(srq.reserveInitial().ok());
    EXPECT_EQ(srq.stats().registered, 8u);
    EXPECT_EQ(budget_.used, 2 * bytesFor(4));

    const std::string why = srq.reserveInitial().message();
    EXPECT_NE(why.find("registered_memory_limit"), std::string::npos) << why;
    SrqStats s = srq.stats();
    EXPECT_EQ(s.refused, 1u);
    EXPECT_EQ(s.reserved, 6u) << "a refused connection reserves nothing";
    EXPECT_EQ(s.connections, 2u);
    EXPECT_EQ(budget_.used, 2 * bytesFor(4)) << "nothing registered over the budget";

    srq.releaseInitial();  // a connection goes: its grant serves the next
    EXPECT_TRUE(srq.reserveInitial().ok());
    EXPECT_EQ(srq.stats().registered, 8u);
  }
  EXPECT_EQ(budget_.used, 0u);
}

TEST_F(SrqTest, TheDevicesMaxSrqWrBoundsItWithTheReason) {
  ibv_device_attr attr = device_.attr;
  attr.max_srq_wr = 8;
  auto madeSrq = SharedReceiveQueue::create(device_.pd.get(), attr, params(3, 4, 4, 0), budget_);
  ASSERT_TRUE(madeSrq.ok()) << madeSrq.status().toString();
  SharedReceiveQueue& srq = **madeSrq;
  EXPECT_TRUE(srq.reserveInitial().ok());
  EXPECT_TRUE(srq.reserveInitial().ok());
  EXPECT_EQ(srq.reserveInitial().message(), "the shared receive queue is full (8 buffers)");
  EXPECT_EQ(srq.stats().registered, 8u);
}

TEST_F(SrqTest, BusyPeersAreLentAtMostTheBurstAndGiveItBack) {
  auto madeSrq =
      SharedReceiveQueue::create(device_.pd.get(), device_.attr, params(3, 4, 4, 0), budget_);
  ASSERT_TRUE(madeSrq.ok()) << madeSrq.status().toString();
  SharedReceiveQueue& srq = **madeSrq;
  ASSERT_TRUE(srq.reserveInitial().ok());
  EXPECT_EQ(srq.lend(3, 16), 3u) << "as much again";
  EXPECT_EQ(srq.lend(6, 16), 1u) << "what is left of the burst of four";
  EXPECT_EQ(srq.lend(7, 16), 0u) << "the burst is lent";
  EXPECT_EQ(srq.reservedCount(), 7u);
  EXPECT_LE(srq.reservedCount(), srq.stats().registered) << "every allowance has its buffer";
  srq.giveBack(4);
  EXPECT_EQ(srq.reservedCount(), 3u);
  EXPECT_EQ(srq.lend(15, 16), 1u) << "never past the peer's most";
  EXPECT_EQ(srq.lend(16, 16), 0u);
}

TEST_F(SrqTest, LendingStopsAtTheBudgetNotPastIt) {
  budget_.limit = bytesFor(4);
  auto madeSrq =
      SharedReceiveQueue::create(device_.pd.get(), device_.attr, params(3, 8, 4, 0), budget_);
  ASSERT_TRUE(madeSrq.ok()) << madeSrq.status().toString();
  SharedReceiveQueue& srq = **madeSrq;
  ASSERT_TRUE(srq.reserveInitial().ok());
  EXPECT_EQ(srq.lend(3, 16), 1u) << "only the registered buffer not yet reserved";
  EXPECT_EQ(srq.lend(4, 16), 0u);
  EXPECT_EQ(budget_.used, bytesFor(4));
}

TEST_F(SrqTest, ReadBuffersArePostedAgainInOneRefill) {
  auto madeSrq =
      SharedReceiveQueue::create(device_.pd.get(), device_.attr, params(3, 4, 4, 0), budget_);
  ASSERT_TRUE(madeSrq.ok()) << madeSrq.status().toString();
  SharedReceiveQueue& srq = **madeSrq;
  ASSERT_TRUE(srq.reserveInitial().ok());
  ASSERT_EQ(srq.stats().posted, 4u);
  srq.onReceived();
  srq.onReceived();
  EXPECT_EQ(srq.stats().posted, 2u);
  srq.release(0);
  srq.release(1);
  EXPECT_EQ(srq.stats().posted, 2u) << "released buffers wait for the refill";
  EXPECT_TRUE(srq.refill().ok());
  EXPECT_EQ(srq.stats().posted, 4u);
}

}  // namespace
}  // namespace rdmamsg::rdma
