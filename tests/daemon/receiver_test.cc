// Unit tests of the receive side of a connection (daemon/peer/receiver.h)
// over a real RC queue pair on softrdma: the QP's initial grant goes to the
// ledger and into the Hello; batches are kept in arrival order with their
// credits taken at once, and a batch read (in any order) is reposted at the
// next post() and owed to the peer again; a completion that is not a
// receive of its own, or longer than a buffer, and a batch that is not one,
// fail the connection; a batch arriving as it closes is never read; with
// session keys only the handshake's batch comes unverified, a batch that
// does not verify is never read nor are its credits taken, and verified
// batches lose their trailer; giveBack() returns the buffers, read or not.
#include "daemon/peer/receiver.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "daemon/peer/batch_auth.h"
#include "tests/daemon/qp_link.h"

namespace rdmamsg::peer {
namespace {

using namespace std::chrono_literals;
using rdma::test::kBuffer;

rdma::PoolParams pools(bool sharedReceive) {
  rdma::PoolParams p;
  p.bufferSize = kBuffer;
  p.sendBuffers = 4;
  p.sharedReceive = sharedReceive;
  p.perPeerCount = 6;
  p.initialGrant = 3;
  p.burst = 4;
  p.chunk = 4;
  return p;
}

// A batch to read arrived.
bool isBatch(const Result<Receiver::Arrival>& a) {
  return a.ok() && *a == Receiver::Arrival::kBatch;
}
// The reason the connection fails ("" when it does not).
std::string errorOf(const Result<Receiver::Arrival>& a) {
  return a.ok() ? std::string() : a.status().message();
}

class ReceiverTest : public ::testing::Test {
 protected:
  // Connects the link, the server's receive side a Receiver of at most 6
  // credits; starts it and posts its initial receives.
  void connect(bool sharedReceive = false) {
    ASSERT_TRUE(link_.connect(pools(sharedReceive), [&](ibv_qp_init_attr& a, bool server) {
      if (!server) return;
      if (Status st = receiver_.open(*link_.device, 6); !st.ok())
        throw std::runtime_error(st.toString());
      receiver_.describe(a);
    }));
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(link_.serverQp(), &attr, IBV_QP_CAP, &init), 0);
    receiver_.start(init.cap, hello_);
    ASSERT_TRUE(receiver_.post(link_.serverQp(), true).ok());
    Hello peer;  // the client: 16 buffers it may give credits for
    peer.bufferCount = 0;
    peer.maxCredits = 16;
    ledger_.knowPeer(peer);
    sendBufs_ = rdma::BufferPool::create(link_.device->pd(), kBuffer, 8, 0).value();
  }
  // Writes a batch of one confirm record numbered `seq`, carrying
  // `credits`, in client buffer `slot`; sealed with `auth` if given.
  uint32_t write(uint32_t slot, uint64_t seq, uint32_t credits, BatchAuth* auth = nullptr) {
    BatchWriter w;
    w.reset(sendBufs_->at(slot), kBuffer - kBatchTrailerSize);
    w.addConfirm(seq, seq, 0);
    size_t bytes = w.finish(credits);
    if (auth != nullptr) bytes = auth->seal(sendBufs_->at(slot), bytes).value();
    return static_cast<uint32_t>(bytes);
  }
  // Sends `bytes` of client buffer `slot` and waits for the server's completion.
  ibv_wc send(uint32_t slot, uint32_t bytes) {
    ibv_sge sge{sendBufs_->addr(slot), bytes, sendBufs_->lkey()};
    ibv_send_wr w{};
    w.sg_list = &sge;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED;  // its slot on the send queue comes back
    ibv_send_wr* bad = nullptr;
    const size_t before = link_.server.completions.size();
    EXPECT_EQ(ibv_post_send(link_.clientQp(), &w, &bad), 0);
    EXPECT_TRUE(link_.stepUntil([&] { return link_.server.completions.size() == before + 1; }));
    if (link_.server.completions.size() == before) link_.server.completions.push_back(ibv_wc{});
    return link_.server.completions.back();
  }
  Result<Receiver::Arrival> receive(uint32_t slot, uint64_t seq, uint32_t credits = 0,
                                    BatchAuth* auth = nullptr) {
    const ibv_wc wc = send(slot, write(slot, seq, credits, auth));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    return receiver_.onReceived(wc, kBuffer, false);
  }
  uint64_t seqAt(size_t i) {
    BatchReader r(receiver_.batchAt(i));
    Record rec;
    return r.open() && r.next(rec) ? rec.seq : 0;
  }

  rdma::test::QpLink link_;
  CreditLedger ledger_{6, 1s, std::chrono::steady_clock::now()};
  Receiver receiver_{ledger_};
  Hello hello_;
  std::unique_ptr<rdma::BufferPool> sendBufs_;
};

TEST_F(ReceiverTest, StartGrantsThePeerTheQpsBuffersAndAnnouncesThem) {
  connect();
  EXPECT_EQ(ledger_.allowance(), 6u);
  EXPECT_EQ(hello_.bufferCount, 6u);
  EXPECT_EQ(hello_.maxCredits, 6u);
  EXPECT_EQ(hello_.flags & kHelloSharedReceive, 0);
  EXPECT_EQ(receiver_.counters().recvsPosted, 6u);
  EXPECT_EQ(receiver_.counters().postRecvCalls, 1u);
  EXPECT_EQ(ledger_.owed(), 0u) << "the initial grant is not owed again";
  EXPECT_FALSE(receiver_.hasBatch());
  EXPECT_TRUE(receiver_.isReceive(rdma::kQpRecvTag));
  EXPECT_FALSE(receiver_.isReceive(rdma::kSrqRecvTag));
}

TEST_F(ReceiverTest, WithASharedQueueTheGrantIsTheInitialOneAndMoreMayBeLent) {
  connect(true);
  EXPECT_EQ(ledger_.allowance(), 3u) << "the initial grant";
  EXPECT_EQ(hello_.bufferCount, 3u);
  EXPECT_EQ(hello_.maxCredits, 6u) << "the most it may ever fill";
  EXPECT_NE(hello_.flags & kHelloSharedReceive, 0);
  EXPECT_TRUE(receiver_.isReceive(rdma::kSrqRecvTag));
  EXPECT_EQ(receiver_.counters().recvsPosted, 0u) << "the SRQ's buffers are posted already";
}

TEST_F(ReceiverTest, BatchesAreKeptInArrivalOrderWithTheirCreditsTakenAtOnce) {
  connect();
  for (uint32_t i = 0; i < 3; i++) {
    const Result<Receiver::Arrival> a = receive(i, 10 + i, 2);
    EXPECT_TRUE(isBatch(a));
    EXPECT_EQ(errorOf(a), "");
    EXPECT_EQ(ledger_.credits(), 2 * (i + 1)) << "batch " << i;
  }
  ASSERT_EQ(receiver_.pending(), 3u);
  EXPECT_EQ(receiver_.counters().batchesReceived, 3u);
  EXPECT_EQ(seqAt(0), 10u);
  EXPECT_EQ(seqAt(1), 11u);
  EXPECT_EQ(seqAt(2), 12u);

  receiver_.consume(1);  // read out of order
  EXPECT_EQ(receiver_.pending(), 2u);
  EXPECT_EQ(seqAt(0), 10u);
  EXPECT_EQ(seqAt(1), 12u) << "the others keep their order";
  const uint32_t owed = ledger_.owed();
  ASSERT_TRUE(receiver_.post(link_.serverQp(), false).ok());
  EXPECT_EQ(ledger_.owed(), owed + 1) << "a reposted buffer is a credit owed again";
  EXPECT_EQ(receiver_.counters().recvsPosted, 7u);
  EXPECT_EQ(receiver_.counters().postRecvCalls, 2u);
  ASSERT_TRUE(receiver_.post(link_.serverQp(), false).ok());
  EXPECT_EQ(receiver_.counters().postRecvCalls, 2u) << "nothing read: nothing posted";

  receiver_.consume(0);
  receiver_.consume(0);
  ASSERT_TRUE(receiver_.post(link_.serverQp(), false).ok());
  EXPECT_EQ(receiver_.counters().recvsPosted, 9u);
  // Every buffer goes round: more batches than the QP's six.
  for (uint32_t i = 0; i < 6; i++) {
    ledger_.open(false);  // a batch of this end's returns what is owed
    EXPECT_GT(ledger_.seal(std::chrono::steady_clock::now()).returned, 0u);
    const Result<Receiver::Arrival> a = receive(i % 8, 20 + i);
    ASSERT_TRUE(isBatch(a)) << "batch " << i;
    EXPECT_EQ(errorOf(a), "") << "batch " << i;
    EXPECT_EQ(seqAt(0), 20 + i);
    receiver_.consume(0);
    ASSERT_TRUE(receiver_.post(link_.serverQp(), false).ok());
  }
  EXPECT_FALSE(receiver_.hasBatch());
}

TEST_F(ReceiverTest, ACompletionNotOfItsOwnOrTooLongFailsTheConnection) {
  connect();
  const ibv_wc good = send(0, write(0, 1, 0));
  ibv_wc wrongOpcode = good;
  wrongOpcode.opcode = IBV_WC_SEND;
  EXPECT_NE(errorOf(receiver_.onReceived(wrongOpcode, kBuffer, false)), "");
  ibv_wc unknown = good;
  unknown.wr_id = rdma::kQpRecvTag | 6;  // beyond its six buffers
  EXPECT_NE(errorOf(receiver_.onReceived(unknown, kBuffer, false)), "");
  ibv_wc tooLong = good;
  tooLong.byte_len = kBuffer + 1;
  const Result<Receiver::Arrival> a = receiver_.onReceived(tooLong, kBuffer, false);
  EXPECT_FALSE(isBatch(a));
  EXPECT_EQ(errorOf(a), "receive completion with an unexpected opcode, id or length");
  EXPECT_FALSE(receiver_.hasBatch()) << "none of them is read";
  EXPECT_EQ(ledger_.credits(), 0u);
}

TEST_F(ReceiverTest, BytesThatAreNoBatchFailTheConnection) {
  connect();
  std::memset(sendBufs_->at(0), 0x5a, 64);
  const ibv_wc wc = send(0, 64);
  const Result<Receiver::Arrival> a = receiver_.onReceived(wc, kBuffer, false);
  EXPECT_EQ(errorOf(a), "malformed batch from peer: not a batch (wrong magic)");
}

TEST_F(ReceiverTest, ABatchArrivingAsItClosesIsNeverRead) {
  connect();
  const ibv_wc wc = send(0, write(0, 1, 3));
  const Result<Receiver::Arrival> a = receiver_.onReceived(wc, kBuffer, true);
  EXPECT_FALSE(isBatch(a));
  EXPECT_EQ(errorOf(a), "");
  EXPECT_FALSE(receiver_.hasBatch());
  EXPECT_EQ(ledger_.credits(), 0u) << "its credits are not taken";
}

TEST_F(ReceiverTest, BeforeTheKeysOnlyTheHandshakesBatchIsTaken) {
  connect();
  BatchAuth auth;  // not started: no keys yet
  receiver_.authenticate(&auth);
  EXPECT_TRUE(isBatch(receive(0, 1, 1))) << "the handshake's";
  const Result<Receiver::Arrival> a = receive(1, 2, 1);
  EXPECT_FALSE(isBatch(a));
  EXPECT_EQ(a.status().code(), Errc::protocol_error) << "the peer's doing";
  EXPECT_NE(errorOf(a).find("a batch before the session keys"), std::string::npos) << errorOf(a);
  EXPECT_EQ(receiver_.rejected(), BatchReject::kBadMac);
  EXPECT_EQ(receiver_.pending(), 1u);
  EXPECT_EQ(ledger_.credits(), 1u) << "the refused batch's credit is not taken";
}

TEST_F(ReceiverTest, VerifiedBatchesLoseTheirTrailerAndOthersAreNeverRead) {
  connect();
  SessionKey toServer{}, toClient{};
  toServer.fill(1);
  toClient.fill(2);
  BatchAuth client, server;
  ASSERT_TRUE(client.start(toServer, toClient).ok());
  ASSERT_TRUE(server.start(toClient, toServer).ok());
  receiver_.authenticate(&server);

  const uint32_t plain = write(7, 1, 0);  // its length without a trailer
  EXPECT_TRUE(isBatch(receive(0, 1, 2, &client)));
  ASSERT_EQ(receiver_.pending(), 1u);
  EXPECT_EQ(receiver_.batchAt(0).size(), plain) << "the trailer is cut off";
  EXPECT_EQ(seqAt(0), 1u);
  EXPECT_EQ(ledger_.credits(), 2u);

  // Replayed: the same sealed bytes again.
  const uint32_t sealed = write(1, 2, 2, &client);
  const ibv_wc first = send(1, sealed);
  EXPECT_TRUE(isBatch(receiver_.onReceived(first, kBuffer, false)));
  const Result<Receiver::Arrival> again = receiver_.onReceived(send(1, sealed), kBuffer, false);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(receiver_.rejected(), BatchReject::kReplayed);
  EXPECT_NE(errorOf(again).find("it carries batch 2, batch 3 expected"), std::string::npos)
      << errorOf(again);

  // Sealed under another key: forged.
  BatchAuth forger;
  ASSERT_TRUE(forger.start(toClient, toClient).ok());
  const Result<Receiver::Arrival> forged = receive(2, 3, 3, &forger);
  ASSERT_FALSE(forged.ok());
  EXPECT_EQ(forged.status().code(), Errc::protocol_error);
  EXPECT_EQ(receiver_.rejected(), BatchReject::kBadMac);
  EXPECT_EQ(receiver_.pending(), 2u) << "neither rejected batch is read";
  EXPECT_EQ(ledger_.credits(), 4u) << "nor are their credits taken";
}

TEST_F(ReceiverTest, GiveBackReturnsEveryBufferReadOrNot) {
  connect();
  ASSERT_TRUE(isBatch(receive(0, 1)));
  ASSERT_TRUE(isBatch(receive(1, 2)));
  receiver_.consume(0);  // read, not yet reposted
  EXPECT_EQ(link_.device->counters().bufferSetsReused, 0u);
  receiver_.forgetPosted();
  EXPECT_TRUE(receiver_.drained());
  receiver_.giveBack();
  EXPECT_FALSE(receiver_.hasBatch());
  EXPECT_TRUE(receiver_.drained());
  Result<std::unique_ptr<rdma::ReceiveSet>> set = link_.device->takeReceiveSet(6, rdma::kQpRecvTag);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(link_.device->counters().bufferSetsReused, 1u) << "the set went back whole";
  EXPECT_EQ(link_.device->counters().bufferSetsCreated, 1u);
}

TEST_F(ReceiverTest, GiveBackOnASharedQueueRepostsWhatWasUnread) {
  connect(true);
  rdma::SharedReceiveQueue* srq = link_.device->srq();
  ASSERT_NE(srq, nullptr);
  const uint32_t posted = srq->stats().posted;
  ASSERT_TRUE(isBatch(receive(0, 1)));
  ASSERT_TRUE(isBatch(receive(1, 2)));
  receiver_.consume(1);
  EXPECT_EQ(srq->stats().posted, posted - 2);
  receiver_.onLastWqe();
  EXPECT_TRUE(receiver_.drained());
  receiver_.giveBack();
  EXPECT_EQ(srq->stats().posted, posted) << "the unread and the read buffer";
  EXPECT_EQ(srq->stats().connections, 0u);
  EXPECT_EQ(srq->reservedCount(), 0u);
}

}  // namespace
}  // namespace rdmamsg::peer
