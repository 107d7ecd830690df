// Completions (client/completions.h): the outcomes of sent messages as the
// application takes them — in arrival order one id at a time, or one id out
// of the order (sendAndWait()) — and the count of messages in flight.
#include "client/completions.h"

#include <gtest/gtest.h>

#include <vector>

namespace rdmamsg::client {
namespace {

std::vector<uint64_t> drain(Completions& c) {
  std::vector<uint64_t> ids;
  Completion out;
  while (!c.empty()) {
    c.takeFront(out);
    EXPECT_TRUE(out.status.ok()) << out.msgId << ": " << out.status.toString();
    ids.push_back(out.msgId);
  }
  return ids;
}

TEST(CompletionsTest, AnAckedRangeIsTakenOneIdAtATimeInOrder) {
  Completions c;
  c.acked(5, 3);
  c.acked(1, 2);
  EXPECT_EQ(drain(c), (std::vector<uint64_t>{5, 6, 7, 1, 2}));
}

TEST(CompletionsTest, AnErrorIsTakenWithItsReason) {
  Completions c;
  c.acked(1, 1);
  c.failed(2, Status(Errc::unknown_service, "no listener for inbox"));
  Completion out;
  c.takeFront(out);
  EXPECT_EQ(out.msgId, 1u);
  EXPECT_TRUE(out.status.ok());
  c.takeFront(out);
  EXPECT_EQ(out.msgId, 2u);
  EXPECT_EQ(out.status, Status(Errc::unknown_service, "no listener for inbox"));
  EXPECT_TRUE(c.empty());
}

TEST(CompletionsTest, TakingAnIdFromTheMiddleOfARangeLeavesTheRestInOrder) {
  Completions c;
  c.acked(10, 5);  // 10..14
  c.failed(20, Status(Errc::timeout, "late"));
  Completion out;
  ASSERT_TRUE(c.take(12, out));
  EXPECT_EQ(out.msgId, 12u);
  EXPECT_TRUE(out.status.ok());
  ASSERT_TRUE(c.take(10, out));  // the first of a range
  ASSERT_TRUE(c.take(14, out));  // the last
  ASSERT_TRUE(c.take(20, out));  // an error, out of the order
  EXPECT_EQ(out.status.code(), Errc::timeout);
  EXPECT_EQ(drain(c), (std::vector<uint64_t>{11, 13}));
}

TEST(CompletionsTest, AnIdNotArrivedIsNotTaken) {
  Completions c;
  c.acked(1, 3);
  Completion out;
  EXPECT_FALSE(c.take(4, out));
  EXPECT_FALSE(c.take(0, out));
  ASSERT_TRUE(c.take(2, out));
  EXPECT_FALSE(c.take(2, out)) << "taken once";
  EXPECT_EQ(drain(c), (std::vector<uint64_t>{1, 3}));
}

TEST(CompletionsTest, InFlightCountsMessagesSentUntilTheirOutcomeArrives) {
  Completions c;
  for (int i = 0; i < 5; ++i)
    c.sent();
  EXPECT_EQ(c.inFlight(), 5u);
  c.acked(1, 3);
  EXPECT_EQ(c.inFlight(), 2u);
  c.failed(4, Status(Errc::peer_unreachable, "lost"));
  EXPECT_EQ(c.inFlight(), 1u);
  c.acked(5, 4);  // more than in flight (a daemon's duplicate): never below zero
  EXPECT_EQ(c.inFlight(), 0u);
  c.failed(9, Status(Errc::peer_unreachable, "lost"));
  EXPECT_EQ(c.inFlight(), 0u);
}

TEST(CompletionsTest, ManyRangesSplitAndTakenKeepTheirOrder) {
  Completions c;
  for (uint64_t r = 0; r < 40; ++r)  // past the ring's first growth
    c.acked(r * 10 + 1, 10);
  Completion out;
  for (uint64_t r = 0; r < 40; ++r)
    ASSERT_TRUE(c.take(r * 10 + 5, out));
  std::vector<uint64_t> expected;
  for (uint64_t id = 1; id <= 400; ++id)
    if (id % 10 != 5) expected.push_back(id);
  EXPECT_EQ(drain(c), expected);
}

TEST(CompletionsTest, APublishIsTakenWithItsCountsAndAReplySettlesItsRequest) {
  Completions c;
  c.sent();
  c.sent();
  c.sent();
  c.acked(1, 1);
  c.published(2, Status(), 3, 2, 1);
  c.settled();  // request 3's reply came
  EXPECT_EQ(c.inFlight(), 0u);
  Completion done;
  done.matched = 9;  // a reused Completion: an ack's counts are zero
  c.takeFront(done);
  EXPECT_EQ(done.msgId, 1u);
  EXPECT_EQ(done.matched, 0u);
  c.takeFront(done);
  EXPECT_EQ(done.msgId, 2u);
  EXPECT_TRUE(done.status.ok());
  EXPECT_EQ(done.matched, 3u);
  EXPECT_EQ(done.taken, 2u);
  EXPECT_EQ(done.dropped, 1u);
  EXPECT_TRUE(c.empty()) << "a request answered by its reply has no completion";
}

}  // namespace
}  // namespace rdmamsg::client
