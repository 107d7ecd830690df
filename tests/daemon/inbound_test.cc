// Inbound: a peer's message records reassembled in sequence (daemon/peer/inbound.h).
#include "daemon/peer/inbound.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace rdmamsg::peer {
namespace {

using Kind = Inbound::Result::Kind;

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
    ASSERT_EQ(m.kind, Kind::kMessage);
    EXPECT_EQ(m.seq, seq);
    EXPECT_EQ(m.src, "src");
    EXPECT_EQ(m.dst, "dst");
    EXPECT_EQ(text(m.payload), "m" + std::to_string(seq));
  }
  EXPECT_FALSE(in.midMessage());
}

TEST_F(InboundTest, FragmentsAreReassembledIntoOneMessage) {
  EXPECT_EQ(in.onRecord(fragment(1, kFirstFragment, "abc", 9)).kind, Kind::kMore);
  EXPECT_TRUE(in.midMessage());
  EXPECT_EQ(in.onRecord(fragment(1, 0, "def")).kind, Kind::kMore);
  auto m = in.onRecord(fragment(1, kLastFragment, "ghi"));
  ASSERT_EQ(m.kind, Kind::kMessage);
  EXPECT_EQ(m.seq, 1u);
  EXPECT_EQ(m.dst, "dst");
  EXPECT_EQ(text(m.payload), "abcdefghi");
  EXPECT_FALSE(in.midMessage());
  EXPECT_EQ(in.onRecord(whole(2, "next")).kind, Kind::kMessage);
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
  EXPECT_EQ(in.onRecord(whole(1, "small")).room, nullptr) << "a whole message needs no room";
  EXPECT_TRUE(asked.empty());

  EXPECT_EQ(in.onRecord(fragment(2, kFirstFragment, "abc", 9)).kind, Kind::kMore);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], std::make_pair(std::string("src>dst"), uint64_t{9}));
  EXPECT_EQ(in.onRecord(fragment(2, 0, "def")).kind, Kind::kMore);
  auto m = in.onRecord(fragment(2, kLastFragment, "ghi"));
  ASSERT_EQ(m.kind, Kind::kMessage);
  ASSERT_NE(m.room, nullptr);
  EXPECT_EQ(m.payload.data(), m.room->payload().data()) << "the payload lies in the room";
  EXPECT_EQ(text(m.payload), "abcdefghi");
  in.dropRoom();
  EXPECT_EQ(alive, 0);

  sizeGiven = 4;  // not the message's size: the own buffer instead
  EXPECT_EQ(in.onRecord(fragment(3, kFirstFragment, "abc", 6)).kind, Kind::kMore);
  m = in.onRecord(fragment(3, kLastFragment, "def"));
  ASSERT_EQ(m.kind, Kind::kMessage);
  EXPECT_EQ(m.room, nullptr);
  EXPECT_EQ(text(m.payload), "abcdef");

  sizeGiven = 0;
  EXPECT_EQ(in.onRecord(fragment(4, kFirstFragment, "abc", 5)).kind, Kind::kMore);
  EXPECT_EQ(in.onRecord(fragment(4, kLastFragment, "defgh")).kind, Kind::kViolation);
  in.reset();
  EXPECT_EQ(alive, 0) << "a connection's end gives the room back";
}

TEST_F(InboundTest, AMessageOverTheLimitIsAnsweredTooLargeAndNothingOfItIsKept) {
  auto m = in.onRecord(whole(1, std::string(101, 'x')));
  EXPECT_EQ(m.kind, Kind::kTooLarge);
  EXPECT_EQ(m.seq, 1u);
  // Announced over the limit: its fragments are skipped, the last answers.
  EXPECT_EQ(in.onRecord(fragment(2, kFirstFragment, "abc", 500)).kind, Kind::kMore);
  EXPECT_EQ(in.onRecord(fragment(2, 0, std::string(90, 'y'))).kind, Kind::kMore);
  m = in.onRecord(fragment(2, kLastFragment, "z"));
  EXPECT_EQ(m.kind, Kind::kTooLarge);
  EXPECT_EQ(m.seq, 2u);
  EXPECT_EQ(in.onRecord(whole(3, "fine")).kind, Kind::kMessage) << "the connection goes on";
}

TEST_F(InboundTest, TheLimitIsReadAtEachMessageSoAReloadApplies) {
  cfg.buffers.maxMessageSize = 4;
  EXPECT_EQ(in.onRecord(whole(1, "12345")).kind, Kind::kTooLarge);
  cfg.buffers.maxMessageSize = 5;
  EXPECT_EQ(in.onRecord(whole(2, "12345")).kind, Kind::kMessage);
}

TEST_F(InboundTest, OutOfSequenceRecordsAreViolations) {
  EXPECT_EQ(in.onRecord(whole(2, "skipped one")).kind, Kind::kViolation);
  Inbound b{cfg};
  EXPECT_EQ(b.onRecord(fragment(1, 0, "no first")).kind, Kind::kViolation);
  Inbound c{cfg};
  ASSERT_EQ(c.onRecord(fragment(1, kFirstFragment, "ab", 4)).kind, Kind::kMore);
  EXPECT_EQ(c.onRecord(whole(2, "interleaved")).kind, Kind::kViolation);
  Inbound d{cfg};
  ASSERT_EQ(d.onRecord(fragment(1, kFirstFragment, "ab", 4)).kind, Kind::kMore);
  EXPECT_EQ(d.onRecord(fragment(2, kLastFragment, "cd")).kind, Kind::kViolation)
      << "a fragment of another message";
}

TEST_F(InboundTest, FragmentsThatDoNotAddUpToTheAnnouncedLengthAreViolations) {
  EXPECT_EQ(in.onRecord(fragment(1, kFirstFragment, "abcdef", 4)).kind, Kind::kViolation)
      << "a first fragment longer than its message";
  Inbound b{cfg};
  ASSERT_EQ(b.onRecord(fragment(1, kFirstFragment, "ab", 4)).kind, Kind::kMore);
  EXPECT_EQ(b.onRecord(fragment(1, kLastFragment, "cde")).kind, Kind::kViolation);
  Inbound c{cfg};
  ASSERT_EQ(c.onRecord(fragment(1, kFirstFragment, "ab", 4)).kind, Kind::kMore);
  EXPECT_EQ(c.onRecord(fragment(1, kLastFragment, "c")).kind, Kind::kViolation)
      << "a message that ends short";
}

TEST_F(InboundTest, ANewConnectionStartsAtSequenceOneWithNothingPartlyReceived) {
  ASSERT_EQ(in.onRecord(whole(1, "a")).kind, Kind::kMessage);
  ASSERT_EQ(in.onRecord(fragment(2, kFirstFragment, "ab", 4)).kind, Kind::kMore);
  in.reset();
  EXPECT_FALSE(in.midMessage());
  EXPECT_EQ(in.onRecord(whole(1, "again")).kind, Kind::kMessage);
}

}  // namespace
}  // namespace rdmamsg::peer
