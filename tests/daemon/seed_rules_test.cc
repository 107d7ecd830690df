// The RDMA rules the daemon follows (docs/architecture.md, "One thread, one
// loop" and "Connections") that nothing else would catch if they broke,
// each driven through softrdma's test hooks
// (softrdma/testing.h): several rdma_cm events on one edge of the CM event
// pump (seed 003); receive buffers posted before rdma_connect/rdma_accept
// and no RNR ever (seed 004); a receive completion with the wrong opcode or
// a length over the buffer closes its connection (seed 004).
#include <gtest/gtest.h>

#include "daemon/rdma/cm_events.h"
#include "mesh_fixture.h"
#include "softrdma/testing.h"
#include "tests/support/wait.h"

namespace rdmamsg::peer::test {
namespace {

// Records the CM events dispatched to one id.
struct RecordingHandler : rdma::CmHandler {
  std::vector<rdma_cm_event_type> events;
  void onCmEvent(const rdma::CmEvent& e) override { events.push_back(e.type); }
};

// Seed 003: an edge-triggered channel fd reports several queued events as one
// edge, so the pump must get events until EAGAIN.
TEST(SeedRules, EveryCmEventQueuedOnOneEdgeIsDispatched) {
  loop::EventLoop loop;
  rdma::CmEventPump pump(loop);
  constexpr int kIds = 3;
  RecordingHandler handlers[kIds];
  rdma_cm_id* ids[kIds] = {};
  ASSERT_EQ(0, softrdma_hold_cm_events(pump.channel(), 1));
  for (int i = 0; i < kIds; i++) {
    ASSERT_EQ(0, rdma_create_id(pump.channel(), &ids[i], &handlers[i], RDMA_PS_TCP));
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(9);
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    ASSERT_EQ(0, rdma_resolve_addr(ids[i], nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  }
  ASSERT_TRUE(rdmamsg::test::waitFor(
      [&] { return softrdma_hold_cm_events(pump.channel(), 1) == kIds; }, 5s));
  ASSERT_EQ(kIds, softrdma_hold_cm_events(pump.channel(), 0));  // one write: one edge
  auto all = [&] {
    for (const auto& h : handlers)
      if (h.events.empty()) return false;
    return true;
  };
  EXPECT_TRUE(stepUntil(loop, all, 2s)) << "events stranded behind one edge: the pump handled "
                                        << pump.eventsHandled() << " of " << kIds;
  for (const auto& h : handlers)
    EXPECT_EQ(std::vector<rdma_cm_event_type>{RDMA_CM_EVENT_ADDR_RESOLVED}, h.events);
  for (auto* id : ids)
    EXPECT_EQ(0, rdma_destroy_id(id));
}

class SeedPair : public ::testing::TestWithParam<config::ReceiveQueue> {
 protected:
  loop::EventLoop loop;
  uint16_t port = freePort();
  std::unique_ptr<Node> alpha, beta;

  void start() {
    ASSERT_NE(port, 0);
    const std::vector<std::pair<std::string, std::string>> nodes{{"alpha", "127.0.0.1"},
                                                                 {"beta", "127.0.0.2"}};
    auto a = meshConfig("alpha", nodes, port), b = meshConfig("beta", nodes, port);
    a.buffers.receiveQueue = b.buffers.receiveQueue = GetParam();
    alpha = std::make_unique<Node>(loop, a);
    beta = std::make_unique<Node>(loop, b);
    alpha->mesh->start();
    beta->mesh->start();
    ASSERT_TRUE(stepUntil(loop, [&] { return bothEstablished(); }));
  }
  bool bothEstablished() {
    return alpha->peer("beta").established() && beta->peer("alpha").established();
  }
  uint64_t connects() {
    return alpha->peer("beta").counters().connects + beta->peer("alpha").counters().connects;
  }
  void TearDown() override {
    bool a = alpha == nullptr, b = beta == nullptr;
    if (alpha) alpha->mesh->shutdown([&] { a = true; });
    if (beta) beta->mesh->shutdown([&] { b = true; });
    stepUntil(
        loop, [&] { return a && b; }, 5s);
  }
  // A malformed receive completion closes the connection it came on, and
  // the pair connects again.
  void expectMalformedReceiveCloses(ibv_wc_opcode opcode, uint32_t byteLen) {
    ASSERT_NO_FATAL_FAILURE(start());
    const uint64_t before = connects();
    softrdma_corrupt_next_recv(opcode, byteLen);  // the next heartbeat, on either side
    EXPECT_TRUE(stepUntil(
        loop, [&] { return alpha->events.lost + beta->events.lost > 0; }, 5s))
        << "a malformed completion was taken as a good one";
    EXPECT_TRUE(stepUntil(
        loop, [&] { return bothEstablished() && connects() > before; }, 10s))
        << "the pair did not connect again";
  }
};

// Seed 004: receives are posted before rdma_connect/rdma_accept (softrdma
// counts any connect or accept whose QP has none), so nothing ever finds an
// empty receive queue (send_rnr_err).
TEST_P(SeedPair, ReceivesArePostedBeforeConnectAndAcceptAndNoSendMeetsRnr) {
  const int64_t emptyBefore = softrdma_counter("connect_without_recv");
  const int64_t rnrBefore = softrdma_counter("send_rnr_err");
  const int64_t recvsBefore = softrdma_counter("rdma_recvs");
  ASSERT_NO_FATAL_FAILURE(start());
  uint64_t id = 1;
  std::string payload(4000, 'p');
  for (int i = 0; i < 200; i++) {
    ASSERT_TRUE(alpha->peer("beta").send(1, id++, "src", "svc", bytesOf(payload)).ok());
  }
  ASSERT_TRUE(stepUntil(loop, [&] { return alpha->events.deliveredCount[1] == 200; }));
  EXPECT_EQ(emptyBefore, softrdma_counter("connect_without_recv"))
      << "a connect or accept came before its receives were posted";
  EXPECT_EQ(rnrBefore, softrdma_counter("send_rnr_err")) << "a send found no receive (RNR)";
  EXPECT_GT(softrdma_counter("rdma_recvs"), recvsBefore) << "the counters are not live";
}

// Registered memory: pools are registered when the daemon starts — also on a
// wildcard address, which binds no device; with a shared receive queue, the
// buffers lent to busy peers too — and the first connection registers
// nothing more.
TEST_P(SeedPair, PoolsAreRegisteredAtStartNotByTheFirstConnection) {
  ASSERT_NE(port, 0);
  const std::vector<std::pair<std::string, std::string>> nodes{{"alpha", "127.0.0.1"},
                                                               {"beta", "127.0.0.2"}};
  auto a = meshConfig("alpha", nodes, port), b = meshConfig("beta", nodes, port);
  // A wildcard listener takes its port on every address: beta listens on another.
  a.listen = addressOf("0.0.0.0", port);
  b.listen = a.peers[0].address = addressOf("127.0.0.2", static_cast<uint16_t>(port + 1));
  a.buffers.receiveQueue = b.buffers.receiveQueue = GetParam();
  alpha = std::make_unique<Node>(loop, a);
  alpha->mesh->start();
  const uint64_t atStart = alpha->mesh->registeredBytes();
  const uint64_t sendPool = uint64_t{a.buffers.sendBuffers} * a.buffers.bufferSize;
  EXPECT_GE(atStart, sendPool + uint64_t{a.buffers.initialGrant()} * a.buffers.bufferSize)
      << "the send pool and the receive buffers of its peer are registered at start";
  if (GetParam() == config::ReceiveQueue::kShared) {
    EXPECT_GE(atStart,
              sendPool + uint64_t{a.buffers.initialGrant() + a.buffers.sharedReceiveBuffers} *
                             a.buffers.bufferSize)
        << "the buffers lent to busy peers are registered at start, not at the first lending";
  }
  beta = std::make_unique<Node>(loop, b);
  beta->mesh->start();
  ASSERT_TRUE(stepUntil(loop, [&] { return bothEstablished(); }));
  EXPECT_EQ(atStart, alpha->mesh->registeredBytes()) << "the first connection registered memory";
}

TEST_P(SeedPair, AReceiveCompletionWithTheWrongOpcodeClosesTheConnection) {
  expectMalformedReceiveCloses(IBV_WC_SEND, SOFTRDMA_KEEP_BYTE_LEN);  // a good message
}

TEST_P(SeedPair, AReceiveCompletionLongerThanTheBufferClosesTheConnection) {
  expectMalformedReceiveCloses(IBV_WC_RECV, 16 * 1024 + 1);  // meshConfig's buffer_size + 1
}

INSTANTIATE_TEST_SUITE_P(ReceiveQueues, SeedPair,
                         ::testing::Values(config::ReceiveQueue::kShared,
                                           config::ReceiveQueue::kPerPeer),
                         [](const ::testing::TestParamInfo<config::ReceiveQueue>& p) {
                           return std::string(p.param == config::ReceiveQueue::kShared ? "Shared"
                                                                                       : "PerPeer");
                         });

}  // namespace
}  // namespace rdmamsg::peer::test
