// ibv_rereg_mr as rxe gives it (ibv_rereg_mr.3, the kernel's rxe_rereg_user_mr): new access
// flags take effect for the next request at the responder, the keys unchanged; a new PD
// governs the next request too (the MR then holds the new PD); a new translation is refused
// with EOPNOTSUPP (as rxe); bad input with EINVAL. (qp_reset_test.cc: a PD move with QPs
// reset and brought back, as rdma-core's test_mr_rereg_pd does it.)
#include <cerrno>
#include <cstring>

#include "support.h"

namespace rdmamsg::test {
namespace {

class ReregMr : public CmFixture {
 protected:
  void SetUp() override {
    CmFixture::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_NO_FATAL_FAILURE(connect());
  }

  // An RDMA WRITE of 64 bytes into the server's buffer; returns its completion status.
  ibv_wc_status write(uint64_t wrId) {
    EXPECT_EQ(
        0, client_.postRdma(wrId, IBV_WR_RDMA_WRITE, 0, 64, server_.addr(kSlot), server_.mr->rkey));
    auto wc = client_.poll(1);
    return wc.size() == 1 ? wc[0].status : IBV_WC_GENERAL_ERR;
  }
};

TEST_F(ReregMr, NewAccessFlagsGovernTheNextRemoteWrite) {
  const uint32_t rkey = server_.mr->rkey;
  ASSERT_EQ(IBV_WC_SUCCESS, write(1));
  ASSERT_EQ(0, ibv_rereg_mr(server_.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                            IBV_ACCESS_LOCAL_WRITE));
  EXPECT_EQ(rkey, server_.mr->rkey) << "the keys stay";
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, write(2));
}

TEST_F(ReregMr, ANewPdGovernsTheNextRemoteWriteAndIsHeld) {
  ibv_pd* other = ibv_alloc_pd(server_.pd->context);
  ASSERT_NE(nullptr, other);
  const uint32_t rkey = server_.mr->rkey;
  ASSERT_EQ(0, ibv_rereg_mr(server_.mr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0));
  EXPECT_EQ(other, server_.mr->pd);
  EXPECT_EQ(rkey, server_.mr->rkey) << "the keys stay";
  EXPECT_EQ(EBUSY, ibv_dealloc_pd(other)) << "the MR is in it now";
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, write(1)) << "the QP's PD is not the MR's";
  ASSERT_EQ(0, ibv_rereg_mr(server_.mr, IBV_REREG_MR_CHANGE_PD, server_.pd, nullptr, 0, 0));
  EXPECT_EQ(0, ibv_dealloc_pd(other));
}

TEST_F(ReregMr, RefusesANewTranslationAndBadInput) {
  static uint8_t elsewhere[64];
  errno = 0;
  EXPECT_EQ(IBV_REREG_MR_ERR_CMD, ibv_rereg_mr(server_.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr,
                                               elsewhere, sizeof elsewhere, 0));
  EXPECT_EQ(EOPNOTSUPP, errno);
  errno = 0;
  EXPECT_EQ(IBV_REREG_MR_ERR_INPUT, ibv_rereg_mr(server_.mr, 0, nullptr, nullptr, 0, 0));
  EXPECT_EQ(EINVAL, errno);
  errno = 0;
  EXPECT_EQ(IBV_REREG_MR_ERR_INPUT,
            ibv_rereg_mr(server_.mr, IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, 0));
  EXPECT_EQ(EINVAL, errno);
  errno = 0;
  // Remote write requires local write (ibv_reg_mr.3).
  EXPECT_NE(0, ibv_rereg_mr(server_.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                            IBV_ACCESS_REMOTE_WRITE));
  EXPECT_EQ(EINVAL, errno);
  EXPECT_EQ(IBV_WC_SUCCESS, write(1)) << "a refused re-registration changes nothing";
}

}  // namespace
}  // namespace rdmamsg::test
