// Confirmations: the outcomes a node owes its peer, in ranges, written when
// due (daemon/peer/confirmations.h), against a link that records what it is given.
#include "daemon/peer/confirmations.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace rdmamsg::peer {
namespace {

using Written = std::tuple<uint64_t, uint64_t, Errc>;

// Batches with room for `perBatch` confirm records; `batches` of them.
struct FakeLink {
  struct Batch {
    FakeLink* link;
    size_t room() const { return link->room; }
    void addConfirm(uint64_t first, uint64_t last, uint16_t errc) {
      link->written.emplace_back(first, last, static_cast<Errc>(errc));
      link->room -= kConfirmRecordSize;
    }
  };
  size_t perBatch = 2;
  int batches = 100;
  bool open = false;
  size_t room = 0;
  int sealed = 0;
  std::vector<Written> written;
  Batch b{this};

  bool hasOpenBatch() const { return open; }
  bool openBatch(bool) {
    if (open) return true;
    if (batches == 0) return false;
    batches--;
    open = true;
    room = perBatch * kConfirmRecordSize;
    return true;
  }
  Batch& batch() { return b; }
  void sealBatch() { open = false, sealed++; }
};

TEST(Confirmations, ARunWithOneOutcomeIsOneRecordAndAnotherOutcomeStartsANewOne) {
  Confirmations c;
  FakeLink link;
  for (uint64_t seq = 1; seq <= 3; seq++)
    c.add(seq, 1, Errc::ok, true);
  c.add(4, 1, Errc::busy, true);
  c.add(5, 2, Errc::ok, true);
  EXPECT_TRUE(c.write(link));
  EXPECT_EQ(link.written,
            (std::vector<Written>{{1, 3, Errc::ok}, {4, 4, Errc::busy}, {5, 6, Errc::ok}}));
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(link.sealed, 1) << "two records fit a batch: the third went in a second one";
}

TEST(Confirmations, WhatListenersTookWaitsForABatchThatGoesAnyway) {
  Confirmations c;
  FakeLink link;
  EXPECT_FALSE(c.addTaken(1, 1, Errc::ok, 64, 4 << 20)) << "one small message is not due";
  EXPECT_TRUE(c.write(link));
  EXPECT_TRUE(link.written.empty()) << "written without company";
  EXPECT_FALSE(c.empty());
  link.openBatch(true);  // a reply goes: the confirmation rides with it
  EXPECT_TRUE(c.write(link));
  EXPECT_EQ(link.written, (std::vector<Written>{{1, 1, Errc::ok}}));
}

TEST(Confirmations, WhatListenersTookIsDueAtAQuarterWindowOr128MessagesOrWhenTheTimerSays) {
  Confirmations bytes;
  EXPECT_FALSE(bytes.addTaken(1, 1, Errc::ok, 999, 4000));
  EXPECT_TRUE(bytes.addTaken(2, 1, Errc::ok, 1, 4000)) << "a quarter of the window";
  Confirmations count;
  for (uint64_t seq = 1; seq < Confirmations::kLazyMessages; seq++)
    ASSERT_FALSE(count.addTaken(seq, 1, Errc::ok, 1, 1u << 30)) << seq;
  EXPECT_TRUE(count.addTaken(Confirmations::kLazyMessages, 1, Errc::ok, 1, 1u << 30));
  Confirmations unknownSize;
  EXPECT_TRUE(unknownSize.addTaken(1, 1, Errc::ok, 0, 1u << 30)) << "no byte count: at once";
  Confirmations timer;
  EXPECT_FALSE(timer.addTaken(1, 1, Errc::ok, 1, 1u << 30));
  timer.markDue();
  FakeLink link;
  EXPECT_TRUE(timer.write(link));
  EXPECT_EQ(link.written.size(), 1u);
}

TEST(Confirmations, WhatDoesNotFitTheBatchesOnHandStaysDueForTheNextBatch) {
  Confirmations c;
  FakeLink link;
  link.batches = 1;
  for (uint64_t seq = 1; seq <= 6; seq += 2)
    c.add(seq, 1, Errc::ok, true);  // three separate ranges
  EXPECT_FALSE(c.write(link)) << "one batch holds two";
  EXPECT_EQ(link.written.size(), 2u);
  EXPECT_TRUE(c.due()) << "what was left must go as soon as a batch can be had, not wait "
                          "for company (the sender may be stalled on these very confirmations)";
  link.batches = 1;
  link.open = false;
  EXPECT_TRUE(c.write(link));
  EXPECT_EQ(link.written.size(), 3u);
  EXPECT_EQ(std::get<0>(link.written[2]), 5u);
}

TEST(Confirmations, TakenOutcomesThatRodeAlongButDidNotFitStayDue) {
  Confirmations c;
  FakeLink link;
  link.batches = 1;
  link.perBatch = 1;
  EXPECT_FALSE(c.addTaken(1, 1, Errc::ok, 1, 1u << 30));
  EXPECT_FALSE(c.addTaken(3, 1, Errc::ok, 1, 1u << 30));
  link.openBatch(true);  // a batch goes anyway, with room for one record
  EXPECT_FALSE(c.write(link));
  EXPECT_TRUE(c.due());
}

TEST(Confirmations, ANewConnectionOwesNothing) {
  Confirmations c;
  c.add(1, 5, Errc::ok, true);
  c.clear();
  EXPECT_TRUE(c.empty());
  EXPECT_FALSE(c.due());
  EXPECT_FALSE(c.addTaken(1, 1, Errc::ok, 1, 1u << 30)) << "the lazy count started again";
}

}  // namespace
}  // namespace rdmamsg::peer
