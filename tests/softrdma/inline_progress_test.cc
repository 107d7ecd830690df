// Inline progress: a program's thread that polls a CQ (ibv_poll_cq, ibv_start_poll) or gets its
// channel's events receives what waits in the sockets of the CQ's connections itself, as a NIC
// delivers without a hand-off to a progress thread. With the progress thread held, completions
// and events still arrive, through the program's own calls only; the event rules (one-shot
// arming, nothing without arming) are those of the progress thread.
#include <array>
#include <cerrno>

#include "../support/wait.h"
#include "softrdma/testing.h"
#include "support.h"

namespace rdmamsg::test {
namespace {

// Holds softrdma's progress thread for the guard's lifetime.
class ProgressHold {
 public:
  ProgressHold() { softrdma_hold_progress(1); }
  ProgressHold(const ProgressHold&) = delete;
  ProgressHold& operator=(const ProgressHold&) = delete;
  ~ProgressHold() { softrdma_hold_progress(0); }
};

class InlineProgress : public CmFixture {
 protected:
  void SetUp() override {
    CmFixture::SetUp();
    if (HasFatalFailure()) return;
    ConnectOptions options;
    options.serverRecvs = 8;
    ASSERT_NO_FATAL_FAILURE(connect(options));
  }
};

TEST_F(InlineProgress, PollCqReceivesAndCompletesSendsWithTheProgressThreadHeld) {
  const int64_t inlineBefore = softrdma_counter("rx_inline");
  ProgressHold hold;
  const int64_t progressBefore = softrdma_counter("rx_progress");
  for (uint64_t i = 1; i <= 3; i++) {
    ASSERT_EQ(0, client_.postSend(i, 0, 16));
    auto received = server_.poll(1);
    ASSERT_EQ(1u, received.size()) << "the server's ibv_poll_cq received message " << i;
    EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
    EXPECT_EQ(IBV_WC_RECV, received[0].opcode);
    EXPECT_EQ(16u, received[0].byte_len);
    auto sent = client_.poll(1);
    ASSERT_EQ(1u, sent.size()) << "the client's ibv_poll_cq took the ACK of message " << i;
    EXPECT_EQ(i, sent[0].wr_id);
    EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status);
  }
  EXPECT_GE(softrdma_counter("rx_inline") - inlineBefore, 6) << "3 messages and their 3 ACKs";
  EXPECT_EQ(progressBefore, softrdma_counter("rx_progress"));
}

TEST_F(InlineProgress, GetCqEventRaisesTheEventOfAnArmedCqWithTheProgressThreadHeld) {
  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 0));
  ProgressHold hold;
  ASSERT_EQ(0, client_.postSend(1, 0, 16));
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  ASSERT_TRUE(
      waitFor([&] { return ibv_get_cq_event(server_.comp, &cq, &context) == 0; }, kDeadline))
      << "ibv_get_cq_event received the message and returned its event";
  EXPECT_EQ(server_.cq, cq);
  ibv_ack_cq_events(server_.cq, 1);
  EXPECT_EQ(-1, ibv_get_cq_event(server_.comp, &cq, &context)) << "one event per arming";
  EXPECT_EQ(EAGAIN, errno);
  EXPECT_EQ(1u, server_.poll(1, Millis(0)).size());
  EXPECT_EQ(1u, client_.poll(1).size());
}

TEST_F(InlineProgress, GetCqEventReceivesForAnUnarmedCqButRaisesNothing) {
  ProgressHold hold;
  const int64_t inlineBefore = softrdma_counter("rx_inline");
  ASSERT_EQ(0, client_.postSend(1, 0, 16));
  int events = 0;
  ASSERT_TRUE(waitFor(
      [&] {
        ibv_cq* cq = nullptr;
        void* context = nullptr;
        if (ibv_get_cq_event(server_.comp, &cq, &context) == 0) events++;
        return softrdma_counter("rx_inline") > inlineBefore;
      },
      kDeadline))
      << "ibv_get_cq_event received the message";
  EXPECT_EQ(0, events) << "the CQ was not armed";
  EXPECT_FALSE(waitReadable(server_.comp->fd, Millis(0)));
  EXPECT_EQ(1u, server_.poll(1, Millis(0)).size()) << "the completion is in the CQ";
  EXPECT_EQ(1u, client_.poll(1).size());
}

// Two RC QPs connected without rdma_cm (ibv_modify_qp with the peer's GID and QP number, as
// ibv_rc_pingpong and perftest do), both on one CQ: one of them dials the other, and polling
// the CQ receives on both sockets, the dialer's too.
class InlineProgressManualQps : public DeviceFixture {
 protected:
  void SetUp() override {
    DeviceFixture::SetUp();
    if (HasFatalFailure()) return;
    mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(nullptr, mr_);
    cq_ = ibv_create_cq(context_, 64, nullptr, nullptr, 0);
    ASSERT_NE(nullptr, cq_);
    for (ibv_qp*& qp : qps_) {
      ibv_qp_init_attr init{};
      init.send_cq = init.recv_cq = cq_;
      init.qp_type = IBV_QPT_RC;
      init.cap.max_send_wr = init.cap.max_recv_wr = 8;
      init.cap.max_send_sge = init.cap.max_recv_sge = 1;
      qp = ibv_create_qp(pd_, &init);
      ASSERT_NE(nullptr, qp);
    }
    ASSERT_EQ(0, toRts(qps_[0], qps_[1]->qp_num));
    ASSERT_EQ(0, toRts(qps_[1], qps_[0]->qp_num));
  }
  void TearDown() override {
    for (ibv_qp* qp : qps_)
      if (qp != nullptr) {
        EXPECT_EQ(0, ibv_destroy_qp(qp));
      }
    if (cq_ != nullptr) {
      EXPECT_EQ(0, ibv_destroy_cq(cq_));
    }
    if (mr_ != nullptr) {
      EXPECT_EQ(0, ibv_dereg_mr(mr_));
    }
    DeviceFixture::TearDown();
  }

  int toRts(ibv_qp* qp, uint32_t remoteQpn) { return manualQpToRts(qp, remoteQpn, gid_); }

  // qps_[from] sends 16 bytes (signaled) into a receive posted on the other QP.
  void exchange(int from, uint64_t wrId) {
    ibv_qp* to = qps_[1 - from];
    ibv_sge rsge{reinterpret_cast<uint64_t>(buf_.data() + 64), 64, mr_->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = wrId + 1;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    ASSERT_EQ(0, ibv_post_recv(to, &rwr, &rbad));
    ibv_sge ssge{reinterpret_cast<uint64_t>(buf_.data()), 16, mr_->lkey};
    ibv_send_wr swr{};
    swr.wr_id = wrId;
    swr.sg_list = &ssge;
    swr.num_sge = 1;
    swr.opcode = IBV_WR_SEND;
    swr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* sbad = nullptr;
    ASSERT_EQ(0, ibv_post_send(qps_[from], &swr, &sbad));
    auto wcs = pollCompletions(cq_, 2);
    ASSERT_EQ(2u, wcs.size()) << "the send and its receive completed";
    for (const ibv_wc& wc : wcs)
      EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
  }

  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::array<ibv_qp*, 2> qps_{};
  std::array<uint8_t, 256> buf_{};
};

TEST_F(InlineProgressManualQps, PollCqReceivesOnBothSocketsWithTheProgressThreadHeld) {
  ASSERT_NO_FATAL_FAILURE(exchange(0, 10));  // the connection forms, the progress thread running
  ProgressHold hold;
  // Each direction has one socket receive a request and the other its ACK: the dialer's
  // socket receives something in either, and only this thread's polls can read it now.
  ASSERT_NO_FATAL_FAILURE(exchange(0, 20));
  ASSERT_NO_FATAL_FAILURE(exchange(1, 30));
}

}  // namespace
}  // namespace rdmamsg::test
