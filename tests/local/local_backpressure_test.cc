// Flow control of the local server: pauseReading stops consuming a client's
// requests until resumed; a listener that does not read becomes congested
// and the drained callback fires once it catches up.
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

TEST_F(LocalBackpressureTest, RouterCallsForUnknownSessionsAreIgnored) {
  EXPECT_FALSE(server_->ack(12345, 1));
  EXPECT_FALSE(server_->fail(12345, 1, Status(Errc::timeout, "x")));
  EXPECT_FALSE(server_->pauseReading(12345));
  EXPECT_FALSE(server_->deliver(12345, "a", "b", "c", {}));
  EXPECT_EQ(server_->outputBytes(12345), 0u);
}

}  // namespace
}  // namespace rdmamsg::test
