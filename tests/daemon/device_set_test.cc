// Unit tests of the devices a daemon has opened (daemon/rdma/device_set.h)
// on softrdma: a context's device is opened once, at its first get(), and
// found by its context from then on; two contexts are two devices that
// share one registered_memory_limit, and a device the budget cannot hold
// is not opened (nor kept); a failed device creates nothing more through
// get() but is still found until its owner erases it, and a new one opens
// for the context after that; stats() tells each device's pools; every
// byte registered goes back to the budget with the devices.
#include "daemon/rdma/device_set.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "daemon/loop/event_loop.h"
#include "tests/daemon/rdma_fixture.h"

namespace rdmamsg::rdma {
namespace {

using test::bytesFor;
using test::kBuffer;

PoolParams perPeer() {
  PoolParams p;
  p.bufferSize = kBuffer;
  p.sendBuffers = 8;
  p.sharedReceive = false;
  p.perPeerCount = 4;
  p.startPeers = 0;
  return p;
}

PoolParams shared() {
  PoolParams p = perPeer();
  p.sharedReceive = true;
  p.initialGrant = 2;
  p.burst = 4;
  p.chunk = 4;
  p.startPeers = 0;  // the burst alone: one chunk registered at open
  return p;
}

// Counts the device events it is told of.
struct Listener : DeviceListener {
  int events = 0;
  void onDeviceEvent(Device&, ibv_event_type) override { events++; }
};

class DeviceSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(first_.context) << "softrdma's device";
    ASSERT_TRUE(second_.context);
    ASSERT_NE(first_.context.get(), second_.context.get());
  }
  loop::EventLoop loop_;
  Listener listener_;
  // Two contexts of softrdma's device (each ibv_open_device makes one).
  test::OpenDevice first_, second_;
};

TEST_F(DeviceSetTest, AContextsDeviceIsOpenedOnceAndFoundByItsContext) {
  DeviceSet set(loop_, 1 << 30, &listener_);
  ibv_context* ctx = first_.context.get();
  EXPECT_EQ(set.find(ctx), nullptr) << "nothing opened before it is needed";
  EXPECT_EQ(set.get(nullptr, 64, perPeer()), nullptr);
  EXPECT_TRUE(set.all().empty());

  Device* d = set.get(ctx, 64, perPeer());
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->context(), ctx);
  EXPECT_EQ(set.find(ctx), d);
  EXPECT_EQ(set.all().size(), 1u);
  const uint64_t registered = set.registeredBytes();
  EXPECT_EQ(registered, bytesFor(8)) << "its send pool";

  PoolParams other = perPeer();
  other.sendBuffers = 16;
  EXPECT_EQ(set.get(ctx, 128, other), d) << "the same device, not opened again";
  EXPECT_EQ(set.all().size(), 1u);
  EXPECT_EQ(set.registeredBytes(), registered) << "nothing registered twice";
  EXPECT_EQ(d->sendPool().count(), 8u) << "the pools it was opened with";
  EXPECT_EQ(set.find(second_.context.get()), nullptr) << "another context is not this device";
  EXPECT_FALSE(set.anyFailed());
}

TEST_F(DeviceSetTest, TwoContextsAreTwoDevicesSharingOneBudget) {
  DeviceSet set(loop_, 2 * bytesFor(8), &listener_);
  Device* a = set.get(first_.context.get(), 64, perPeer());
  Device* b = set.get(second_.context.get(), 64, perPeer());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(set.find(first_.context.get()), a);
  EXPECT_EQ(set.find(second_.context.get()), b);
  EXPECT_EQ(set.registeredBytes(), 2 * bytesFor(8));
  EXPECT_EQ(set.budget().used, set.budget().limit) << "the budget is full";

  Result<std::unique_ptr<ReceiveSet>> refused = a->takeReceiveSet(4, kQpRecvTag);
  EXPECT_FALSE(refused.ok()) << "a device draws on the budget the other filled";

  set.clear();
  EXPECT_EQ(set.registeredBytes(), 0u) << "every byte back with the devices";
}

TEST_F(DeviceSetTest, ADeviceTheBudgetCannotHoldIsNotOpenedNorKept) {
  DeviceSet set(loop_, bytesFor(8) + bytesFor(4), &listener_);
  ASSERT_NE(set.get(first_.context.get(), 64, perPeer()), nullptr);
  EXPECT_EQ(set.get(second_.context.get(), 64, perPeer()), nullptr)
      << "its send pool is over registered_memory_limit";
  EXPECT_EQ(set.find(second_.context.get()), nullptr);
  EXPECT_EQ(set.all().size(), 1u);
  EXPECT_EQ(set.registeredBytes(), bytesFor(8)) << "the refused device took nothing";
  EXPECT_FALSE(set.anyFailed()) << "refused is not failed";
}

TEST_F(DeviceSetTest, AFailedDeviceCreatesNothingMoreUntilErasedThenOpensAnew) {
  DeviceSet set(loop_, 1 << 30, &listener_);
  ibv_context* ctx = first_.context.get();
  Device* d = set.get(ctx, 64, perPeer());
  ASSERT_NE(d, nullptr);
  ASSERT_NE(set.get(second_.context.get(), 64, perPeer()), nullptr);
  d->markFailed();  // what a fatal async event does
  EXPECT_TRUE(set.anyFailed());
  EXPECT_EQ(set.get(ctx, 64, perPeer()), nullptr) << "a failed device is not handed out";
  EXPECT_EQ(set.find(ctx), d) << "still found: its connections release their verbs objects first";
  EXPECT_EQ(set.all().size(), 2u) << "not replaced while it is kept";
  EXPECT_NE(set.get(second_.context.get(), 64, perPeer()), nullptr)
      << "the other device is not failed with it";

  int failed = 0;
  for (auto it = set.all().begin(); it != set.all().end();) {
    if (it->second->failed()) {
      failed++;
      it = set.erase(it);
    } else {
      ++it;
    }
  }
  EXPECT_EQ(failed, 1);
  EXPECT_FALSE(set.anyFailed());
  EXPECT_EQ(set.registeredBytes(), bytesFor(8)) << "the erased device gave its bytes back";
  EXPECT_EQ(set.find(ctx), nullptr);
  Device* again = set.get(ctx, 64, perPeer());
  ASSERT_NE(again, nullptr) << "the context's device opens again";
  EXPECT_FALSE(again->failed());
  EXPECT_EQ(set.find(ctx), again);
  EXPECT_EQ(listener_.events, 0) << "nothing was told to the listener by the set itself";
}

TEST_F(DeviceSetTest, StatsTellEachDevicesPools) {
  DeviceSet set(loop_, 1 << 30, &listener_);
  Device* own = set.get(first_.context.get(), 64, perPeer());
  Device* srq = set.get(second_.context.get(), 64, shared());
  ASSERT_NE(own, nullptr);
  ASSERT_NE(srq, nullptr);
  loop::ServiceQueue q(loop_, [](uint32_t) {});
  ASSERT_TRUE(own->sendPool().take(q.waker(0)));
  srq->markFailed();

  const std::vector<DeviceStats> stats = set.stats();
  ASSERT_EQ(stats.size(), 2u);
  int seen = 0;
  for (const DeviceStats& s : stats) {
    EXPECT_FALSE(s.name.empty());
    EXPECT_GE(s.cqEntries, 64);
    EXPECT_EQ(s.sendBuffers, 8u);
    if (!s.srq) {
      seen |= 1;
      EXPECT_EQ(s.name, own->name());
      EXPECT_FALSE(s.failed);
      EXPECT_EQ(s.sendBuffersFree, 7u) << "one buffer taken";
      EXPECT_EQ(s.counters.registeredBytes, bytesFor(8));
    } else {
      seen |= 2;
      EXPECT_TRUE(s.failed);
      EXPECT_EQ(s.sendBuffersFree, 8u);
      EXPECT_EQ(s.srq->registered, 4u) << "one chunk for the burst";
      EXPECT_EQ(s.counters.registeredBytes, bytesFor(8) + bytesFor(4))
          << "the send pool and the shared receive queue's chunk";
    }
  }
  EXPECT_EQ(seen, 3) << "one device of each kind";
  EXPECT_EQ(set.registeredBytes(), 2 * bytesFor(8) + bytesFor(4));
  EXPECT_EQ(set.droppedCompletions(), 0u);
  own->sendPool().give(0);
}

// Completions of a QP that is gone are dropped and counted, on every device.
TEST_F(DeviceSetTest, DroppedCompletionsAreCountedAcrossDevices) {
  DeviceSet set(loop_, 1 << 30, &listener_);
  CmEventPump pump(loop_);
  std::vector<std::byte> memory(2 * kBuffer);
  MrPtr mr;
  Device* device = nullptr;
  auto deviceFor = [&](ibv_context* ctx) -> Device& {
    device = set.get(ctx, 64, perPeer());
    if (!mr)
      mr.reset(ibv_reg_mr(device->pd(), memory.data(), memory.size(), IBV_ACCESS_LOCAL_WRITE));
    return *device;
  };
  {
    test::Loopback link(loop_, pump, deviceFor);
    ASSERT_TRUE(link.connect());
    ASSERT_TRUE(mr);
    ibv_sge sge{reinterpret_cast<uint64_t>(memory.data()), static_cast<uint32_t>(kBuffer),
                mr->lkey};
    ibv_recv_wr recv{};
    recv.sg_list = &sge;
    recv.num_sge = 1;
    ibv_recv_wr* badRecv = nullptr;
    ASSERT_EQ(ibv_post_recv(link.serverQp(), &recv, &badRecv), 0);
    ibv_sge sendSge{reinterpret_cast<uint64_t>(memory.data() + kBuffer), 64, mr->lkey};
    ibv_send_wr send{};
    send.sg_list = &sendSge;
    send.num_sge = 1;
    send.opcode = IBV_WR_SEND;
    send.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* badSend = nullptr;
    ASSERT_EQ(ibv_post_send(link.clientQp(), &send, &badSend), 0);
    EXPECT_TRUE(test::stepUntil(loop_, [&] { return set.droppedCompletions() == 2; }))
        << "no sink attached: both completions dropped, " << set.droppedCompletions();
  }
  mr.reset();
  set.clear();
  EXPECT_EQ(set.registeredBytes(), 0u);
}

}  // namespace
}  // namespace rdmamsg::rdma
