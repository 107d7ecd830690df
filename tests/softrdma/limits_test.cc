// Queue and SGE limits, the QP state machine, device maxima, and key/length checks with their
// completion statuses (ibv_post_send.3, ibv_modify_qp.3, ibv_create_qp.3, ibv_poll_cq.3).
#include <array>
#include <cstring>

#include "../support/wait.h"
#include "support.h"

namespace rdmamsg::test {
namespace {

// --- Limits on a connected QP -------------------------------------------------------------------

class Limits : public CmFixture {
 protected:
  void SetUp() override {
    CmFixture::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_NO_FATAL_FAILURE(connect());
  }

  ibv_send_wr sendWr(uint64_t wrId, ibv_sge* sge, int numSge) {
    ibv_send_wr wr{};
    wr.wr_id = wrId;
    wr.sg_list = sge;
    wr.num_sge = numSge;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    return wr;
  }
};

TEST_F(Limits, PostingBeyondMaxSendWrFailsWithEnomemAndBadWrAtFirstUnposted) {
  // No receive is posted at the server and rnr_retry is 7: every send stays outstanding.
  const uint32_t cap = client_.cap.max_send_wr;
  ASSERT_GT(cap, 0u);
  std::vector<ibv_sge> sges(cap + 3, ibv_sge{client_.addr(0), 8, client_.mr->lkey});
  std::vector<ibv_send_wr> wrs(cap + 3);
  for (size_t i = 0; i < wrs.size(); ++i) {
    wrs[i] = sendWr(i, &sges[i], 1);
    wrs[i].next = i + 1 < wrs.size() ? &wrs[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ENOMEM, ibv_post_send(client_.qp, wrs.data(), &bad));
  EXPECT_EQ(&wrs[cap], bad) << "bad_wr is the first WR that was not posted";
  // The posted prefix is really posted: it completes once receives exist.
  if (server_.cap.max_recv_wr >= cap) {
    for (uint32_t i = 0; i < cap; ++i)
      ASSERT_EQ(0, server_.postRecv(i, 0, kSlot));
    auto sent = client_.poll(cap, Millis(15000));
    ASSERT_EQ(cap, sent.size());
    for (uint32_t i = 0; i < cap; ++i) {
      EXPECT_EQ(IBV_WC_SUCCESS, sent[i].status);
      EXPECT_EQ(i, sent[i].wr_id);
    }
    EXPECT_TRUE(collectFor(client_.cq).empty()) << "nothing beyond bad_wr was posted";
  }
}

TEST_F(Limits, PostingBeyondMaxRecvWrFailsWithEnomemAndBadWrAtFirstUnposted) {
  const uint32_t cap = server_.cap.max_recv_wr;
  std::vector<ibv_sge> sges(cap + 2, ibv_sge{server_.addr(0), 8, server_.mr->lkey});
  std::vector<ibv_recv_wr> wrs(cap + 2);
  for (size_t i = 0; i < wrs.size(); ++i) {
    wrs[i].wr_id = i;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].next = i + 1 < wrs.size() ? &wrs[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ENOMEM, ibv_post_recv(server_.qp, wrs.data(), &bad));
  EXPECT_EQ(&wrs[cap], bad);
}

TEST_F(Limits, MoreSgesThanMaxSendSgeFailsWithEinval) {
  const uint32_t n = client_.cap.max_send_sge + 1;
  std::vector<ibv_sge> sges(n, ibv_sge{client_.addr(0), 1, client_.mr->lkey});
  ibv_send_wr wr = sendWr(1, sges.data(), static_cast<int>(n));
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(EINVAL, ibv_post_send(client_.qp, &wr, &bad));
  EXPECT_EQ(&wr, bad);
}

TEST_F(Limits, MoreSgesThanMaxRecvSgeFailsWithEinval) {
  const uint32_t n = server_.cap.max_recv_sge + 1;
  std::vector<ibv_sge> sges(n, ibv_sge{server_.addr(0), 1, server_.mr->lkey});
  ibv_recv_wr wr{};
  wr.sg_list = sges.data();
  wr.num_sge = static_cast<int>(n);
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(EINVAL, ibv_post_recv(server_.qp, &wr, &bad));
  EXPECT_EQ(&wr, bad);
}

TEST_F(Limits, InlineLargerThanMaxInlineDataFailsWithEinval) {
  ibv_sge sge{client_.addr(0), client_.cap.max_inline_data + 1, client_.mr->lkey};
  ibv_send_wr wr = sendWr(1, &sge, 1);
  wr.send_flags |= IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(EINVAL, ibv_post_send(client_.qp, &wr, &bad));
  EXPECT_EQ(&wr, bad);
}

TEST_F(Limits, WrongLkeyCompletesWithLocalProtectionError) {
  ASSERT_EQ(0, server_.postRecv(1, 0, kSlot));
  ibv_sge sge{client_.addr(0), 16, client_.mr->lkey ^ 0x00ff00ffu};
  ibv_send_wr wr = sendWr(5, &sge, 1);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(client_.qp, &wr, &bad));
  auto wcs = client_.poll(1);
  ASSERT_EQ(1u, wcs.size());
  EXPECT_EQ(5u, wcs[0].wr_id);
  EXPECT_EQ(IBV_WC_LOC_PROT_ERR, wcs[0].status) << ibv_wc_status_str(wcs[0].status);
  EXPECT_TRUE(waitFor([&] { return client_.qpState() == IBV_QPS_ERR; }, kDeadline))
      << "a failed WR moves the QP to ERR";
}

TEST_F(Limits, SgeOutsideRegisteredRangeCompletesWithLocalProtectionError) {
  ASSERT_EQ(0, server_.postRecv(1, 0, kSlot));
  ibv_sge sge{client_.addr(client_.buf.size() - 10), 100, client_.mr->lkey};
  ibv_send_wr wr = sendWr(6, &sge, 1);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(client_.qp, &wr, &bad));
  auto wcs = client_.poll(1);
  ASSERT_EQ(1u, wcs.size());
  EXPECT_EQ(IBV_WC_LOC_PROT_ERR, wcs[0].status) << ibv_wc_status_str(wcs[0].status);
}

TEST_F(Limits, RdmaWriteWithWrongRkeyCompletesWithRemoteAccessError) {
  ASSERT_EQ(0, client_.postRdma(7, IBV_WR_RDMA_WRITE, 0, 64, server_.addr(0),
                                server_.mr->rkey ^ 0x12345678u));
  auto wcs = client_.poll(1);
  ASSERT_EQ(1u, wcs.size());
  EXPECT_EQ(7u, wcs[0].wr_id);
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, wcs[0].status) << ibv_wc_status_str(wcs[0].status);
}

TEST_F(Limits, RdmaWriteOutsideRemoteRegionCompletesWithRemoteAccessError) {
  ASSERT_EQ(0, client_.postRdma(8, IBV_WR_RDMA_WRITE, 0, 64, server_.addr(server_.buf.size() - 32),
                                server_.mr->rkey));
  auto wcs = client_.poll(1);
  ASSERT_EQ(1u, wcs.size());
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, wcs[0].status) << ibv_wc_status_str(wcs[0].status);
}

TEST_F(Limits, RdmaWriteToRegionWithoutRemoteWriteAccessCompletesWithRemoteAccessError) {
  std::vector<uint8_t> local(4096);
  ibv_mr* readOnly = ibv_reg_mr(server_.pd, local.data(), local.size(),
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(nullptr, readOnly);
  ASSERT_EQ(0, client_.postRdma(9, IBV_WR_RDMA_WRITE, 0, 64,
                                reinterpret_cast<uint64_t>(local.data()), readOnly->rkey));
  auto wcs = client_.poll(1);
  ASSERT_EQ(1u, wcs.size());
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, wcs[0].status) << ibv_wc_status_str(wcs[0].status);
  EXPECT_EQ(0, ibv_dereg_mr(readOnly));
}

TEST_F(Limits, ReceiveBufferTooSmallCompletesWithLocalLengthErrorAtReceiver) {
  ASSERT_EQ(0, server_.postRecv(10, 0, 16));
  ASSERT_EQ(0, client_.postSend(11, 0, 64));
  auto received = server_.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(10u, received[0].wr_id);
  EXPECT_EQ(IBV_WC_LOC_LEN_ERR, received[0].status) << ibv_wc_status_str(received[0].status);
  auto sent = client_.poll(1);
  ASSERT_EQ(1u, sent.size());
  EXPECT_NE(IBV_WC_SUCCESS, sent[0].status);
  EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, sent[0].status)
      << "IB requester sees a remote invalid request NAK; got "
      << ibv_wc_status_str(sent[0].status);
}

// --- QP state machine and device limits on plain verbs (no rdma_cm) -----------------------------

class Verbs : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = openFirstDevice();
    ASSERT_NE(nullptr, context_);
    ASSERT_EQ(0, ibv_query_device(context_, &device_));
    ASSERT_EQ(0, ibv_query_port(context_, 1, &port_));
    pd_ = ibv_alloc_pd(context_);
    ASSERT_NE(nullptr, pd_);
    cq_ = ibv_create_cq(context_, 64, nullptr, nullptr, 0);
    ASSERT_NE(nullptr, cq_);
    buf_.assign(64 * 1024, 0);
    mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(nullptr, mr_);
  }
  void TearDown() override {
    for (ibv_qp* qp : qps_)
      EXPECT_EQ(0, ibv_destroy_qp(qp));
    if (mr_ != nullptr) {
      EXPECT_EQ(0, ibv_dereg_mr(mr_));
    }
    if (cq_ != nullptr) {
      EXPECT_EQ(0, ibv_destroy_cq(cq_));
    }
    if (pd_ != nullptr) {
      EXPECT_EQ(0, ibv_dealloc_pd(pd_));
    }
    if (context_ != nullptr) {
      EXPECT_EQ(0, ibv_close_device(context_));
    }
  }

  ibv_qp* createQp(uint32_t sendWr = 16, uint32_t sge = 1) {
    ibv_qp_init_attr attr{};
    attr.send_cq = cq_;
    attr.recv_cq = cq_;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = sendWr;
    attr.cap.max_recv_wr = 16;
    attr.cap.max_send_sge = sge;
    attr.cap.max_recv_sge = 1;
    ibv_qp* qp = ibv_create_qp(pd_, &attr);
    if (qp != nullptr) qps_.push_back(qp);
    return qp;
  }

  static int state(ibv_qp* qp) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    return ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) == 0 ? attr.qp_state : -1;
  }

  int toInit(ibv_qp* qp) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = 1;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    return ibv_modify_qp(qp, &attr,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  }

  // RTR towards `remote` on this device, addressed like ibv_rc_pingpong (LID + GID 0).
  int toRtr(ibv_qp* qp, uint32_t remoteQpn) {
    ibv_gid gid{};
    if (ibv_query_gid(context_, 1, 0, &gid) != 0) return -1;
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = IBV_MTU_1024;
    attr.dest_qp_num = remoteQpn;
    attr.rq_psn = 0;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.dlid = port_.lid;
    attr.ah_attr.port_num = 1;
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = gid;
    attr.ah_attr.grh.sgid_index = 0;
    attr.ah_attr.grh.hop_limit = 1;
    return ibv_modify_qp(qp, &attr,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  }

  static int toRts(ibv_qp* qp) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.sq_psn = 0;
    attr.max_rd_atomic = 1;
    return ibv_modify_qp(qp, &attr,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  }

  int postRecv(ibv_qp* qp, uint64_t wrId, size_t offset) {
    ibv_sge sge{reinterpret_cast<uint64_t>(buf_.data() + offset), 1024, mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wrId;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp, &wr, &bad);
  }

  int postSend(ibv_qp* qp, uint64_t wrId, size_t offset, uint32_t length) {
    ibv_sge sge{reinterpret_cast<uint64_t>(buf_.data() + offset), length, mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wrId;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
  }

  ibv_context* context_ = nullptr;
  ibv_device_attr device_{};
  ibv_port_attr port_{};
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<uint8_t> buf_;
  std::vector<ibv_qp*> qps_;
};

TEST_F(Verbs, DeviceAndPortReportPlausibleAttributes) {
  EXPECT_GT(device_.max_qp_wr, 0);
  EXPECT_GT(device_.max_sge, 0);
  EXPECT_GT(device_.max_cqe, 0);
  EXPECT_GT(device_.max_qp, 0);
  EXPECT_GE(device_.phys_port_cnt, 1);
  EXPECT_GE(context_->num_comp_vectors, 1);
  EXPECT_EQ(IBV_PORT_ACTIVE, port_.state);
}

TEST_F(Verbs, NewQpIsInResetAndRejectsReceivesWithEinval) {
  ibv_qp* qp = createQp();
  ASSERT_NE(nullptr, qp);
  EXPECT_EQ(IBV_QPS_RESET, state(qp));
  EXPECT_EQ(EINVAL, postRecv(qp, 1, 0));
}

TEST_F(Verbs, SendsOnQpNotInRtsFailWithEinval) {
  ibv_qp* qp = createQp();
  ibv_qp* peer = createQp();
  ASSERT_TRUE(qp && peer);
  EXPECT_EQ(EINVAL, postSend(qp, 1, 0, 8)) << "RESET";
  ASSERT_EQ(0, toInit(qp));
  EXPECT_EQ(EINVAL, postSend(qp, 1, 0, 8)) << "INIT";
  ASSERT_EQ(0, toRtr(qp, peer->qp_num));
  EXPECT_EQ(EINVAL, postSend(qp, 1, 0, 8)) << "RTR";
}

TEST_F(Verbs, ResetToRtrDirectlyFailsWithEinval) {
  ibv_qp* qp = createQp();
  ibv_qp* peer = createQp();
  ASSERT_TRUE(qp && peer);
  EXPECT_EQ(EINVAL, toRtr(qp, peer->qp_num));
  EXPECT_EQ(IBV_QPS_RESET, state(qp));
}

TEST_F(Verbs, TransitionWithoutRequiredAttributesFailsWithEinval) {
  ibv_qp* qp = createQp();
  ASSERT_NE(nullptr, qp);
  ASSERT_EQ(0, toInit(qp));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &attr, IBV_QP_STATE)) << "RTR needs AV, DEST_QPN, ...";
  EXPECT_EQ(IBV_QPS_INIT, state(qp));
}

TEST_F(Verbs, ResetInitRtrRtsWithRequiredAttributesSucceeds) {
  ibv_qp* qp = createQp();
  ibv_qp* peer = createQp();
  ASSERT_TRUE(qp && peer);
  ASSERT_EQ(0, toInit(qp));
  EXPECT_EQ(IBV_QPS_INIT, state(qp));
  EXPECT_EQ(0, postRecv(qp, 1, 0)) << "receives may be posted in INIT";
  ASSERT_EQ(0, toRtr(qp, peer->qp_num));
  EXPECT_EQ(IBV_QPS_RTR, state(qp));
  ASSERT_EQ(0, toRts(qp));
  EXPECT_EQ(IBV_QPS_RTS, state(qp));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(0, ibv_modify_qp(qp, &attr, IBV_QP_STATE));
  EXPECT_EQ(IBV_QPS_ERR, state(qp));
  attr.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(0, ibv_modify_qp(qp, &attr, IBV_QP_STATE));
  EXPECT_EQ(IBV_QPS_RESET, state(qp));
}

TEST_F(Verbs, ManuallyConnectedQpsExchangeMessagesLikeRcPingpong) {
  ibv_qp* a = createQp();
  ibv_qp* b = createQp();
  ASSERT_TRUE(a && b);
  for (ibv_qp* qp : {a, b})
    ASSERT_EQ(0, toInit(qp));
  ASSERT_EQ(0, postRecv(b, 7, 4096));
  ASSERT_EQ(0, toRtr(a, b->qp_num));
  ASSERT_EQ(0, toRtr(b, a->qp_num));
  ASSERT_EQ(0, toRts(a));
  ASSERT_EQ(0, toRts(b));
  memcpy(buf_.data(), "pingpong", 8);
  ASSERT_EQ(0, postSend(a, 8, 0, 8));
  auto wcs = pollCompletions(cq_, 2);
  ASSERT_EQ(2u, wcs.size());
  for (const auto& wc : wcs) {
    EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
    EXPECT_EQ(wc.wr_id == 7 ? b->qp_num : a->qp_num, wc.qp_num);
  }
  EXPECT_EQ(0, memcmp(buf_.data() + 4096, "pingpong", 8));
}

TEST_F(Verbs, CreateQpBeyondDeviceMaximaFails) {
  EXPECT_EQ(nullptr, createQp(static_cast<uint32_t>(device_.max_qp_wr) + 1, 1));
  EXPECT_EQ(nullptr, createQp(16, static_cast<uint32_t>(device_.max_sge) + 1));
}

TEST_F(Verbs, CreateCqBeyondDeviceMaximumFails) {
  ibv_cq* cq = ibv_create_cq(context_, device_.max_cqe + 1, nullptr, nullptr, 0);
  EXPECT_EQ(nullptr, cq);
  if (cq != nullptr) ibv_destroy_cq(cq);
}

}  // namespace
}  // namespace rdmamsg::test
