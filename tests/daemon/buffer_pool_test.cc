// Unit tests of registered buffers (daemon/rdma/buffer_pool.h) on
// softrdma's device: a pool is one memory region of whole pages holding
// `count` equal buffers that never overlap; a registration the device
// refuses, or memory that cannot be had, is an io_error with the reason;
// a ReceiveSet's pre-built work requests name each buffer once, with its
// tag and index, and a send over a real queue pair lands in the buffer
// whose work request was posted.
#include "daemon/rdma/buffer_pool.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "daemon/loop/event_loop.h"
#include "daemon/rdma/cm_events.h"
#include "daemon/rdma/device.h"
#include "tests/daemon/rdma_fixture.h"

namespace rdmamsg::rdma {
namespace {

using test::kBuffer;

uint64_t page() {
  return static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

class BufferPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(device_.pd) << "softrdma's device"; }
  test::OpenDevice device_;
};

TEST_F(BufferPoolTest, RegistersWholePagesForItsBuffers) {
  EXPECT_EQ(BufferPool::registeredBytesFor(kBuffer, 8), 8 * kBuffer);
  EXPECT_EQ(BufferPool::registeredBytesFor(100, 3), page()) << "300 bytes: one page";
  EXPECT_EQ(BufferPool::registeredBytesFor(page() + 1, 1), 2 * page());
  EXPECT_EQ(BufferPool::registeredBytesFor(page(), 2), 2 * page()) << "no page more than needed";

  auto made = BufferPool::create(device_.pd.get(), 1000, 5, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(made.ok()) << made.status().toString();
  BufferPool& pool = **made;
  EXPECT_EQ(pool.count(), 5u);
  EXPECT_EQ(pool.bufferSize(), 1000u);
  EXPECT_EQ(pool.registeredBytes(), BufferPool::registeredBytesFor(1000, 5));
  EXPECT_EQ(pool.addr(0) % page(), 0u) << "the region starts on a page";
}

TEST_F(BufferPoolTest, ItsBuffersAreDistinctAndNeverOverlap) {
  constexpr uint32_t kCount = 16;
  constexpr size_t kSize = 1000;  // not a power of two: buffers straddle pages
  auto made = BufferPool::create(device_.pd.get(), kSize, kCount, 0);
  ASSERT_TRUE(made.ok()) << made.status().toString();
  BufferPool& pool = **made;
  std::set<uint64_t> starts;
  for (uint32_t i = 0; i < kCount; i++) {
    EXPECT_TRUE(starts.insert(pool.addr(i)).second) << "buffer " << i << " handed out twice";
    EXPECT_EQ(pool.addr(i), reinterpret_cast<uint64_t>(pool.at(i)));
    if (i > 0) {
      EXPECT_EQ(pool.addr(i) - pool.addr(i - 1), kSize) << "buffer " << i;
    }
    EXPECT_LE(pool.addr(i) + kSize - pool.addr(0), pool.registeredBytes())
        << "buffer " << i << " lies inside the registered region";
  }
  // Every buffer keeps what was written to it, whatever is written to the others.
  for (uint32_t i = 0; i < kCount; i++)
    std::memset(pool.at(i), static_cast<int>(i + 1), kSize);
  for (uint32_t i = 0; i < kCount; i++) {
    std::vector<std::byte> want(kSize, static_cast<std::byte>(i + 1));
    EXPECT_EQ(std::memcmp(pool.at(i), want.data(), kSize), 0) << "buffer " << i;
  }
}

TEST_F(BufferPoolTest, ARegistrationTheDeviceRefusesIsAnIoError) {
  // Remote write without local write is refused by ibv_reg_mr (EINVAL).
  auto refused = BufferPool::create(device_.pd.get(), kBuffer, 4, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Errc::io_error);
  EXPECT_NE(refused.status().message().find("ibv_reg_mr"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find(std::strerror(EINVAL)), std::string::npos)
      << refused.status().message();
}

TEST_F(BufferPoolTest, MemoryThatCannotBeHadIsAnIoError) {
#if defined(__SANITIZE_ADDRESS__)
  // ASan's allocator aborts the process instead of failing an allocation it
  // cannot serve (allocator_may_return_null=0): nothing to observe.
  GTEST_SKIP() << "under AddressSanitizer an impossible allocation aborts";
#endif
  // 2^56 bytes: more than any address space holds.
  auto refused = BufferPool::create(device_.pd.get(), size_t{1} << 40, 1u << 16, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Errc::io_error);
  EXPECT_NE(refused.status().message().find("no memory"), std::string::npos)
      << refused.status().message();
}

TEST_F(BufferPoolTest, AReceiveSetBuildsOneWorkRequestPerBuffer) {
  constexpr uint64_t kTag = 7ULL << 32;
  auto made = ReceiveSet::create(device_.pd.get(), kBuffer, 6, kTag);
  ASSERT_TRUE(made.ok()) << made.status().toString();
  ReceiveSet& set = **made;
  EXPECT_EQ(set.registeredBytes(), test::bytesFor(6));
  std::set<uint64_t> ids, addrs;
  for (uint32_t i = 0; i < 6; i++) {
    const ibv_recv_wr* wr = set.wr(i);
    EXPECT_EQ(wr->wr_id, kTag | i);
    EXPECT_TRUE(ids.insert(wr->wr_id).second);
    ASSERT_EQ(wr->num_sge, 1);
    EXPECT_EQ(wr->sg_list->addr, set.pool().addr(i));
    EXPECT_TRUE(addrs.insert(wr->sg_list->addr).second) << "buffer " << i << " posted twice";
    EXPECT_EQ(wr->sg_list->length, kBuffer);
    EXPECT_EQ(wr->sg_list->lkey, set.pool().lkey());
    EXPECT_EQ(wr->next, nullptr) << "its next is the caller's";
  }
}

// A send from one pool's buffer lands, over a real RC queue pair, in the
// ReceiveSet buffer whose pre-built work request was posted, and in no other.
TEST_F(BufferPoolTest, ASendLandsInThePostedBufferOfAReceiveSet) {
  loop::EventLoop loop;
  CmEventPump pump(loop);
  MemoryBudget budget;
  budget.limit = 1 << 30;
  PoolParams params;
  params.bufferSize = kBuffer;
  params.sendBuffers = 4;
  params.sharedReceive = false;
  std::unique_ptr<Device> device;
  std::unique_ptr<BufferPool> sendPool;
  std::unique_ptr<ReceiveSet> set;
  auto deviceFor = [&](ibv_context* ctx) -> Device& {
    if (!device) device = Device::open(loop, ctx, 64, params, budget, nullptr).value();
    return *device;
  };
  {
    test::Loopback link(loop, pump, deviceFor);
    ASSERT_TRUE(link.connect());
    sendPool = BufferPool::create(device->pd(), kBuffer, 2, 0).value();
    set = ReceiveSet::create(device->pd(), kBuffer, 4, kQpRecvTag).value();
    for (uint32_t i = 0; i < 4; i++)
      std::memset(set->pool().at(i), 0, kBuffer);
    test::RecordingSink client, server;
    device->attach(link.clientQp()->qp_num, &client);
    device->attach(link.serverQp()->qp_num, &server);

    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_recv(link.serverQp(), set->wr(3), &bad), 0);
    const char text[] = "into buffer three";
    std::memcpy(sendPool->at(1), text, sizeof text);
    ibv_sge sge{sendPool->addr(1), sizeof text, sendPool->lkey()};
    ibv_send_wr send{};
    send.wr_id = 1;
    send.sg_list = &sge;
    send.num_sge = 1;
    send.opcode = IBV_WR_SEND;
    send.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* badSend = nullptr;
    ASSERT_EQ(ibv_post_send(link.clientQp(), &send, &badSend), 0);
    ASSERT_TRUE(test::stepUntil(loop, [&] { return server.completions.size() == 1; }));
    const ibv_wc& wc = server.completions[0];
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.wr_id, kQpRecvTag | 3);
    EXPECT_EQ(wc.byte_len, sizeof text);
    EXPECT_STREQ(reinterpret_cast<const char*>(set->pool().at(3)), text);
    for (uint32_t i = 0; i < 3; i++)
      EXPECT_EQ(set->pool().at(i)[0], std::byte{0}) << "buffer " << i << " was not posted";
    device->detach(link.clientQp()->qp_num);
    device->detach(link.serverQp()->qp_num);
  }
  set.reset();
  sendPool.reset();
  device.reset();
}

}  // namespace
}  // namespace rdmamsg::rdma
