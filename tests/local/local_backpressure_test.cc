// Flow control of the local server: pauseReading stops consuming a client's
// requests until resumed; a listener that does not read becomes congested
// and the drained callback fires once it catches up.
#include "daemon/local/session.h"
#include "local_fixture.h"

namespace rdmamsg::test {
namespace {

using proto::FrameKind;

class LocalBackpressureTest : public LocalFixture {};

TEST_F(LocalBackpressureTest, PausedSessionIsNotReadUntilResumed) {
  auto listener = connect();
  auto sender = connect();
  ASSERT_EQ(registerService(*listener, "sink").kind, FrameKind::registered);
  handler_.pauseOnSend = true;
  const std::string payload(1000, 'p');
  // Write until the socket is full: the server stopped reading after the
  // first message, so the sender's writes must eventually block.
  size_t queued = 0;
  bool blocked = false;
  for (int round = 0; round < 100000 && !blocked; ++round) {
    proto::encodeSend(sender->out(), ++queued, "nodeA", "sink", "",
                      std::as_bytes(std::span(payload.data(), payload.size())));
    blocked = !sender->write();
    if (round % 64 == 0) loop_.runOnce();
  }
  ASSERT_TRUE(blocked) << "writes never blocked";
  ASSERT_FALSE(sender->writeFailed());
  for (int i = 0; i < 20; ++i)
    loop_.runOnce(std::chrono::milliseconds(1));
  EXPECT_EQ(handler_.sends, 1u);
  EXPECT_FALSE(sender->write());  // still full

  handler_.pauseOnSend = false;
  server_->resumeReading(handler_.lastSender);
  EXPECT_TRUE(stepUntil([&] {
    sender->write();
    proto::Frame f;
    while (listener->next(f)) {
    }
    return handler_.sends == queued;
  }));
}

TEST_F(LocalBackpressureTest, SlowListenerBecomesCongestedThenDrains) {
  local::LocalServerConfig cfg = testConfig(dir_.file("bp.sock"), kMaxMessage);
  cfg.outputHighWatermark = 256 * 1024;
  cfg.outputLowWatermark = 64 * 1024;
  restart(cfg);
  std::vector<local::SessionId> drained;
  server_->setDrainedCallback([&](local::SessionId id) { drained.push_back(id); });
  auto listener = connect();
  ASSERT_EQ(registerService(*listener, "slow").kind, FrameKind::registered);
  const local::SessionId id = server_->sessionIds().front();
  const std::string payload(4000, 'd');
  // Deliver far more than the socket buffer holds without the client reading.
  for (int i = 0; i < 1000 && !server_->outputCongested(id); ++i) {
    server_->deliver(id, "nodeB", "src", "slow",
                     std::as_bytes(std::span(payload.data(), payload.size())));
    loop_.runOnce();
  }
  ASSERT_TRUE(server_->outputCongested(id));
  EXPECT_GE(server_->outputBytes(id), cfg.outputHighWatermark);
  EXPECT_TRUE(drained.empty());
  // The client catches up.
  proto::Frame f;
  size_t got = 0;
  EXPECT_TRUE(stepUntil([&] {
    while (listener->next(f))
      ++got;
    return !drained.empty();
  }));
  EXPECT_EQ(drained, std::vector<local::SessionId>{id});
  EXPECT_FALSE(server_->outputCongested(id));
  EXPECT_GT(got, 0u);
}

// Deliveries that continue one another (same owner and epoch, next seq) are
// handed back as runs once the listener has taken them; every message is
// covered exactly once, in order, and a gap or another owner starts a run.
TEST_F(LocalBackpressureTest, ReceiptsComeBackInRunsCoveringEveryMessageOnce) {
  auto listener = connect();
  ASSERT_EQ(registerService(*listener, "slow").kind, FrameKind::registered);
  const local::SessionId id = server_->sessionIds().front();
  struct Back {
    void* owner;
    uint64_t seq, count;
    size_t bytes;
  };
  std::vector<Back> back;
  server_->setConsumedCallback([&](const local::Receipt& r, size_t bytes, Errc errc) {
    EXPECT_EQ(errc, Errc::ok);
    back.push_back({r.owner, r.seq, r.count, bytes});
  });
  int ownerA = 0, ownerB = 0;
  const std::string payload(1000, 'r');
  const auto body = std::as_bytes(std::span(payload.data(), payload.size()));
  // Owner A: 1..600 then, after a gap, 700..899; owner B's 1..100 in between.
  std::vector<std::pair<void*, uint64_t>> sent;
  for (uint64_t s = 1; s <= 600; ++s)
    sent.push_back({&ownerA, s});
  for (uint64_t s = 1; s <= 100; ++s)
    sent.push_back({&ownerB, s});
  for (uint64_t s = 700; s < 900; ++s)
    sent.push_back({&ownerA, s});
  size_t trackedMax = 0;
  for (auto [owner, seq] : sent) {
    local::Receipt r{owner, 7, seq};
    ASSERT_TRUE(server_->deliver(id, "nodeB", "src", "slow", body, &r));
    trackedMax = std::max(trackedMax, server_->trackedBytes());
  }
  proto::Frame f;
  size_t got = 0;
  ASSERT_TRUE(stepUntil([&] {
    while (listener->next(f))
      ++got;
    return got == sent.size() && server_->trackedBytes() == 0;
  })) << got
      << " of " << sent.size() << " read";
  // Runs in delivery order; expanded, they are exactly the messages sent.
  std::vector<std::pair<void*, uint64_t>> covered;
  size_t bytes = 0;
  for (const Back& b : back) {
    for (uint64_t s = b.seq; s < b.seq + b.count; ++s)
      covered.push_back({b.owner, s});
    bytes += b.bytes;
  }
  EXPECT_EQ(covered, sent);
  EXPECT_EQ(bytes, trackedMax);
  EXPECT_LT(back.size(), sent.size() / 10) << "consecutive deliveries were not joined";
  EXPECT_GE(back.size(), 3u) << "a gap or another owner must start a new run";
  for (const Back& b : back)
    EXPECT_LE(b.bytes, local::Session::kReceiptSpan + 2 * payload.size());
}

TEST_F(LocalBackpressureTest, RouterCallsForUnknownSessionsAreIgnored) {
  EXPECT_FALSE(server_->ack(12345, 1));
  EXPECT_FALSE(server_->fail(12345, 1, Status(Errc::timeout, "x")));
  EXPECT_FALSE(server_->pauseReading(12345));
  EXPECT_FALSE(server_->deliver(12345, "a", "b", "c", {}));
  EXPECT_EQ(server_->outputBytes(12345), 0u);
}

}  // namespace
}  // namespace rdmamsg::test
