// RC atomics (IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP) as rxe executes them: the
// original value lands in the local SGE and the remote 8 bytes change; ibv_post_send refuses
// what rdma-core's rxe provider refuses (a misaligned remote address, a local buffer under 8
// bytes); the responder checks its resources, IBV_ACCESS_REMOTE_ATOMIC and the alignment; and
// concurrent atomics on one address are atomic. QPs connected by hand within one process.
#include <infiniband/verbs.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "support.h"

namespace rdmamsg::test {
namespace {

constexpr uint64_t kSendOps =
    IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
constexpr int kRemoteAtomic = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
constexpr size_t kWords = 8192;  // 64-bit words in each buffer

// A requester QP connected to a responder QP, both on one CQ of their own.
struct Link {
  ibv_cq* cq = nullptr;
  ibv_qp* requester = nullptr;
  ibv_qp* responder = nullptr;
};

// What the responder QP is given.
struct Responder {
  int qpAccess = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  uint8_t maxDestRdAtomic = 1;
};

class Atomics : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = openFirstDevice();
    ASSERT_NE(nullptr, context_);
    ASSERT_EQ(0, ibv_query_device(context_, &device_));
    ASSERT_EQ(0, ibv_query_gid(context_, 1, 0, &gid_));
    pd_ = ibv_alloc_pd(context_);
    ASSERT_NE(nullptr, pd_);
    local_.assign(kWords, 0);
    remote_.assign(kWords, 0);
    localMr_ = reg(local_.data(), IBV_ACCESS_LOCAL_WRITE);
    remoteMr_ = reg(remote_.data(), kRemoteAtomic);
    ASSERT_TRUE(localMr_ && remoteMr_);
  }
  void TearDown() override {
    for (const Link& l : links_) {
      if (l.requester != nullptr) {
        EXPECT_EQ(0, ibv_destroy_qp(l.requester));
      }
      if (l.responder != nullptr) {
        EXPECT_EQ(0, ibv_destroy_qp(l.responder));
      }
      if (l.cq != nullptr) {
        EXPECT_EQ(0, ibv_destroy_cq(l.cq));
      }
    }
    for (ibv_mr* mr : mrs_)
      EXPECT_EQ(0, ibv_dereg_mr(mr));
    if (pd_ != nullptr) {
      EXPECT_EQ(0, ibv_dealloc_pd(pd_));
    }
    if (context_ != nullptr) {
      EXPECT_EQ(0, ibv_close_device(context_));
    }
  }

  ibv_mr* reg(uint64_t* words, int access) {
    ibv_mr* mr = ibv_reg_mr(pd_, words, kWords * sizeof(uint64_t), access);
    if (mr != nullptr) mrs_.push_back(mr);
    return mr;
  }

  ibv_qp* createQp(ibv_cq* cq) {
    ibv_qp_init_attr_ex attr{};
    attr.send_cq = cq;
    attr.recv_cq = cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = 256;
    attr.cap.max_recv_wr = 16;
    attr.cap.max_send_sge = 2;
    attr.cap.max_recv_sge = 1;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    attr.pd = pd_;
    attr.send_ops_flags = kSendOps;
    return ibv_create_qp_ex(context_, &attr);
  }

  int toRts(ibv_qp* qp, uint32_t remoteQpn, int access, uint8_t maxDestRdAtomic) {
    return manualQpToRts(qp, remoteQpn, gid_, {access, maxDestRdAtomic, 1});
  }

  // A requester connected to a new responder configured as `r`.
  Link connect(const Responder& r = {}) {
    Link l;
    l.cq = ibv_create_cq(context_, 1024, nullptr, nullptr, 0);
    if (l.cq != nullptr) {
      l.requester = createQp(l.cq);
      l.responder = createQp(l.cq);
    }
    links_.push_back(l);
    if (l.requester == nullptr || l.responder == nullptr) {
      ADD_FAILURE() << "QP creation failed";
      return l;
    }
    EXPECT_EQ(0, toRts(l.requester, l.responder->qp_num, IBV_ACCESS_REMOTE_WRITE, 1));
    EXPECT_EQ(0, toRts(l.responder, l.requester->qp_num, r.qpAccess, r.maxDestRdAtomic));
    return l;
  }

  // One atomic through ibv_post_send; the original value goes to local_[slot].
  int post(ibv_qp* qp, ibv_wr_opcode op, size_t slot, uint64_t remoteAddr, uint32_t rkey,
           uint64_t compareAdd, uint64_t swap = 0, uint32_t length = 8,
           unsigned flags = IBV_SEND_SIGNALED) {
    ibv_sge sge{reinterpret_cast<uint64_t>(&local_[slot]), length, localMr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 100 + slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.wr.atomic.remote_addr = remoteAddr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = compareAdd;
    wr.wr.atomic.swap = swap;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp, &wr, &bad);
    if (rc != 0) {
      EXPECT_EQ(&wr, bad);
    }
    return rc;
  }
  uint64_t remoteAddr(size_t word) { return reinterpret_cast<uint64_t>(&remote_[word]); }

  ibv_wc one(const Link& l) {
    auto wcs = pollCompletions(l.cq, 1);
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

  ibv_context* context_ = nullptr;
  ibv_device_attr device_{};
  ibv_gid gid_{};
  ibv_pd* pd_ = nullptr;
  std::vector<uint64_t> local_;
  std::vector<uint64_t> remote_;
  ibv_mr* localMr_ = nullptr;
  ibv_mr* remoteMr_ = nullptr;
  std::vector<ibv_mr*> mrs_;
  std::vector<Link> links_;
};

TEST_F(Atomics, DeviceReportsAtomicsAsRxeDoes) {
  EXPECT_EQ(IBV_ATOMIC_HCA, device_.atomic_cap);
  EXPECT_GT(device_.max_qp_rd_atom, 0);
  EXPECT_GT(device_.max_qp_init_rd_atom, 0);
}

TEST_F(Atomics, FetchAndAddReturnsTheOriginalValueAndAddsRemotely) {
  Link l = connect();
  remote_[3] = 40;
  local_[0] = 0xdeadbeef;
  ASSERT_EQ(0,
            post(l.requester, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, remoteAddr(3), remoteMr_->rkey, 2));
  ibv_wc wc = one(l);
  EXPECT_EQ(IBV_WC_SUCCESS, wc.status) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(IBV_WC_FETCH_ADD, wc.opcode);
  EXPECT_EQ(100u, wc.wr_id);
  EXPECT_EQ(8u, wc.byte_len);
  EXPECT_EQ(40u, local_[0]);
  EXPECT_EQ(42u, remote_[3]);
}

TEST_F(Atomics, CompareAndSwapSwapsOnlyWhenTheValueIsEqual) {
  Link l = connect();
  remote_[5] = 7;
  ASSERT_EQ(0,
            post(l.requester, IBV_WR_ATOMIC_CMP_AND_SWP, 0, remoteAddr(5), remoteMr_->rkey, 7, 99));
  ibv_wc wc = one(l);
  EXPECT_EQ(IBV_WC_SUCCESS, wc.status) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(IBV_WC_COMP_SWAP, wc.opcode);
  EXPECT_EQ(7u, local_[0]);
  EXPECT_EQ(99u, remote_[5]);
  // Not equal: nothing is swapped, and the value found comes back.
  ASSERT_EQ(0,
            post(l.requester, IBV_WR_ATOMIC_CMP_AND_SWP, 1, remoteAddr(5), remoteMr_->rkey, 7, 5));
  wc = one(l);
  EXPECT_EQ(IBV_WC_SUCCESS, wc.status) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(99u, local_[1]);
  EXPECT_EQ(99u, remote_[5]);
}

TEST_F(Atomics, ExtendedWrApiPostsBothAtomics) {
  Link l = connect();
  remote_[0] = 10;
  remote_[1] = 20;
  ibv_qp_ex* x = ibv_qp_to_qp_ex(l.requester);
  ASSERT_NE(nullptr, x);
  ibv_wr_start(x);
  x->wr_id = 1;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_fetch_add(x, remoteMr_->rkey, remoteAddr(0), 5);
  ibv_wr_set_sge(x, localMr_->lkey, reinterpret_cast<uint64_t>(&local_[0]), 8);
  x->wr_id = 2;
  ibv_wr_atomic_cmp_swp(x, remoteMr_->rkey, remoteAddr(1), 20, 21);
  ibv_wr_set_sge(x, localMr_->lkey, reinterpret_cast<uint64_t>(&local_[1]), 8);
  ASSERT_EQ(0, ibv_wr_complete(x));
  auto wcs = pollCompletions(l.cq, 2);
  ASSERT_EQ(2u, wcs.size());
  EXPECT_EQ(IBV_WC_SUCCESS, wcs[0].status);
  EXPECT_EQ(IBV_WC_FETCH_ADD, wcs[0].opcode);
  EXPECT_EQ(IBV_WC_SUCCESS, wcs[1].status);
  EXPECT_EQ(IBV_WC_COMP_SWAP, wcs[1].opcode);
  EXPECT_EQ(10u, local_[0]);
  EXPECT_EQ(15u, remote_[0]);
  EXPECT_EQ(20u, local_[1]);
  EXPECT_EQ(21u, remote_[1]);
}

TEST_F(Atomics, PostRefusesAMisalignedRemoteAddressOrAShortLocalBuffer) {
  Link l = connect();
  remote_[0] = 1;
  EXPECT_EQ(EINVAL, post(l.requester, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, remoteAddr(0) + 4,
                         remoteMr_->rkey, 1));
  EXPECT_EQ(EINVAL, post(l.requester, IBV_WR_ATOMIC_CMP_AND_SWP, 0, remoteAddr(0), remoteMr_->rkey,
                         1, 2, 4));
  EXPECT_TRUE(collectFor(l.cq).empty());
  EXPECT_EQ(1u, remote_[0]);
  EXPECT_EQ(IBV_QPS_RTS, state(l.requester));
}

TEST_F(Atomics, MisalignedRemoteAddressFailsAtTheResponderThroughTheWrApi) {
  // rxe's ibv_wr_* builders check nothing; its responder refuses (invalid request NAK).
  Link l = connect();
  remote_[0] = 1;
  ibv_qp_ex* x = ibv_qp_to_qp_ex(l.requester);
  ASSERT_NE(nullptr, x);
  ibv_wr_start(x);
  x->wr_id = 3;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_fetch_add(x, remoteMr_->rkey, remoteAddr(0) + 4, 1);
  ibv_wr_set_sge(x, localMr_->lkey, reinterpret_cast<uint64_t>(&local_[0]), 8);
  ASSERT_EQ(0, ibv_wr_complete(x));
  ibv_wc wc = one(l);
  EXPECT_EQ(3u, wc.wr_id);
  EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, wc.status) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(1u, remote_[0]);
  EXPECT_EQ(IBV_QPS_ERR, state(l.requester));
}

TEST_F(Atomics, MrWithoutRemoteAtomicAccessFailsWithRemoteAccessError) {
  Link l = connect();
  std::vector<uint64_t> other(kWords, 9);
  ibv_mr* mr =
      reg(other.data(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(nullptr, mr);
  ASSERT_EQ(0, post(l.requester, IBV_WR_ATOMIC_FETCH_AND_ADD, 0,
                    reinterpret_cast<uint64_t>(&other[0]), mr->rkey, 1));
  ibv_wc wc = one(l);
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, wc.status) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(9u, other[0]);
  EXPECT_EQ(IBV_QPS_ERR, state(l.requester));
}

TEST_F(Atomics, QpWithoutRemoteAtomicAccessFailsWithRemoteAccessError) {
  Responder r;
  r.qpAccess = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  Link l = connect(r);
  remote_[0] = 1;
  ASSERT_EQ(0,
            post(l.requester, IBV_WR_ATOMIC_CMP_AND_SWP, 0, remoteAddr(0), remoteMr_->rkey, 1, 2));
  ibv_wc wc = one(l);
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, wc.status) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(1u, remote_[0]);
}

TEST_F(Atomics, ResponderWithoutRdAtomicResourcesRefusesWithInvalidRequest) {
  Responder r;
  r.maxDestRdAtomic = 0;
  Link l = connect(r);
  ASSERT_EQ(0,
            post(l.requester, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, remoteAddr(0), remoteMr_->rkey, 1));
  ibv_wc wc = one(l);
  EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, wc.status) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(0u, remote_[0]);
}

TEST_F(Atomics, TwoQpsHammeringOneCounterGiveTheExactSum) {
  constexpr size_t kPerQp = 2000;
  constexpr size_t kBatch = 100;  // posted, then all polled: within the send queue
  Link links[2] = {connect(), connect()};
  remote_[0] = 0;
  auto hammer = [&](const Link& l, size_t firstSlot) {
    for (size_t done = 0; done < kPerQp; done += kBatch) {
      for (size_t i = 0; i < kBatch; i++)
        if (post(l.requester, IBV_WR_ATOMIC_FETCH_AND_ADD, firstSlot + done + i, remoteAddr(0),
                 remoteMr_->rkey, 1) != 0)
          return;
      auto wcs = pollCompletions(l.cq, kBatch);
      EXPECT_EQ(kBatch, wcs.size());
      for (const ibv_wc& wc : wcs)
        EXPECT_EQ(IBV_WC_SUCCESS, wc.status) << ibv_wc_status_str(wc.status);
      if (wcs.size() != kBatch) return;
    }
  };
  std::thread a(hammer, links[0], 0);
  std::thread b(hammer, links[1], kPerQp);
  // The program's own atomic additions to the same counter meanwhile.
  for (size_t i = 0; i < kPerQp; i++)
    std::atomic_ref<uint64_t>(remote_[0]).fetch_add(1000000);
  a.join();
  b.join();
  EXPECT_EQ(2 * kPerQp + kPerQp * 1000000, remote_[0]);
  // Every remote fetch-add saw a count of remote additions no other one saw: 0 .. 2*kPerQp-1.
  std::vector<uint64_t> seen(local_.begin(), local_.begin() + 2 * kPerQp);
  for (uint64_t& v : seen)
    v %= 1000000;
  std::sort(seen.begin(), seen.end());
  std::vector<uint64_t> expected(2 * kPerQp);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(expected, seen);
}

}  // namespace
}  // namespace rdmamsg::test
