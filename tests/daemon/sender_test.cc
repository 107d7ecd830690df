// Unit tests of the send side of a connection (daemon/peer/sender.h) over a
// real RC queue pair on softrdma, with the device's own send pool: a batch
// opens only within the peer's credits (one always kept for batches
// without messages) and the buffers it may hold; sealed batches go in one
// ibv_post_send list and arrive in order, each with what it was filled
// with; a signaled completion gives back its buffer and every one posted
// before it, once; a connection that found the pool empty is woken when a
// buffer comes back; after the QP went to error, flushed completions and
// the teardown beacon give back every buffer, and giveBack() what is open
// and sealed too, each exactly once; a post the QP refuses is an io_error.
#include "daemon/peer/sender.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <vector>

#include "daemon/peer/credit_ledger.h"
#include "daemon/peer/protocol.h"
#include "tests/daemon/qp_link.h"

namespace rdmamsg::peer {
namespace {

using namespace std::chrono_literals;
using rdma::test::kBuffer;

rdma::PoolParams pools(uint32_t sendBuffers) {
  rdma::PoolParams p;
  p.bufferSize = kBuffer;
  p.sendBuffers = sendBuffers;
  p.sharedReceive = false;
  p.perPeerCount = 16;
  return p;
}

// A ledger whose peer granted `credits` of its `credits` buffers.
struct Ledger {
  CreditLedger ledger{16, 1s, std::chrono::steady_clock::now()};
  explicit Ledger(uint32_t credits) {
    Hello remote;
    remote.bufferCount = credits;
    remote.maxCredits = credits;
    ledger.knowPeer(remote);
    (void)ledger.takeInitialCredits();
  }
};

class SenderTest : public ::testing::Test {
 protected:
  // Connects the link with a pool of `sendBuffers`, and posts `receives`
  // buffers on the server's QP.
  void connect(uint32_t sendBuffers, uint32_t receives) {
    ASSERT_TRUE(link_.connect(pools(sendBuffers)));
    set_ = link_.device->takeReceiveSet(16, rdma::kQpRecvTag).value();
    for (uint32_t i = 0; i < receives; i++) {
      set_->wr(i)->next = nullptr;
      ibv_recv_wr* bad = nullptr;
      ASSERT_EQ(ibv_post_recv(link_.serverQp(), set_->wr(i), &bad), 0);
    }
  }
  rdma::SendPool& pool() { return link_.device->sendPool(); }
  // What the server received, as the first record's seq of each batch.
  std::vector<uint64_t> receivedSeqs() {
    std::vector<uint64_t> seqs;
    for (const ibv_wc& wc : link_.server.completions) {
      const auto idx = static_cast<uint32_t>(wc.wr_id & 0xffffffff);
      BatchReader r({set_->pool().at(idx), wc.byte_len});
      Record rec;
      seqs.push_back(r.open() && r.next(rec) == 1 ? rec.seq : 0);
    }
    return seqs;
  }
  // Opens, fills with one confirm record numbered `seq` and seals a batch.
  static bool fill(Sender& s, uint64_t seq, bool forMessages = true) {
    if (!s.open(forMessages)) return false;
    s.batch().addConfirm(seq, seq, 0);
    EXPECT_TRUE(s.seal().ok());
    return true;
  }
  // Send completions as the connection reads them: true when each was
  // for a buffer posted.
  bool deliverSendCompletions(Sender& s, size_t from = 0) {
    bool all = true;
    for (size_t i = from; i < link_.client.completions.size(); i++) {
      const ibv_wc& wc = link_.client.completions[i];
      if ((wc.wr_id & rdma::kWrTagMask) != Sender::kTag) continue;
      all = s.onCompleted(static_cast<uint32_t>(wc.wr_id & 0xffffffff)) && all;
    }
    return all;
  }
  // Every buffer of the pool is free, each once.
  void expectPoolWhole() {
    EXPECT_EQ(pool().available(), pool().count());
    std::set<uint32_t> taken;
    std::vector<uint32_t> order;
    for (uint32_t i = 0; i < pool().count(); i++) {
      auto idx = pool().take(queue_.waker(99));
      ASSERT_TRUE(idx) << "buffer " << i;
      EXPECT_TRUE(taken.insert(*idx).second) << "buffer " << *idx << " given back twice";
      order.push_back(*idx);
    }
    EXPECT_FALSE(pool().take(queue_.waker(99)));
    for (uint32_t idx : order)
      pool().give(idx);
  }

  rdma::test::QpLink link_;
  std::vector<uint32_t> woken_;
  loop::ServiceQueue queue_{link_.loop, [this](uint32_t key) { woken_.push_back(key); }};
  std::unique_ptr<rdma::ReceiveSet> set_;
};

TEST_F(SenderTest, BatchesOpenOnlyWithinThePeersCredits) {
  connect(8, 0);
  Ledger l(3);
  Sender s(l.ledger, queue_.waker(1));
  s.attach(pool(), 8);
  s.setBatchCapacity(kBuffer);
  EXPECT_TRUE(fill(s, 1));
  EXPECT_TRUE(fill(s, 2));
  EXPECT_FALSE(s.open(true)) << "the last credit is kept for batches without messages";
  EXPECT_EQ(s.counters().creditStalls, 1u);
  EXPECT_TRUE(s.open(false)) << "a batch without messages takes the last credit";
  EXPECT_FALSE(s.open(true)) << "and the batch open on it takes no message";
  EXPECT_TRUE(s.open(false)) << "but does take other records";
  s.batch().addHeartbeat();
  EXPECT_TRUE(s.seal().ok());
  EXPECT_FALSE(s.open(false)) << "no credit left";
  EXPECT_FALSE(s.open(true));
  EXPECT_EQ(l.ledger.credits(), 0u);
  EXPECT_EQ(pool().available(), 5u) << "three batches, three buffers: no more than the credits";
  EXPECT_EQ(s.counters().sendPoolWaits, 0u);
  s.giveBack();
  expectPoolWhole();
}

TEST_F(SenderTest, ABatchOpensOnlyWithinTheBuffersItMayHold) {
  connect(8, 0);
  Ledger l(16);
  Sender s(l.ledger, queue_.waker(1));
  s.attach(pool(), 2);
  s.setBatchCapacity(kBuffer);
  EXPECT_TRUE(fill(s, 1));
  EXPECT_TRUE(fill(s, 2));
  EXPECT_FALSE(s.open(false)) << "its cap of two";
  EXPECT_EQ(l.ledger.credits(), 14u) << "no credit spent on a batch that did not open";
  EXPECT_EQ(pool().available(), 6u);
  s.giveBack();
  expectPoolWhole();
}

TEST_F(SenderTest, SealedBatchesArePostedInOneListAndArriveInOrder) {
  connect(16, 8);
  Ledger l(16);
  Sender s(l.ledger, queue_.waker(1));
  s.attach(pool(), 16);
  s.setBatchCapacity(kBuffer);
  for (uint64_t seq = 1; seq <= 5; seq++)
    ASSERT_TRUE(fill(s, seq));
  EXPECT_TRUE(s.hasSealed());
  EXPECT_EQ(s.outstanding(), 0u) << "sealed is not posted";
  ASSERT_TRUE(s.post(link_.clientQp()).ok());
  EXPECT_FALSE(s.hasSealed());
  EXPECT_EQ(s.outstanding(), 5u);
  EXPECT_EQ(s.counters().sendsPosted, 5u);
  EXPECT_EQ(s.counters().postSendCalls, 1u) << "one ibv_post_send for the five";
  ASSERT_TRUE(link_.stepUntil([&] { return link_.server.completions.size() == 5; }));
  EXPECT_EQ(receivedSeqs(), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  for (const ibv_wc& wc : link_.server.completions)
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);

  EXPECT_TRUE(s.post(link_.clientQp()).ok()) << "nothing sealed: nothing to post";
  EXPECT_EQ(s.counters().postSendCalls, 1u);
  s.giveBack();
  expectPoolWhole();
}

TEST_F(SenderTest, ASignaledCompletionGivesBackItsBufferAndThoseBeforeItOnce) {
  connect(16, 8);
  Ledger l(16);
  Sender s(l.ledger, queue_.waker(1));
  s.attach(pool(), 4);  // every second send signaled
  s.setBatchCapacity(kBuffer);
  ASSERT_TRUE(fill(s, 1));
  ASSERT_TRUE(fill(s, 2));
  ASSERT_TRUE(s.post(link_.clientQp()).ok());
  EXPECT_EQ(s.counters().sendsSignaled, 1u) << "the first send unsignaled, the second signaled";
  EXPECT_EQ(pool().available(), 14u);
  ASSERT_TRUE(link_.stepUntil(
      [&] { return link_.server.completions.size() == 2 && !link_.client.completions.empty(); }));
  ASSERT_EQ(link_.client.completions.size(), 1u) << "one completion for the two sends";
  const ibv_wc& wc = link_.client.completions[0];
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  const auto idx = static_cast<uint32_t>(wc.wr_id & 0xffffffff);
  EXPECT_TRUE(s.onCompleted(idx));
  EXPECT_EQ(s.outstanding(), 0u);
  EXPECT_EQ(pool().available(), 16u) << "both buffers back with the one completion";
  EXPECT_FALSE(s.onCompleted(idx)) << "a completion seen twice gives nothing back twice";
  EXPECT_FALSE(s.onCompleted(idx ^ 1)) << "a buffer never posted";
  EXPECT_EQ(pool().available(), 16u);
  EXPECT_EQ(pool().unsignaled(), 0u) << "no send left behind an unsignaled one";
  s.giveBack();
  expectPoolWhole();
}

TEST_F(SenderTest, AConnectionThatFoundThePoolEmptyIsWokenWhenABufferComesBack) {
  connect(2, 8);
  Ledger l(16);
  Sender s(l.ledger, queue_.waker(7));
  s.attach(pool(), 8);
  s.setBatchCapacity(kBuffer);
  ASSERT_TRUE(fill(s, 1));
  ASSERT_TRUE(fill(s, 2));
  EXPECT_FALSE(s.open(true)) << "the device's pool of two is empty";
  EXPECT_EQ(s.counters().sendPoolWaits, 1u);
  EXPECT_EQ(l.ledger.credits(), 14u) << "a batch that found no buffer spent no credit";
  link_.loop.runOnce(0ms);
  EXPECT_TRUE(woken_.empty());

  ASSERT_TRUE(s.post(link_.clientQp()).ok());  // the pool is low: the last send is signaled
  ASSERT_TRUE(link_.stepUntil([&] { return !link_.client.completions.empty(); }));
  EXPECT_TRUE(deliverSendCompletions(s));
  EXPECT_EQ(pool().available(), 2u);
  ASSERT_TRUE(link_.stepUntil([&] { return !woken_.empty(); }));
  EXPECT_EQ(woken_, (std::vector<uint32_t>{7}));
  EXPECT_TRUE(fill(s, 3)) << "woken, it opens its batch";
  s.giveBack();
  expectPoolWhole();
}

TEST_F(SenderTest, AfterTheQpFailedFlushesAndTheBeaconGiveEveryBufferBackOnce) {
  connect(32, 0);  // no receive posted: the sends wait for the peer
  Ledger l(16);
  Sender s(l.ledger, queue_.waker(1));
  s.attach(pool(), 16);  // room and pool to spare: the six are unsignaled
  s.setBatchCapacity(kBuffer);
  for (uint64_t seq = 1; seq <= 6; seq++)
    ASSERT_TRUE(fill(s, seq));
  ASSERT_TRUE(s.post(link_.clientQp()).ok());
  EXPECT_EQ(s.outstanding(), 6u);
  EXPECT_EQ(s.counters().sendsSignaled, 0u);
  EXPECT_EQ(pool().unsignaled(), 6u);

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(link_.clientQp(), &attr, IBV_QP_STATE), 0);
  // The teardown beacon: a signaled send posted behind the others, flushed last.
  constexpr uint64_t kBeacon = 8ULL << 32;
  ibv_send_wr beacon{};
  beacon.wr_id = kBeacon;
  beacon.opcode = IBV_WR_SEND;
  beacon.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(link_.clientQp(), &beacon, &bad), 0);
  ASSERT_TRUE(link_.stepUntil([&] {
    return !link_.client.completions.empty() && link_.client.completions.back().wr_id == kBeacon;
  }));
  for (const ibv_wc& wc : link_.client.completions)
    EXPECT_NE(wc.status, IBV_WC_SUCCESS) << "nothing was received: every send failed";
  // As the connection does: a failed send completion gives back like any.
  for (size_t i = 0; i + 1 < link_.client.completions.size(); i++) {
    const ibv_wc& wc = link_.client.completions[i];
    EXPECT_TRUE(s.onCompleted(static_cast<uint32_t>(wc.wr_id & 0xffffffff)));
  }
  s.onBeacon();
  EXPECT_EQ(s.outstanding(), 0u);
  EXPECT_EQ(pool().unsignaled(), 0u);
  EXPECT_TRUE(link_.server.completions.empty());
  s.giveBack();  // the connection goes: nothing more to give
  expectPoolWhole();
}

TEST_F(SenderTest, GiveBackReturnsOpenSealedAndPostedBuffersOnce) {
  connect(16, 8);
  Ledger l(16);
  Sender s(l.ledger, queue_.waker(1));
  s.attach(pool(), 16);
  s.setBatchCapacity(kBuffer);
  ASSERT_TRUE(fill(s, 1));
  ASSERT_TRUE(fill(s, 2));
  ASSERT_TRUE(s.post(link_.clientQp()).ok());  // posted, not yet known complete
  ASSERT_TRUE(fill(s, 3));                     // sealed
  ASSERT_TRUE(s.open(true));                   // open
  EXPECT_EQ(pool().available(), 12u);
  ASSERT_TRUE(link_.stepUntil([&] { return link_.server.completions.size() == 2; }));
  s.giveBack();
  EXPECT_FALSE(s.hasOpen());
  EXPECT_FALSE(s.hasSealed());
  EXPECT_EQ(pool().unsignaled(), 0u);
  s.giveBack();
  expectPoolWhole();
}

TEST_F(SenderTest, APostTheQpRefusesIsAnIoError) {
  ASSERT_TRUE(link_.openDevice(pools(4)));
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = link_.device->cq();
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(link_.device->pd(), &a);  // in RESET: takes no send
  ASSERT_NE(qp, nullptr);
  Ledger l(16);
  Sender s(l.ledger, queue_.waker(1));
  s.attach(pool(), 4);
  s.setBatchCapacity(kBuffer);
  ASSERT_TRUE(fill(s, 1));
  const Status st = s.post(qp);
  EXPECT_EQ(st.code(), Errc::io_error);
  EXPECT_NE(st.message().find("ibv_post_send"), std::string::npos) << st.message();
  EXPECT_EQ(s.outstanding(), 0u) << "nothing posted";
  EXPECT_TRUE(s.hasSealed()) << "the batch is still the connection's";
  s.giveBack();
  EXPECT_EQ(pool().available(), 4u);
  EXPECT_EQ(pool().unsignaled(), 0u) << "the failed post leaves no unsignaled send counted";
  ibv_destroy_qp(qp);
}

}  // namespace
}  // namespace rdmamsg::peer
