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

// A rail that answers probes but fails as soon as the session is back on
// it: each failback that fails holds it down twice as long (from ten probe
// intervals, at most 32 times that), so the session is not moved back and
// forth every heartbeat_timeout; a failback that holds clears it.
TEST(RailHealth, AFailbackThatFailsHoldsTheRailDownLongerEachTime) {
  using namespace std::chrono_literals;
  RailHealth h;
  h.reset(2, 100ms);  // probation and first hold-down: 1 s
  auto t = RailHealth::Clock::now();
  h.failed(0, "lost", t);
  EXPECT_EQ(h.heldDownFor(0, t), 0ms) << "a failover alone holds nothing down";
  h.succeeded(0, t);
  ASSERT_EQ(h.preferredOver(1, 0, t), 0u);
  std::chrono::milliseconds expected = 1s;
  for (int round = 1; round <= 8; round++) {
    h.movedBack(0, t);
    t += 300ms;  // fails again within its probation
    EXPECT_TRUE(h.failed(0, "lost again", t)) << round;
    EXPECT_EQ(h.at(0).failbacksFailed, static_cast<uint64_t>(round));
    EXPECT_EQ(h.heldDownFor(0, t), expected) << round;
    h.succeeded(0, t);  // its probes answer at once
    EXPECT_TRUE(h.healthy(0));
    EXPECT_FALSE(h.preferredOver(1, 0, t)) << "held down, round " << round;
    EXPECT_FALSE(h.preferredOver(1, 0, t + expected - 1ms)) << round;
    t += expected;
    EXPECT_EQ(h.preferredOver(1, 0, t), 0u) << "the hold-down is over, round " << round;
    expected = std::min(expected * 2, std::chrono::milliseconds(32s));
  }
  EXPECT_EQ(h.at(0).holdDown, 32s) << "at most 32 times the first";
  EXPECT_EQ(h.at(0).failbacks, 8u);

  // A failback that carries the session through its probation clears it.
  h.movedBack(0, t);
  t += 1s;
  h.succeeded(0, t);
  EXPECT_EQ(h.at(0).holdDown, 0ms);
  t += 5s;
  EXPECT_FALSE(h.failed(0, "lost much later", t)) << "a failure after the probation";
  EXPECT_EQ(h.heldDownFor(0, t), 0ms);
  h.movedBack(0, t);
  EXPECT_TRUE(h.failed(0, "lost at once", t + 10ms));
  EXPECT_EQ(h.heldDownFor(0, t + 10ms), 1s) << "starts again from the first hold-down";
  EXPECT_EQ(h.state(0, 1), RailState::kDown);
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
