// RC data path: SEND (+IMM), RDMA WRITE (+IMM), RDMA READ, inline, WR chains, selective
// signaling, posting-order completions, scatter/gather (ibv_post_send.3, ibv_poll_cq.3).
#include <arpa/inet.h>

#include <array>
#include <chrono>
#include <cstring>
#include <string>

#include "support.h"

namespace rdmamsg::test {
namespace {

void fill(uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<uint8_t>(seed + i * 13);
}

class DataPath : public CmFixture {
 protected:
  void SetUp() override {
    CmFixture::SetUp();
    if (HasFatalFailure()) return;
    ConnectOptions options;
    options.serverRecvs = initialServerRecvs_;
    ASSERT_NO_FATAL_FAILURE(connect(options));
  }

  int initialServerRecvs_ = 0;
};

TEST_F(DataPath, SendDeliversBytesLengthAndWrIds) {
  ASSERT_EQ(0, server_.postRecv(77, 0, kSlot));
  fill(client_.at(0), 100, 1);
  ASSERT_EQ(0, client_.postSend(42, 0, 100));
  auto sent = client_.poll(1);
  ASSERT_EQ(1u, sent.size());
  EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status);
  EXPECT_EQ(IBV_WC_SEND, sent[0].opcode);
  EXPECT_EQ(42u, sent[0].wr_id);
  EXPECT_EQ(client_.qp->qp_num, sent[0].qp_num);
  auto received = server_.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(IBV_WC_RECV, received[0].opcode);
  EXPECT_EQ(77u, received[0].wr_id);
  EXPECT_EQ(100u, received[0].byte_len);
  EXPECT_EQ(server_.qp->qp_num, received[0].qp_num);
  EXPECT_FALSE(received[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(0, memcmp(client_.at(0), server_.at(0), 100));
}

TEST_F(DataPath, ZeroLengthSendCompletesWithZeroByteLen) {
  ASSERT_EQ(0, server_.postRecv(1, 0, kSlot));
  ASSERT_EQ(0, client_.postSend(2, 0, 0));
  ASSERT_EQ(1u, client_.poll(1).size());
  auto received = server_.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(0u, received[0].byte_len);
}

TEST_F(DataPath, SendWithImmediatePreservesImmData) {
  ASSERT_EQ(0, server_.postRecv(5, 0, kSlot));
  fill(client_.at(0), 64, 2);
  ASSERT_EQ(0, client_.postSend(6, 0, 64, IBV_SEND_SIGNALED, IBV_WR_SEND_WITH_IMM, 0xdeadbeef));
  ASSERT_EQ(1u, client_.poll(1).size());
  auto received = server_.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(IBV_WC_RECV, received[0].opcode);
  EXPECT_TRUE(received[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(0xdeadbeefu, ntohl(received[0].imm_data));
  EXPECT_EQ(64u, received[0].byte_len);
  EXPECT_EQ(0, memcmp(client_.at(0), server_.at(0), 64));
}

TEST_F(DataPath, RdmaWriteChangesRemoteMemoryWithoutConsumingReceive) {
  ASSERT_EQ(0, server_.postRecv(9, 0, kSlot));
  fill(client_.at(0), 256, 3);
  ASSERT_EQ(0, client_.postRdma(10, IBV_WR_RDMA_WRITE, 0, 256, server_.addr(5 * kSlot),
                                server_.mr->rkey));
  auto written = client_.poll(1);
  ASSERT_EQ(1u, written.size());
  EXPECT_EQ(IBV_WC_SUCCESS, written[0].status);
  EXPECT_EQ(IBV_WC_RDMA_WRITE, written[0].opcode);
  EXPECT_EQ(10u, written[0].wr_id);
  EXPECT_EQ(0, memcmp(client_.at(0), server_.at(5 * kSlot), 256))
      << "a completed RDMA WRITE is visible at the responder";
  EXPECT_TRUE(collectFor(server_.cq).empty()) << "RDMA WRITE consumes no receive";
  // The receive is still there for the next SEND.
  ASSERT_EQ(0, client_.postSend(11, 0, 8));
  auto received = server_.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(9u, received[0].wr_id);
}

TEST_F(DataPath, RdmaWriteWithImmediateConsumesReceive) {
  ASSERT_EQ(0, server_.postRecv(12, 0, kSlot));
  fill(client_.at(0), 300, 4);
  ASSERT_EQ(0, client_.postRdma(13, IBV_WR_RDMA_WRITE_WITH_IMM, 0, 300, server_.addr(7 * kSlot),
                                server_.mr->rkey, IBV_SEND_SIGNALED, 0x01020304));
  auto written = client_.poll(1);
  ASSERT_EQ(1u, written.size());
  EXPECT_EQ(IBV_WC_SUCCESS, written[0].status);
  EXPECT_EQ(IBV_WC_RDMA_WRITE, written[0].opcode);
  auto received = server_.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, received[0].opcode);
  EXPECT_EQ(12u, received[0].wr_id);
  EXPECT_TRUE(received[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(0x01020304u, ntohl(received[0].imm_data));
  EXPECT_EQ(300u, received[0].byte_len);
  EXPECT_EQ(0, memcmp(client_.at(0), server_.at(7 * kSlot), 300));
}

TEST_F(DataPath, RdmaReadFetchesRemoteMemory) {
  fill(server_.at(3 * kSlot), 1000, 5);
  ASSERT_EQ(0, client_.postRdma(14, IBV_WR_RDMA_READ, kSlot, 1000, server_.addr(3 * kSlot),
                                server_.mr->rkey));
  auto read = client_.poll(1);
  ASSERT_EQ(1u, read.size());
  EXPECT_EQ(IBV_WC_SUCCESS, read[0].status);
  EXPECT_EQ(IBV_WC_RDMA_READ, read[0].opcode);
  EXPECT_EQ(14u, read[0].wr_id);
  EXPECT_EQ(1000u, read[0].byte_len);
  EXPECT_EQ(0, memcmp(client_.at(kSlot), server_.at(3 * kSlot), 1000));
  EXPECT_TRUE(collectFor(server_.cq).empty()) << "RDMA READ consumes no receive";
}

TEST_F(DataPath, LargeRdmaWriteIsVisibleBeforeFollowingSendCompletes) {
  ASSERT_EQ(0, server_.postRecv(20, 0, kSlot));
  const size_t size = 512 * 1024;
  fill(client_.at(kSlot), size, 6);
  ASSERT_EQ(0, client_.postRdma(21, IBV_WR_RDMA_WRITE, kSlot, size, server_.addr(kSlot),
                                server_.mr->rkey, 0));
  ASSERT_EQ(0, client_.postSend(22, 0, 8));
  auto received = server_.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(0, memcmp(client_.at(kSlot), server_.at(kSlot), size))
      << "RC order: the WRITE's data is visible when the later SEND arrives";
  EXPECT_EQ(1u, client_.poll(1).size());
}

TEST_F(DataPath, InlineSendBufferIsReusableWhenPostReturns) {
  ASSERT_EQ(0, server_.postRecv(30, 0, kSlot));
  ASSERT_GE(client_.cap.max_inline_data, 32u);
  // Inline data need not be registered: the L_Key is not checked (ibv_post_send.3).
  std::array<uint8_t, 32> local{};
  fill(local.data(), local.size(), 7);
  const std::array<uint8_t, 32> original = local;
  ibv_sge sge{reinterpret_cast<uint64_t>(local.data()), 32, 0};
  ibv_send_wr wr{};
  wr.wr_id = 31;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(client_.qp, &wr, &bad));
  local.fill(0xee);
  auto received = server_.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(32u, received[0].byte_len);
  EXPECT_EQ(0, memcmp(original.data(), server_.at(0), 32));
  auto sent = client_.poll(1);
  ASSERT_EQ(1u, sent.size());
  EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status);
}

TEST_F(DataPath, ChainedWorkRequestListsArePostedInOrder) {
  std::array<ibv_sge, 3> rsge{};
  std::array<ibv_recv_wr, 3> rwr{};
  std::array<ibv_sge, 3> ssge{};
  std::array<ibv_send_wr, 3> swr{};
  for (size_t i = 0; i < 3; ++i) {
    rsge[i] = {server_.addr(i * kSlot), static_cast<uint32_t>(kSlot), server_.mr->lkey};
    rwr[i].wr_id = 100 + i;
    rwr[i].sg_list = &rsge[i];
    rwr[i].num_sge = 1;
    rwr[i].next = i + 1 < 3 ? &rwr[i + 1] : nullptr;
    fill(client_.at(i * kSlot), 10 + i, static_cast<uint8_t>(i));
    ssge[i] = {client_.addr(i * kSlot), static_cast<uint32_t>(10 + i), client_.mr->lkey};
    swr[i].wr_id = 200 + i;
    swr[i].sg_list = &ssge[i];
    swr[i].num_sge = 1;
    swr[i].opcode = IBV_WR_SEND;
    swr[i].send_flags = IBV_SEND_SIGNALED;
    swr[i].next = i + 1 < 3 ? &swr[i + 1] : nullptr;
  }
  ibv_recv_wr* badRecv = nullptr;
  ASSERT_EQ(0, ibv_post_recv(server_.qp, rwr.data(), &badRecv));
  ibv_send_wr* badSend = nullptr;
  ASSERT_EQ(0, ibv_post_send(client_.qp, swr.data(), &badSend));
  auto sent = client_.poll(3);
  auto received = server_.poll(3);
  ASSERT_EQ(3u, sent.size());
  ASSERT_EQ(3u, received.size());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(200 + i, sent[i].wr_id);
    EXPECT_EQ(100 + i, received[i].wr_id);
    EXPECT_EQ(10 + i, received[i].byte_len);
    EXPECT_EQ(0, memcmp(client_.at(i * kSlot), server_.at(i * kSlot), 10 + i));
  }
}

TEST_F(DataPath, UnsignaledSendsMakeNoCompletionButSignaledOneDoes) {
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(0, server_.postRecv(i, i * kSlot, kSlot));
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(0, client_.postSend(300 + i, 0, 8, 0));
  auto received = server_.poll(3);
  ASSERT_EQ(3u, received.size()) << "unsignaled sends are delivered";
  EXPECT_TRUE(collectFor(client_.cq).empty()) << "unsignaled sends make no completion";
  ASSERT_EQ(0, client_.postSend(303, 0, 8, IBV_SEND_SIGNALED));
  auto sent = client_.poll(1);
  ASSERT_EQ(1u, sent.size());
  EXPECT_EQ(303u, sent[0].wr_id);
  EXPECT_TRUE(collectFor(client_.cq).empty()) << "one signaled send, one completion";
  EXPECT_EQ(1u, server_.poll(1).size());
}

TEST_F(DataPath, ThousandSendsCompleteInPostingOrderOnBothSides) {
  const uint32_t batch = std::min({client_.cap.max_send_wr, server_.cap.max_recv_wr, 64u});
  ASSERT_GT(batch, 0u);
  uint32_t nextSend = 0;
  uint32_t nextRecv = 0;
  uint32_t nextSendCompletion = 0;
  while (nextSend < 1000) {
    const uint32_t n = std::min(batch, 1000 - nextSend);
    for (uint32_t j = 0; j < n; ++j) {
      ASSERT_EQ(0, server_.postRecv(nextSend + j, j * 8, 8));
    }
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t seq = nextSend + j;
      memcpy(client_.at(j * 8), &seq, sizeof seq);
      ASSERT_EQ(0, client_.postSend(seq, j * 8, sizeof seq));
    }
    nextSend += n;
    auto sent = client_.poll(n);
    ASSERT_EQ(n, sent.size());
    for (const auto& wc : sent) {
      ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
      ASSERT_EQ(nextSendCompletion++, wc.wr_id) << "send completions in posting order";
    }
    auto received = server_.poll(n);
    ASSERT_EQ(n, received.size());
    for (const auto& wc : received) {
      ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
      ASSERT_EQ(nextRecv, wc.wr_id) << "receive completions in posting order";
      uint32_t seq = 0;
      memcpy(&seq, server_.at((wc.wr_id % batch) * 8), sizeof seq);
      ASSERT_EQ(nextRecv, seq) << "messages arrive in order";
      ++nextRecv;
    }
  }
  EXPECT_EQ(1000u, nextRecv);
}

TEST_F(DataPath, MultiSgeSendGathersAndReceiveScatters) {
  ASSERT_GE(client_.cap.max_send_sge, 3u);
  ASSERT_GE(server_.cap.max_recv_sge, 2u);
  std::array<ibv_sge, 2> rsge{{{server_.addr(10 * kSlot), 25, server_.mr->lkey},
                               {server_.addr(11 * kSlot), 100, server_.mr->lkey}}};
  ibv_recv_wr rwr{};
  rwr.wr_id = 50;
  rwr.sg_list = rsge.data();
  rwr.num_sge = 2;
  ibv_recv_wr* badRecv = nullptr;
  ASSERT_EQ(0, ibv_post_recv(server_.qp, &rwr, &badRecv));
  fill(client_.at(0), 10, 1);
  fill(client_.at(kSlot), 20, 2);
  fill(client_.at(2 * kSlot), 30, 3);
  std::array<ibv_sge, 3> ssge{{{client_.addr(0), 10, client_.mr->lkey},
                               {client_.addr(kSlot), 20, client_.mr->lkey},
                               {client_.addr(2 * kSlot), 30, client_.mr->lkey}}};
  ibv_send_wr swr{};
  swr.wr_id = 51;
  swr.sg_list = ssge.data();
  swr.num_sge = 3;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* badSend = nullptr;
  ASSERT_EQ(0, ibv_post_send(client_.qp, &swr, &badSend));
  auto received = server_.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(60u, received[0].byte_len);
  std::vector<uint8_t> sent;
  sent.insert(sent.end(), client_.at(0), client_.at(0) + 10);
  sent.insert(sent.end(), client_.at(kSlot), client_.at(kSlot) + 20);
  sent.insert(sent.end(), client_.at(2 * kSlot), client_.at(2 * kSlot) + 30);
  EXPECT_EQ(0, memcmp(sent.data(), server_.at(10 * kSlot), 25));
  EXPECT_EQ(0, memcmp(sent.data() + 25, server_.at(11 * kSlot), 35));
  EXPECT_EQ(1u, client_.poll(1).size());
}

TEST_F(DataPath, BothDirectionsAtOnce) {
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(0, server_.postRecv(i, i * kSlot, kSlot));
    ASSERT_EQ(0, client_.postRecv(i, i * kSlot, kSlot));
  }
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(0, client_.postSend(100 + i, 32 * kSlot, 64));
    ASSERT_EQ(0, server_.postSend(100 + i, 32 * kSlot, 64));
  }
  // Each CQ holds both this side's send completions and its receive completions.
  EXPECT_EQ(32u, client_.poll(32).size());
  EXPECT_EQ(32u, server_.poll(32).size());
}

class Acknowledgement : public CmFixture {};

// On RC hardware the responder acknowledges a message before its receive completion is even
// visible, so a sender's SEND completes successfully although the receiver tears the connection
// down right after polling the receive (rdma_server/rdma_client do exactly that).
TEST_F(Acknowledgement, SendSucceedsWhenReceiverDisconnectsRightAfterReceiving) {
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ConnectOptions options;
    options.serverRecvs = 1;
    ASSERT_NO_FATAL_FAILURE(connect(options));
    ASSERT_EQ(0, client_.postSend(1, 0, 8));
    // Busy-poll (bounded) so the teardown follows the receive completion immediately.
    ibv_wc received{};
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    int got = 0;
    while (got == 0 && std::chrono::steady_clock::now() < deadline) {
      got = ibv_poll_cq(server_.cq, 1, &received);
    }
    ASSERT_EQ(1, got);
    ASSERT_EQ(IBV_WC_SUCCESS, received.status);
    ASSERT_EQ(0, rdma_disconnect(server_.id));
    server_.destroy();
    auto sent = client_.poll(1);
    ASSERT_EQ(1u, sent.size());
    EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status) << ibv_wc_status_str(sent[0].status);
    while (nextCmEvent(clientCh_, Millis(0)) || nextCmEvent(serverCh_, Millis(0))) {
    }
    client_.destroy();
  }
}

TEST_F(Acknowledgement, SendSucceedsWhenActiveReceiverDisconnectsRightAfterReceiving) {
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ConnectOptions options;
    options.clientRecvs = 1;
    ASSERT_NO_FATAL_FAILURE(connect(options));
    ASSERT_EQ(0, server_.postSend(1, 0, 8));
    // Busy-poll (bounded) so the teardown follows the receive completion immediately.
    ibv_wc received{};
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    int got = 0;
    while (got == 0 && std::chrono::steady_clock::now() < deadline) {
      got = ibv_poll_cq(client_.cq, 1, &received);
    }
    ASSERT_EQ(1, got);
    ASSERT_EQ(IBV_WC_SUCCESS, received.status);
    ASSERT_EQ(0, rdma_disconnect(client_.id));
    client_.destroy();
    auto sent = server_.poll(1);
    ASSERT_EQ(1u, sent.size());
    EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status) << ibv_wc_status_str(sent[0].status);
    while (nextCmEvent(clientCh_, Millis(0)) || nextCmEvent(serverCh_, Millis(0))) {
    }
    server_.destroy();
  }
}

// rdma_connect on an id without a QP (conn_param.qp_num names the program's own QP, which it
// moves through INIT, RTR and RTS itself, completing the handshake on
// CONNECT_RESPONSE with rdma_establish): a message the server sends at once, before that QP
// is ready, is held, never acknowledged, and delivered once the QP reaches RTR.
class ProgramsOwnQp : public CmFixture {
 protected:
  void TearDown() override {
    if (qp_ != nullptr) {
      EXPECT_EQ(0, ibv_destroy_qp(qp_));
    }
    if (mr_ != nullptr) {
      EXPECT_EQ(0, ibv_dereg_mr(mr_));
    }
    if (cq_ != nullptr) {
      EXPECT_EQ(0, ibv_destroy_cq(cq_));
    }
    if (pd_ != nullptr) {
      EXPECT_EQ(0, ibv_dealloc_pd(pd_));
    }
    CmFixture::TearDown();
  }

  int modify(ibv_qp_state state) {
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = state;
    if (int rc = rdma_init_qp_attr(client_.id, &a, &mask); rc != 0) return rc;
    if (state == IBV_QPS_RTR) a.dest_qp_num = server_.qp->qp_num;
    return ibv_modify_qp(qp_, &a, mask);
  }

  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_qp* qp_ = nullptr;
  std::array<uint8_t, 64> buf_{};
};

TEST_F(ProgramsOwnQp, MessageBeforeRtrIsHeldAndDeliveredOnceTheQpIsReady) {
  ASSERT_NO_FATAL_FAILURE(resolveClient());
  pd_ = ibv_alloc_pd(client_.id->verbs);
  ASSERT_NE(nullptr, pd_);
  cq_ = ibv_create_cq(client_.id->verbs, 16, nullptr, nullptr, 0);
  ASSERT_NE(nullptr, cq_);
  mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(nullptr, mr_);
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  qp_ = ibv_create_qp(pd_, &init);
  ASSERT_NE(nullptr, qp_);
  rdma_conn_param param{};
  param.responder_resources = param.initiator_depth = 1;
  param.retry_count = param.rnr_retry_count = 7;
  param.qp_num = qp_->qp_num;
  ASSERT_EQ(0, rdma_connect(client_.id, &param)) << strerror(errno);
  auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_TRUE(request);
  ASSERT_NO_FATAL_FAILURE(server_.create(request->id));
  rdma_conn_param accept{};
  accept.responder_resources = accept.initiator_depth = 1;
  accept.rnr_retry_count = 7;
  ASSERT_EQ(0, rdma_accept(server_.id, &accept)) << strerror(errno);
  // No QP on the id: the active side completes the handshake itself (rdma_establish sends the
  // RTU), here before its QP is ready.
  ASSERT_TRUE(expectCmEvent(clientCh_, RDMA_CM_EVENT_CONNECT_RESPONSE));
  ASSERT_EQ(0, rdma_establish(client_.id)) << strerror(errno);
  ASSERT_TRUE(expectCmEvent(serverCh_, RDMA_CM_EVENT_ESTABLISHED));

  fill(server_.at(0), 32, 7);
  ASSERT_EQ(0, server_.postSend(1, 0, 32));
  EXPECT_TRUE(collectFor(server_.cq).empty()) << "nothing acknowledges it before RTR";
  ASSERT_EQ(0, modify(IBV_QPS_INIT));
  ibv_sge sge{reinterpret_cast<uint64_t>(buf_.data()), 64, mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = 9;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_recv(qp_, &wr, &bad));
  ASSERT_EQ(0, modify(IBV_QPS_RTR));
  ASSERT_EQ(0, modify(IBV_QPS_RTS));

  auto received = pollCompletions(cq_, 1);
  ASSERT_EQ(1u, received.size()) << "the held message is delivered once the QP is ready";
  EXPECT_EQ(9u, received[0].wr_id);
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(32u, received[0].byte_len);
  EXPECT_EQ(0, memcmp(server_.at(0), buf_.data(), 32));
  auto sent = server_.poll(1);
  ASSERT_EQ(1u, sent.size());
  EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status);
}

}  // namespace
}  // namespace rdmamsg::test
