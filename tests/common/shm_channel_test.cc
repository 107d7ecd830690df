// ShmChannel's wake-up accounting between a client and a daemon side in one
// process: a side that arms again before it woke must still read every
// ring it is owed, so that its doorbell (the application's fd()) does not
// stay readable with nothing behind it — a poll loop on it would spin.
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <string_view>

#include "common/shm_channel.h"

namespace rdmamsg {
namespace {

struct Pair {
  ShmChannel client;
  ShmChannel daemon;
};

Pair makePair() {
  constexpr size_t kCap = shm_channel::kMinCapacity;
  ShmChannel client = ShmChannel::create(kCap, kCap).value();
  std::array<UniqueFd, shm_channel::kFdCount> fds;
  const auto passed = client.fdsToPass();
  for (size_t i = 0; i < fds.size(); ++i)
    fds[i].reset(::dup(passed[i]));
  ShmChannel daemon = ShmChannel::attach(std::move(fds), kCap, kCap).value();
  return {std::move(client), std::move(daemon)};
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

void put(ShmChannel& side, std::string_view text) {
  ASSERT_EQ(side.write(std::as_bytes(std::span(text.data(), text.size()))).value(), text.size());
}

// Writes until `side`'s outgoing ring has no room (the other side reads nothing).
void fillOutgoing(ShmChannel& side) {
  std::string big(shm_channel::kMinCapacity, 'x');
  size_t written = 0;
  for (int i = 0; i < 64; ++i) {
    Result<size_t> n =
        side.write(std::as_bytes(std::span(big.data() + written, big.size() - written)));
    ASSERT_TRUE(n.ok());
    if (*n == 0) return;
    written += *n;
  }
  FAIL() << "the ring never filled";
}

// The client armed (to be woken for input), the daemon wrote and rang, and
// the client armed again before it woke — it found the record then, or
// slept on a doorbell already rung. After it disarms and reads, nothing
// may be left on its doorbell.
TEST(ShmChannelTest, ArmingAgainBeforeWakingLeavesNoStaleRing) {
  Pair p = makePair();
  ASSERT_TRUE(p.client.prepareToSleep(false));
  put(p.daemon, "first");
  ASSERT_TRUE(readable(p.client.wakeFd()));  // the daemon rang: the client slept

  EXPECT_FALSE(p.client.prepareToSleep(false));  // the record is there: go on
  ByteBuffer in;
  EXPECT_EQ(p.client.read(in, SIZE_MAX).value(), 5u);
  ASSERT_TRUE(p.client.disarm().ok());
  EXPECT_FALSE(readable(p.client.wakeFd()));
}

// The same with the second arm succeeding: the client sleeps again after
// the first ring, is rung a second time, and one disarm owes both.
TEST(ShmChannelTest, ArmingAgainAfterReadingOwesBothRings) {
  Pair p = makePair();
  ASSERT_TRUE(p.client.prepareToSleep(false));
  put(p.daemon, "first");
  ByteBuffer in;
  EXPECT_EQ(p.client.read(in, SIZE_MAX).value(), 5u);
  ASSERT_TRUE(p.client.prepareToSleep(false));  // nothing left: sleeps again
  put(p.daemon, "second");
  ASSERT_TRUE(p.client.disarm().ok());
  EXPECT_FALSE(readable(p.client.wakeFd()));
  EXPECT_EQ(p.client.read(in, SIZE_MAX).value(), 6u);
}

// A daemon whose output waits for room arms for it more than once before
// the client releases any: the ring the client makes is read by the
// daemon's next disarm, whichever arm it answered.
TEST(ShmChannelTest, ArmingForRoomTwiceLeavesNoStaleRing) {
  Pair p = makePair();
  ASSERT_NO_FATAL_FAILURE(fillOutgoing(p.daemon));
  ASSERT_TRUE(p.daemon.armRoom());
  ByteBuffer in;
  ASSERT_GT(p.client.read(in, 4096).value(), 0u);  // releases room: rings the daemon
  EXPECT_FALSE(p.daemon.armRoom());                // room is there now
  ASSERT_TRUE(p.daemon.disarm().ok());
  EXPECT_FALSE(readable(p.daemon.wakeFd()));
}

// The arming a side is in: what it asked to be woken for, nothing once it
// found work instead, and nothing again after disarm().
TEST(ShmChannelTest, ArmingNamesWhatASideWaitsFor) {
  Pair p = makePair();
  EXPECT_EQ(p.daemon.arming(), ShmArming::kAwake);
  EXPECT_FALSE(p.daemon.armed());
  ASSERT_TRUE(p.daemon.prepareToSleep(false));
  EXPECT_EQ(p.daemon.arming(), ShmArming::kInput);
  EXPECT_TRUE(p.daemon.armed());

  // Its outgoing ring fills: it arms for room too.
  ASSERT_NO_FATAL_FAILURE(fillOutgoing(p.daemon));
  ASSERT_TRUE(p.daemon.armRoom());
  EXPECT_EQ(p.daemon.arming(), ShmArming::kInputAndRoom);

  // The client sends: arming for input again finds it, and stays armed for room only.
  put(p.client, "news");
  EXPECT_FALSE(p.daemon.armInput());
  EXPECT_EQ(p.daemon.arming(), ShmArming::kRoom);
  ASSERT_TRUE(p.daemon.disarm().ok());
  EXPECT_EQ(p.daemon.arming(), ShmArming::kAwake);
  EXPECT_FALSE(p.daemon.armed());
}

// A side arms for one thing more or disarms; swapping what it waits for in
// one move would lose the word it armed (a ring owed and never read).
TEST(ShmChannelTest, ArmingNeverSwapsInputForRoom) {
  EXPECT_FALSE(allowedEdge(ShmArming::kInput, ShmArming::kRoom));
  EXPECT_FALSE(allowedEdge(ShmArming::kRoom, ShmArming::kInput));
  for (ShmArming to : {ShmArming::kAwake, ShmArming::kInputAndRoom}) {
    EXPECT_TRUE(allowedEdge(ShmArming::kInput, to));
    EXPECT_TRUE(allowedEdge(ShmArming::kRoom, to));
  }
  EXPECT_TRUE(allowedEdge(ShmArming::kInputAndRoom, ShmArming::kRoom));
  EXPECT_STREQ(toString(ShmArming::kInputAndRoom), "armed for input and room");
}

}  // namespace
}  // namespace rdmamsg
