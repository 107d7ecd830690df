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

constexpr size_t kBuffer = 4096;

uint64_t bytesFor(uint32_t count) {
  return BufferPool::registeredBytesFor(kBuffer, count);
}

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
  SendPool pool(device_.pd.get(), kBuffer, 4, budget_);
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
    SendPool pool(device_.pd.get(), kBuffer, 8, budget_);
    EXPECT_EQ(budget_.used, bytesFor(8));
    EXPECT_EQ(pool.buffers().registeredBytes(), bytesFor(8));
  }
  EXPECT_EQ(budget_.used, 0u);

  budget_.limit = bytesFor(8) - 1;
  try {
    SendPool pool(device_.pd.get(), kBuffer, 8, budget_);
    ADD_FAILURE() << "a send pool over registered_memory_limit";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("registered_memory_limit"), std::string::npos) << e.what();
  }
  EXPECT_EQ(budget_.used, 0u) << "nothing taken for a pool that was refused";
}

TEST_F(SendPoolTest, AConnectionHoldsAtMostItsCapOfThePool) {
  loop::EventLoop loop;
  loop::ServiceQueue q(loop, [](uint32_t) {});
  SendPool pool(device_.pd.get(), kBuffer, 8, budget_);
  peer::CreditLedger ledger(16, 1s, std::chrono::steady_clock::now());
  peer::Hello remote;
  remote.bufferCount = 16;
  remote.maxCredits = 16;
  ledger.knowPeer(remote);
  ASSERT_TRUE(ledger.takeInitialCredits());
  peer::Sender sender(ledger, q.waker(0));
  sender.attach(pool, 3);
  sender.setBatchCapacity(kBuffer);
  int opened = 0;
  for (int i = 0; i < 8 && sender.open(true); i++) {
    opened++;
    sender.seal();
  }
  EXPECT_EQ(opened, 3) << "its cap, with credits and buffers to spare";
  EXPECT_EQ(pool.available(), 5u) << "the rest of the pool stays for the other connections";
  sender.giveBack();
  EXPECT_EQ(pool.available(), 8u);
}

using SrqTest = SharedPoolsTest;

TEST_F(SrqTest, ConnectionsReserveTheirGrantGrowingInChunksWithinTheBudget) {
  budget_.limit = 2 * bytesFor(4);  // two chunks of four
  {
    SharedReceiveQueue srq(device_.pd.get(), device_.attr, kBuffer, 3, 4, 4, 0, budget_);
    EXPECT_EQ(srq.reserveInitial(), "");
    EXPECT_EQ(srq.stats().registered, 4u) << "one chunk for a grant of three";
    EXPECT_EQ(srq.stats().posted, 4u) << "registered buffers are posted";
    EXPECT_EQ(srq.reserveInitial(), "");
    EXPECT_EQ(srq.stats().registered, 8u);
    EXPECT_EQ(budget_.used, 2 * bytesFor(4));

    const std::string why = srq.reserveInitial();
    EXPECT_NE(why.find("registered_memory_limit"), std::string::npos) << why;
    SrqStats s = srq.stats();
    EXPECT_EQ(s.refused, 1u);
    EXPECT_EQ(s.reserved, 6u) << "a refused connection reserves nothing";
    EXPECT_EQ(s.connections, 2u);
    EXPECT_EQ(budget_.used, 2 * bytesFor(4)) << "nothing registered over the budget";

    srq.releaseInitial();  // a connection goes: its grant serves the next
    EXPECT_EQ(srq.reserveInitial(), "");
    EXPECT_EQ(srq.stats().registered, 8u);
  }
  EXPECT_EQ(budget_.used, 0u);
}

TEST_F(SrqTest, TheDevicesMaxSrqWrBoundsItWithTheReason) {
  ibv_device_attr attr = device_.attr;
  attr.max_srq_wr = 8;
  SharedReceiveQueue srq(device_.pd.get(), attr, kBuffer, 3, 4, 4, 0, budget_);
  EXPECT_EQ(srq.reserveInitial(), "");
  EXPECT_EQ(srq.reserveInitial(), "");
  EXPECT_EQ(srq.reserveInitial(), "the shared receive queue is full (8 buffers)");
  EXPECT_EQ(srq.stats().registered, 8u);
}

TEST_F(SrqTest, BusyPeersAreLentAtMostTheBurstAndGiveItBack) {
  SharedReceiveQueue srq(device_.pd.get(), device_.attr, kBuffer, 3, 4, 4, 0, budget_);
  ASSERT_EQ(srq.reserveInitial(), "");
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
  SharedReceiveQueue srq(device_.pd.get(), device_.attr, kBuffer, 3, 8, 4, 0, budget_);
  ASSERT_EQ(srq.reserveInitial(), "");
  EXPECT_EQ(srq.lend(3, 16), 1u) << "only the registered buffer not yet reserved";
  EXPECT_EQ(srq.lend(4, 16), 0u);
  EXPECT_EQ(budget_.used, bytesFor(4));
}

TEST_F(SrqTest, ReadBuffersArePostedAgainInOneRefill) {
  SharedReceiveQueue srq(device_.pd.get(), device_.attr, kBuffer, 3, 4, 4, 0, budget_);
  ASSERT_EQ(srq.reserveInitial(), "");
  ASSERT_EQ(srq.stats().posted, 4u);
  srq.onReceived();
  srq.onReceived();
  EXPECT_EQ(srq.stats().posted, 2u);
  srq.release(0);
  srq.release(1);
  EXPECT_EQ(srq.stats().posted, 2u) << "released buffers wait for the refill";
  EXPECT_TRUE(srq.refill());
  EXPECT_EQ(srq.stats().posted, 4u);
}

}  // namespace
}  // namespace rdmamsg::rdma
