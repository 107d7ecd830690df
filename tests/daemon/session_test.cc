// Unit tests of a peer's session across connections (daemon/peer/resume.h)
// where the two ends' event loops run apart: alpha's loop stands still
// while beta's goes on, so that a connection can be lost before alpha read
// what beta wrote on it. Each end holds a session then, and they need not
// be the same one: a resume between them must not take one for the other.
#include <gtest/gtest.h>

#include <algorithm>

#include "mesh_fixture.h"

namespace rdmamsg::peer::test {
namespace {

// Alpha and beta share two rails (as TwoRailPeerTest), each on its own
// event loop. Beta holds a session for 300 ms, alpha for 2 s.
class SplitLoopSessionTest : public ::testing::Test {
 protected:
  loop::EventLoop loopA, loopB;
  uint16_t port = freePort();
  std::unique_ptr<Node> alpha, beta;

  void SetUp() override {
    ASSERT_NE(port, 0);
    const std::vector<std::pair<std::string, std::string>> nodes{{"alpha", "127.0.0.1"},
                                                                 {"beta", "127.0.0.2"}};
    auto a = meshConfig("alpha", nodes, port), b = meshConfig("beta", nodes, port);
    a.extraListen = {addressOf("127.0.0.3", port)};
    a.peers[0].extraRails = {addressOf("127.0.0.4", port)};
    b.extraListen = {addressOf("127.0.0.4", port)};
    b.peers[0].extraRails = {addressOf("127.0.0.3", port)};
    b.timers.connectTimeout = b.timers.heartbeatTimeout = 300ms;
    alpha = std::make_unique<Node>(loopA, a);
    beta = std::make_unique<Node>(loopB, b);
    alpha->mesh->start();
    beta->mesh->start();
  }

  void TearDown() override {
    bool doneA = alpha == nullptr, doneB = beta == nullptr;
    if (alpha) alpha->mesh->shutdown([&] { doneA = true; });
    if (beta) beta->mesh->shutdown([&] { doneB = true; });
    stepBoth([&] { return doneA && doneB; }, 5s);
  }

  bool bothEstablished() {
    return alpha->peer("beta").established() && beta->peer("alpha").established();
  }

  // Steps the two loops in turn until `cond` holds (checked after each
  // step); false at the deadline.
  template <typename Cond>
  bool stepBoth(Cond&& cond, std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!cond()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      loopA.runOnce(2ms);
      if (cond()) return true;
      loopB.runOnce(2ms);
    }
    return true;
  }

  void cutAlphasConnection(const std::string& why) {
    const Connection* c = alpha->peer("beta").connection();
    ASSERT_NE(c, nullptr);
    const_cast<Connection*>(c)->close(why);
  }
};

// Alpha's messages 1-3 were delivered (held by beta's listener, so not
// confirmed) when the connection was lost. Beta's hold ends while alpha
// still holds; the next connection gives beta a new session, and is lost
// before alpha read beta's kFresh on it. Both ends hold a session now, not
// the same one: on the connection after, each must see that the other's
// kContinue is for another session. Alpha's messages fail (beta kept
// nothing of them) and none is delivered twice; the connection goes on
// with a new session.
TEST_F(SplitLoopSessionTest, ASessionLostDuringItsResumeIsNotTakenForAnother) {
  Peer& a = alpha->peer("beta");
  Peer& b = beta->peer("alpha");
  ASSERT_TRUE(a.resumes() && b.resumes());
  ASSERT_TRUE(stepBoth([&] { return bothEstablished(); }));
  beta->events.verdict["held"] = Delivery::kAccepted;
  std::string payload(100, 'p');
  for (uint64_t id = 1; id <= 3; id++)
    ASSERT_TRUE(a.send(1, id, "src", "held", bytesOf(payload)).ok());
  ASSERT_TRUE(stepBoth([&] { return beta->events.incomingFor("held") == 3; }));

  cutAlphasConnection("link cut by the test");
  ASSERT_TRUE(stepBoth([&] { return a.holdsSession() && b.holdsSession(); }));
  // Alpha's loop stands still: beta's dials go unanswered until its hold ends.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (b.holdsSession() && std::chrono::steady_clock::now() < deadline)
    loopB.runOnce(5ms);
  ASSERT_FALSE(b.holdsSession()) << "beta's session was not ended";
  ASSERT_TRUE(a.holdsSession());

  // The next connection: stop as soon as beta has it (and wrote its kFresh),
  // before alpha's loop runs again, and lose it on alpha's side.
  ASSERT_TRUE(stepBoth([&] { return b.established(); }));
  cutAlphasConnection("lost again by the test");
  ASSERT_TRUE(stepBoth([&] { return a.holdsSession() && b.holdsSession(); }));

  // The connection after: both ends continue, each its own session.
  ASSERT_TRUE(stepBoth([&] {
    return bothEstablished() &&
           (alpha->events.failures.size() == 3 || beta->events.incomingFor("held") > 3);
  })) << "no connection after";
  EXPECT_EQ(beta->events.incomingFor("held"), 3u) << "a message was delivered twice";
  ASSERT_EQ(alpha->events.failures.size(), 3u);
  for (const auto& [id, st] : alpha->events.failures)
    EXPECT_EQ(st.code(), Errc::peer_unreachable) << st.toString();
  EXPECT_EQ(a.counters().sessionsResumed, b.counters().sessionsResumed);

  // The connection carries a new session: a message goes and is confirmed.
  beta->events.verdict.clear();
  ASSERT_TRUE(a.send(1, 4, "src", "svc", bytesOf("after")).ok());
  ASSERT_TRUE(stepBoth([&] { return beta->events.incomingFor("svc") == 1; }));
  EXPECT_EQ(beta->events.incoming.back().seq, 1u) << "not numbered from 1 in a new session";
  ASSERT_TRUE(stepBoth([&] { return alpha->events.deliveredCount[1] == 1; }));
  EXPECT_EQ(alpha->events.failures.size(), 3u);
}

// The first connection is lost as soon as beta has it: alpha has not read
// beta's kFresh (it knows no name for beta's side of the session), beta's
// messages went after alpha's kFresh (or wait for it). The next connection
// goes on with that session: what alpha never read is sent again, each
// message arrives once and no sender sees a failure.
TEST_F(SplitLoopSessionTest, ASessionLostBeforeOneEndReadTheOthersFirstRecordGoesOn) {
  Peer& a = alpha->peer("beta");
  Peer& b = beta->peer("alpha");
  ASSERT_TRUE(stepBoth([&] { return b.established(); }));
  ASSERT_FALSE(a.holdsSession());
  std::string payload(100, 'q');
  for (uint64_t id = 1; id <= 3; id++)
    ASSERT_TRUE(b.send(1, id, "src", "svc", bytesOf(payload)).ok());
  cutAlphasConnection("lost by the test before alpha read anything");
  ASSERT_TRUE(stepBoth([&] {
    return bothEstablished() && b.counters().sessionsResumed == 1 &&
           beta->events.deliveredCount[1] == 3;
  })) << "the session did not go on";
  EXPECT_EQ(alpha->events.incomingFor("svc"), 3u) << "each message once";
  EXPECT_TRUE(beta->events.failures.empty()) << beta->events.failures[0].second.toString();
  EXPECT_EQ(a.counters().sessionsResumed, 1u);
}

// A publish result alpha wrote on a connection that was lost before beta
// read it (beta's loop had not run since) is written again on the
// session's next connection; the one beta had read is not. Each result
// arrives once, in order, with the ones written after.
TEST_F(SplitLoopSessionTest, AResultThePeerHadNotReadIsWrittenAgainOnTheNextConnection) {
  Peer& a = alpha->peer("beta");
  Peer& b = beta->peer("alpha");
  ASSERT_TRUE(stepBoth(
      [&] { return bothEstablished() && alpha->events.ups == 1 && beta->events.ups == 1; }));
  ASSERT_TRUE(a.routesSubjects());
  a.sendPubResult(a.epoch(), 76, PubResultBody{1, 1, 0, 0});
  ASSERT_TRUE(stepBoth([&] { return beta->events.pubResults.size() == 1; }));

  // 77 is written and posted by alpha alone; beta loses the connection
  // before its loop runs again.
  const uint64_t posted = a.connection()->counters().sendsPosted;
  a.sendPubResult(a.epoch(), 77, PubResultBody{2, 2, 0, 0});
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (a.connection()->counters().sendsPosted == posted &&
         std::chrono::steady_clock::now() < deadline)
    loopA.runOnce(2ms);
  ASSERT_GT(a.connection()->counters().sendsPosted, posted) << "alpha wrote nothing";
  const_cast<Connection*>(b.connection())->close("lost by the test before beta read it");

  ASSERT_TRUE(stepBoth([&] {
    return bothEstablished() && a.counters().sessionsResumed == 1 &&
           b.counters().sessionsResumed == 1;
  })) << "the session did not go on";
  a.sendPubResult(a.epoch(), 78, PubResultBody{3, 3, 0, 0});
  // Whatever is written again comes before 78 on the connection.
  ASSERT_TRUE(stepBoth([&] {
    const auto& got = beta->events.pubResults;
    return std::find(got.begin(), got.end(), 78u) != got.end();
  }));
  EXPECT_EQ(beta->events.pubResults, (std::vector<uint64_t>{76, 77, 78}))
      << "77 lost with the connection, or one written twice";
}

}  // namespace
}  // namespace rdmamsg::peer::test
