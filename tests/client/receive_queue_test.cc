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

proto::Frame subjectMsg(uint64_t subId, std::string_view subject, std::string_view replyTo,
                        std::string_view text) {
  proto::Frame f;
  f.kind = proto::FrameKind::msg;
  f.msgId = subId;
  f.node = "beta";
  f.subject = subject;
  f.replyTo = replyTo;
  f.payload = std::as_bytes(std::span(text.data(), text.size()));
  return f;
}

proto::Frame reply(uint64_t requestId, std::string_view text) {
  proto::Frame f;
  f.kind = proto::FrameKind::reply;
  f.msgId = requestId;
  f.node = "gamma";
  f.payload = std::as_bytes(std::span(text.data(), text.size()));
  return f;
}

// A slot reused for another kind of message keeps nothing of the last one.
TEST(ReceiveQueueTest, SubjectMessagesAndRepliesCarryTheirOwnFieldsOnly) {
  ReceiveQueue q;
  Message m;
  q.pushMsg(subjectMsg(7, "prices.eu", "alpha/3/9", "42"));
  q.takeInto(m);
  EXPECT_EQ(m.subscription, 7u);
  EXPECT_EQ(m.subject, "prices.eu");
  EXPECT_EQ(m.replyTo, "alpha/3/9");
  EXPECT_TRUE(m.isRequest());
  EXPECT_EQ(m.srcNode, "beta");
  EXPECT_EQ(m.service, "");
  q.push(deliver("alpha", "orders", "inbox", "plain"));
  q.takeInto(m);
  EXPECT_EQ(m.subscription, 0u);
  EXPECT_EQ(m.subject, "");
  EXPECT_FALSE(m.isRequest());
  q.pushReply(reply(11, "answer"));
  q.takeInto(m);
  EXPECT_EQ(m.requestId, 11u);
  EXPECT_EQ(m.srcNode, "gamma");
  EXPECT_EQ(m.text(), "answer");
  EXPECT_EQ(q.nextReport(), 3u);
}

// requestAndWait(): the awaited reply is kept aside and taken out of turn,
// but CONSUMED counts deliveries from the first, so it is reported only
// once the messages read before it were taken too.
TEST(ReceiveQueueTest, AReplyTakenOutOfTurnIsReportedOnceEverythingBeforeItWasTaken) {
  ReceiveQueue q;
  Message m;
  q.push(deliver("alpha", "orders", "inbox", "one"));
  q.push(deliver("alpha", "orders", "inbox", "two"));
  q.awaitReply(5);
  q.pushReply(reply(4, "not awaited"));  // another request's: queued
  EXPECT_FALSE(q.replyArrived());
  q.pushReply(reply(5, "awaited"));
  ASSERT_TRUE(q.replyArrived());
  EXPECT_EQ(q.size(), 3u) << "the awaited reply is not for receive()";
  q.push(deliver("alpha", "orders", "inbox", "after"));
  q.takeReply(m);
  EXPECT_EQ(m.text(), "awaited");
  EXPECT_EQ(q.nextReport(), std::nullopt) << "three messages before it are not taken";
  q.takeInto(m);
  q.takeInto(m);
  EXPECT_EQ(q.nextReport(), 2u);
  q.takeInto(m);
  EXPECT_EQ(m.text(), "not awaited");
  EXPECT_EQ(q.nextReport(), 4u) << "the reply taken out of turn counts now";
  q.takeInto(m);
  EXPECT_EQ(m.text(), "after");
  EXPECT_EQ(q.nextReport(), 5u);
  EXPECT_TRUE(q.empty());
}

TEST(ReceiveQueueTest, AReplyWithNothingBeforeItIsReportedAtOnce) {
  ReceiveQueue q;
  Message m;
  q.awaitReply(9);
  q.pushReply(reply(9, "first"));
  q.takeReply(m);
  EXPECT_EQ(q.nextReport(), 1u);
  q.awaitReply(10);
  q.stopAwaiting();  // requestAndWait gave up: a late reply is received as any message
  q.pushReply(reply(10, "late"));
  EXPECT_FALSE(q.replyArrived());
  ASSERT_EQ(q.size(), 1u);
  q.takeInto(m);
  EXPECT_EQ(m.requestId, 10u);
  EXPECT_EQ(q.nextReport(), 2u);
}

}  // namespace
}  // namespace rdmamsg::client
