// Memory windows as rxe has them: type 1 windows bound with ibv_bind_mw, type 2 windows bound
// by IBV_WR_BIND_MW work requests (and ibv_wr_bind_mw), local invalidation, SEND with
// invalidate, and the responder's checks of an access through a window's rkey (bounds, the
// window's access flags, its QP, invalidated and unbound windows: IBV_WC_REM_ACCESS_ERR at the
// requester, whose QP goes to error). QPs connected by hand within one process.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "support.h"

namespace rdmamsg::test {
namespace {

constexpr size_t kBuf = 4 * kSlot;
constexpr int kWindowAccess = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr uint64_t kSendOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
                              IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_BIND_MW |
                              IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV;

// A QP with a CQ of its own.
struct End {
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
};

class Mw : public DeviceFixture {
 protected:
  void SetUp() override {
    DeviceFixture::SetUp();
    if (HasFatalFailure()) return;
    local_.assign(kBuf, 0);
    remote_.assign(kBuf, 0);
    localMr_ = ibv_reg_mr(pd_, local_.data(), kBuf, IBV_ACCESS_LOCAL_WRITE);
    // The MR itself gives no remote access: only windows do.
    remoteMr_ = ibv_reg_mr(pd_, remote_.data(), kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    ASSERT_TRUE(localMr_ && remoteMr_);
    ASSERT_NO_FATAL_FAILURE(link(requester_, responder_));
  }
  void TearDown() override {
    for (ibv_mw* mw : mws_)
      EXPECT_EQ(0, ibv_dealloc_mw(mw));
    for (End* e : {&requester_, &responder_, &other_, &otherResponder_}) {
      if (e->qp != nullptr) {
        EXPECT_EQ(0, ibv_destroy_qp(e->qp));
      }
      if (e->cq != nullptr) {
        EXPECT_EQ(0, ibv_destroy_cq(e->cq));
      }
    }
    for (ibv_mr* mr : {localMr_, remoteMr_})
      if (mr != nullptr) {
        EXPECT_EQ(0, ibv_dereg_mr(mr));
      }
    DeviceFixture::TearDown();
  }

  void create(End& e) {
    e.cq = ibv_create_cq(context_, 256, nullptr, nullptr, 0);
    ASSERT_NE(nullptr, e.cq);
    ibv_qp_init_attr_ex attr{};
    attr.send_cq = e.cq;
    attr.recv_cq = e.cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = 64;
    attr.cap.max_recv_wr = 16;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    attr.pd = pd_;
    attr.send_ops_flags = kSendOps;
    e.qp = ibv_create_qp_ex(context_, &attr);
    ASSERT_NE(nullptr, e.qp);
  }

  int toRts(ibv_qp* qp, uint32_t remoteQpn) {
    return manualQpToRts(qp, remoteQpn, gid_,
                         {IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 1, 1});
  }

  void link(End& a, End& b) {
    ASSERT_NO_FATAL_FAILURE(create(a));
    ASSERT_NO_FATAL_FAILURE(create(b));
    ASSERT_EQ(0, toRts(a.qp, b.qp->qp_num));
    ASSERT_EQ(0, toRts(b.qp, a.qp->qp_num));
  }

  ibv_mw* alloc(ibv_mw_type type) {
    ibv_mw* mw = ibv_alloc_mw(pd_, type);
    if (mw != nullptr) mws_.push_back(mw);
    return mw;
  }
  void dealloc(ibv_mw* mw) {
    std::erase(mws_, mw);
    EXPECT_EQ(0, ibv_dealloc_mw(mw));
  }

  uint64_t remote(size_t offset) { return reinterpret_cast<uint64_t>(&remote_[offset]); }

  // A type 2 bind of `mw` over [offset, +length) of the remote buffer, posted on the
  // responder's QP with the window's next key; returns the post's result (the key in *rkey).
  int bindType2(ibv_mw* mw, size_t offset, uint64_t length, unsigned access, uint32_t* rkey,
                ibv_mr* mr = nullptr) {
    ibv_send_wr wr{};
    wr.wr_id = 7;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    wr.bind_mw.bind_info.mr = mr != nullptr ? mr : remoteMr_;
    wr.bind_mw.bind_info.addr = remote(offset);
    wr.bind_mw.bind_info.length = length;
    wr.bind_mw.bind_info.mw_access_flags = access;
    *rkey = wr.bind_mw.rkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(responder_.qp, &wr, &bad);
  }

  // An RDMA operation of `length` bytes from local_ on `e`; returns its completion status.
  ibv_wc_status rdma(End& e, ibv_wr_opcode op, uint64_t remoteAddr, uint32_t rkey,
                     uint32_t length = 64) {
    ibv_sge sge{reinterpret_cast<uint64_t>(local_.data()), length, localMr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remoteAddr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(e.qp, &wr, &bad) != 0) return IBV_WC_GENERAL_ERR;
    return one(e).status;
  }

  ibv_wc one(End& e) {
    auto wcs = pollCompletions(e.cq, 1);
    if (wcs.size() != 1) {
      ADD_FAILURE() << "no completion";
      return ibv_wc{};
    }
    return wcs[0];
  }

  static int state(ibv_qp* qp) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    return ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) == 0 ? attr.qp_state : -1;
  }

  std::vector<uint8_t> local_, remote_;
  ibv_mr* localMr_ = nullptr;
  ibv_mr* remoteMr_ = nullptr;
  End requester_, responder_, other_, otherResponder_;
  std::vector<ibv_mw*> mws_;
};

TEST_F(Mw, DeviceReportsWindowsAsRxeDoes) {
  ibv_device_attr attr{};
  ASSERT_EQ(0, ibv_query_device(context_, &attr));
  const unsigned flags =
      IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  EXPECT_EQ(flags, attr.device_cap_flags & flags);
  EXPECT_EQ(0x1000, attr.max_mw);
  ibv_mw* one = alloc(IBV_MW_TYPE_1);
  ibv_mw* two = alloc(IBV_MW_TYPE_2);
  ASSERT_TRUE(one && two);
  EXPECT_EQ(IBV_MW_TYPE_1, one->type);
  EXPECT_EQ(pd_, two->pd);
  EXPECT_NE(one->rkey, two->rkey);
  errno = 0;
  EXPECT_EQ(nullptr, ibv_alloc_mw(pd_, static_cast<ibv_mw_type>(3)));
  EXPECT_EQ(EINVAL, errno);
  EXPECT_EQ(EBUSY, ibv_dealloc_pd(pd_)) << "windows hold their PD";
}

TEST_F(Mw, Type1BindGivesAccessWithinTheWindowOnly) {
  ibv_mw* mw = alloc(IBV_MW_TYPE_1);
  ASSERT_NE(nullptr, mw);
  const uint32_t before = mw->rkey;
  ibv_mw_bind bind{};
  bind.wr_id = 9;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info = {remoteMr_, remote(kSlot), kSlot, kWindowAccess};
  ASSERT_EQ(0, ibv_bind_mw(responder_.qp, mw, &bind));
  EXPECT_EQ(ibv_inc_rkey(before), mw->rkey) << "ibv_mw takes the next key when posted";
  ibv_wc wc = one(responder_);
  EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
  EXPECT_EQ(IBV_WC_BIND_MW, wc.opcode);
  EXPECT_EQ(9u, wc.wr_id);

  memset(local_.data(), 0xab, 64);
  ASSERT_EQ(IBV_WC_SUCCESS, rdma(requester_, IBV_WR_RDMA_WRITE, remote(kSlot), mw->rkey));
  EXPECT_EQ(0xab, remote_[kSlot + 63]);
  EXPECT_EQ(IBV_WC_SUCCESS, rdma(requester_, IBV_WR_RDMA_READ, remote(2 * kSlot - 64), mw->rkey));
  // The MR around the window is not reachable through it.
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
            rdma(requester_, IBV_WR_RDMA_WRITE, remote(2 * kSlot - 32), mw->rkey));
  EXPECT_EQ(IBV_QPS_ERR, state(requester_.qp));
  EXPECT_EQ(0, remote_[2 * kSlot]);
}

TEST_F(Mw, Type1RebindRetiresTheOldKeyAndZeroLengthUnbinds) {
  ibv_mw* mw = alloc(IBV_MW_TYPE_1);
  ASSERT_NE(nullptr, mw);
  ibv_mw_bind bind{};
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info = {remoteMr_, remote(0), kBuf, kWindowAccess};
  ASSERT_EQ(0, ibv_bind_mw(responder_.qp, mw, &bind));
  ASSERT_EQ(IBV_WC_SUCCESS, one(responder_).status);
  const uint32_t first = mw->rkey;
  ASSERT_EQ(0, ibv_bind_mw(responder_.qp, mw, &bind));
  ASSERT_EQ(IBV_WC_SUCCESS, one(responder_).status);
  EXPECT_EQ(IBV_WC_SUCCESS, rdma(requester_, IBV_WR_RDMA_WRITE, remote(0), mw->rkey));
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rdma(requester_, IBV_WR_RDMA_WRITE, remote(0), first));

  ASSERT_NO_FATAL_FAILURE(link(other_, otherResponder_));
  bind.bind_info = {remoteMr_, remote(0), 0, 0};
  ASSERT_EQ(0, ibv_bind_mw(otherResponder_.qp, mw, &bind)) << "a type 1 window binds from any QP";
  ASSERT_EQ(IBV_WC_SUCCESS, one(otherResponder_).status);
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rdma(other_, IBV_WR_RDMA_WRITE, remote(0), mw->rkey));
}

TEST_F(Mw, Type2WindowServesItsQpUntilLocallyInvalidated) {
  ibv_mw* mw = alloc(IBV_MW_TYPE_2);
  ASSERT_NE(nullptr, mw);
  uint32_t rkey = 0;
  ASSERT_EQ(0, bindType2(mw, 0, kBuf, kWindowAccess, &rkey));
  ibv_wc wc = one(responder_);
  ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
  EXPECT_EQ(IBV_WC_BIND_MW, wc.opcode);
  remote_[100] = 0x5c;
  ASSERT_EQ(IBV_WC_SUCCESS, rdma(requester_, IBV_WR_RDMA_READ, remote(64), rkey));
  EXPECT_EQ(0x5c, local_[36]);

  // Another connection of the same PD: a type 2 window belongs to the QP that bound it.
  ASSERT_NO_FATAL_FAILURE(link(other_, otherResponder_));
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rdma(other_, IBV_WR_RDMA_READ, remote(64), rkey));

  ibv_send_wr inv{};
  inv.wr_id = 8;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(responder_.qp, &inv, &bad));
  wc = one(responder_);
  EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
  EXPECT_EQ(IBV_WC_LOCAL_INV, wc.opcode);
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rdma(requester_, IBV_WR_RDMA_READ, remote(64), rkey));
  EXPECT_EQ(IBV_QPS_ERR, state(requester_.qp));
}

TEST_F(Mw, SendWithInvalidateInvalidatesTheResponderWindow) {
  ibv_mw* mw = alloc(IBV_MW_TYPE_2);
  ASSERT_NE(nullptr, mw);
  uint32_t rkey = 0;
  ASSERT_EQ(0, bindType2(mw, 0, kBuf, kWindowAccess, &rkey));
  ASSERT_EQ(IBV_WC_SUCCESS, one(responder_).status);
  ASSERT_EQ(IBV_WC_SUCCESS, rdma(requester_, IBV_WR_RDMA_WRITE, remote(0), rkey));

  ibv_sge rsge{remote(kSlot), kSlot, remoteMr_->lkey};
  ibv_recv_wr recv{};
  recv.wr_id = 77;
  recv.sg_list = &rsge;
  recv.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(0, ibv_post_recv(responder_.qp, &recv, &rbad));
  ibv_sge sge{reinterpret_cast<uint64_t>(local_.data()), 32, localMr_->lkey};
  ibv_send_wr send{};
  send.wr_id = 5;
  send.sg_list = &sge;
  send.num_sge = 1;
  send.opcode = IBV_WR_SEND_WITH_INV;
  send.send_flags = IBV_SEND_SIGNALED;
  send.invalidate_rkey = rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(requester_.qp, &send, &bad));
  ibv_wc wc = one(requester_);
  EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
  EXPECT_EQ(IBV_WC_SEND, wc.opcode);
  wc = one(responder_);
  EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
  EXPECT_EQ(IBV_WC_RECV, wc.opcode);
  EXPECT_EQ(77u, wc.wr_id);
  EXPECT_EQ(32u, wc.byte_len);
  EXPECT_EQ(IBV_WC_WITH_INV, wc.wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(rkey, wc.invalidated_rkey);
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rdma(requester_, IBV_WR_RDMA_WRITE, remote(0), rkey));
}

TEST_F(Mw, SendInvalidatingAnUnboundKeyIsAnInvalidRequest) {
  ibv_mw* mw = alloc(IBV_MW_TYPE_2);
  ASSERT_NE(nullptr, mw);
  ibv_sge rsge{remote(0), kSlot, remoteMr_->lkey};
  ibv_recv_wr recv{};
  recv.sg_list = &rsge;
  recv.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(0, ibv_post_recv(responder_.qp, &recv, &rbad));
  ibv_send_wr send{};
  send.opcode = IBV_WR_SEND_WITH_INV;
  send.send_flags = IBV_SEND_SIGNALED;
  send.invalidate_rkey = mw->rkey;  // allocated, never bound
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(requester_.qp, &send, &bad));
  EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, one(requester_).status);
  ibv_wc wc = one(responder_);
  EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, wc.status);
  EXPECT_EQ(IBV_QPS_ERR, state(responder_.qp));
}

TEST_F(Mw, WindowAccessFlagsGovernNotTheMrs) {
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(responder_.qp);
  ASSERT_NE(nullptr, qpx);
  ibv_mw* mw = alloc(IBV_MW_TYPE_2);
  ASSERT_NE(nullptr, mw);
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  ibv_mw_bind_info info{remoteMr_, remote(0), kBuf, IBV_ACCESS_REMOTE_READ};
  ibv_wr_start(qpx);
  qpx->wr_id = 3;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_bind_mw(qpx, mw, rkey, &info);
  ASSERT_EQ(0, ibv_wr_complete(qpx));
  ASSERT_EQ(IBV_WC_SUCCESS, one(responder_).status);
  EXPECT_EQ(IBV_WC_SUCCESS, rdma(requester_, IBV_WR_RDMA_READ, remote(0), rkey));
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rdma(requester_, IBV_WR_RDMA_WRITE, remote(0), rkey));
  EXPECT_EQ(0, remote_[0]);
}

TEST_F(Mw, WrBuildersBindAndInvalidateLocallyAndRemotely) {
  ibv_qp_ex* responder = ibv_qp_to_qp_ex(responder_.qp);
  ibv_qp_ex* requester = ibv_qp_to_qp_ex(requester_.qp);
  ASSERT_TRUE(responder && requester);
  ibv_mw* first = alloc(IBV_MW_TYPE_2);
  ibv_mw* second = alloc(IBV_MW_TYPE_2);
  ASSERT_TRUE(first && second);
  const uint32_t k1 = ibv_inc_rkey(first->rkey), k2 = ibv_inc_rkey(second->rkey);
  ibv_mw_bind_info info{remoteMr_, remote(0), kBuf, kWindowAccess};
  ibv_wr_start(responder);
  responder->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_bind_mw(responder, first, k1, &info);
  ibv_wr_bind_mw(responder, second, k2, &info);
  ASSERT_EQ(0, ibv_wr_complete(responder));
  ASSERT_EQ(2u, pollCompletions(responder_.cq, 2).size());
  ASSERT_EQ(IBV_WC_SUCCESS, rdma(requester_, IBV_WR_RDMA_WRITE, remote(0), k1));
  ASSERT_EQ(IBV_WC_SUCCESS, rdma(requester_, IBV_WR_RDMA_WRITE, remote(0), k2));

  ibv_wr_start(responder);
  responder->wr_id = 4;
  ibv_wr_local_inv(responder, k1);
  ASSERT_EQ(0, ibv_wr_complete(responder));
  ibv_wc wc = one(responder_);
  EXPECT_EQ(IBV_WC_LOCAL_INV, wc.opcode);
  EXPECT_EQ(IBV_WC_SUCCESS, wc.status);

  ibv_sge rsge{remote(kSlot), kSlot, remoteMr_->lkey};
  ibv_recv_wr recv{};
  recv.sg_list = &rsge;
  recv.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(0, ibv_post_recv(responder_.qp, &recv, &rbad));
  ibv_wr_start(requester);
  requester->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send_inv(requester, k2);
  ibv_wr_set_sge(requester, localMr_->lkey, reinterpret_cast<uint64_t>(local_.data()), 16);
  ASSERT_EQ(0, ibv_wr_complete(requester));
  EXPECT_EQ(IBV_WC_SUCCESS, one(requester_).status);
  wc = one(responder_);
  EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
  EXPECT_EQ(k2, wc.invalidated_rkey);
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rdma(requester_, IBV_WR_RDMA_WRITE, remote(0), k2));
  ASSERT_NO_FATAL_FAILURE(link(other_, otherResponder_));
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rdma(other_, IBV_WR_RDMA_WRITE, remote(0), k1));
}

TEST_F(Mw, ZeroBasedType2WindowTakesOffsets) {
  ibv_mw* mw = alloc(IBV_MW_TYPE_2);
  ASSERT_NE(nullptr, mw);
  uint32_t rkey = 0;
  ASSERT_EQ(0, bindType2(mw, kSlot, kSlot, kWindowAccess | IBV_ACCESS_ZERO_BASED, &rkey));
  ASSERT_EQ(IBV_WC_SUCCESS, one(responder_).status);
  memset(local_.data(), 0x11, 64);
  ASSERT_EQ(IBV_WC_SUCCESS, rdma(requester_, IBV_WR_RDMA_WRITE, 128, rkey));
  EXPECT_EQ(0x11, remote_[kSlot + 128]);
  EXPECT_EQ(0, remote_[128]);
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rdma(requester_, IBV_WR_RDMA_WRITE, kSlot - 32, rkey));
}

TEST_F(Mw, FailedBindCompletesWithBindErrorAndTheQpGoesToError) {
  ibv_mr* noBind = ibv_reg_mr(pd_, local_.data(), kBuf, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(nullptr, noBind);
  ibv_mw* mw = alloc(IBV_MW_TYPE_2);
  ASSERT_NE(nullptr, mw);
  uint32_t rkey = 0;
  // The MR was registered without IBV_ACCESS_MW_BIND (C10-73).
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = {noBind, reinterpret_cast<uint64_t>(local_.data()), 64, kWindowAccess};
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(responder_.qp, &wr, &bad));
  ibv_wc wc = one(responder_);
  EXPECT_EQ(IBV_WC_MW_BIND_ERR, wc.status);
  EXPECT_EQ(IBV_QPS_ERR, state(responder_.qp));
  EXPECT_EQ(0, ibv_dereg_mr(noBind));
}

TEST_F(Mw, LocalInvalidateOfAType1WindowFails) {
  ibv_mw* mw = alloc(IBV_MW_TYPE_1);
  ASSERT_NE(nullptr, mw);
  ibv_send_wr inv{};
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = mw->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(responder_.qp, &inv, &bad));
  ibv_wc wc = one(responder_);
  EXPECT_EQ(IBV_WC_LOC_QP_OP_ERR, wc.status);
  EXPECT_EQ(IBV_QPS_ERR, state(responder_.qp));
}

TEST_F(Mw, BindWithDataIsRefusedAtPost) {
  ibv_mw* mw = alloc(IBV_MW_TYPE_2);
  ASSERT_NE(nullptr, mw);
  ibv_sge sge{reinterpret_cast<uint64_t>(local_.data()), 8, localMr_->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_BIND_MW;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.bind_mw.mw = mw;
  wr.bind_mw.bind_info = {remoteMr_, remote(0), 64, kWindowAccess};
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(EINVAL, ibv_post_send(responder_.qp, &wr, &bad));
  EXPECT_EQ(&wr, bad);
  EXPECT_EQ(IBV_QPS_RTS, state(responder_.qp));
}

TEST_F(Mw, BoundMrCannotBeDeregisteredAndDeallocRevokesAccess) {
  ibv_mw* mw = alloc(IBV_MW_TYPE_2);
  ASSERT_NE(nullptr, mw);
  uint32_t rkey = 0;
  ASSERT_EQ(0, bindType2(mw, 0, kBuf, kWindowAccess, &rkey));
  ASSERT_EQ(IBV_WC_SUCCESS, one(responder_).status);
  EXPECT_EQ(EINVAL, ibv_dereg_mr(remoteMr_)) << "a window is bound to it";
  dealloc(mw);
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, rdma(requester_, IBV_WR_RDMA_WRITE, remote(0), rkey));
}

TEST_F(Mw, BindCompletesInOrderAfterTheRequestBeforeIt) {
  ibv_mw* mw = alloc(IBV_MW_TYPE_2);
  ASSERT_NE(nullptr, mw);
  // The responder QP requests too: a READ from the requester side, then a bind.
  ibv_mr* requesterSide =
      ibv_reg_mr(pd_, local_.data(), kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(nullptr, requesterSide);
  ibv_sge sge{remote(0), 64, remoteMr_->lkey};
  ibv_send_wr read{};
  read.wr_id = 1;
  read.sg_list = &sge;
  read.num_sge = 1;
  read.opcode = IBV_WR_RDMA_READ;
  read.send_flags = IBV_SEND_SIGNALED;
  read.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(local_.data());
  read.wr.rdma.rkey = requesterSide->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(responder_.qp, &read, &bad));
  uint32_t rkey = 0;
  ASSERT_EQ(0, bindType2(mw, 0, kBuf, kWindowAccess, &rkey));
  auto wcs = pollCompletions(responder_.cq, 2);
  ASSERT_EQ(2u, wcs.size());
  EXPECT_EQ(IBV_WC_RDMA_READ, wcs[0].opcode);
  EXPECT_EQ(IBV_WC_BIND_MW, wcs[1].opcode);
  EXPECT_EQ(IBV_WC_SUCCESS, wcs[1].status);
  EXPECT_EQ(0, ibv_dereg_mr(requesterSide));
}

}  // namespace
}  // namespace rdmamsg::test
