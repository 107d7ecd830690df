// OutcomeLog: the outcomes a node gave a peer's messages, kept for a
// resume until the peer has settled them (daemon/peer/resume.h).
#include "daemon/peer/resume.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace rdmamsg::peer {
namespace {

using Ranges = std::vector<std::tuple<uint64_t, uint64_t, uint16_t>>;

Ranges rangesOf(const OutcomeLog& log) {
  Ranges out;
  log.forEach(
      [&](uint64_t first, uint64_t last, uint16_t errc) { out.emplace_back(first, last, errc); });
  return out;
}

TEST(OutcomeLog, OutcomesInAnyOrderJoinIntoRangesOfOneOutcome) {
  OutcomeLog log;
  log.add(1, 1, 0);
  log.add(3, 4, 0);  // 2 is still with its listener
  log.add(6, 6, 2);  // unknown_service
  EXPECT_EQ(rangesOf(log), (Ranges{{1, 1, 0}, {3, 4, 0}, {6, 6, 2}}));
  log.add(2, 2, 0);
  log.add(5, 5, 0);
  EXPECT_EQ(rangesOf(log), (Ranges{{1, 5, 0}, {6, 6, 2}}))
      << "a range joins its neighbours of the same outcome only";
  log.add(7, 7, 2);
  log.add(3, 3, 0);  // logged already: nothing changes
  EXPECT_EQ(rangesOf(log), (Ranges{{1, 5, 0}, {6, 7, 2}}));
  EXPECT_EQ(log.ranges(), 2u);
}

TEST(OutcomeLog, WhatThePeerSettledIsDropped) {
  OutcomeLog log;
  log.add(1, 10, 0);
  log.add(11, 11, 3);
  log.add(14, 20, 0);
  log.dropBelow(5);
  EXPECT_EQ(rangesOf(log), (Ranges{{5, 10, 0}, {11, 11, 3}, {14, 20, 0}}));
  log.dropBelow(12);
  EXPECT_EQ(rangesOf(log), (Ranges{{14, 20, 0}}));
  log.dropBelow(21);
  EXPECT_EQ(log.ranges(), 0u);
  log.add(21, 21, 0);
  log.clear();
  EXPECT_EQ(log.ranges(), 0u);
}

}  // namespace
}  // namespace rdmamsg::peer
