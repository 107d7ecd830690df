// Sharing a context's objects within a process (ibv_import_device.3, ibv_import_pd.3,
// ibv_import_mr.3), as rdma-core's test_shared_pd uses it: a context imported from a dup of
// another's cmd_fd, the PD and MR imported by handle, a QP on the imported PD sending from the
// imported MR; unimport frees the views only; bad descriptors and handles are refused.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "support.h"

namespace rdmamsg::test {
namespace {

constexpr size_t kBuf = 4096;

class Import : public DeviceFixture {
 protected:
  void SetUp() override {
    DeviceFixture::SetUp();
    if (HasFatalFailure()) return;
    buf_.assign(kBuf, 0);
    mr_ = ibv_reg_mr(pd_, buf_.data(), kBuf, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(nullptr, mr_);
  }
  void TearDown() override {
    for (ibv_qp* qp : qps_)
      EXPECT_EQ(0, ibv_destroy_qp(qp));
    for (ibv_cq* cq : cqs_)
      EXPECT_EQ(0, ibv_destroy_cq(cq));
    if (imr_ != nullptr) ibv_unimport_mr(imr_);
    if (ipd_ != nullptr) ibv_unimport_pd(ipd_);
    if (ictx_ != nullptr) {
      EXPECT_EQ(0, ibv_close_device(ictx_));
    }
    if (mr_ != nullptr) {
      EXPECT_EQ(0, ibv_dereg_mr(mr_));
    }
    DeviceFixture::TearDown();
  }

  void importAll() {
    int fd = dup(context_->cmd_fd);
    ASSERT_GE(fd, 0);
    ictx_ = ibv_import_device(fd);
    if (ictx_ == nullptr) close(fd);
    ASSERT_NE(nullptr, ictx_);
    EXPECT_EQ(fd, ictx_->cmd_fd) << "the imported context owns the descriptor";
    ipd_ = ibv_import_pd(ictx_, pd_->handle);
    ASSERT_NE(nullptr, ipd_);
    imr_ = ibv_import_mr(ipd_, mr_->handle);
    ASSERT_NE(nullptr, imr_);
  }

  ibv_qp* createQp(ibv_context* ctx, ibv_pd* pd) {
    ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    if (cq == nullptr) return nullptr;
    cqs_.push_back(cq);
    ibv_qp_init_attr attr{};
    attr.send_cq = attr.recv_cq = cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap = {4, 4, 1, 1, 0};
    ibv_qp* qp = ibv_create_qp(pd, &attr);
    if (qp != nullptr) qps_.push_back(qp);
    return qp;
  }

  int toRts(ibv_qp* qp, uint32_t remoteQpn) { return manualQpToRts(qp, remoteQpn, gid_); }

  ibv_mr* mr_ = nullptr;
  std::vector<uint8_t> buf_;
  ibv_context* ictx_ = nullptr;
  ibv_pd* ipd_ = nullptr;
  ibv_mr* imr_ = nullptr;
  std::vector<ibv_cq*> cqs_;
  std::vector<ibv_qp*> qps_;
};

TEST_F(Import, ImportedPdAndMrStandForTheOriginals) {
  ASSERT_NO_FATAL_FAILURE(importAll());
  EXPECT_NE(context_, ictx_);
  EXPECT_NE(pd_, ipd_);
  EXPECT_EQ(pd_->handle, ipd_->handle);
  EXPECT_EQ(ictx_, ipd_->context);
  EXPECT_EQ(mr_->lkey, imr_->lkey);
  EXPECT_EQ(mr_->rkey, imr_->rkey);
  EXPECT_EQ(mr_->length, imr_->length);
  EXPECT_EQ(mr_->handle, imr_->handle);
  EXPECT_EQ(ipd_, imr_->pd);
  EXPECT_EQ(nullptr, imr_->addr) << "the kernel does not tell the address";

  // A QP on the imported PD sends from the (imported) MR to a QP on the original PD.
  ibv_qp* sender = createQp(ictx_, ipd_);
  ibv_qp* receiver = createQp(context_, pd_);
  ASSERT_TRUE(sender && receiver);
  ASSERT_EQ(0, toRts(sender, receiver->qp_num));
  ASSERT_EQ(0, toRts(receiver, sender->qp_num));
  ibv_sge rsge{reinterpret_cast<uint64_t>(buf_.data() + 2048), 64, mr_->lkey};
  ibv_recv_wr recv{};
  recv.sg_list = &rsge;
  recv.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(0, ibv_post_recv(receiver, &recv, &rbad));
  memset(buf_.data(), 0x3c, 64);
  ibv_sge sge{reinterpret_cast<uint64_t>(buf_.data()), 64, imr_->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(sender, &wr, &bad));
  auto sent = pollCompletions(cqs_[0], 1);
  auto received = pollCompletions(cqs_[1], 1);
  ASSERT_EQ(1u, sent.size());
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status) << "the imported PD is the MR's PD";
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(0x3c, buf_[2048 + 63]);
}

TEST_F(Import, ViewsAreUnimportedNotDestroyedAndHoldTheOriginals) {
  ASSERT_NO_FATAL_FAILURE(importAll());
  EXPECT_EQ(EINVAL, ibv_dereg_mr(imr_)) << "unimport a view; its owner destroys the MR";
  EXPECT_EQ(EINVAL, ibv_dealloc_pd(ipd_));
  EXPECT_EQ(EBUSY, ibv_dereg_mr(mr_)) << "an imported view of it exists";
  ibv_unimport_mr(imr_);
  imr_ = nullptr;
  ibv_unimport_pd(ipd_);
  ipd_ = nullptr;
  EXPECT_EQ(0, ibv_dereg_mr(mr_));
  mr_ = nullptr;
  EXPECT_EQ(0, ibv_dealloc_pd(pd_));
  pd_ = nullptr;
}

TEST_F(Import, RefusesWhatNamesNoObjectOfTheContext) {
  errno = 0;
  EXPECT_EQ(nullptr, ibv_import_device(-1));
  EXPECT_EQ(EBADF, errno);
  int p[2];
  ASSERT_EQ(0, pipe2(p, O_CLOEXEC));
  errno = 0;
  EXPECT_EQ(nullptr, ibv_import_device(p[0])) << "no context's command file";
  EXPECT_EQ(EOPNOTSUPP, errno);
  close(p[0]);
  close(p[1]);

  ASSERT_NO_FATAL_FAILURE(importAll());
  errno = 0;
  EXPECT_EQ(nullptr, ibv_import_pd(ictx_, pd_->handle + 1000));
  EXPECT_EQ(EINVAL, errno);
  // A PD of another context (another uverbs file) is not the imported context's to import.
  ibv_context* other = openFirstDevice();
  ASSERT_NE(nullptr, other);
  ibv_pd* foreign = ibv_alloc_pd(other);
  ASSERT_NE(nullptr, foreign);
  errno = 0;
  EXPECT_EQ(nullptr, ibv_import_pd(ictx_, foreign->handle));
  EXPECT_EQ(EINVAL, errno);
  ibv_mr* foreignMr = ibv_reg_mr(foreign, buf_.data(), 64, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(nullptr, foreignMr);
  errno = 0;
  EXPECT_EQ(nullptr, ibv_import_mr(ipd_, foreignMr->handle));
  EXPECT_EQ(EINVAL, errno);
  EXPECT_EQ(0, ibv_dereg_mr(foreignMr));
  EXPECT_EQ(0, ibv_dealloc_pd(foreign));
  EXPECT_EQ(0, ibv_close_device(other));
}

}  // namespace
}  // namespace rdmamsg::test
