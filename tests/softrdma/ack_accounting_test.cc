// Event/ack accounting and destroy ordering: destroying a CQ or an id waits until every event
// returned for it was acked; parents in use refuse destruction with EBUSY.
#include <atomic>
#include <future>
#include <memory>
#include <thread>

#include "../support/wait.h"
#include "support.h"

namespace rdmamsg::test {
namespace {

// Runs `destroy` on another thread; the test checks that it blocks until `release` ran.
template <typename Destroy, typename Release>
void expectBlocksUntil(Destroy destroy, Release release) {
  struct State {
    std::atomic<bool> returned{false};
    std::promise<int> result;
  };
  auto state = std::make_shared<State>();
  auto future = state->result.get_future();
  std::thread thread([state, destroy] {
    state->result.set_value(destroy());
    state->returned = true;
  });
  // Observation window: the destroy call must still be waiting for the ack.
  EXPECT_FALSE(waitFor([&] { return state->returned.load(); }, Millis(300)))
      << "destroy returned while an event was un-acked";
  release();
  const bool finished = future.wait_for(kDeadline) == std::future_status::ready;
  EXPECT_TRUE(finished) << "destroy did not return after the ack";
  if (finished) {
    EXPECT_EQ(0, future.get());
    thread.join();
  } else {
    thread.detach();  // the test has failed; do not hang the process on join
  }
}

class AckAccounting : public CmFixture {};

TEST_F(AckAccounting, DestroyCqWaitsUntilReturnedEventIsAcked) {
  ConnectOptions options;
  options.serverRecvs = 1;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 0));
  ASSERT_EQ(0, client_.postSend(1, 0, 8));
  ASSERT_EQ(1u, client_.poll(1).size());
  ASSERT_EQ(server_.cq, getCqEvent(server_.comp));
  ASSERT_EQ(1u, server_.poll(1).size());
  server_.destroyQp();  // the CQ must not be in use by a QP
  ibv_cq* cq = server_.cq;
  expectBlocksUntil([cq] { return ibv_destroy_cq(cq); }, [cq] { ibv_ack_cq_events(cq, 1); });
  server_.cq = nullptr;
}

TEST_F(AckAccounting, DestroyIdWaitsUntilItsEventsAreAcked) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(0, rdma_create_id(clientCh_, &id, nullptr, RDMA_PS_TCP));
  sockaddr_in dst = ipv4("127.0.0.1", port_);
  ASSERT_EQ(0, rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  rdma_cm_event* event = getRawCmEvent(clientCh_);
  ASSERT_NE(nullptr, event);
  ASSERT_EQ(id, event->id);
  expectBlocksUntil([id] { return rdma_destroy_id(id); },
                    [event] { EXPECT_EQ(0, rdma_ack_cm_event(event)); });
}

TEST_F(AckAccounting, DestroyIdDiscardsUnreadEvents) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(0, rdma_create_id(clientCh_, &id, nullptr, RDMA_PS_TCP));
  sockaddr_in dst = ipv4("127.0.0.1", port_);
  ASSERT_EQ(0, rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  ASSERT_TRUE(waitReadable(clientCh_->fd, kDeadline));
  // The event was never returned by rdma_get_cm_event: destroy does not wait for it.
  EXPECT_EQ(0, rdma_destroy_id(id));
  EXPECT_FALSE(nextCmEvent(clientCh_, kQuiet)) << "events of a destroyed id are discarded";
}

class Busy : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = openFirstDevice();
    ASSERT_NE(nullptr, context_);
    pd_ = ibv_alloc_pd(context_);
    ASSERT_NE(nullptr, pd_);
    channel_ = ibv_create_comp_channel(context_);
    ASSERT_NE(nullptr, channel_);
    cq_ = ibv_create_cq(context_, 16, nullptr, channel_, 0);
    ASSERT_NE(nullptr, cq_);
  }
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
    if (channel_ != nullptr) {
      EXPECT_EQ(0, ibv_destroy_comp_channel(channel_));
    }
    if (pd_ != nullptr) {
      EXPECT_EQ(0, ibv_dealloc_pd(pd_));
    }
    if (context_ != nullptr) {
      EXPECT_EQ(0, ibv_close_device(context_));
    }
  }
  void createQp() {
    ibv_qp_init_attr attr{};
    attr.send_cq = cq_;
    attr.recv_cq = cq_;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    qp_ = ibv_create_qp(pd_, &attr);
    ASSERT_NE(nullptr, qp_);
  }

  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  char buf_[256] = {};
};

TEST_F(Busy, DestroyCqInUseByQpFailsWithEbusy) {
  ASSERT_NO_FATAL_FAILURE(createQp());
  EXPECT_EQ(EBUSY, ibv_destroy_cq(cq_));
  EXPECT_EQ(0, ibv_destroy_qp(qp_));
  qp_ = nullptr;
}

TEST_F(Busy, DestroyCompChannelWithCqAttachedFailsWithEbusy) {
  EXPECT_EQ(EBUSY, ibv_destroy_comp_channel(channel_));
  EXPECT_EQ(0, ibv_destroy_cq(cq_));
  cq_ = nullptr;
  EXPECT_EQ(0, ibv_destroy_comp_channel(channel_));
  channel_ = nullptr;
}

TEST_F(Busy, DeallocPdWithMrFailsWithEbusy) {
  mr_ = ibv_reg_mr(pd_, buf_, sizeof buf_, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(nullptr, mr_);
  EXPECT_EQ(EBUSY, ibv_dealloc_pd(pd_));
}

TEST_F(Busy, DeallocPdWithQpFailsWithEbusy) {
  ASSERT_NO_FATAL_FAILURE(createQp());
  EXPECT_EQ(EBUSY, ibv_dealloc_pd(pd_));
}

}  // namespace
}  // namespace rdmamsg::test
