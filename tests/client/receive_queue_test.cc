// ReceiveQueue (client/receive_queue.h): received messages are taken in
// order with their names and payload, receiving reuses the application's
// buffers, and the count reported to the daemon (CONSUMED) follows the
// confirmation rule — at take with confirmOnReceive, at confirmTaken()
// without.
#include "client/receive_queue.h"

#include <gtest/gtest.h>

#include <string>

namespace rdmamsg::client {
namespace {

proto::Frame deliver(std::string_view node, std::string_view from, std::string_view to,
                     std::string_view text) {
  proto::Frame f;
  f.kind = proto::FrameKind::deliver;
  f.node = node;
  f.service = from;
  f.otherService = to;
  f.payload = std::as_bytes(std::span(text.data(), text.size()));
  return f;
}

TEST(ReceiveQueueTest, MessagesAreTakenInOrderWithTheirNamesAndPayload) {
  ReceiveQueue q;
  q.push(deliver("alpha", "orders", "inbox", "first"));
  q.push(deliver("beta", "", "audit", "second"));
  EXPECT_EQ(q.size(), 2u);
  Message m;
  q.takeInto(m);
  EXPECT_EQ(m.srcNode, "alpha");
  EXPECT_EQ(m.srcService, "orders");
  EXPECT_EQ(m.service, "inbox");
  EXPECT_EQ(m.text(), "first");
  q.takeInto(m);
  EXPECT_EQ(m.srcNode, "beta");
  EXPECT_EQ(m.srcService, "");
  EXPECT_EQ(m.service, "audit");
  EXPECT_EQ(m.text(), "second");
  EXPECT_TRUE(q.empty());
}

// The application's payload buffer goes into the queue's slot and comes
// back to it: a steady stream into one Message does not allocate.
TEST(ReceiveQueueTest, ReceivingReusesTheApplicationsBuffers) {
  ReceiveQueue q;
  Message m;
  m.payload.reserve(1 << 16);
  const std::byte* const buffer = m.payload.data();
  const std::string text(1000, 'x');
  bool cameBack = false;
  for (int i = 0; i < 64 && !cameBack; ++i) {
    q.push(deliver("alpha", "orders", "inbox", text));
    q.takeInto(m);
    ASSERT_EQ(m.text(), text);
    cameBack = m.payload.data() == buffer;
  }
  EXPECT_TRUE(cameBack) << "the buffer handed in was not reused";
}

TEST(ReceiveQueueTest, SwapFrontHandsOverTheWholeMessageWithoutCountingIt) {
  ReceiveQueue q;
  q.push(deliver("alpha", "orders", "inbox", "viewed"));
  Message copy;
  q.swapFront(copy);
  EXPECT_EQ(copy.srcNode, "alpha");
  EXPECT_EQ(copy.text(), "viewed");
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.nextReport(), std::nullopt) << "a view counts as taken at its release";
  q.noteTaken();
  EXPECT_EQ(q.nextReport(), 1u);
}

TEST(ReceiveQueueTest, WithConfirmOnReceiveEveryTakenMessageIsReportedOnce) {
  ReceiveQueue q;
  EXPECT_EQ(q.nextReport(), std::nullopt);
  Message m;
  for (int i = 0; i < 3; ++i)
    q.push(deliver("alpha", "orders", "inbox", "x"));
  q.takeInto(m);
  q.takeInto(m);
  EXPECT_EQ(q.nextReport(), 2u);
  EXPECT_EQ(q.nextReport(), std::nullopt) << "reported already";
  q.takeInto(m);
  EXPECT_EQ(q.nextReport(), 3u) << "the count is cumulative";
}

TEST(ReceiveQueueTest, WithoutConfirmOnReceiveMessagesAreReportedAtConfirmTaken) {
  ReceiveQueue q;
  q.setConfirmOnReceive(false);
  Message m;
  for (int i = 0; i < 3; ++i)
    q.push(deliver("alpha", "orders", "inbox", "x"));
  q.takeInto(m);
  q.takeInto(m);
  EXPECT_EQ(q.nextReport(), std::nullopt) << "taken, not confirmed";
  q.confirmTaken();
  EXPECT_EQ(q.nextReport(), 2u);
  q.takeInto(m);
  EXPECT_EQ(q.nextReport(), std::nullopt);
  q.setConfirmOnReceive(true);  // confirms what was taken so far
  EXPECT_EQ(q.nextReport(), 3u);
}

}  // namespace
}  // namespace rdmamsg::client
