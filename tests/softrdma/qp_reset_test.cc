// A QP connected without rdma_cm, moved to RESET and brought back to RTS with its peer, carries
// traffic again, as on rxe: after plain traffic, after an error that moved both QPs to ERR, with
// either QP of the pair reset and brought back first. And ibv_rereg_mr moving a receive buffer's
// MR to another PD and back, the flow of rdma-core's test_mr_rereg_pd. And such QPs still work
// after the time their connection had to form. QPs in one process.
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "support.h"

namespace rdmamsg::test {
namespace {

constexpr size_t kBuf = 2 * kSlot;

struct End {
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf, 0);
};

class QpReset : public DeviceFixture {
 protected:
  void SetUp() override {
    DeviceFixture::SetUp();
    if (HasFatalFailure()) return;
    for (End* e : {&a_, &b_}) {
      e->cq = ibv_create_cq(context_, 64, nullptr, nullptr, 0);
      ASSERT_NE(nullptr, e->cq);
      ibv_qp_init_attr attr{};
      attr.send_cq = attr.recv_cq = e->cq;
      attr.qp_type = IBV_QPT_RC;
      attr.cap = {16, 16, 1, 1, 0};
      e->qp = ibv_create_qp(pd_, &attr);
      ASSERT_NE(nullptr, e->qp);
      e->mr = ibv_reg_mr(pd_, e->buf.data(), kBuf, IBV_ACCESS_LOCAL_WRITE);
      ASSERT_NE(nullptr, e->mr);
    }
    ASSERT_EQ(0, toRts(a_, b_));
    ASSERT_EQ(0, toRts(b_, a_));
  }
  void TearDown() override {
    for (End* e : {&a_, &b_}) {
      if (e->qp != nullptr) {
        EXPECT_EQ(0, ibv_destroy_qp(e->qp));
      }
      if (e->cq != nullptr) {
        EXPECT_EQ(0, ibv_destroy_cq(e->cq));
      }
      if (e->mr != nullptr) {
        EXPECT_EQ(0, ibv_dereg_mr(e->mr));
      }
    }
    DeviceFixture::TearDown();
  }

  int toRts(End& e, End& peer) {
    return manualQpToRts(e.qp, peer.qp->qp_num, gid_, {IBV_ACCESS_REMOTE_WRITE, 1, 1});
  }

  static int reset(End& e) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RESET;
    return ibv_modify_qp(e.qp, &a, IBV_QP_STATE);
  }

  // Resets both QPs and brings them back to RTS, `first` completely before the other.
  void restate(End& first, End& second) {
    ASSERT_EQ(0, reset(first));
    ASSERT_EQ(0, toRts(first, second));
    ASSERT_EQ(0, reset(second));
    ASSERT_EQ(0, toRts(second, first));
  }

  // A 64-byte SEND from `from` into a receive of `to`; the two completion statuses.
  std::pair<ibv_wc_status, ibv_wc_status> send(End& from, End& to, uint8_t fill) {
    ibv_sge rsge{reinterpret_cast<uint64_t>(to.buf.data()), 64, to.mr->lkey};
    ibv_recv_wr recv{};
    recv.sg_list = &rsge;
    recv.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    EXPECT_EQ(0, ibv_post_recv(to.qp, &recv, &rbad));
    memset(from.buf.data() + kSlot, fill, 64);
    ibv_sge sge{reinterpret_cast<uint64_t>(from.buf.data() + kSlot), 64, from.mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(0, ibv_post_send(from.qp, &wr, &bad));
    auto sent = pollCompletions(from.cq, 1);
    auto received = pollCompletions(to.cq, 1);
    if (sent.size() != 1 || received.size() != 1) {
      ADD_FAILURE() << "missing completions";
      return {IBV_WC_GENERAL_ERR, IBV_WC_GENERAL_ERR};
    }
    return {sent[0].status, received[0].status};
  }

  void expectTrafficBothWays(uint8_t fill) {
    using Pair = std::pair<ibv_wc_status, ibv_wc_status>;
    EXPECT_EQ(Pair(IBV_WC_SUCCESS, IBV_WC_SUCCESS), send(a_, b_, fill));
    EXPECT_EQ(fill, b_.buf[63]);
    EXPECT_EQ(Pair(IBV_WC_SUCCESS, IBV_WC_SUCCESS), send(b_, a_, fill + 1));
    EXPECT_EQ(fill + 1, a_.buf[63]);
  }

  // A remote access error: an RDMA WRITE from a_ to a key b_ does not have.
  void breakBoth() {
    ibv_sge sge{reinterpret_cast<uint64_t>(a_.buf.data()), 8, a_.mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(b_.buf.data());
    wr.wr.rdma.rkey = b_.mr->rkey;  // registered without remote write
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(0, ibv_post_send(a_.qp, &wr, &bad));
    auto wc = pollCompletions(a_.cq, 1);
    ASSERT_EQ(1u, wc.size());
    EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, wc[0].status);
    ibv_qp_attr err{};
    err.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(0, ibv_modify_qp(b_.qp, &err, IBV_QP_STATE));
  }

  End& lower() { return a_.qp->qp_num < b_.qp->qp_num ? a_ : b_; }
  End& higher() { return a_.qp->qp_num < b_.qp->qp_num ? b_ : a_; }

  End a_, b_;
};

TEST_F(QpReset, BackToRtsCarriesTrafficAgain) {
  expectTrafficBothWays(1);
  ASSERT_NO_FATAL_FAILURE(restate(a_, b_));
  expectTrafficBothWays(3);
  ASSERT_NO_FATAL_FAILURE(restate(b_, a_));
  expectTrafficBothWays(5);
}

TEST_F(QpReset, AfterAnErrorTheDialingQpComesBackFirst) {
  expectTrafficBothWays(1);
  ASSERT_NO_FATAL_FAILURE(breakBoth());
  ASSERT_NO_FATAL_FAILURE(restate(lower(), higher()));
  expectTrafficBothWays(3);
}

TEST_F(QpReset, AfterAnErrorTheListeningQpComesBackFirst) {
  expectTrafficBothWays(1);
  ASSERT_NO_FATAL_FAILURE(breakBoth());
  ASSERT_NO_FATAL_FAILURE(restate(higher(), lower()));
  expectTrafficBothWays(3);
}

TEST_F(QpReset, ReceiveBufferMovedToAnotherPdAndBack) {
  expectTrafficBothWays(1);
  ibv_pd* other = ibv_alloc_pd(context_);
  ASSERT_NE(nullptr, other);
  ASSERT_EQ(0, ibv_rereg_mr(b_.mr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0));
  using Pair = std::pair<ibv_wc_status, ibv_wc_status>;
  EXPECT_EQ(Pair(IBV_WC_REM_OP_ERR, IBV_WC_LOC_PROT_ERR), send(a_, b_, 7));
  ASSERT_NO_FATAL_FAILURE(restate(a_, b_));
  ASSERT_EQ(0, ibv_rereg_mr(b_.mr, IBV_REREG_MR_CHANGE_PD, pd_, nullptr, 0, 0));
  expectTrafficBothWays(9);
  EXPECT_EQ(0, ibv_dealloc_pd(other));
}

// Both QPs keep working once the time a connection has to form (10 s) is over: the waiting
// QP's deadline concerns only a connection that never came. Not a synchronisation: the test
// is about the time that passes.
using ManualQp = QpReset;
TEST_F(ManualQp, BothSidesStillSendAfterTheConnectDeadline) {
  expectTrafficBothWays(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(10500));
  expectTrafficBothWays(3);
}

}  // namespace
}  // namespace rdmamsg::test
