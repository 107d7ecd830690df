// Unit tests of the peer layer — Connection, Peer, Mesh — stepping the real
// event loop over softrdma, with a recording PeerEvents in place of the router.
#include <gtest/gtest.h>

#include "mesh_fixture.h"

namespace rdmamsg::peer::test {
namespace {

TEST_F(MeshPair, OneConnectionPerPairCarriesMessagesInOrderAndConfirmsThem) {
  start();
  EXPECT_EQ(alpha->peer("beta").counters().connects, 1u);
  uint64_t id = 1;
  EXPECT_TRUE(send("svc", 100, 100, id).empty());
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 100; }));
  ASSERT_EQ(beta->events.incoming.size(), 100u);
  for (uint64_t i = 0; i < 100; i++) {
    EXPECT_EQ(beta->events.incoming[i].seq, i + 1) << "out of order";
    EXPECT_EQ(beta->events.incoming[i].src, "src");
    EXPECT_EQ(beta->events.incoming[i].payload.size(), 100u);
  }
  EXPECT_TRUE(alpha->events.failures.empty());
  EXPECT_EQ(alpha->peer("beta").inFlight(), 0u);
}

// A peer removed by a reload is freed once its connection is closed: a
// mesh whose peer is removed and configured again twenty times holds one
// peer object, a receipt that named the removed peer names nobody (not the
// new peer in its slot), and the peer configured again carries messages.
TEST_F(MeshPair, ARemovedPeerIsFreedAndItsHandleNamesNoPeerAfterIt) {
  start();
  const uint64_t old = alpha->mesh->handleOf(alpha->peer("beta"));
  ASSERT_EQ(alpha->mesh->peerByHandle(old), &alpha->peer("beta"));
  const config::Config full = alpha->config;
  config::Config without = full;
  without.peers.clear();
  for (int round = 0; round < 20; round++) {
    ASSERT_TRUE(alpha->mesh->prepareReload(without).empty());
    alpha->config = without;
    alpha->mesh->applyPeers({});
    ASSERT_TRUE(stepUntil(loop, [&] { return alpha->mesh->peerObjectCount() == 0; }))
        << "round " << round << ": the removed peer was not freed";
    EXPECT_EQ(alpha->mesh->peerByHandle(old), nullptr);
    ASSERT_TRUE(alpha->mesh->prepareReload(full).empty());
    alpha->config = full;
    alpha->mesh->applyPeers({});
    ASSERT_EQ(alpha->mesh->peerObjectCount(), 1u);
    ASSERT_EQ(alpha->mesh->configuredPeers().size(), 1u);
    EXPECT_EQ(alpha->mesh->peerByHandle(old), nullptr) << "round " << round;
  }
  ASSERT_TRUE(stepUntil(loop, [&] {
    return alpha->peer("beta").established() && beta->peer("alpha").established();
  }));
  uint64_t id = 1;
  send("svc", 10, 100, id);
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 10; }));
  EXPECT_NE(alpha->mesh->peerByHandle(alpha->mesh->handleOf(alpha->peer("beta"))), nullptr);
}

TEST_F(MeshPair, LargeMessagesAreFragmentedAndReassembled) {
  start();
  uint64_t id = 1;
  send("svc", 3, 100 * 1024, id);  // buffers are 16 KiB
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 3; }));
  ASSERT_EQ(beta->events.incoming.size(), 3u);
  EXPECT_EQ(beta->events.incoming[2].payload, std::string(100 * 1024, 'p'));
}

// A flow whose listener does not read stalls alone: its window fills, its
// queue pauses its senders, the other flow and the link go on, heartbeats
// keep the peer alive; when the held messages are confirmed, it resumes.
TEST_F(MeshPair, AHeldFlowStallsAloneAndResumesWhenConfirmed) {
  start([](config::Config& c) {
    c.buffers.flowWindow = 32 * 1024;
    c.buffers.sendQueueLimit = 16 * 1024;
  });
  beta->events.verdict["stuck"] = Delivery::kAccepted;
  uint64_t id = 1;
  auto keys = send("stuck", 100, 1024, id);  // 100 KiB: over window + queue limit
  EXPECT_FALSE(keys.empty()) << "the stalled flow never paused its sender";
  // The window bounds what beta holds: 32 KiB at most (plus one message).
  ASSERT_TRUE(stepUntil(loop, [&] { return beta->events.incomingFor("stuck") >= 20; }));
  auto lastConnects = alpha->peer("beta").counters().connects;
  // Several heartbeat timeouts pass with the flow stalled.
  auto until = std::chrono::steady_clock::now() + 1200ms;
  stepUntil(
      loop, [&] { return std::chrono::steady_clock::now() >= until; }, 2s);
  EXPECT_LE(beta->events.incomingFor("stuck"), 32u) << "more than the window was sent";
  EXPECT_TRUE(alpha->peer("beta").established());
  EXPECT_EQ(alpha->peer("beta").counters().connects, lastConnects) << "the link was dropped";
  EXPECT_TRUE(alpha->events.failures.empty());

  // Another flow between the same daemons is not held up.
  uint64_t liveId = 1000;
  for (int i = 0; i < 50; i++) {
    ASSERT_TRUE(alpha->peer("beta").send(2, liveId++, "src", "live", bytesOf("hello")).ok());
  }
  ASSERT_TRUE(stepUntil(
      loop, [&] { return alpha->events.deliveredCount[2] == 50; }, 5s))
      << "the live flow waited behind the stalled one";

  // The listener reads: beta confirms what it held, the flow resumes.
  size_t confirmed = 0;
  ASSERT_TRUE(stepUntil(
      loop,
      [&] {
        while (confirmed < beta->events.incoming.size()) {
          const auto& m = beta->events.incoming[confirmed++];
          if (m.dst == "stuck") m.from->confirmLater(m.epoch, m.seq, 1, Errc::ok);
        }
        return alpha->events.deliveredCount[1] == 100;
      },
      10s))
      << "delivered " << alpha->events.deliveredCount[1] << " of 100";
  EXPECT_TRUE(alpha->events.failures.empty());
  for (const FlowKey& k : keys)
    EXPECT_NE(std::find(alpha->events.drained.begin(), alpha->events.drained.end(), k),
              alpha->events.drained.end())
        << "a paused sender was never resumed";
}

TEST_F(MeshPair, AStalledFlowTimesOutAloneNamingTheService) {
  start([](config::Config& c) {
    c.buffers.flowWindow = 8 * 1024;
    c.timers.messageTimeout = 300ms;
  });
  beta->events.verdict["stuck"] = Delivery::kAccepted;
  uint64_t id = 1;
  send("stuck", 40, 1024, id);
  ASSERT_TRUE(stepUntil(
      loop, [&] { return alpha->events.failures.size() == 40; }, 5s))
      << alpha->events.failures.size() << " of 40 failed";
  for (const auto& [msgId, st] : alpha->events.failures) {
    EXPECT_EQ(st.code(), Errc::timeout);
    EXPECT_NE(st.message().find("stuck"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("beta"), std::string::npos) << st.message();
  }
  EXPECT_TRUE(alpha->peer("beta").established()) << "a timeout took the link down";
  EXPECT_EQ(alpha->peer("beta").counters().connects, 1u);
}

TEST_F(MeshPair, ALostConnectionFailsEverythingInFlightAndRedials) {
  start();
  beta->events.verdict["stuck"] = Delivery::kAccepted;
  uint64_t id = 1;
  send("stuck", 5, 100, id);
  ASSERT_TRUE(stepUntil(loop, [&] { return beta->events.incomingFor("stuck") == 5; }));
  beta.reset();  // the peer daemon is gone at once
  ASSERT_TRUE(stepUntil(
      loop, [&] { return alpha->events.failures.size() == 5; }, 5s));
  for (const auto& [msgId, st] : alpha->events.failures)
    EXPECT_EQ(st.code(), Errc::peer_unreachable) << st.toString();
  EXPECT_EQ(alpha->events.lost, 1);
  auto dials = alpha->peer("beta").counters().dials;
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->peer("beta").counters().dials >= dials + 2; }))
      << "no re-dial after the loss";
}

// Past receive_memory_limit the router answers a stuck listener's messages
// busy: they fail back to their sender with busy, and the link keeps
// carrying every other flow.
TEST_F(MeshPair, AMessageTheReceiverCannotHoldFailsBusyAndTheLinkGoesOn) {
  start();
  beta->events.verdict["full"] = Delivery::kBusy;
  uint64_t id = 1;
  send("full", 20, 1024, id);
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.failures.size() == 20; }))
      << "failed " << alpha->events.failures.size() << " of 20";
  for (const auto& [msgId, st] : alpha->events.failures)
    EXPECT_EQ(st.code(), Errc::busy) << st.toString();
  send("live", 50, 1024, id);
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 50; }))
      << "delivered " << alpha->events.deliveredCount[1] << " of 50 after the busy ones";
  EXPECT_EQ(alpha->peer("beta").counters().connects, 1u);
}

// A connection closed while the handshake is under way (a reload changed
// the peer's address, a connect timeout) may still see ESTABLISHED arrive:
// it is ignored (the peer is told with a disconnect), and the peer dials again.
TEST_F(MeshPair, AConnectionClosedDuringItsHandshakeIgnoresALateEstablished) {
  // alpha looks for beta where it is not, so the one connection is beta's
  // request, which alpha accepts.
  auto a = meshConfig("alpha", {{"alpha", "127.0.0.1"}, {"beta", "127.0.0.9"}}, port);
  for (auto& peer : a.peers)
    peer.verifyAddress = false;  // beta's request comes from 127.0.0.2
  auto b = meshConfig("beta", nodes, port);
  alpha = std::make_unique<Node>(loop, a);
  beta = std::make_unique<Node>(loop, b);
  alpha->mesh->start();
  beta->mesh->start();
  Peer& p = alpha->peer("beta");
  ASSERT_TRUE(stepUntil(loop, [&] {
    return p.connection() != nullptr && p.connection()->state() == ConnState::kAccepting;
  })) << "alpha never accepted beta's request";
  p.readdress(config::Peer{"beta", addressOf("127.0.0.2", port)});
  EXPECT_TRUE(stepUntil(
      loop,
      [&] {
        return alpha->peer("beta").established() && beta->peer("alpha").established() &&
               alpha->mesh->connectionCount() == 1 && beta->mesh->connectionCount() == 1;
      },
      10s))
      << "the pair did not settle on one connection";
}

TEST(Peer, RedialsAfterEveryFailedAttempt) {
  loop::EventLoop loop;
  uint16_t port = freePort();
  ASSERT_NE(port, 0);
  // gamma's address has nobody listening: every dial is refused.
  Node alpha(loop, meshConfig("alpha", {{"alpha", "127.0.0.1"}, {"gamma", "127.0.0.3"}}, port));
  alpha.mesh->start();
  Peer& gamma = alpha.peer("gamma");
  ASSERT_TRUE(stepUntil(
      loop, [&] { return gamma.counters().dials >= 4; }, 10s))
      << "dials: " << gamma.counters().dials;
  EXPECT_FALSE(gamma.established());
  EXPECT_FALSE(gamma.lastError().empty());
  Result<Admitted> sent = gamma.send(1, 1, "s", "svc", bytesOf("x"));
  EXPECT_EQ(sent.status().code(), Errc::peer_unreachable);
  EXPECT_NE(sent.status().message().find("gamma"), std::string::npos);
  bool done = false;
  alpha.mesh->shutdown([&] { done = true; });
  EXPECT_TRUE(stepUntil(
      loop, [&] { return done; }, 5s));
  EXPECT_EQ(gamma.state(), PeerState::kStopped);
}

// A connection reports what happens to it through its state and marks its
// owner's key; it never calls up.
TEST(Connection, AFailedDialIsSeenThroughItsStateAndItsMark) {
  loop::EventLoop loop;
  uint16_t port = freePort();
  ASSERT_NE(port, 0);
  std::vector<uint32_t> serviced;
  std::unique_ptr<rdma::Device> device;
  rdma::MemoryBudget budget{64 << 20, 0};
  rdma::PoolParams pools{4096, 8, true, 2, 4, 4};
  Connection* conn = nullptr;
  loop::ServiceQueue queue(loop, [&](uint32_t key) {
    serviced.push_back(key);
    // The owner's service step hands a dialing connection the device it asks for.
    if (ibv_context* ctx = conn != nullptr ? conn->wantsDevice() : nullptr) {
      if (!device) device = rdma::Device::open(loop, ctx, 64, pools, budget, nullptr).value();
      conn->useDevice(device.get());
    }
  });
  rdma::CmEventPump pump(loop);
  ConnParams params;
  params.bufferSize = 4096;
  params.maxCredits = 4;
  params.sendBuffers = 4;
  Connection c(loop, params, "gamma", queue.waker(7));
  conn = &c;
  auto src = addressOf("127.0.0.1", port), dst = addressOf("127.0.0.3", port);
  sockaddr_storage s{}, d{};
  src.toSockaddr(s);
  reinterpret_cast<sockaddr_in*>(&s)->sin_port = 0;  // any source port
  dst.toSockaddr(d);
  c.startActive(pump.channel(), reinterpret_cast<sockaddr*>(&s), reinterpret_cast<sockaddr*>(&d));
  ASSERT_TRUE(stepUntil(
      loop, [&] { return c.reapable(); }, 5s))
      << toString(c.state());
  EXPECT_TRUE(c.down());
  EXPECT_FALSE(c.closeReason().empty());
  EXPECT_NE(device, nullptr) << "the route resolved and the connection asked for its device";
  ASSERT_FALSE(serviced.empty());
  EXPECT_TRUE(std::all_of(serviced.begin(), serviced.end(), [](uint32_t k) { return k == 7; }));
  EXPECT_EQ(c.messageRoom(), 0u);
  EXPECT_FALSE(c.hasBatch());
}

}  // namespace
}  // namespace rdmamsg::peer::test
