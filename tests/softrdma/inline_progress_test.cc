// Inline progress: a program's thread that polls a CQ (ibv_poll_cq, ibv_start_poll) or gets its
// channel's events receives what waits in the sockets of the CQ's connections itself, as a NIC
// delivers without a hand-off to a progress thread. With the progress thread held, completions
// and events still arrive, through the program's own calls only; the event rules (one-shot
// arming, nothing without arming) are those of the progress thread.
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

}  // namespace
}  // namespace rdmamsg::test
