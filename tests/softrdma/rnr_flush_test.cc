// RNR (no receive posted): rnr_retry_count from the PEER's conn_param bounds the retries; 7
// holds the message until a receive appears. Flush: a QP in ERR completes every outstanding
// WR with IBV_WC_WR_FLUSH_ERR and raises a CQ event; a destroyed QP leaves no CQEs behind.
#include <cstring>

#include "../support/wait.h"
#include "support.h"

namespace rdmamsg::test {
namespace {

class Rnr : public CmFixture {};

TEST_F(Rnr, AcceptorRnrRetryZeroFailsClientSendWithRnrRetryExceeded) {
  ConnectOptions options;
  options.serverRnrRetry = 0;  // rdma_accept.3: governs the remote (client) side's sends
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ASSERT_EQ(0, client_.postSend(1, 0, 8));
  auto wcs = client_.poll(1, Millis(10000));
  ASSERT_EQ(1u, wcs.size());
  EXPECT_EQ(1u, wcs[0].wr_id);
  EXPECT_EQ(IBV_WC_RNR_RETRY_EXC_ERR, wcs[0].status) << ibv_wc_status_str(wcs[0].status);
  EXPECT_TRUE(waitFor([&] { return client_.qpState() == IBV_QPS_ERR; }, kDeadline));
}

TEST_F(Rnr, ConnectorRnrRetryZeroFailsServerSendWithRnrRetryExceeded) {
  ConnectOptions options;
  options.clientRnrRetry = 0;  // rdma_connect.3: governs the remote (server) side's sends
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ASSERT_EQ(0, server_.postSend(2, 0, 8));
  auto wcs = server_.poll(1, Millis(10000));
  ASSERT_EQ(1u, wcs.size());
  EXPECT_EQ(IBV_WC_RNR_RETRY_EXC_ERR, wcs[0].status) << ibv_wc_status_str(wcs[0].status);
}

TEST_F(Rnr, RnrRetrySevenHoldsMessageUntilReceiveIsPosted) {
  ConnectOptions options;
  options.clientRnrRetry = 0;  // must not affect the client's own sends
  options.serverRnrRetry = 7;  // infinite retries for the client's sends
  ASSERT_NO_FATAL_FAILURE(connect(options));
  memcpy(client_.at(0), "held msg", 8);
  ASSERT_EQ(0, client_.postSend(3, 0, 8));
  EXPECT_TRUE(collectFor(client_.cq, Millis(300)).empty()) << "the send waits for a receive";
  ASSERT_EQ(0, server_.postRecv(4, 0, kSlot));
  auto received = server_.poll(1, Millis(10000));
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(0, memcmp(server_.at(0), "held msg", 8));
  auto sent = client_.poll(1, Millis(10000));
  ASSERT_EQ(1u, sent.size());
  EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status);
}

class Flush : public CmFixture {
 protected:
  static void expectFlushed(const std::vector<ibv_wc>& wcs, const std::vector<uint64_t>& ids,
                            uint32_t qpNum) {
    ASSERT_EQ(ids.size(), wcs.size());
    for (size_t i = 0; i < wcs.size(); ++i) {
      EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wcs[i].status) << ibv_wc_status_str(wcs[i].status);
      EXPECT_EQ(ids[i], wcs[i].wr_id);
      EXPECT_EQ(qpNum, wcs[i].qp_num);
    }
  }
  static std::vector<uint64_t> recvIds(int n) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < n; ++i)
      ids.push_back(kRecvBase + i);
    return ids;
  }
};

TEST_F(Flush, DisconnectFlushesReceivesOnEachSideAndRaisesCqEvent) {
  ConnectOptions options;
  options.clientRecvs = 4;
  options.serverRecvs = 4;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ASSERT_EQ(0, ibv_req_notify_cq(client_.cq, 0));
  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 0));

  ASSERT_EQ(0, rdma_disconnect(client_.id));
  expectFlushed(client_.poll(4), recvIds(4), client_.qp->qp_num);
  EXPECT_EQ(client_.cq, getCqEvent(client_.comp)) << "flush raises an event on an armed CQ";
  ibv_ack_cq_events(client_.cq, 1);

  auto disconnected = expectCmEvent(serverCh_, RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_TRUE(disconnected);
  EXPECT_TRUE(collectFor(server_.cq).empty())
      << "the library leaves the peer's QP alone until it calls rdma_disconnect";
  ASSERT_EQ(0, rdma_disconnect(server_.id));
  expectFlushed(server_.poll(4), recvIds(4), server_.qp->qp_num);
  EXPECT_EQ(server_.cq, getCqEvent(server_.comp));
  ibv_ack_cq_events(server_.cq, 1);
}

TEST_F(Flush, ModifyToErrorFlushesOutstandingSendsAndReceives) {
  ConnectOptions options;
  options.clientRecvs = 3;  // the server posts no receive: the client's sends stay outstanding
  ASSERT_NO_FATAL_FAILURE(connect(options));
  for (uint64_t i = 1; i <= 3; ++i)
    ASSERT_EQ(0, client_.postSend(i, 0, 8));
  EXPECT_TRUE(collectFor(client_.cq).empty());
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(0, ibv_modify_qp(client_.qp, &attr, IBV_QP_STATE));
  auto wcs = client_.poll(6);
  ASSERT_EQ(6u, wcs.size());
  std::vector<ibv_wc> sends;
  std::vector<ibv_wc> recvs;
  for (const auto& wc : wcs)
    (wc.wr_id >= kRecvBase ? recvs : sends).push_back(wc);
  expectFlushed(sends, {1, 2, 3}, client_.qp->qp_num);
  expectFlushed(recvs, recvIds(3), client_.qp->qp_num);
}

TEST_F(Flush, WorkRequestsPostedInErrorStateAreFlushed) {
  ASSERT_NO_FATAL_FAILURE(connect());
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(0, ibv_modify_qp(client_.qp, &attr, IBV_QP_STATE));
  ASSERT_EQ(0, client_.postRecv(10, 0, kSlot));
  ASSERT_EQ(0, client_.postSend(11, 0, 8));
  auto wcs = client_.poll(2);
  ASSERT_EQ(2u, wcs.size());
  for (const auto& wc : wcs) {
    EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status);
    EXPECT_TRUE(wc.wr_id == 10 || wc.wr_id == 11);
  }
}

TEST_F(Flush, DestroyedQpLeavesNoCompletionsInItsCq) {
  ConnectOptions options;
  options.clientRecvs = 8;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ASSERT_EQ(0, ibv_req_notify_cq(client_.cq, 0));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(0, ibv_modify_qp(client_.qp, &attr, IBV_QP_STATE));
  ASSERT_EQ(client_.cq, getCqEvent(client_.comp)) << "flush CQEs are in the CQ";
  ibv_ack_cq_events(client_.cq, 1);
  client_.destroyQp();
  EXPECT_TRUE(collectFor(client_.cq).empty()) << "ibv_destroy_qp removes the QP's CQEs";
}

}  // namespace
}  // namespace rdmamsg::test
