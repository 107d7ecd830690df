// Unit tests of a connection's link credits (daemon/peer/credit_ledger.h):
// the rules that keep a link from overrunning its peer's receive buffers
// and keep it alive whatever consumers do.
#include "daemon/peer/credit_ledger.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>
#include <vector>

namespace rdmamsg::peer {
namespace {

using namespace std::chrono_literals;
using Clock = CreditLedger::Clock;

const Clock::time_point kStart = Clock::time_point{} + 1h;

// A batch as the peer would send it, opened like the connection does.
class PeerBatch {
 public:
  PeerBatch(uint32_t credits, uint16_t released, bool message) {
    BatchWriter w;
    w.reset(buf_.data(), buf_.size());
    if (message) {
      const std::array<std::byte, 8> payload{};
      w.addMessage(1, kFirstFragment | kLastFragment, "alpha/a", "beta/b", 0, payload);
    } else {
      w.addHeartbeat();
    }
    size_ = w.finish(credits, released);
  }
  BatchReader reader() const {
    BatchReader r({buf_.data(), size_});
    EXPECT_TRUE(r.open());
    return r;
  }

 private:
  std::array<std::byte, 512> buf_{};
  size_t size_ = 0;
};

Hello peerHello(uint32_t bufferCount, uint32_t maxCredits, bool shared) {
  Hello h;
  h.bufferCount = bufferCount;
  h.maxCredits = maxCredits;
  h.flags = shared ? kHelloSharedReceive : 0;
  return h;
}

// A ledger whose peer granted `credits` (of `most` buffers) at the handshake.
CreditLedger sender(uint32_t credits, uint32_t most = 64, bool shared = false) {
  CreditLedger l(64, 1000ms, kStart);
  l.knowPeer(peerHello(credits, most, shared));
  EXPECT_TRUE(l.takeInitialCredits());
  return l;
}

class FakeLender : public Lender {
 public:
  explicit FakeLender(uint32_t spare) : spare_(spare) {}
  uint32_t lend(uint32_t allowance, uint32_t max) override {
    const uint32_t n = std::min({allowance, max - allowance, spare_});
    spare_ -= n;
    out += n;
    return n;
  }
  void giveBack(uint32_t n) override {
    out -= n;
    spare_ += n;
  }
  uint32_t out = 0;

 private:
  uint32_t spare_;
};

TEST(CreditLedger, NeverOpensMoreBatchesThanThePeerHasCredited) {
  CreditLedger l = sender(5);
  int opened = 0;
  for (int i = 0; i < 20; i++) {
    const bool forMessages = i % 3 != 0;
    if (!l.mayOpen(forMessages) && !l.mayOpen(false)) break;
    l.open(l.mayOpen(forMessages) && forMessages);
    l.seal(kStart);
    opened++;
  }
  EXPECT_EQ(opened, 5);
  EXPECT_EQ(l.credits(), 0u);
  EXPECT_FALSE(l.mayOpen(true));
  EXPECT_FALSE(l.mayOpen(false));
  // Credits the peer returns are usable at once.
  l.grant(4, nullptr);
  ASSERT_TRUE(l.onBatch(PeerBatch(2, 0, false).reader()).ok());
  EXPECT_EQ(l.credits(), 2u);
}

TEST(CreditLedger, OneCreditIsAlwaysKeptForBatchesWithoutMessages) {
  CreditLedger l = sender(3);
  ASSERT_TRUE(l.mayOpen(true));
  l.open(true);
  l.seal(kStart);
  ASSERT_TRUE(l.mayOpen(true));
  l.open(true);
  l.seal(kStart);
  // One credit left: messages wait, a confirmation or heartbeat still goes.
  EXPECT_EQ(l.credits(), 1u);
  EXPECT_FALSE(l.mayOpen(true));
  ASSERT_TRUE(l.mayOpen(false));
  l.open(false);
  EXPECT_FALSE(l.join(true)) << "a batch on the last credit takes no message";
  EXPECT_TRUE(l.join(false));
  l.seal(kStart);
  EXPECT_EQ(l.credits(), 0u);
}

TEST(CreditLedger, ABatchOpenedWithoutMessagesTakesThemWhileACreditIsLeft) {
  CreditLedger l = sender(2);
  l.open(false);
  EXPECT_TRUE(l.join(true)) << "one credit is still kept";
  l.seal(kStart);
  EXPECT_FALSE(l.mayOpen(true));
}

TEST(CreditLedger, ACreditOnlyBatchGoesOnceEnoughCreditsAreOwed) {
  CreditLedger l = sender(8);
  l.grant(8, nullptr);
  EXPECT_EQ(l.owed(), 0u);
  // The peer fills three buffers; none is read yet: nothing is owed.
  for (int i = 0; i < 3; i++)
    ASSERT_TRUE(l.onBatch(PeerBatch(0, 0, true).reader()).ok());
  EXPECT_EQ(l.owed(), 0u);
  EXPECT_FALSE(l.wantsCreditReturn());
  // One read and reposted: owed, but one credit alone is not worth a batch
  // (a credit-only batch spends one of the peer's).
  l.reposted(1);
  EXPECT_EQ(l.owed(), 1u);
  EXPECT_FALSE(l.wantsCreditReturn());
  // A quarter of the allowance (8 / 4 = 2) is.
  l.reposted(1);
  EXPECT_TRUE(l.wantsCreditReturn());
  // The next batch returns them all, and then nothing is owed.
  l.open(false);
  EXPECT_EQ(l.seal(kStart).returned, 2u);
  EXPECT_EQ(l.owed(), 0u);
  EXPECT_FALSE(l.wantsCreditReturn());
}

TEST(CreditLedger, ACreditOnlyBatchNeverReturnsJustTheCreditItSpends) {
  // Otherwise two ends would answer each other's returns forever.
  CreditLedger l = sender(4);
  l.grant(4, nullptr);
  ASSERT_TRUE(l.onBatch(PeerBatch(0, 0, false).reader()).ok());
  l.reposted(1);
  EXPECT_EQ(l.owed(), 1u);
  EXPECT_FALSE(l.wantsCreditReturn());
  ASSERT_TRUE(l.onBatch(PeerBatch(0, 0, false).reader()).ok());
  l.reposted(1);
  EXPECT_TRUE(l.wantsCreditReturn());
}

TEST(CreditLedger, WithTwoBuffersOneOwedCreditIsReturnedAtOnce) {
  CreditLedger l = sender(2);
  l.grant(2, nullptr);
  ASSERT_TRUE(l.onBatch(PeerBatch(0, 0, false).reader()).ok());
  l.reposted(1);
  EXPECT_TRUE(l.wantsCreditReturn()) << "the peer must not be left below two credits";
}

TEST(CreditLedger, IdleCreditsAreReleasedToASharedQueueAfterReleaseAfter) {
  CreditLedger l(64, 1000ms, kStart);
  l.knowPeer(peerHello(2, 16, /*shared=*/true));
  ASSERT_TRUE(l.takeInitialCredits());
  l.grant(2, nullptr);
  // The peer lent more: 8 credits in all.
  ASSERT_TRUE(l.onBatch(PeerBatch(6, 0, false).reader()).ok());
  ASSERT_EQ(l.credits(), 8u);
  l.open(true);
  EXPECT_EQ(l.seal(kStart).released, 0u) << "busy: keeps what it was lent";
  l.open(false);
  EXPECT_EQ(l.seal(kStart + 999ms).released, 0u) << "not idle for long enough";
  EXPECT_EQ(l.credits(), 6u);
  l.open(false);
  const CreditLedger::Seal s = l.seal(kStart + 1000ms);
  // It keeps the peer's initial grant, of which this batch spent one.
  EXPECT_EQ(s.released, 4u);
  EXPECT_EQ(l.credits(), 1u);
  l.open(false);
  EXPECT_EQ(l.seal(kStart + 2000ms).released, 0u) << "nothing more to release";
}

TEST(CreditLedger, NothingIsReleasedToAPeerWithItsOwnReceiveBuffers) {
  CreditLedger l = sender(8, 8, /*shared=*/false);
  l.open(false);
  EXPECT_EQ(l.seal(kStart + 1h).released, 0u);
  EXPECT_EQ(l.credits(), 7u);
}

TEST(CreditLedger, ABusyPeerIsLentMoreAndGivesItBackWhenIdle) {
  FakeLender lender(8);
  CreditLedger l(16, 1000ms, kStart);
  l.knowPeer(peerHello(4, 16, false));
  ASSERT_TRUE(l.takeInitialCredits());
  l.grant(2, &lender);
  // A batch without messages is no reason to lend.
  ASSERT_TRUE(l.onBatch(PeerBatch(0, 0, false).reader()).ok());
  EXPECT_EQ(l.allowance(), 2u);
  // A batch of messages, with half its allowance or less left as credits: lent as much again.
  ASSERT_TRUE(l.onBatch(PeerBatch(0, 0, true).reader()).ok());
  EXPECT_EQ(l.allowance(), 4u);
  EXPECT_EQ(l.lent(), 2u);
  EXPECT_EQ(lender.out, 2u);
  EXPECT_EQ(l.lentTotal(), 2u);
  // The new buffers go to the peer with the next batch (the two read ones too).
  l.reposted(2);
  l.open(false);
  EXPECT_EQ(l.seal(kStart).returned, 4u);
  // Idle, the peer releases what it holds beyond its initial grant: back to the lender.
  ASSERT_TRUE(l.onBatch(PeerBatch(0, 2, false).reader()).ok());
  EXPECT_EQ(l.lent(), 0u);
  EXPECT_EQ(l.allowance(), 2u);
  EXPECT_EQ(lender.out, 0u);
  EXPECT_EQ(l.releasedTotal(), 2u);
}

TEST(CreditLedger, LendingStopsAtMaxCredits) {
  FakeLender lender(100);
  CreditLedger l(6, 1000ms, kStart);
  l.knowPeer(peerHello(16, 16, false));
  ASSERT_TRUE(l.takeInitialCredits());
  l.grant(2, &lender);
  // Rounds in which the peer spends every credit on messages, then gets
  // them back.
  uint32_t peerCredits = 2;
  for (int round = 0; round < 4; round++) {
    for (uint32_t i = 0; i < peerCredits; i++)
      ASSERT_TRUE(l.onBatch(PeerBatch(0, 0, true).reader()).ok()) << round;
    l.reposted(peerCredits);
    l.open(false);
    peerCredits = l.seal(kStart).returned;
    EXPECT_LE(l.allowance(), 6u);
  }
  EXPECT_EQ(l.allowance(), 6u);
  EXPECT_EQ(l.lent(), 4u);
  EXPECT_EQ(lender.out, 4u);
}

TEST(CreditLedger, APeerThatBreaksTheRulesIsRefused) {
  {
    CreditLedger l = sender(4);
    l.grant(1, nullptr);
    ASSERT_TRUE(l.onBatch(PeerBatch(0, 0, false).reader()).ok());
    EXPECT_EQ(l.onBatch(PeerBatch(0, 0, false).reader()).message(),
              "peer sent a batch without a credit");
  }
  {
    CreditLedger l = sender(4);
    l.grant(3, nullptr);
    EXPECT_EQ(l.onBatch(PeerBatch(0, 3, false).reader()).message(),
              "peer released more credits than it holds");
  }
  {
    CreditLedger l = sender(4, /*most=*/6);
    l.grant(3, nullptr);
    ASSERT_TRUE(l.onBatch(PeerBatch(2, 0, false).reader()).ok());
    EXPECT_EQ(l.onBatch(PeerBatch(1, 0, false).reader()).message(),
              "peer returned more credits than it has receive buffers");
  }
  {
    CreditLedger l(64, 1000ms, kStart);
    l.knowPeer(peerHello(8, 4, false));
    EXPECT_EQ(
        l.takeInitialCredits(),
        Status(Errc::protocol_error, "peer returned more credits than it has receive buffers"))
        << "a grant beyond its own buffers";
  }
}

}  // namespace
}  // namespace rdmamsg::peer
