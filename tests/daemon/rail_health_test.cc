// RailHealth (daemon/peer/rails.h): a rail's health from the failures and
// successes over it, which rails are probed, and which one active-standby
// moves back to.
#include <gtest/gtest.h>

#include "daemon/peer/rails.h"

namespace rdmamsg::peer {
namespace {

TEST(RailHealth, EveryRailStartsHealthyAndStandsBy) {
  RailHealth h;
  h.reset(2);
  EXPECT_TRUE(h.healthy(0));
  EXPECT_TRUE(h.healthy(1));
  EXPECT_EQ(h.state(0, 0), RailState::kActive);
  EXPECT_EQ(h.state(1, 0), RailState::kStandby);
  EXPECT_EQ(h.state(1, std::nullopt), RailState::kStandby);
  EXPECT_FALSE(h.wantsProbe(1, 0)) << "a healthy standby rail is not probed every interval";
  EXPECT_TRUE(h.wantsProbe(1, 0, RailHealth::kStandbyProbeEvery)) << "but every tenth";
  EXPECT_FALSE(h.wantsProbe(1, 0, RailHealth::kStandbyProbeEvery + 1));
  EXPECT_FALSE(h.wantsProbe(0, 0, RailHealth::kStandbyProbeEvery)) << "never the rail in use";
  EXPECT_FALSE(h.healthy(2)) << "no such rail";
}

TEST(RailHealth, AFailureMarksTheRailDownUntilASuccess) {
  RailHealth h;
  h.reset(2);
  h.failed(0, "connection lost: RDMA port down");
  EXPECT_FALSE(h.healthy(0));
  EXPECT_EQ(h.at(0).health, kMaxHealth - kHealthStep);
  EXPECT_EQ(h.at(0).failures, 1u);
  EXPECT_EQ(h.at(0).lastFailure, "connection lost: RDMA port down");
  EXPECT_EQ(h.state(0, 1), RailState::kDown);
  EXPECT_TRUE(h.wantsProbe(0, 1));
  EXPECT_FALSE(h.wantsProbe(0, 0)) << "the rail in use is not probed";
  h.succeeded(0);
  EXPECT_TRUE(h.healthy(0));
  EXPECT_EQ(h.state(0, 1), RailState::kStandby);
  EXPECT_FALSE(h.wantsProbe(0, 1));
}

TEST(RailHealth, ARailThatKeptFailingNeedsAsManySuccessesBack) {
  RailHealth h;
  h.reset(2);
  for (int i = 0; i < 15; i++)
    h.failed(0, "probe: no answer");
  EXPECT_EQ(h.at(0).health, 0) << "never below 0";
  for (int i = 0; i < 9; i++) {
    h.succeeded(0);
    EXPECT_FALSE(h.healthy(0)) << i;
    EXPECT_EQ(h.state(0, 1), RailState::kDegraded);
    EXPECT_TRUE(h.wantsProbe(0, 1)) << "a degraded rail is still probed";
  }
  h.succeeded(0);
  EXPECT_TRUE(h.healthy(0));
  h.succeeded(0);
  EXPECT_EQ(h.at(0).health, kMaxHealth) << "never above the maximum";
}

TEST(RailHealth, TheSessionGoesBackToTheFirstHealthyRailBeforeTheOneInUse) {
  RailHealth h;
  h.reset(3);
  EXPECT_FALSE(h.preferredOver(0)) << "rail 0 is first already";
  EXPECT_EQ(h.preferredOver(2), 0u);
  h.failed(0, "lost");
  EXPECT_EQ(h.preferredOver(2), 1u);
  EXPECT_FALSE(h.preferredOver(1)) << "rail 0 is not healthy yet";
  h.succeeded(0);
  EXPECT_EQ(h.preferredOver(1), 0u);
}

TEST(RailHealth, ALanePrefersItsOwnRailThenTheOnesAfterIt) {
  RailHealth h;
  h.reset(3);
  EXPECT_FALSE(h.preferredOver(1, 1)) << "lane 1 is on its own rail";
  EXPECT_EQ(h.preferredOver(0, 1), 1u) << "rail 0 comes last for lane 1";
  EXPECT_EQ(h.preferredOver(2, 1), 1u);
  h.failed(1, "lost");
  EXPECT_EQ(h.preferredOver(0, 1), 2u) << "its own rail down: the next one";
  EXPECT_FALSE(h.preferredOver(2, 1));
  h.succeeded(1);
  EXPECT_EQ(h.preferredOver(2, 1), 1u);
}

TEST(RailHealth, TrafficAddsUp) {
  RailTraffic a{1, 2, 3, 4, 5, 6, 7};
  a += RailTraffic{10, 20, 30, 40, 50, 60, 70};
  EXPECT_EQ(a.batchesSent, 11u);
  EXPECT_EQ(a.batchesReceived, 22u);
  EXPECT_EQ(a.bytesSent, 33u);
  EXPECT_EQ(a.bytesReceived, 44u);
  EXPECT_EQ(a.messagesReceived, 55u);
  EXPECT_EQ(a.messagesConfirmed, 66u);
  EXPECT_EQ(a.messagesResent, 77u);
}

}  // namespace
}  // namespace rdmamsg::peer
