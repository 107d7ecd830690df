// Unit tests of the send buffers a connection holds and of selective
// signalling (daemon/peer/send_batches.h): a buffer comes back only with a
// signaled completion, so every rule here bounds how long one can be held.
#include "daemon/peer/send_batches.h"

#include <gtest/gtest.h>

#include <vector>

namespace rdmamsg::peer {
namespace {

// A device pool with plenty free and nothing behind unsignaled sends.
constexpr SendBatches::Pool kRoomy{1024, 1024, 0};

// Seals `n` batches on buffers next, next + 1, ...
void sealSome(SendBatches& b, uint32_t n, uint32_t& next) {
  for (uint32_t i = 0; i < n; i++) {
    b.open(next++);
    b.seal(100);
  }
}

// Decides signalling for the sealed list, posts it and returns the flags.
std::vector<bool> post(SendBatches& b, SendBatches::Pool pool = kRoomy) {
  std::vector<bool> flags;
  for (size_t i = 0; i < b.sealed().size(); i++) {
    flags.push_back(b.signal(i, pool));
    if (!flags.back()) pool.unsignaled++;
  }
  b.posted();
  return flags;
}

TEST(SendBatches, SignalsAtLeastEveryNthSend) {
  SendBatches b;
  b.setCap(64);
  ASSERT_EQ(b.signalEvery(), 16u) << "at most every 16th";
  uint32_t next = 0, run = 0, longest = 0;
  // Lists of one to five sends; completions free what the signaled ones cover.
  for (int list = 0; list < 200; list++) {
    sealSome(b, 1 + list % 5, next);
    const uint32_t first = next - static_cast<uint32_t>(b.sealed().size());
    std::vector<bool> flags = post(b);
    for (size_t i = 0; i < flags.size(); i++) {
      run = flags[i] ? 0 : run + 1;
      longest = std::max(longest, run);
      if (flags[i]) b.complete(first + static_cast<uint32_t>(i), [](uint32_t) {});
    }
  }
  EXPECT_LT(longest, 16u) << "unsignaled sends in a row";
  SendBatches small;
  small.setCap(6);
  EXPECT_EQ(small.signalEvery(), 3u) << "every half of what the connection may hold";
}

TEST(SendBatches, SignalsSoonerWhenAQuarterOfThePoolIsBehindUnsignaledSends) {
  SendBatches b;
  b.setCap(64);
  uint32_t next = 0;
  sealSome(b, 3, next);
  const std::vector<bool> flags = post(b, {64, 60, 15});
  EXPECT_FALSE(flags[0]);
  EXPECT_TRUE(flags[1]) << "the pool's 16th unsignaled buffer (a quarter of 64)";
}

TEST(SendBatches, TheLastOfAListIsSignaledWhenTheConnectionRunsLow) {
  SendBatches b;
  b.setCap(32);  // signals every 16th
  uint32_t next = 0;
  sealSome(b, 4, next);
  EXPECT_EQ(post(b), (std::vector<bool>{false, false, false, false})) << "room for 28 more";
  sealSome(b, 14, next);  // 18 held: room for 14, fewer than 16
  const std::vector<bool> flags = post(b);
  EXPECT_TRUE(flags.back());
  EXPECT_FALSE(flags.front());
  // And when the device's pool runs low (under a quarter free).
  SendBatches c;
  c.setCap(32);
  uint32_t n2 = 0;
  sealSome(c, 2, n2);
  EXPECT_EQ(post(c, {64, 10, 0}), (std::vector<bool>{false, true}));
}

TEST(SendBatches, ACompletionFreesItsBufferAndEveryOnePostedBeforeIt) {
  SendBatches b;
  b.setCap(16);
  uint32_t next = 10;
  sealSome(b, 5, next);
  post(b);
  EXPECT_EQ(b.held(), 5u);
  std::vector<uint32_t> freed;
  EXPECT_EQ(b.complete(12, [&](uint32_t i) { freed.push_back(i); }), 3u);
  EXPECT_EQ(freed, (std::vector<uint32_t>{10, 11, 12}));
  EXPECT_EQ(b.held(), 2u);
  EXPECT_EQ(b.complete(11, [&](uint32_t i) { freed.push_back(i); }), 0u)
      << "a buffer not posted (any more)";
  EXPECT_EQ(freed.size(), 3u);
}

TEST(SendBatches, HoldsNoMoreThanItsCapAndGivesEverythingBack) {
  SendBatches b;
  b.setCap(4);
  uint32_t next = 0;
  sealSome(b, 2, next);
  post(b);
  sealSome(b, 1, next);
  b.open(next++);
  EXPECT_EQ(b.held(), 4u) << "posted, sealed and open";
  EXPECT_TRUE(b.full());
  std::vector<uint32_t> back;
  b.completeAll([&](uint32_t i) { back.push_back(i); });
  EXPECT_EQ(back, (std::vector<uint32_t>{0, 1})) << "the beacon frees what was posted";
  EXPECT_TRUE(b.hasOpen());
  b.releaseAll([&](uint32_t i) { back.push_back(i); });
  EXPECT_EQ(back, (std::vector<uint32_t>{0, 1, 3, 2}));
  EXPECT_EQ(b.held(), 0u);
  EXPECT_EQ(b.unsignaled(), 0u);
}

}  // namespace
}  // namespace rdmamsg::peer
