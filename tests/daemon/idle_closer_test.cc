// IdleCloser (daemon/peer/idle_closer.h): the idle-close agreement of one
// connection — a request is accepted only when this node may agree and
// commits it to start no message; this node's own request is closed on an
// accept and forgotten on a refusal; answers without a request close the
// connection; an agreement the peer does not complete expires; every new
// connection starts a new agreement.
#include "daemon/peer/idle_closer.h"

#include <gtest/gtest.h>

#include <string>

namespace rdmamsg::peer {
namespace {

using namespace std::chrono_literals;
using Clock = IdleCloser::Clock;

TEST(IdleCloserTest, ARequestIsAcceptedOnlyWhenThisNodeMayAgree) {
  IdleCloser idle("test");
  const auto t0 = Clock::now();
  idle.reset(t0);
  idle.received(IdleClose::kRequest);
  EXPECT_EQ(idle.handle(false, t0).value(), IdleCloser::Decision::kGoOn);
  ASSERT_EQ(idle.answers().size(), 1u);
  EXPECT_EQ(idle.answers()[0], IdleClose::kRefuse);
  EXPECT_FALSE(idle.committed()) << "a refusal commits to nothing";
  idle.written(1);
  idle.received(IdleClose::kRequest);
  EXPECT_EQ(idle.handle(true, t0).value(), IdleCloser::Decision::kGoOn);
  ASSERT_EQ(idle.answers().size(), 1u);
  EXPECT_EQ(idle.answers()[0], IdleClose::kAccept);
  EXPECT_TRUE(idle.committed()) << "having agreed, this node starts no message";
  EXPECT_TRUE(idle.agreedToClose());
  EXPECT_EQ(idle.state(), IdleAgreement::kAgreed);
}

TEST(IdleCloserTest, ThisNodesRequestClosesOnAnAcceptAndIsForgottenOnARefusal) {
  IdleCloser idle("test");
  const auto t0 = Clock::now();
  idle.reset(t0);
  idle.asked(t0);
  EXPECT_TRUE(idle.committed());
  idle.received(IdleClose::kRefuse);
  EXPECT_EQ(idle.handle(true, t0 + 1s).value(), IdleCloser::Decision::kGoOn);
  EXPECT_FALSE(idle.committed());
  EXPECT_FALSE(idle.idleFor(500ms, t0 + 1s)) << "a refusal starts another idle period";
  EXPECT_TRUE(idle.idleFor(500ms, t0 + 1500ms));
  idle.asked(t0 + 2s);
  idle.received(IdleClose::kAccept);
  EXPECT_EQ(idle.handle(true, t0 + 2s).value(), IdleCloser::Decision::kClose);
  EXPECT_EQ(idle.state(), IdleAgreement::kClosing);
}

TEST(IdleCloserTest, AnAnswerWithoutARequestClosesTheConnection) {
  IdleCloser idle("test");
  idle.reset(Clock::now());
  idle.received(IdleClose::kAccept);
  const Result<IdleCloser::Decision> d = idle.handle(true, Clock::now());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Errc::protocol_error);
  EXPECT_NE(d.status().message().find("without a request"), std::string::npos);
}

TEST(IdleCloserTest, BothAskingAtOnceAgreeAndARefusalOfOursKeepsTheAgreement) {
  IdleCloser idle("test");
  const auto t0 = Clock::now();
  idle.reset(t0);
  idle.asked(t0);
  idle.received(IdleClose::kRequest);
  idle.received(IdleClose::kRefuse);  // the peer had asked too: it refuses ours
  EXPECT_EQ(idle.handle(true, t0).value(), IdleCloser::Decision::kGoOn);
  EXPECT_EQ(idle.state(), IdleAgreement::kAgreed);
  EXPECT_TRUE(idle.agreedToClose());
}

TEST(IdleCloserTest, AnAgreementNotCompletedExpiresAndANewConnectionStartsAfresh) {
  IdleCloser idle("test");
  const auto t0 = Clock::now();
  idle.reset(t0);
  idle.asked(t0);
  EXPECT_TRUE(idle.expire(1s, t0 + 500ms).ok());
  const Status expired = idle.expire(1s, t0 + 2s);
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.code(), Errc::timeout);
  EXPECT_EQ(idle.state(), IdleAgreement::kClosing);
  idle.reset(t0 + 3s);
  EXPECT_EQ(idle.state(), IdleAgreement::kNone);
  EXPECT_FALSE(idle.busy());
}

TEST(IdleCloserTest, ActivityRestartsTheIdlePeriod) {
  IdleCloser idle("test");
  const auto t0 = Clock::now();
  idle.reset(t0);
  idle.noteActivity(0, t0 + 1s);  // nothing new
  EXPECT_TRUE(idle.idleFor(1s, t0 + 1s));
  idle.noteActivity(3, t0 + 1s);
  EXPECT_FALSE(idle.idleFor(1s, t0 + 1500ms));
  EXPECT_TRUE(idle.idleFor(1s, t0 + 2s));
}

}  // namespace
}  // namespace rdmamsg::peer
