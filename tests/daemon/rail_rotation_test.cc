// RailRotation (daemon/peer/redial.h): which rail a peer dials, and when a
// failure is retried at once on the next rail or waits for the backoff.
#include <gtest/gtest.h>

#include "daemon/peer/redial.h"

namespace rdmamsg::peer {
namespace {

TEST(RailRotation, OneRailAlwaysWaitsForTheBackoff) {
  RailRotation r;
  for (int i = 0; i < 5; i++) {
    EXPECT_FALSE(r.failed(1));
    EXPECT_EQ(r.current(), 0u);
  }
}

TEST(RailRotation, AFailureMovesToTheNextRailAtOnceUntilEveryRailFailed) {
  RailRotation r;
  EXPECT_EQ(r.current(), 0u);
  EXPECT_TRUE(r.failed(3));  // rail 0 lost: rail 1 now
  EXPECT_EQ(r.current(), 1u);
  EXPECT_TRUE(r.failed(3));  // rail 1 did not connect: rail 2 now
  EXPECT_EQ(r.current(), 2u);
  EXPECT_FALSE(r.failed(3));  // every rail failed once: the backoff, then rail 0
  EXPECT_EQ(r.current(), 0u);
  EXPECT_TRUE(r.failed(3));  // a new round
  EXPECT_EQ(r.current(), 1u);
}

TEST(RailRotation, AConnectionMadeStartsTheRoundAgainOnItsRail) {
  RailRotation r;
  EXPECT_TRUE(r.failed(2));  // rail 0 lost
  r.connected();             // over rail 1
  EXPECT_EQ(r.current(), 1u);
  EXPECT_TRUE(r.failed(2));  // rail 1 lost later: rail 0 at once
  EXPECT_EQ(r.current(), 0u);
  EXPECT_FALSE(r.failed(2));
  EXPECT_EQ(r.current(), 1u);
}

TEST(RailRotation, NewRailsStartAtTheFirst) {
  RailRotation r;
  EXPECT_TRUE(r.failed(2));
  r.setHome(0, 2);
  EXPECT_EQ(r.current(), 0u);
  EXPECT_TRUE(r.failed(2));
}

TEST(RailRotation, ALaneStartsAtItsOwnRailAndWrapsAround) {
  RailRotation r;
  r.setHome(1, 3);
  EXPECT_EQ(r.current(), 1u);
  EXPECT_TRUE(r.failed(3));
  EXPECT_EQ(r.current(), 2u);
  EXPECT_TRUE(r.failed(3));
  EXPECT_EQ(r.current(), 0u) << "past the last rail: the first";
  EXPECT_FALSE(r.failed(3)) << "every rail failed once: the backoff";
  r.setHome(2, 2);
  EXPECT_EQ(r.current(), 0u) << "a home the two nodes do not share: the first rail";
}

TEST(RailRotation, AMoveDialsThatRailWithAFullRoundAhead) {
  RailRotation r;
  EXPECT_TRUE(r.failed(2));  // on rail 1 now
  r.moveTo(0);               // rail 0 healthy again: the session moves back
  EXPECT_EQ(r.current(), 0u);
  EXPECT_TRUE(r.failed(2)) << "its failure still moves on at once";
  EXPECT_EQ(r.current(), 1u);
}

}  // namespace
}  // namespace rdmamsg::peer
