// ViewSlot (client/view_slot.h): the next message is viewed where it lies —
// in the input buffer, untouched by what is read while the view is held;
// in a block of the delivery area, which release() hands back; or, when
// the library had queued it already, in a copy — and only the view held
// is held.
#include "client/view_slot.h"

#include <gtest/gtest.h>

#include <string>

namespace rdmamsg::client {
namespace {

std::span<const std::byte> bytesOf(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

void appendDeliver(ByteBuffer& in, std::string_view text) {
  proto::encodeDeliver(in, "alpha", "orders", "inbox", bytesOf(text));
}

TEST(ViewSlotTest, ADeliverInTheInputIsViewedInPlaceAndStaysPutWhileHeld) {
  ByteBuffer in(256);
  appendDeliver(in, "in place");
  appendDeliver(in, "behind it");
  const std::byte* const start = in.data();
  ViewSlot slot;
  ReceiveQueue queue;
  slot.readyInInput();
  MessageView v;
  slot.take(v, 9, in, proto::kDefaultMaxBody, queue);
  EXPECT_FALSE(slot.ready());
  EXPECT_TRUE(slot.holds(v));
  EXPECT_TRUE(v.inPlace);
  EXPECT_EQ(v.srcNode, "alpha");
  EXPECT_EQ(v.srcService, "orders");
  EXPECT_EQ(v.service, "inbox");
  EXPECT_EQ(v.text(), "in place");
  EXPECT_GT(v.payload.data(), start);
  EXPECT_LT(v.payload.data(), start + 256) << "not copied out of the input buffer";
  // Reading goes on (more than the buffer holds): the viewed bytes stay.
  for (int i = 0; i < 100; ++i)
    appendDeliver(in, std::string(100, 'n'));
  EXPECT_EQ(v.text(), "in place");
  const Result<proto::Decoded> next = proto::decodeFrame(in.readable(), proto::kDefaultMaxBody);
  ASSERT_TRUE(next.ok()) << next.status().toString();
  ASSERT_EQ(next->kind, proto::Decoded::Kind::frame);
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(next->frame.payload.data()),
                             next->frame.payload.size()),
            "behind it")
      << "the frames behind the view stay unparsed, in order";
  EXPECT_EQ(slot.release(v, in), std::nullopt) << "no block to give back";
  EXPECT_FALSE(slot.held());
  EXPECT_EQ(v.handle, 0u);
}

TEST(ViewSlotTest, AQueuedMessageIsViewedInACopy) {
  ByteBuffer in;
  ReceiveQueue queue;
  proto::Frame f;
  f.kind = proto::FrameKind::deliver;
  f.node = "beta";
  f.otherService = "inbox";
  f.payload = bytesOf("queued");
  queue.push(f);
  ViewSlot slot;
  MessageView v;
  slot.take(v, 1, in, proto::kDefaultMaxBody, queue);
  EXPECT_FALSE(v.inPlace);
  EXPECT_EQ(v.srcNode, "beta");
  EXPECT_EQ(v.text(), "queued");
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(slot.release(v, in), std::nullopt);
}

TEST(ViewSlotTest, ADeliverInABlockIsViewedThereAndItsBlockGivenBackAtRelease) {
  const std::string block = "payload in the delivery area";
  proto::Frame f;
  f.kind = proto::FrameKind::deliver;
  f.node = "gamma";
  f.service = "feed";
  f.otherService = "inbox";
  f.payload = bytesOf(block);
  ViewSlot slot;
  slot.want(true);
  slot.readyInBlock(ShmChannel::FrameHold{0, 6}, f);
  EXPECT_TRUE(slot.ready());
  ByteBuffer in;
  ReceiveQueue queue;
  MessageView v;
  slot.take(v, 2, in, proto::kDefaultMaxBody, queue);
  EXPECT_TRUE(v.inPlace);
  EXPECT_EQ(v.payload.data(), f.payload.data());
  EXPECT_EQ(v.srcNode, "gamma");
  std::optional<ShmChannel::FrameHold> back = slot.release(v, in);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->slot, 6u);
  EXPECT_FALSE(slot.held());
}

TEST(ViewSlotTest, OnlyTheViewHeldIsHeld) {
  ByteBuffer in;
  ReceiveQueue queue;
  proto::Frame f;
  f.kind = proto::FrameKind::deliver;
  queue.push(f);
  ViewSlot slot;
  MessageView v, other;
  EXPECT_FALSE(slot.holds(v)) << "handle 0 is never held";
  slot.take(v, 3, in, proto::kDefaultMaxBody, queue);
  other.handle = 4;
  EXPECT_FALSE(slot.holds(other));
  MessageView stale = v;
  (void)slot.release(v, in);
  EXPECT_FALSE(slot.holds(stale)) << "released already";
}

}  // namespace
}  // namespace rdmamsg::client
