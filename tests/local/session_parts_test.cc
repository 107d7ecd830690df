// The parts a Session is made of: its acks (AckQueue) and the deliveries
// its client has not taken yet (DeliveryLedger).
#include <gtest/gtest.h>

#include <vector>

#include "common/local_protocol.h"
#include "daemon/local/ack_queue.h"
#include "daemon/local/delivery_ledger.h"

namespace rdmamsg::local {
namespace {

std::vector<proto::AckRange> acksIn(const ByteBuffer& out) {
  std::vector<proto::AckRange> runs;
  std::span<const std::byte> in = out.readable();
  while (!in.empty()) {
    const Result<proto::Decoded> d = proto::decodeFrame(in, 1 << 20);
    EXPECT_TRUE(d.ok()) << d.status().toString();
    if (!d) break;
    EXPECT_EQ(d->kind, proto::Decoded::Kind::frame);
    if (d->kind != proto::Decoded::Kind::frame) break;
    EXPECT_EQ(d->frame.kind, proto::FrameKind::ack);
    for (size_t i = 0; i < d->frame.ackRangeCount(); i++)
      runs.push_back(d->frame.ackRange(i));
    in = in.subspan(d->consumed);
  }
  return runs;
}

TEST(AckQueueTest, ConsecutiveIdsAreOneRunAndATurnsRunsShareFrames) {
  AckQueue acks(2);  // two runs per frame
  acks.add(1, 1);
  acks.add(2, 3);   // extends 1..1 to 1..4
  acks.add(10, 1);  // a gap: a run of its own
  acks.add(20, 2);
  EXPECT_EQ(acks.bytes(), 3 * proto::kAckRangeSize);
  ByteBuffer out;
  acks.encode(out);
  EXPECT_TRUE(acks.empty());
  const auto runs = acksIn(out);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].first, 1u);
  EXPECT_EQ(runs[0].count, 4u);
  EXPECT_EQ(runs[1].first, 10u);
  EXPECT_EQ(runs[2].first, 20u);
  EXPECT_EQ(runs[2].count, 2u);
}

Receipt peerReceipt(uint64_t seq, uint64_t owner = 1) {
  return {Receipt::Kind::peer, owner, 1, seq, 1};
}

TEST(DeliveryLedgerTest, AStreamIsHandedBackInRunsExactlyAsFarAsTheClientTookIt) {
  DeliveryLedger d;
  for (uint64_t seq = 1; seq <= 5; seq++)
    d.track(peerReceipt(seq), 100);
  d.track(peerReceipt(1, 2), 100);  // another sender
  EXPECT_EQ(d.unconsumedBytes(), 600u);
  ASSERT_TRUE(d.consume(3));
  std::vector<Receipt> back;
  d.consumed([&](const Receipt& r, size_t bytes) {
    back.push_back(r);
    EXPECT_EQ(bytes, 300u);
  });
  ASSERT_EQ(back.size(), 1u) << "one run, taken in part: exactly its first three";
  EXPECT_EQ(back[0].seq, 1u);
  EXPECT_EQ(back[0].count, 3u);
  EXPECT_EQ(d.unconsumedBytes(), 300u);
  ASSERT_TRUE(d.consume(6));
  back.clear();
  d.consumed([&](const Receipt& r, size_t) { back.push_back(r); });
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].seq, 4u);
  EXPECT_EQ(back[0].count, 2u);
  EXPECT_EQ(back[1].owner, 2u);
  EXPECT_EQ(d.unconsumedBytes(), 0u);
}

TEST(DeliveryLedgerTest, ACountThatGoesBackOrPastTheDeliveriesIsRefused) {
  DeliveryLedger d;
  d.track(peerReceipt(1), 10);
  d.track(peerReceipt(2), 10);
  EXPECT_FALSE(d.consume(3)) << "past the deliveries handed out";
  ASSERT_TRUE(d.consume(2));
  EXPECT_FALSE(d.consume(1)) << "back";
}

TEST(DeliveryLedgerTest, WhatWasNotTakenGoesBackWhenTheSessionCloses) {
  DeliveryLedger d;
  d.track(peerReceipt(1), 10);
  d.track(peerReceipt(2), 10);
  ASSERT_TRUE(d.consume(1));
  d.consumed([](const Receipt&, size_t) {});
  uint64_t count = 0;
  d.unconsumed([&](const Receipt& r, size_t) { count += r.count; });
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(d.unconsumedBytes(), 0u);
}

}  // namespace
}  // namespace rdmamsg::local
