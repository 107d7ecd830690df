// Inbound: a peer's message records reassembled in sequence (daemon/peer/inbound.h).
#include "daemon/peer/inbound.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace rdmamsg::peer {
namespace {

// What a record made: Inbound::Part's kinds, or a violation (an error).
enum class Kind { kMore, kMessage, kTooLarge, kViolation };
Kind kindOf(const Result<Inbound::Part>& r) {
  if (!r.ok()) return Kind::kViolation;
  switch (r->kind) {
    case Inbound::Part::Kind::kMore:
      return Kind::kMore;
    case Inbound::Part::Kind::kMessage:
      return Kind::kMessage;
    case Inbound::Part::Kind::kTooLarge:
      return Kind::kTooLarge;
  }
  return Kind::kViolation;
}

class InboundTest : public ::testing::Test {
 protected:
  config::Config cfg;
  Inbound in{cfg};
  std::vector<std::string> keep;  // payload storage for the records

  void SetUp() override { cfg.buffers.maxMessageSize = 100; }

  Record fragment(uint64_t seq, uint8_t flags, const std::string& bytes, uint64_t total = 0) {
    keep.push_back(bytes);
    Record r{};
    r.type = RecordType::kMessage;
    r.flags = flags;
    r.seq = seq;
    r.srcService = "src";
    r.dstService = "dst";
    r.totalLength = total;
    r.payload = std::as_bytes(std::span(keep.back()));
    return r;
  }
  Record whole(uint64_t seq, const std::string& bytes) {
    return fragment(seq, kFirstFragment | kLastFragment, bytes);
  }
  static std::string text(std::span<const std::byte> b) {
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
};

TEST_F(InboundTest, WholeMessagesComeOutInSequenceWithTheirNames) {
  for (uint64_t seq = 1; seq <= 3; seq++) {
    auto m = in.onRecord(whole(seq, "m" + std::to_string(seq)));
    ASSERT_EQ(kindOf(m), Kind::kMessage);
    EXPECT_EQ(m->seq, seq);
    EXPECT_EQ(m->src, "src");
    EXPECT_EQ(m->dst, "dst");
    EXPECT_EQ(text(m->payload), "m" + std::to_string(seq));
  }
  EXPECT_FALSE(in.midMessage());
}

TEST_F(InboundTest, FragmentsAreReassembledIntoOneMessage) {
  EXPECT_EQ(kindOf(in.onRecord(fragment(1, kFirstFragment, "abc", 9))), Kind::kMore);
  EXPECT_TRUE(in.midMessage());
  EXPECT_EQ(kindOf(in.onRecord(fragment(1, 0, "def"))), Kind::kMore);
  auto m = in.onRecord(fragment(1, kLastFragment, "ghi"));
  ASSERT_EQ(kindOf(m), Kind::kMessage);
  EXPECT_EQ(m->seq, 1u);
  EXPECT_EQ(m->dst, "dst");
  EXPECT_EQ(text(m->payload), "abcdefghi");
  EXPECT_FALSE(in.midMessage());
  EXPECT_EQ(kindOf(in.onRecord(whole(2, "next"))), Kind::kMessage);
}

// A room offered at the first fragment (the listener's delivery block):
// every fragment is written there, the message comes out in it, and the
// room is given back after; a room of another size is not used, and a
// fragment that overruns the announced length never reaches the room.
struct TestRoom : DeliveryRoom {
  explicit TestRoom(size_t n, int* count) : bytes(n), alive(count) { ++*alive; }
  ~TestRoom() override { --*alive; }
  std::span<std::byte> payload() override { return bytes; }
  std::vector<std::byte> bytes;
  int* alive;
};

TEST_F(InboundTest, FragmentsArePutTogetherInTheRoomTheListenerOffers) {
  int alive = 0;
  std::vector<std::pair<std::string, uint64_t>> asked;
  uint64_t sizeGiven = 0;  // 0: the size asked for
  in.setRoomSource([&](std::string_view src, std::string_view dst, uint64_t total) {
    asked.emplace_back(std::string(src) + ">" + std::string(dst), total);
    return std::make_unique<TestRoom>(sizeGiven != 0 ? sizeGiven : total, &alive);
  });
  EXPECT_EQ(in.onRecord(whole(1, "small"))->room, nullptr) << "a whole message needs no room";
  EXPECT_TRUE(asked.empty());

  EXPECT_EQ(kindOf(in.onRecord(fragment(2, kFirstFragment, "abc", 9))), Kind::kMore);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], std::make_pair(std::string("src>dst"), uint64_t{9}));
  EXPECT_EQ(kindOf(in.onRecord(fragment(2, 0, "def"))), Kind::kMore);
  auto m = in.onRecord(fragment(2, kLastFragment, "ghi"));
  ASSERT_EQ(kindOf(m), Kind::kMessage);
  ASSERT_NE(m->room, nullptr);
  EXPECT_EQ(m->payload.data(), m->room->payload().data()) << "the payload lies in the room";
  EXPECT_EQ(text(m->payload), "abcdefghi");
  in.dropRoom();
  EXPECT_EQ(alive, 0);

  sizeGiven = 4;  // not the message's size: the own buffer instead
  EXPECT_EQ(kindOf(in.onRecord(fragment(3, kFirstFragment, "abc", 6))), Kind::kMore);
  m = in.onRecord(fragment(3, kLastFragment, "def"));
  ASSERT_EQ(kindOf(m), Kind::kMessage);
  EXPECT_EQ(m->room, nullptr);
  EXPECT_EQ(text(m->payload), "abcdef");

  sizeGiven = 0;
  EXPECT_EQ(kindOf(in.onRecord(fragment(4, kFirstFragment, "abc", 5))), Kind::kMore);
  EXPECT_EQ(kindOf(in.onRecord(fragment(4, kLastFragment, "defgh"))), Kind::kViolation);
  in.reset();
  EXPECT_EQ(alive, 0) << "a connection's end gives the room back";
}

TEST_F(InboundTest, AMessageOverTheLimitIsAnsweredTooLargeAndNothingOfItIsKept) {
  auto m = in.onRecord(whole(1, std::string(101, 'x')));
  EXPECT_EQ(kindOf(m), Kind::kTooLarge);
  EXPECT_EQ(m->seq, 1u);
  // Announced over the limit: its fragments are skipped, the last answers.
  EXPECT_EQ(kindOf(in.onRecord(fragment(2, kFirstFragment, "abc", 500))), Kind::kMore);
  EXPECT_EQ(kindOf(in.onRecord(fragment(2, 0, std::string(90, 'y')))), Kind::kMore);
  m = in.onRecord(fragment(2, kLastFragment, "z"));
  EXPECT_EQ(kindOf(m), Kind::kTooLarge);
  EXPECT_EQ(m->seq, 2u);
  EXPECT_EQ(kindOf(in.onRecord(whole(3, "fine"))), Kind::kMessage) << "the connection goes on";
}

TEST_F(InboundTest, TheLimitIsReadAtEachMessageSoAReloadApplies) {
  cfg.buffers.maxMessageSize = 4;
  EXPECT_EQ(kindOf(in.onRecord(whole(1, "12345"))), Kind::kTooLarge);
  cfg.buffers.maxMessageSize = 5;
  EXPECT_EQ(kindOf(in.onRecord(whole(2, "12345"))), Kind::kMessage);
}

TEST_F(InboundTest, OutOfSequenceRecordsAreViolations) {
  EXPECT_EQ(kindOf(in.onRecord(whole(2, "skipped one"))), Kind::kViolation);
  Inbound b{cfg};
  EXPECT_EQ(kindOf(b.onRecord(fragment(1, 0, "no first"))), Kind::kViolation);
  Inbound c{cfg};
  ASSERT_EQ(kindOf(c.onRecord(fragment(1, kFirstFragment, "ab", 4))), Kind::kMore);
  EXPECT_EQ(kindOf(c.onRecord(whole(2, "interleaved"))), Kind::kViolation);
  Inbound d{cfg};
  ASSERT_EQ(kindOf(d.onRecord(fragment(1, kFirstFragment, "ab", 4))), Kind::kMore);
  EXPECT_EQ(kindOf(d.onRecord(fragment(2, kLastFragment, "cd"))), Kind::kViolation)
      << "a fragment of another message";
}

TEST_F(InboundTest, FragmentsThatDoNotAddUpToTheAnnouncedLengthAreViolations) {
  EXPECT_EQ(kindOf(in.onRecord(fragment(1, kFirstFragment, "abcdef", 4))), Kind::kViolation)
      << "a first fragment longer than its message";
  Inbound b{cfg};
  ASSERT_EQ(kindOf(b.onRecord(fragment(1, kFirstFragment, "ab", 4))), Kind::kMore);
  EXPECT_EQ(kindOf(b.onRecord(fragment(1, kLastFragment, "cde"))), Kind::kViolation);
  Inbound c{cfg};
  ASSERT_EQ(kindOf(c.onRecord(fragment(1, kFirstFragment, "ab", 4))), Kind::kMore);
  EXPECT_EQ(kindOf(c.onRecord(fragment(1, kLastFragment, "c"))), Kind::kViolation)
      << "a message that ends short";
}

TEST_F(InboundTest, ANewConnectionStartsAtSequenceOneWithNothingPartlyReceived) {
  ASSERT_EQ(kindOf(in.onRecord(whole(1, "a"))), Kind::kMessage);
  ASSERT_EQ(kindOf(in.onRecord(fragment(2, kFirstFragment, "ab", 4))), Kind::kMore);
  in.reset();
  EXPECT_FALSE(in.midMessage());
  EXPECT_EQ(kindOf(in.onRecord(whole(1, "again"))), Kind::kMessage);
}

// A violation is the peer's: protocol_error naming it, the connection's
// close reason (the integration tests grep the log for it).
TEST_F(InboundTest, AViolationIsAProtocolErrorNamingIt) {
  const Result<Inbound::Part> m = in.onRecord(whole(2, "skipped one"));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status(), Status(Errc::protocol_error, "message out of sequence from peer"));
  ASSERT_EQ(kindOf(in.onRecord(whole(1, "a"))), Kind::kMessage);
  ASSERT_EQ(kindOf(in.onRecord(fragment(2, kFirstFragment, "ab", 4))), Kind::kMore);
  EXPECT_EQ(in.onRecord(fragment(2, kLastFragment, "cde")).status().message(),
            "fragments exceed the announced message length");
}

// A resume (resume.h): the point is the first message not received whole;
// a message partly received is forgotten and taken again from its first
// fragment, under its number.
TEST_F(InboundTest, AResumeStartsAtTheFirstMessageNotReceivedWhole) {
  ASSERT_EQ(kindOf(in.onRecord(whole(1, "one"))), Kind::kMessage);
  EXPECT_EQ(in.resumePoint(), 2u);
  ASSERT_EQ(kindOf(in.onRecord(fragment(2, kFirstFragment, "tw", 3))), Kind::kMore);
  EXPECT_TRUE(in.midMessage());
  EXPECT_EQ(in.resumePoint(), 2u) << "message 2 is not whole";
  in.dropPartial();
  EXPECT_FALSE(in.midMessage());
  EXPECT_EQ(in.resumePoint(), 2u);
  EXPECT_EQ(kindOf(in.onRecord(whole(3, "three"))), Kind::kViolation)
      << "message 2 comes again before 3";
  in.dropPartial();  // (nothing partly received: changes nothing)
  ASSERT_EQ(kindOf(in.onRecord(fragment(2, kFirstFragment, "tw", 3))), Kind::kMore);
  auto m = in.onRecord(fragment(2, kLastFragment, "o"));
  ASSERT_EQ(kindOf(m), Kind::kMessage);
  EXPECT_EQ(m->seq, 2u);
  EXPECT_EQ(text(m->payload), "two") << "nothing of the first attempt is left in it";
  EXPECT_EQ(in.resumePoint(), 3u);
}

TEST_F(InboundTest, AResumeTakesAgainAMessageThatWasBeingSkippedAsTooLarge) {
  ASSERT_EQ(kindOf(in.onRecord(fragment(1, kFirstFragment, "x", 1000))), Kind::kMore);
  EXPECT_EQ(in.resumePoint(), 1u) << "its answer (too_large) is not given yet";
  in.dropPartial();
  ASSERT_EQ(kindOf(in.onRecord(fragment(1, kFirstFragment, "x", 1000))), Kind::kMore);
  auto m = in.onRecord(fragment(1, kLastFragment, "y"));
  ASSERT_EQ(kindOf(m), Kind::kTooLarge);
  EXPECT_EQ(m->seq, 1u);
}

}  // namespace
}  // namespace rdmamsg::peer
