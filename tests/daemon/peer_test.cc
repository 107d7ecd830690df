// Unit tests of a peer (daemon/peer/peer.h): what a configured peer daemon
// does with its connections and with the messages the router hands it,
// seen through its state, its counters, its snapshot and the PeerEvents it
// raises, over two real meshes on softrdma (mesh_fixture.h). A message to
// a peer that is not connected waits and dials it with connect: on_demand;
// one over the peer's max_message_size is refused at once and the link goes
// on; an idle link is kept up by heartbeats; a shutdown fails what is in
// flight with its reason and dials no more; a confirmation owed on an
// earlier connection never confirms a message of the next one; the
// snapshot shows the link while there is one. With two rails a session
// outlives its connection: what was cut in the middle goes again, what was
// owed is confirmed, nothing fails.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "mesh_fixture.h"

namespace rdmamsg::peer::test {
namespace {

class PeerTest : public MeshPair {};

TEST_F(PeerTest, AMessageForAPeerNotConnectedWaitsAndDialsItWithConnectOnDemand) {
  auto a = meshConfig("alpha", nodes, port), b = meshConfig("beta", nodes, port);
  a.connect = b.connect = config::ConnectMode::kOnDemand;
  alpha = std::make_unique<Node>(loop, a);
  beta = std::make_unique<Node>(loop, b);
  alpha->mesh->start();
  beta->mesh->start();
  Peer& p = alpha->peer("beta");
  // Nobody sends: nobody dials.
  loop.runOnce(50ms);
  EXPECT_EQ(p.state(), PeerState::kIdle);
  EXPECT_EQ(p.counters().dials, 0u);

  Result<Admitted> sent = p.send(1, 1, "src", "svc", bytesOf("waits for its link"));
  ASSERT_TRUE(sent.ok()) << sent.status().toString();
  EXPECT_EQ(p.queuedBytes() > 0 || p.inFlight() > 0, true);
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 1; }))
      << "state " << toString(p.state()) << ", last error: " << p.lastError();
  ASSERT_EQ(beta->events.incoming.size(), 1u);
  EXPECT_EQ(beta->events.incoming[0].payload, "waits for its link");
  EXPECT_EQ(p.counters().dials, 1u);
  EXPECT_TRUE(p.established());
}

TEST_F(PeerTest, AMessageOverThePeersLimitIsRefusedAtOnceAndTheLinkGoesOn) {
  start([](config::Config& c) { c.buffers.maxMessageSize = 4096; });
  Peer& p = alpha->peer("beta");
  Result<Admitted> big = p.send(1, 1, "src", "svc", bytesOf(std::string(8192, 'x')));
  EXPECT_EQ(big.status().code(), Errc::too_large) << big.status().toString();
  ASSERT_TRUE(p.send(1, 2, "src", "svc", bytesOf(std::string(4096, 'y'))).ok());
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 1; }));
  ASSERT_EQ(beta->events.incoming.size(), 1u);
  EXPECT_EQ(beta->events.incoming[0].payload.size(), 4096u);
  EXPECT_EQ(p.counters().connects, 1u);
}

TEST_F(PeerTest, AnIdleLinkIsKeptUpByHeartbeats) {
  start();  // heartbeat_interval 100 ms, heartbeat_timeout 400 ms
  Peer& p = alpha->peer("beta");
  // Ten heartbeats each way take more than twice the timeout.
  ASSERT_TRUE(stepUntil(loop, [&] {
    return p.counters().heartbeatsSent >= 10 && beta->peer("alpha").counters().heartbeatsSent >= 10;
  }));
  EXPECT_TRUE(p.established());
  EXPECT_EQ(p.counters().connects, 1u) << "an idle link was taken down: " << p.lastError();
  EXPECT_EQ(alpha->events.lost, 0);
}

TEST_F(PeerTest, AShutdownFailsWhatIsInFlightWithItsReasonAndDialsNoMore) {
  start();
  beta->events.verdict["stuck"] = Delivery::kAccepted;  // taken, never confirmed
  uint64_t id = 1;
  send("stuck", 3, 100, id);
  ASSERT_TRUE(stepUntil(loop, [&] { return beta->events.incomingFor("stuck") == 3; }));
  Peer& p = alpha->peer("beta");
  p.shutdown("the operator stopped it");
  ASSERT_TRUE(stepUntil(loop, [&] { return p.state() == PeerState::kStopped; }));
  ASSERT_EQ(alpha->events.failures.size(), 3u);
  for (const auto& [msgId, st] : alpha->events.failures) {
    EXPECT_EQ(st.code(), Errc::peer_unreachable);
    EXPECT_NE(st.message().find("the operator stopped it"), std::string::npos) << st.toString();
  }
  const uint64_t dials = p.counters().dials;
  Result<Admitted> after = p.send(1, id++, "src", "stuck", bytesOf("late"));
  EXPECT_EQ(after.status().code(), Errc::peer_unreachable);
  // beta dials alpha again; alpha's stopped peer neither dials nor takes it.
  ASSERT_TRUE(stepUntil(loop, [&] { return beta->peer("alpha").counters().dials >= 2; }));
  EXPECT_EQ(p.counters().dials, dials);
  EXPECT_EQ(p.state(), PeerState::kStopped);
}

TEST_F(PeerTest, AConfirmationOwedOnAnEarlierConnectionNeverConfirmsOneOfTheNext) {
  start();
  beta->events.verdict["stuck"] = Delivery::kAccepted;
  uint64_t id = 1;
  send("stuck", 1, 100, id);
  ASSERT_TRUE(stepUntil(loop, [&] { return beta->events.incomingFor("stuck") == 1; }));
  Peer& fromAlpha = beta->peer("alpha");
  const uint64_t oldEpoch = beta->events.incoming[0].epoch;
  const uint64_t oldSeq = beta->events.incoming[0].seq;

  // The connection goes; the message in flight fails back to alpha's sender.
  fromAlpha.readdress(config::Peer{"alpha", addressOf("127.0.0.1", port)});
  ASSERT_TRUE(stepUntil(loop, [&] {
    return alpha->events.failures.size() == 1 && alpha->peer("beta").established() &&
           fromAlpha.established() && fromAlpha.epoch() != oldEpoch;
  }));
  EXPECT_EQ(alpha->events.failures[0].second.code(), Errc::peer_unreachable);

  // A new message gets the old one's sequence number on the new connection.
  send("stuck", 1, 100, id);
  ASSERT_TRUE(stepUntil(loop, [&] { return beta->events.incomingFor("stuck") == 2; }));
  ASSERT_EQ(beta->events.incoming[1].seq, oldSeq);
  // The old connection's confirmation is dropped; the new one's, busy,
  // is the outcome alpha's sender gets.
  fromAlpha.confirmLater(oldEpoch, oldSeq, 1, Errc::ok, 100);
  fromAlpha.confirmLater(fromAlpha.epoch(), oldSeq, 1, Errc::busy);
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.failures.size() == 2; }));
  EXPECT_EQ(alpha->events.failures[1].first, id - 1);
  EXPECT_EQ(alpha->events.failures[1].second.code(), Errc::busy);
  EXPECT_EQ(alpha->events.deliveredCount[1], 0u);
}

TEST_F(PeerTest, TheSnapshotShowsTheLinkWhileThereIsOne) {
  start();
  Peer& p = alpha->peer("beta");
  PeerSnapshot s = p.snapshot();
  EXPECT_EQ(s.name, "beta");
  EXPECT_EQ(s.state, PeerState::kEstablished);
  ASSERT_TRUE(s.link.has_value());
  EXPECT_TRUE(s.link->established);
  EXPECT_EQ(s.link->remoteIncarnation, p.remoteIncarnation());
  EXPECT_NE(s.link->remoteIncarnation, 0u);
  EXPECT_FALSE(s.link->device.empty());
  EXPECT_GT(s.link->credits, 0u);

  beta.reset();  // the peer daemon is gone at once
  ASSERT_TRUE(stepUntil(loop, [&] { return !p.established(); }));
  s = p.snapshot();
  EXPECT_NE(s.state, PeerState::kEstablished);
  EXPECT_TRUE(!s.link.has_value() || !s.link->established);
  EXPECT_FALSE(s.lastError.empty());
}

// Alpha and beta share two rails (127.0.0.1/.3 and 127.0.0.2/.4): a
// session outlives its connection.
class TwoRailPeerTest : public MeshPair {
 protected:
  void startTwoRails() {
    start([&](config::Config& c) {
      const bool isAlpha = c.node == "alpha";
      c.extraListen = {addressOf(isAlpha ? "127.0.0.3" : "127.0.0.4", port)};
      c.peers[0].extraRails = {addressOf(isAlpha ? "127.0.0.4" : "127.0.0.3", port)};
    });
  }
};

// A message cut in the middle (larger than the batches one step may post),
// messages behind it, and one beta's listener holds (taken later): alpha's
// connection is lost while they are under way. The session goes on over a
// new connection: each is delivered once, in order, and confirmed — the
// held one by a confirmation owed from before the loss — and no sender
// sees a failure.
TEST_F(TwoRailPeerTest, AConnectionLostMidMessageGoesOnAndEveryMessageArrivesOnce) {
  startTwoRails();
  ASSERT_TRUE(alpha->peer("beta").resumes());
  beta->events.verdict["held"] = Delivery::kAccepted;
  uint64_t id = 1;
  send("held", 1, 100, id);
  ASSERT_TRUE(stepUntil(loop, [&] { return beta->events.incomingFor("held") == 1; }));
  const RecordingEvents::Incoming held = beta->events.incoming[0];

  std::string big(2 << 20, '\0');  // 128 buffers of 16 KiB; alpha holds 8 credits
  for (size_t i = 0; i < big.size(); i++)
    big[i] = static_cast<char>('a' + i % 23);
  ASSERT_TRUE(alpha->peer("beta").send(1, id++, "src", "svc", bytesOf(big)).ok());
  send("svc", 3, 1000, id);
  loop.runOnce(1ms);  // some of it goes
  cutAlphasConnection("link cut by the test");
  ASSERT_TRUE(stepUntil(loop, [&] {
    return alpha->peer("beta").established() && beta->peer("alpha").established() &&
           alpha->peer("beta").counters().sessionsResumed == 1;
  })) << "no resume";
  EXPECT_EQ(alpha->peer("beta").epoch(), 1u) << "the same session";
  EXPECT_EQ(beta->peer("alpha").epoch(), held.epoch);
  ASSERT_TRUE(stepUntil(loop, [&] { return beta->events.incomingFor("svc") == 4; }));
  // The outcome owed from before the loss.
  beta->peer("alpha").confirmLater(held.epoch, held.seq, 1, Errc::ok, 100);
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 5; }))
      << alpha->events.deliveredCount[1];
  EXPECT_TRUE(alpha->events.failures.empty()) << alpha->events.failures[0].second.toString();
  std::vector<uint64_t> seqs;
  for (const auto& m : beta->events.incoming) {
    seqs.push_back(m.seq);
    if (m.seq == held.seq + 1) {
      EXPECT_EQ(m.payload, big) << "the message cut in the middle arrives whole";
    } else if (m.seq > held.seq + 1) {
      EXPECT_EQ(m.payload, std::string(1000, 'p'));
    }
  }
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3, 4, 5})) << "each once, in order";
  EXPECT_EQ(alpha->peer("beta").inFlight(), 0u);
  EXPECT_EQ(beta->peer("alpha").counters().sessionsResumed, 1u);
  // Beta had message 1 whole, not 2 (its 128 buffers take many more credits
  // than one step has): 2 went again; the ones behind it had not started.
  EXPECT_EQ(alpha->peer("beta").counters().messagesResent, 1u);
}

// A message sent after the connection went down but before the peer's
// service step saw it (the state still says established) waits for the
// held session like any other: it is not refused as unreachable.
TEST_F(TwoRailPeerTest, AMessageSentAsTheConnectionGoesDownWaitsForTheNextOne) {
  startTwoRails();
  uint64_t id = 1;
  send("svc", 1, 100, id);
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 1; }));
  cutAlphasConnection("link cut by the test");
  ASSERT_TRUE(alpha->peer("beta").established()) << "not seen down yet";
  Result<Admitted> admitted = alpha->peer("beta").send(1, id++, "src", "svc", bytesOf("late"));
  ASSERT_TRUE(admitted.ok()) << admitted.status().toString();
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 2; }));
  EXPECT_TRUE(alpha->events.failures.empty());
  EXPECT_EQ(alpha->peer("beta").counters().sessionsResumed, 1u);
}

// Subjects across a held session: the loss of a connection whose session
// goes on is never reported (the router keeps the peer's interest, so a
// publish meanwhile goes into the session), and a publish result owed while
// the session was held is written on the next connection.
TEST_F(TwoRailPeerTest, AHeldSessionKeepsTheSubjectsAndTheResultsOwed) {
  startTwoRails();
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.ups == 1 && beta->events.ups == 1; }));
  Peer& p = alpha->peer("beta");
  ASSERT_TRUE(p.routesSubjects());
  const uint64_t epoch = p.epoch();
  cutAlphasConnection("link cut by the test");
  ASSERT_TRUE(stepUntil(loop, [&] { return p.holdsSession(); }));
  p.sendPubResult(epoch, 77, PubResultBody{1, 1, 0, 0});
  ASSERT_TRUE(stepUntil(loop, [&] { return beta->events.pubResults.size() == 1; }))
      << "the result owed while held never came";
  EXPECT_EQ(beta->events.pubResults[0], 77u);
  ASSERT_TRUE(stepUntil(loop, [&] { return p.counters().sessionsResumed == 1; }));
  EXPECT_EQ(alpha->events.lost, 0) << "a session that went on reported a loss";
  EXPECT_EQ(beta->events.lost, 0);
  EXPECT_EQ(alpha->events.ups, 2) << "the interest is announced again on the new connection";
}

// A held session that never resumes reports its loss once, when it ends.
TEST_F(TwoRailPeerTest, AHeldSessionThatEndsReportsTheLossOnce) {
  startTwoRails();
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.ups == 1; }));
  beta.reset();  // gone on both rails
  Peer& p = alpha->peer("beta");
  ASSERT_TRUE(stepUntil(loop, [&] { return p.holdsSession(); }));
  EXPECT_EQ(alpha->events.lost, 0) << "reported while the session may still go on";
  ASSERT_TRUE(stepUntil(
      loop, [&] { return alpha->events.lost == 1; }, 10s))
      << "the session's end was not reported";
  EXPECT_FALSE(p.holdsSession());
}

// The session leaves rail 0 (lost) and moves back once rail 0 is healthy
// again: the move back is dialed by one end, the one whose dial wins the
// pair's tie-break (alpha, the lower name); beta waits for that connection
// instead of dialing too, so no dial crosses it and the failback holds.
TEST_F(TwoRailPeerTest, AFailbackIsDialedByOneEnd) {
  start([&](config::Config& c) {
    const bool isAlpha = c.node == "alpha";
    c.extraListen = {addressOf(isAlpha ? "127.0.0.3" : "127.0.0.4", port)};
    c.peers[0].extraRails = {addressOf(isAlpha ? "127.0.0.4" : "127.0.0.3", port)};
    c.timers.railProbeInterval = 100ms;
  });
  Peer& a = alpha->peer("beta");
  Peer& b = beta->peer("alpha");
  auto onRail = [&](std::size_t rail) {
    return a.established() && b.established() && a.snapshot().link->rail == rail &&
           b.snapshot().link->rail == rail;
  };
  ASSERT_TRUE(stepUntil(loop, [&] { return onRail(0); }));
  cutAlphasConnection("link cut by the test");
  ASSERT_TRUE(stepUntil(loop, [&] { return a.counters().sessionsResumed == 1 && onRail(1); }));
  const uint64_t dialsA = a.counters().dials, dialsB = b.counters().dials;
  ASSERT_TRUE(stepUntil(loop, [&] {
    return a.counters().railFailbacks == 1 && b.counters().railFailbacks == 1 && onRail(0) &&
           a.counters().sessionsResumed == 2 && b.counters().sessionsResumed == 2;
  })) << "no failback that resumed the session";
  EXPECT_EQ(a.counters().dials, dialsA + 1);
  EXPECT_EQ(b.counters().dials, dialsB) << "beta dialed the failback too";
  for (Peer* p : {&a, &b}) {
    const auto rails = p->snapshot().rails;
    ASSERT_EQ(rails.size(), 2u);
    EXPECT_EQ(rails[0].stats.failbacksFailed, 0u) << p->label();
  }
}

// rail_policy spread: a lane per rail, each its own connection over its
// own rail; flows are hashed to lanes and each keeps its order. A reload
// that leaves one rail closes lane 1; lane 0 carries every flow then.
TEST_F(TwoRailPeerTest, SpreadKeepsALanePerRailAndAReloadToOneRailClosesTheOther) {
  start([&](config::Config& c) {
    const bool isAlpha = c.node == "alpha";
    c.extraListen = {addressOf(isAlpha ? "127.0.0.3" : "127.0.0.4", port)};
    c.peers[0].extraRails = {addressOf(isAlpha ? "127.0.0.4" : "127.0.0.3", port)};
    c.railPolicy = config::RailPolicy::kSpread;
  });
  Peer& lane0 = alpha->peer("beta");
  ASSERT_EQ(lane0.lanes().size(), 2u);
  Peer& lane1 = *lane0.lanes()[1];
  EXPECT_EQ(lane1.lane(), 1u);
  EXPECT_EQ(lane1.label(), "beta lane 1");
  ASSERT_TRUE(stepUntil(loop, [&] { return lane1.established(); }));
  EXPECT_EQ(lane0.snapshot().link->rail, std::optional<std::size_t>(0));
  EXPECT_EQ(lane1.snapshot().link->rail, std::optional<std::size_t>(1));
  EXPECT_TRUE(lane0.routesSubjects());
  EXPECT_FALSE(lane1.routesSubjects()) << "subjects go over lane 0 only";
  // Sixteen flows: both lanes carry some, each flow always the same lane.
  std::set<Peer*> used;
  uint64_t id = 1;
  for (int f = 0; f < 16; f++) {
    const std::string svc = "f" + std::to_string(f);
    Peer* lane = alpha->mesh->route("beta", "src", svc);
    ASSERT_NE(lane, nullptr);
    EXPECT_EQ(lane, alpha->mesh->route("beta", "src", svc)) << "a flow changed lanes";
    used.insert(lane);
    for (int i = 0; i < 3; i++)
      ASSERT_TRUE(lane->send(1, id++, "src", svc, bytesOf(svc + ":" + std::to_string(i))).ok());
  }
  EXPECT_EQ(used.size(), 2u) << "sixteen flows on one lane";
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 48; }));
  std::map<std::string, int> nextOf;
  std::set<Peer*> from;
  for (const auto& m : beta->events.incoming) {
    EXPECT_EQ(m.payload, m.dst + ":" + std::to_string(nextOf[m.dst]++)) << "out of order";
    from.insert(m.from);
  }
  EXPECT_EQ(from.size(), 2u) << "beta received over one lane only";

  // Beta keeps one rail: lane 1 closes on both ends, lane 0 carries all.
  for (auto* node : {alpha.get(), beta.get()}) {
    config::Config next = node->config;
    next.peers[0].extraRails.clear();
    ASSERT_TRUE(node->mesh->prepareReload(next).empty());
    node->config = next;
    node->mesh->applyPeers({next.peers[0].name});
  }
  ASSERT_TRUE(stepUntil(loop, [&] {
    return alpha->mesh->peerObjectCount() == 1 && beta->mesh->peerObjectCount() == 1 &&
           alpha->peer("beta").established() && beta->peer("alpha").established();
  })) << "lane 1 was not closed and freed";
  EXPECT_TRUE(alpha->peer("beta").lanes().empty());
  for (int f = 0; f < 16; f++)
    EXPECT_EQ(alpha->mesh->route("beta", "src", "f" + std::to_string(f)), &alpha->peer("beta"));
  ASSERT_TRUE(
      alpha->mesh->route("beta", "src", "f1")->send(1, id++, "src", "f1", bytesOf("after")).ok());
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 49; }));
}

// With one rail nothing changes: the connection's messages fail back to
// their senders at once, and the next connection is a new session.
TEST_F(PeerTest, WithOneRailALostConnectionFailsWhatWasInFlight) {
  start();
  ASSERT_FALSE(alpha->peer("beta").resumes());
  beta->events.verdict["held"] = Delivery::kAccepted;
  uint64_t id = 1;
  send("held", 1, 100, id);
  ASSERT_TRUE(stepUntil(loop, [&] { return beta->events.incomingFor("held") == 1; }));
  cutAlphasConnection("link cut by the test");
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.failures.size() == 1; }));
  EXPECT_EQ(alpha->events.failures[0].second.code(), Errc::peer_unreachable);
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->peer("beta").established(); }));
  EXPECT_EQ(alpha->peer("beta").counters().sessionsResumed, 0u);
  EXPECT_EQ(alpha->events.lost, 1) << "the subjects' loss is reported at once";
}

}  // namespace
}  // namespace rdmamsg::peer::test
