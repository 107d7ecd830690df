// Unreliable connected QPs (ibv_create_qp.3, ibv_modify_qp.3, ibv_post_send.3): SENDs and RDMA
// WRITEs complete at the sender without an acknowledgement, and what the receiver cannot place
// is dropped silently, as rxe's responder does for UC.
#include <arpa/inet.h>

#include <cstring>

#include "../support/wait.h"
#include "softrdma/testing.h"
#include "support.h"

namespace rdmamsg::test {
namespace {

struct UcEnd {
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(64 * 1024);

  void create(ibv_context* ctx) {
    pd = ibv_alloc_pd(ctx);
    ASSERT_NE(nullptr, pd);
    cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ASSERT_NE(nullptr, cq);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(nullptr, mr);
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq;
    a.qp_type = IBV_QPT_UC;
    a.cap = {16, 16, 1, 1, 0};
    qp = ibv_create_qp(pd, &a);
    ASSERT_NE(nullptr, qp) << strerror(errno);
  }
  // RESET → INIT → RTR (to `remote`) → RTS, as ibv_uc_pingpong does.
  void connect(uint32_t remote) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    ASSERT_EQ(0, ibv_modify_qp(
                     qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = remote;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xff;
    inet_pton(AF_INET, "127.0.0.1", &a.ah_attr.grh.dgid.raw[12]);
    EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU))
        << "RTR needs the destination QP and the receive PSN";
    ASSERT_EQ(0, ibv_modify_qp(
                     qp, &a,
                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN));
    a.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
  }
  void destroy() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
  }
  int postRecv(uint64_t wrId) {
    ibv_sge s{reinterpret_cast<uint64_t>(buf.data()), 1024, mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wrId;
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp, &wr, &bad);
  }
  int post(ibv_wr_opcode op, uint32_t len, uint64_t raddr = 0, uint32_t rkey = 0) {
    ibv_sge s{reinterpret_cast<uint64_t>(buf.data() + 32 * 1024), len, mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 9;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(77);
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
  }
};

class Uc : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = openFirstDevice();
    ASSERT_NE(nullptr, ctx_);
    ASSERT_NO_FATAL_FAILURE(a_.create(ctx_));
    ASSERT_NO_FATAL_FAILURE(b_.create(ctx_));
    ASSERT_NO_FATAL_FAILURE(a_.connect(b_.qp->qp_num));
    ASSERT_NO_FATAL_FAILURE(b_.connect(a_.qp->qp_num));
  }
  void TearDown() override {
    a_.destroy();
    b_.destroy();
    if (ctx_) ibv_close_device(ctx_);
  }
  void expectSent(ibv_wc_opcode op) {
    auto s = pollCompletions(a_.cq, 1);
    ASSERT_EQ(1u, s.size());
    EXPECT_EQ(IBV_WC_SUCCESS, s[0].status);
    EXPECT_EQ(op, s[0].opcode);
  }
  ibv_context* ctx_ = nullptr;
  UcEnd a_, b_;
};

TEST_F(Uc, SendAndWriteWithImmediateArrive) {
  ASSERT_EQ(0, b_.postRecv(1));
  memcpy(a_.buf.data() + 32 * 1024, "uc send", 7);
  ASSERT_EQ(0, a_.post(IBV_WR_SEND, 7));
  expectSent(IBV_WC_SEND);
  auto r = pollCompletions(b_.cq, 1);
  ASSERT_EQ(1u, r.size());
  EXPECT_EQ(IBV_WC_RECV, r[0].opcode);
  EXPECT_EQ(7u, r[0].byte_len) << "no GRH on a connected QP";
  EXPECT_EQ(0u, r[0].wc_flags & IBV_WC_GRH);
  EXPECT_EQ(0, memcmp("uc send", b_.buf.data(), 7));
  ASSERT_EQ(0, b_.postRecv(2));
  const uint64_t target = reinterpret_cast<uint64_t>(b_.buf.data() + 8192);
  ASSERT_EQ(0, a_.post(IBV_WR_RDMA_WRITE_WITH_IMM, 7, target, b_.mr->rkey));
  expectSent(IBV_WC_RDMA_WRITE);
  r = pollCompletions(b_.cq, 1);
  ASSERT_EQ(1u, r.size());
  EXPECT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, r[0].opcode);
  EXPECT_EQ(htonl(77), r[0].imm_data);
  EXPECT_EQ(0, memcmp("uc send", b_.buf.data() + 8192, 7));
  EXPECT_EQ(EINVAL, a_.post(IBV_WR_RDMA_READ, 7, target, b_.mr->rkey)) << "no READ on UC";
}

TEST_F(Uc, WhatCannotBePlacedIsDroppedSilently) {
  const uint64_t target = reinterpret_cast<uint64_t>(b_.buf.data() + 8192);
  memset(b_.buf.data() + 8192, 0, 16);
  memcpy(a_.buf.data() + 32 * 1024, "bad rkey", 8);
  const int64_t accepted = softrdma_counter("ud_accepted");
  ASSERT_EQ(0, a_.post(IBV_WR_RDMA_WRITE, 8, target, b_.mr->rkey + 1));
  expectSent(IBV_WC_RDMA_WRITE);
  ASSERT_EQ(0, a_.post(IBV_WR_SEND, 8)) << "no receive posted";
  expectSent(IBV_WC_SEND);
  ASSERT_EQ(0, a_.post(IBV_WR_SEND, 2000)) << "longer than any receive";
  expectSent(IBV_WC_SEND);
  ASSERT_TRUE(waitFor([&] { return softrdma_counter("ud_accepted") >= accepted + 3; }, kDeadline))
      << "the three messages reached the QP";
  ASSERT_EQ(0, b_.postRecv(1));
  EXPECT_TRUE(collectFor(b_.cq).empty());
  EXPECT_NE(0, memcmp("bad rkey", b_.buf.data() + 8192, 8)) << "nothing written";
  ASSERT_EQ(0, a_.post(IBV_WR_SEND, 8));
  expectSent(IBV_WC_SEND);
  auto r = pollCompletions(b_.cq, 1);
  ASSERT_EQ(1u, r.size()) << "the receive stayed posted";
  EXPECT_EQ(IBV_WC_SUCCESS, r[0].status);
  EXPECT_TRUE(collectFor(a_.cq).empty()) << "the sender never hears of the drops";
}

}  // namespace
}  // namespace rdmamsg::test
