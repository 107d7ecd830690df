// Unit tests of the device limits against the configuration
// (daemon/rdma/limits.h): what the daemon creates on a device for a
// configuration, and the check that refuses, at start and in
// --check-config, a configuration the device cannot hold, naming the key,
// its value and the device's limit. The probe runs on softrdma's device.
#include "daemon/rdma/limits.h"

#include <gtest/gtest.h>

#include <string>

#include "config/units.h"

namespace rdmamsg::rdma {
namespace {

constexpr const char* kDevice = "dev0";

config::Address address(const std::string& text) {
  return *config::parseAddress(text).value;
}

// The defaults (buffer_size 256 KiB, buffer_count 16, send_buffers 32,
// shared_receive_buffers 32, a shared receive queue) and `peers` peers.
config::Config withPeers(size_t peers) {
  config::Config c;
  c.node = "alpha";
  for (size_t i = 0; i < peers; i++)
    c.peers.push_back(
        {"peer" + std::to_string(i), address("127.0.0.2:" + std::to_string(7000 + i))});
  return c;
}

// Limits every test configuration fits.
ibv_device_attr roomy() {
  ibv_device_attr a{};
  a.max_qp_wr = 16384;
  a.max_cqe = 1 << 20;
  a.max_srq = 1024;
  a.max_srq_wr = 16384;
  a.max_sge = 4;
  return a;
}

bool mentions(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(Limits, NeedsFollowTheConfiguration) {
  config::Config c = withPeers(3);
  Needs n = needsOf(c);
  EXPECT_EQ(n.sendWr, 17u) << "one per send buffer a peer may hold (16), one for teardown";
  EXPECT_EQ(n.recvWr, 0u) << "receives are on the shared queue";
  const uint64_t qps = 2 * 3 + 2;
  EXPECT_EQ(n.srqWr, qps * c.buffers.initialGrant() + 32 + 16);
  EXPECT_EQ(n.cqe, qps * 17 + n.srqWr);
  EXPECT_EQ(n.messageBytes, c.buffers.bufferSize);

  c.buffers.receiveQueue = config::ReceiveQueue::kPerPeer;
  n = needsOf(c);
  EXPECT_EQ(n.recvWr, 16u) << "buffer_count on every peer's queue pair";
  EXPECT_EQ(n.srqWr, 0u);
  EXPECT_EQ(n.cqe, qps * (17 + 16));

  EXPECT_EQ(needsOf(c, 10).cqe, (2 * 10 + 2) * uint64_t{17 + 16}) << "sized for the peers given";
}

TEST(Limits, AConfigurationTheDeviceHoldsHasNoProblems) {
  EXPECT_TRUE(checkLimits(withPeers(3), roomy(), kDevice).empty());
}

TEST(Limits, TooManySendWorkRequestsNameBufferCountAndMaxQpWr) {
  ibv_device_attr a = roomy();
  a.max_qp_wr = 10;
  auto problems = checkLimits(withPeers(1), a, kDevice);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(mentions(problems[0], "buffer_count: 16")) << problems[0];
  EXPECT_TRUE(mentions(problems[0], "max_qp_wr of 10 on RDMA device dev0")) << problems[0];
  EXPECT_TRUE(mentions(problems[0], "use at most 9")) << problems[0];
  a.max_qp_wr = 17;
  EXPECT_TRUE(checkLimits(withPeers(1), a, kDevice).empty()) << "exactly enough fits";
}

TEST(Limits, ACompletionQueueTooLargeNamesPeersAndMaxCqe) {
  ibv_device_attr a = roomy();
  config::Config c = withPeers(3);
  a.max_cqe = static_cast<int>(needsOf(c).cqe);
  EXPECT_TRUE(checkLimits(c, a, kDevice).empty());
  a.max_cqe -= 1;
  auto problems = checkLimits(c, a, kDevice);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(mentions(problems[0], "with 3 peers")) << problems[0];
  EXPECT_TRUE(mentions(problems[0], "max_cqe of " + std::to_string(a.max_cqe))) << problems[0];
}

TEST(Limits, AReloadIsCheckedForThePeersItWillHave) {
  ibv_device_attr a = roomy();
  config::Config c = withPeers(2);
  a.max_cqe = static_cast<int>(needsOf(c).cqe);
  EXPECT_TRUE(checkLimits(c, a, kDevice).empty());
  auto problems = checkLimits(c, a, kDevice, 50);
  ASSERT_FALSE(problems.empty());
  EXPECT_TRUE(mentions(problems[0], "with 50 peers")) << problems[0];
}

TEST(Limits, ASharedReceiveQueueTheDeviceLacksNamesReceiveQueue) {
  ibv_device_attr a = roomy();
  a.max_srq = 0;
  a.max_srq_wr = 0;
  auto problems = checkLimits(withPeers(1), a, kDevice);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(mentions(problems[0], "receive_queue: shared")) << problems[0];
  EXPECT_TRUE(mentions(problems[0], "use receive_queue: per_peer")) << problems[0];

  config::Config perPeer = withPeers(1);
  perPeer.buffers.receiveQueue = config::ReceiveQueue::kPerPeer;
  EXPECT_TRUE(checkLimits(perPeer, a, kDevice).empty()) << "per-peer queues need no SRQ";
}

TEST(Limits, ASharedReceiveQueueTooDeepNamesSharedReceiveBuffers) {
  ibv_device_attr a = roomy();
  config::Config c = withPeers(4);
  a.max_srq_wr = static_cast<int>(needsOf(c).srqWr) - 1;
  auto problems = checkLimits(c, a, kDevice);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(mentions(problems[0], "shared_receive_buffers: 32 with 4 peers")) << problems[0];
  EXPECT_TRUE(mentions(problems[0], "max_srq_wr of " + std::to_string(a.max_srq_wr)))
      << problems[0];
}

TEST(Limits, EveryLimitOverIsReportedNotJustTheFirst) {
  ibv_device_attr a = roomy();
  a.max_qp_wr = 4;
  a.max_cqe = 8;
  a.max_srq_wr = 8;
  EXPECT_EQ(checkLimits(withPeers(2), a, kDevice).size(), 3u);
}

TEST(Limits, TheMemoryPlanCountsWhatIsRegisteredAndHowManyPeersFit) {
  config::Config c = withPeers(10);
  c.buffers.bufferSize = 64 * 1024;
  c.buffers.registeredMemoryLimit = 4 * 1024 * 1024;
  MemoryPlan m = memoryPlan(c);
  EXPECT_EQ(m.sendPool, 32u * 64 * 1024);
  EXPECT_EQ(m.burst, 32u * 64 * 1024);
  EXPECT_EQ(m.perPeer, uint64_t{c.buffers.initialGrant()} * 64 * 1024);
  EXPECT_EQ(m.allPeers, m.sendPool + m.burst + 10 * m.perPeer);
  EXPECT_EQ(m.peersWithinLimit(), (m.limit - m.sendPool - m.burst) / m.perPeer);
  const std::string text = describe(m, c, 10);
  EXPECT_TRUE(mentions(
      text, "(which holds " + std::to_string(m.peersWithinLimit()) + " connected peers at once)"))
      << text;

  c.buffers.registeredMemoryLimit = m.sendPool;
  EXPECT_EQ(memoryPlan(c).peersWithinLimit(), 0u) << "the pools alone do not fit";
}

TEST(Limits, TheListenAddressIsProbedOnItsDevice) {
  auto info = probeDevice(address("127.0.0.1:7471"));
  ASSERT_TRUE(info.ok()) << info.status().toString();
  EXPECT_FALSE(info->name.empty());
  EXPECT_GT(info->attr.max_qp_wr, 0);
  EXPECT_GT(info->attr.max_cqe, 0);
  EXPECT_TRUE(checkLimits(withPeers(2), info->attr, info->name).empty())
      << "the defaults fit softrdma";
}

}  // namespace
}  // namespace rdmamsg::rdma
