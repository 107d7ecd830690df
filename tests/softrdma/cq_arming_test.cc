// CQ notification is one-shot (ibv_req_notify_cq.3): one event per arming, only for completions
// added after arming; solicited_only passes solicited receives and every unsuccessful completion.
#include "support.h"

namespace rdmamsg::test {
namespace {

class CqArming : public CmFixture {
 protected:
  void SetUp() override {
    CmFixture::SetUp();
    if (HasFatalFailure()) return;
    ConnectOptions options;
    options.serverRecvs = 8;
    ASSERT_NO_FATAL_FAILURE(connect(options));
  }

  // Client sends one message (signaled) and the server's receive completion is polled, so
  // any event it generated is already visible on the server's completion channel.
  void deliverOne(uint64_t wrId, unsigned flags = IBV_SEND_SIGNALED) {
    ASSERT_EQ(0, client_.postSend(wrId, 0, 16, flags));
    auto sent = client_.poll(1);
    ASSERT_EQ(1u, sent.size());
    ASSERT_EQ(IBV_WC_SUCCESS, sent[0].status);
    auto received = server_.poll(1);
    ASSERT_EQ(1u, received.size());
    ASSERT_EQ(IBV_WC_SUCCESS, received[0].status);
  }

  bool serverEventPending(Millis window = kQuiet) { return waitReadable(server_.comp->fd, window); }
};

TEST_F(CqArming, CompletionOnUnarmedCqMakesNoEvent) {
  ASSERT_NO_FATAL_FAILURE(deliverOne(1));
  EXPECT_FALSE(serverEventPending());
  EXPECT_EQ(nullptr, getCqEvent(server_.comp, Millis(0)));
}

TEST_F(CqArming, ArmingDeliversExactlyOneEventForManyCompletions) {
  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 0));
  ASSERT_NO_FATAL_FAILURE(deliverOne(1));
  ASSERT_EQ(server_.cq, getCqEvent(server_.comp));
  ibv_ack_cq_events(server_.cq, 1);
  // Not re-armed: the second completion makes no event.
  ASSERT_NO_FATAL_FAILURE(deliverOne(2));
  EXPECT_FALSE(serverEventPending());
  EXPECT_EQ(nullptr, getCqEvent(server_.comp, Millis(0)));
  // Re-armed: the next completion makes exactly one event again.
  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 0));
  ASSERT_NO_FATAL_FAILURE(deliverOne(3));
  ASSERT_EQ(server_.cq, getCqEvent(server_.comp));
  ibv_ack_cq_events(server_.cq, 1);
  EXPECT_EQ(nullptr, getCqEvent(server_.comp, kQuiet));
}

TEST_F(CqArming, TwoCompletionsAfterOneArmingMakeOneEvent) {
  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 0));
  ASSERT_EQ(0, client_.postSend(1, 0, 16));
  ASSERT_EQ(0, client_.postSend(2, 0, 16));
  ASSERT_EQ(2u, client_.poll(2).size());
  ASSERT_EQ(2u, server_.poll(2).size());
  ASSERT_EQ(server_.cq, getCqEvent(server_.comp));
  ibv_ack_cq_events(server_.cq, 1);
  EXPECT_EQ(nullptr, getCqEvent(server_.comp, kQuiet));
}

TEST_F(CqArming, SolicitedOnlyIgnoresUnsolicitedReceive) {
  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 1));
  ASSERT_NO_FATAL_FAILURE(deliverOne(1));
  EXPECT_FALSE(serverEventPending());
  // Still armed: a solicited message triggers the event.
  ASSERT_NO_FATAL_FAILURE(deliverOne(2, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED));
  EXPECT_EQ(server_.cq, getCqEvent(server_.comp));
  ibv_ack_cq_events(server_.cq, 1);
}

TEST_F(CqArming, SolicitedOnlyFiresForSolicitedReceive) {
  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 1));
  ASSERT_NO_FATAL_FAILURE(deliverOne(1, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED));
  EXPECT_EQ(server_.cq, getCqEvent(server_.comp));
  ibv_ack_cq_events(server_.cq, 1);
}

TEST_F(CqArming, SolicitedOnlyFiresForFlushCompletion) {
  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 1));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(0, ibv_modify_qp(server_.qp, &attr, IBV_QP_STATE));
  auto flushed = server_.poll(8);
  ASSERT_EQ(8u, flushed.size());
  for (const auto& wc : flushed)
    EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status);
  EXPECT_EQ(server_.cq, getCqEvent(server_.comp));
  ibv_ack_cq_events(server_.cq, 1);
}

TEST_F(CqArming, SolicitedOnlyFiresForSenderErrorCompletion) {
  ASSERT_EQ(0, ibv_req_notify_cq(client_.cq, 1));
  // A send with a wrong lkey fails locally: an unsuccessful completion passes solicited_only.
  ibv_sge sge{client_.addr(0), 16, client_.mr->lkey ^ 0x5a5a5a5au};
  ibv_send_wr wr{};
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(client_.qp, &wr, &bad));
  auto wcs = client_.poll(1);
  ASSERT_EQ(1u, wcs.size());
  EXPECT_NE(IBV_WC_SUCCESS, wcs[0].status);
  EXPECT_EQ(client_.cq, getCqEvent(client_.comp));
  ibv_ack_cq_events(client_.cq, 1);
}

}  // namespace
}  // namespace rdmamsg::test
