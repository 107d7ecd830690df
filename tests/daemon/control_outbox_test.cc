// ControlOutbox: the subject records a node owes its peer (interest and
// publish results), and between peers that acknowledge results the ones
// kept until the peer has read them (daemon/peer/control_outbox.h), against
// a link that records what it is given.
#include "daemon/peer/control_outbox.h"

#include <gtest/gtest.h>

#include <vector>

namespace rdmamsg::peer {
namespace {

// Batches with room for everything; records the results' tokens.
struct FakeLink {
  struct Batch {
    FakeLink* link;
    size_t room() const { return 1 << 20; }
    void addInterest(InterestOp, std::string_view, std::string_view) { link->interest++; }
    void addPubResult(uint64_t token, const PubResultBody&) { link->results.push_back(token); }
  };
  Batch b{this};
  int interest = 0;
  std::vector<uint64_t> results;
  bool openBatch(bool) { return true; }
  Batch& batch() { return b; }
  void sealBatch() {}
};

PubResultBody body(uint32_t matched) {
  return PubResultBody{matched, matched, 0, 0};
}

TEST(ControlOutbox, ResultsThePeerHadNotReadGoAgainFirstOnTheNextConnection) {
  ControlOutbox o;
  FakeLink first;
  o.acknowledgeResults(true, false);
  for (uint64_t token = 1; token <= 4; token++)
    o.pubResult(token, body(1));
  ASSERT_TRUE(o.write(first));
  EXPECT_EQ(first.results, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(o.acknowledged(1));
  EXPECT_EQ(o.keptResults(), 3u) << "kept until the peer has read them";
  EXPECT_FALSE(o.acknowledged(5)) << "more read than were written";

  // The connection is lost; the peer had read two. A result owed meanwhile
  // waits, and nothing goes before the peer's count.
  o.pubResult(5, body(1));
  o.acknowledgeResults(true, true);
  FakeLink second;
  o.interest(InterestOp::kAdd, "", "a.>");
  ASSERT_TRUE(o.write(second));
  EXPECT_EQ(second.interest, 1) << "interest does not wait";
  EXPECT_TRUE(second.results.empty()) << "a result before the peer's count";
  EXPECT_TRUE(o.acknowledged(2));
  ASSERT_TRUE(o.write(second));
  EXPECT_EQ(second.results, (std::vector<uint64_t>{3, 4, 5})) << "again, then the new one";
  // Numbered again from the peer's count: 3, 4, 5 are its 3rd to 5th.
  EXPECT_TRUE(o.acknowledged(5));
  EXPECT_EQ(o.keptResults(), 0u);
  EXPECT_FALSE(o.acknowledged(6));
}

TEST(ControlOutbox, WithoutAcknowledgementsNothingIsKeptOrHeld) {
  ControlOutbox o;
  FakeLink link;
  o.acknowledgeResults(false, true);
  o.pubResult(7, body(2));
  ASSERT_TRUE(o.write(link));
  EXPECT_EQ(link.results, (std::vector<uint64_t>{7}));
  EXPECT_EQ(o.keptResults(), 0u);
  // A new session drops what was kept and numbers from 1 again.
  o.acknowledgeResults(true, false);
  o.pubResult(8, body(1));
  ASSERT_TRUE(o.write(link));
  o.clearResults();
  EXPECT_EQ(o.keptResults(), 0u);
  EXPECT_FALSE(o.acknowledged(1)) << "none written in the new session";
  EXPECT_TRUE(o.acknowledged(0));
}

}  // namespace
}  // namespace rdmamsg::peer
