// Inbound: a peer's message records reassembled in sequence (daemon/peer/inbound.h).
#include "daemon/peer/inbound.h"

#include <gtest/gtest.h>

#include <string>

namespace rdmamsg::peer {
namespace {

using Kind = Inbound::Result::Kind;

class InboundTest : public ::testing::Test {
 protected:
  config::Config cfg;
  Inbound in{cfg};
  std::vector<std::string> keep;  // payload storage for the records

  void SetUp() override { cfg.maxMessageSize = 100; }

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
  cfg.maxMessageSize = 4;
  EXPECT_EQ(in.onRecord(whole(1, "12345")).kind, Kind::kTooLarge);
  cfg.maxMessageSize = 5;
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
