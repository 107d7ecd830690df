// Flow control of the local server: pauseReading stops consuming a client's
// requests until resumed; a listener whose application does not take its
// messages becomes congested and the drained callback fires once it catches
// up; deliveries are handed back (receipts) only when the client says its
// application took them (CONSUMED).
#include "daemon/local/session.h"
#include "local_fixture.h"

namespace rdmamsg::test {
namespace {

using proto::FrameKind;

class LocalBackpressureTest : public LocalFixture {};

local::Receipt peerReceipt(uint64_t owner, uint64_t seq) {
  return {local::Receipt::Kind::peer, owner, 7, seq, 1};
}

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
  for (uint64_t i = 1; i <= 1000 && !server_->outputCongested(id); ++i) {
    server_->deliver(id, "nodeB", "src", "slow",
                     std::as_bytes(std::span(payload.data(), payload.size())), peerReceipt(1, i));
    loop_.runOnce();
  }
  ASSERT_TRUE(server_->outputCongested(id));
  EXPECT_GE(server_->trackedBytes(), cfg.outputHighWatermark);
  EXPECT_TRUE(drained.empty());
  // The client catches up.
  proto::Frame f;
  size_t got = 0;
  EXPECT_TRUE(stepUntil([&] {
    while (listener->next(f))
      ++got;
    listener->consumeAll();
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
    uint64_t owner;
    uint64_t seq, count;
    size_t bytes;
  };
  std::vector<Back> back;
  server_->setConsumedCallback(
      [&](local::SessionId to, const local::Receipt& r, size_t bytes, Errc errc) {
        EXPECT_EQ(errc, Errc::ok);
        EXPECT_EQ(to, id);
        back.push_back({r.owner, r.seq, r.count, bytes});
      });
  const uint64_t ownerA = 1, ownerB = 2;
  const std::string payload(1000, 'r');
  const auto body = std::as_bytes(std::span(payload.data(), payload.size()));
  // Owner A: 1..600 then, after a gap, 700..899; owner B's 1..100 in between.
  std::vector<std::pair<uint64_t, uint64_t>> sent;
  for (uint64_t s = 1; s <= 600; ++s)
    sent.push_back({ownerA, s});
  for (uint64_t s = 1; s <= 100; ++s)
    sent.push_back({ownerB, s});
  for (uint64_t s = 700; s < 900; ++s)
    sent.push_back({ownerA, s});
  size_t trackedMax = 0;
  for (auto [owner, seq] : sent) {
    ASSERT_TRUE(server_->deliver(id, "nodeB", "src", "slow", body, peerReceipt(owner, seq)));
    trackedMax = std::max(trackedMax, server_->trackedBytes());
  }
  proto::Frame f;
  size_t got = 0;
  ASSERT_TRUE(stepUntil([&] {
    while (listener->next(f))
      ++got;
    listener->consumeAll();
    return got == sent.size() && server_->trackedBytes() == 0;
  })) << got
      << " of " << sent.size() << " read";
  // Runs in delivery order; expanded, they are exactly the messages sent.
  std::vector<std::pair<uint64_t, uint64_t>> covered;
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

// A message read from the socket is not taken: its receipt comes back only
// when CONSUMED covers it, and exactly the ones it covers.
TEST_F(LocalBackpressureTest, ADeliveryReadButNotTakenIsNotHandedBack) {
  auto listener = connect();
  ASSERT_EQ(registerService(*listener, "svc").kind, FrameKind::registered);
  const local::SessionId id = server_->sessionIds().front();
  std::vector<uint64_t> back;
  server_->setConsumedCallback([&](local::SessionId, const local::Receipt& r, size_t, Errc errc) {
    EXPECT_EQ(errc, Errc::ok);
    for (uint64_t s = r.seq; s < r.seq + r.count; ++s)
      back.push_back(s);
  });
  const std::string payload(100, 'x');
  const auto body = std::as_bytes(std::span(payload.data(), payload.size()));
  for (uint64_t s = 1; s <= 10; ++s)
    ASSERT_TRUE(server_->deliver(id, "nodeB", "src", "svc", body, peerReceipt(1, s)));
  proto::Frame f;
  ASSERT_TRUE(stepUntil([&] {
    while (listener->next(f)) {
    }
    return listener->delivered() == 10;
  }));
  for (int i = 0; i < 20; ++i)
    loop_.runOnce(std::chrono::milliseconds(1));
  EXPECT_TRUE(back.empty()) << "a delivery came back before the client said it took it";
  EXPECT_EQ(server_->trackedBytes(), 10 * (payload.size() + 8 + 3 + 5 + 3 + 3));
  proto::encodeConsumed(listener->out(), 4);
  listener->write();
  ASSERT_TRUE(stepUntil([&] { return back.size() == 4; }));
  EXPECT_EQ(back, (std::vector<uint64_t>{1, 2, 3, 4}));
  listener->consumeAll();
  ASSERT_TRUE(stepUntil([&] { return back.size() == 10; }));
  EXPECT_EQ(server_->trackedBytes(), 0u);
}

// A CONSUMED that goes back, or claims more than was delivered, closes the
// client's connection with a protocol error; what it did not take fails.
TEST_F(LocalBackpressureTest, ConsumedPastTheDeliveriesIsAProtocolError) {
  for (uint64_t claim : {5u, 1u}) {
    auto listener = connect();
    ASSERT_EQ(registerService(*listener, "svc" + std::to_string(claim)).kind,
              FrameKind::registered);
    const local::SessionId id = server_->sessionIds().back();
    uint64_t taken = 0, failed = 0;
    server_->setConsumedCallback([&](local::SessionId, const local::Receipt& r, size_t, Errc errc) {
      (errc == Errc::ok ? taken : failed) += r.count;
    });
    const std::string payload(10, 'x');
    const auto body = std::as_bytes(std::span(payload.data(), payload.size()));
    for (uint64_t s = 1; s <= 3; ++s)
      server_->deliver(id, "nodeB", "src", "svc" + std::to_string(claim), body, peerReceipt(1, s));
    if (claim == 1) {  // goes back: 2, then 1
      proto::encodeConsumed(listener->out(), 2);
      proto::encodeConsumed(listener->out(), 1);
    } else {  // past the 3 delivered
      proto::encodeConsumed(listener->out(), claim);
    }
    listener->write();
    proto::Frame f;
    bool sawError = false;
    ASSERT_TRUE(stepUntil([&] {
      while (listener->next(f))
        sawError = sawError || (f.kind == FrameKind::error && f.errc == Errc::protocol_error);
      return listener->sawEof();
    }));
    EXPECT_TRUE(sawError);
    EXPECT_EQ(taken, claim == 1 ? 2u : 0u);
    EXPECT_EQ(taken + failed, 3u) << "every delivery is handed back once";
  }
}

// A client of another protocol version reads why, framed in its own version.
TEST_F(LocalBackpressureTest, AClientOfAnotherVersionIsToldInItsOwnFraming) {
  auto old = std::make_unique<RawClient>(server_->socketPath());
  ASSERT_TRUE(old->connected());
  proto::encodeHello(old->out(), "old");
  auto bytes = std::span(const_cast<std::byte*>(old->out().data()), old->out().size());
  bytes[4] = std::byte{1};  // a version 1 HELLO
  old->write();
  ASSERT_TRUE(stepUntil([&] { return old->sawEof(); }));
  const std::string raw = old->rawInput();
  ASSERT_GE(raw.size(), proto::kHeaderSize);
  EXPECT_EQ(static_cast<uint8_t>(raw[4]), 1) << "not framed in the client's version";
  EXPECT_EQ(static_cast<uint8_t>(raw[5]), static_cast<uint8_t>(FrameKind::error));
  EXPECT_NE(raw.find("local protocol version 2, the client version 1"), std::string::npos) << raw;
}

// A client of a newer version (or of version 0) cannot be answered in its
// framing: it gets the protocol error in the daemon's, as any bad header.
TEST_F(LocalBackpressureTest, AClientOfANewerVersionIsToldInTheDaemonsFraming) {
  for (uint8_t version : {uint8_t{3}, uint8_t{0}}) {
    SCOPED_TRACE(int{version});
    auto newer = std::make_unique<RawClient>(server_->socketPath());
    ASSERT_TRUE(newer->connected());
    proto::encodeHello(newer->out(), "newer");
    auto bytes = std::span(const_cast<std::byte*>(newer->out().data()), newer->out().size());
    bytes[4] = std::byte{version};
    newer->write();
    ASSERT_TRUE(stepUntil([&] { return newer->sawEof(); }));
    const std::string raw = newer->rawInput();
    ASSERT_GE(raw.size(), proto::kHeaderSize);
    EXPECT_EQ(static_cast<uint8_t>(raw[4]), proto::kProtocolVersion);
    EXPECT_EQ(static_cast<uint8_t>(raw[5]), static_cast<uint8_t>(FrameKind::error));
    EXPECT_NE(raw.find("unsupported protocol version"), std::string::npos) << raw;
  }
}

TEST_F(LocalBackpressureTest, RouterCallsForUnknownSessionsAreIgnored) {
  EXPECT_FALSE(server_->ack(12345, 1));
  EXPECT_FALSE(server_->fail(12345, 1, Status(Errc::timeout, "x")));
  EXPECT_FALSE(server_->pauseReading(12345));
  EXPECT_FALSE(server_->deliver(12345, "a", "b", "c", {}, peerReceipt(1, 1)));
  EXPECT_FALSE(server_->hold(12345, "a", "b"));
  EXPECT_EQ(server_->outputBytes(12345), 0u);
}

}  // namespace
}  // namespace rdmamsg::test
