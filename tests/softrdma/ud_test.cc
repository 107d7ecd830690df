// Unreliable datagram QPs, address handles and multicast (ibv_create_ah.3, ibv_post_send.3,
// ibv_modify_qp.3, ibv_attach_mcast.3): the GRH at the start of every receive, qkey checks,
// datagrams nobody takes, the MTU, AH lifetime, the UD state machine and multicast fan-out.
#include <arpa/inet.h>
#include <netinet/ip.h>

#include <cstring>

#include "../support/wait.h"
#include "softrdma/testing.h"
#include "support.h"

namespace rdmamsg::test {
namespace {

constexpr uint32_t kQkey = 0x11223344;
constexpr size_t kBuf = 64 * 1024;
constexpr size_t kGrh = 40;

// A UD QP in RTS with its own CQ and a registered buffer; every receive slot is kSlot + 40.
struct UdEnd {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);

  void create(ibv_context* c, bool toRts = true, ibv_srq* srq = nullptr) {
    ctx = c;
    pd = ibv_alloc_pd(ctx);
    ASSERT_NE(nullptr, pd);
    cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    ASSERT_NE(nullptr, cq);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(nullptr, mr);
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq;
    a.srq = srq;
    a.qp_type = IBV_QPT_UD;
    a.cap = {64, 64, 2, 2, 64};
    qp = ibv_create_qp(pd, &a);
    ASSERT_NE(nullptr, qp) << strerror(errno);
    if (toRts) {
      ASSERT_NO_FATAL_FAILURE(moveToRts());
    }
  }
  void moveToRts() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = kQkey;
    ASSERT_EQ(0,
              ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY));
    a.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    ASSERT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
  }
  void destroy() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    qp = nullptr;
    mr = nullptr;
    cq = nullptr;
    pd = nullptr;
  }
  int postRecv(uint64_t wrId, size_t slot, uint32_t length = kSlot + kGrh) {
    ibv_sge s{reinterpret_cast<uint64_t>(&buf[slot * (kSlot + kGrh)]), length, mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wrId;
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp, &wr, &bad);
  }
  // Sends `len` bytes from the start of the buffer.
  int send(ibv_ah* ah, uint32_t qpn, uint32_t len, uint32_t qkey = kQkey, uint64_t wrId = 7,
           ibv_wr_opcode op = IBV_WR_SEND) {
    ibv_sge s{reinterpret_cast<uint64_t>(buf.data()), len, mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wrId;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(0xabcdef01);
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
  }
  uint8_t* slot(size_t i) { return &buf[i * (kSlot + kGrh)]; }
  std::vector<ibv_wc> poll(size_t n) { return pollCompletions(cq, n); }
};

ibv_ah_attr ahTo(const char* ip) {
  ibv_ah_attr a{};
  a.is_global = 1;
  a.port_num = 1;
  a.grh.hop_limit = 64;
  a.grh.sgid_index = 0;  // ::ffff:127.0.0.1 on softrdma
  a.grh.dgid.raw[10] = a.grh.dgid.raw[11] = 0xff;
  inet_pton(AF_INET, ip, &a.grh.dgid.raw[12]);
  return a;
}

class Ud : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = openFirstDevice();
    ASSERT_NE(nullptr, ctx_);
    ASSERT_NO_FATAL_FAILURE(a_.create(ctx_));
    ASSERT_NO_FATAL_FAILURE(b_.create(ctx_));
    ibv_ah_attr attr = ahTo("127.0.0.1");
    ah_ = ibv_create_ah(a_.pd, &attr);
    ASSERT_NE(nullptr, ah_) << strerror(errno);
  }
  void TearDown() override {
    if (ah_) ibv_destroy_ah(ah_);
    a_.destroy();
    b_.destroy();
    if (ctx_) ibv_close_device(ctx_);
  }
  // The sender's completion for wr_id 7, successful.
  void expectSent() {
    auto s = a_.poll(1);
    ASSERT_EQ(1u, s.size());
    EXPECT_EQ(IBV_WC_SUCCESS, s[0].status);
    EXPECT_EQ(IBV_WC_SEND, s[0].opcode);
  }

  ibv_context* ctx_ = nullptr;
  UdEnd a_, b_;
  ibv_ah* ah_ = nullptr;
};

TEST_F(Ud, ReceiveStartsWithTheGrhAndCompletesWithItsFields) {
  ASSERT_EQ(0, b_.postRecv(1, 0));
  memcpy(a_.buf.data(), "datagram", 8);
  ASSERT_EQ(0, a_.send(ah_, b_.qp->qp_num, 8, kQkey, 7, IBV_WR_SEND_WITH_IMM));
  expectSent();
  auto r = b_.poll(1);
  ASSERT_EQ(1u, r.size());
  EXPECT_EQ(IBV_WC_SUCCESS, r[0].status);
  EXPECT_EQ(IBV_WC_RECV, r[0].opcode);
  EXPECT_EQ(kGrh + 8, r[0].byte_len) << "byte_len counts the 40-byte GRH";
  EXPECT_EQ(unsigned(IBV_WC_GRH | IBV_WC_WITH_IMM), r[0].wc_flags);
  EXPECT_EQ(a_.qp->qp_num, r[0].src_qp);
  EXPECT_EQ(htonl(0xabcdef01), r[0].imm_data);
  const uint8_t* g = b_.slot(0);
  EXPECT_EQ(0, memcmp("datagram", g + kGrh, 8));
  // RoCE v2 over IPv4: 20 zero bytes, then the IPv4 header (UDP, 127.0.0.1 → 127.0.0.1).
  for (int i = 0; i < 20; i++)
    EXPECT_EQ(0, g[i]) << "byte " << i;
  EXPECT_EQ(0x45, g[20]);
  EXPECT_EQ(IPPROTO_UDP, g[29]);
  EXPECT_EQ(64, g[28]) << "ttl: the AH's hop limit";
  in_addr lo{};
  inet_pton(AF_INET, "127.0.0.1", &lo);
  EXPECT_EQ(0, memcmp(&lo, g + 32, 4));
  EXPECT_EQ(0, memcmp(&lo, g + 36, 4));
  // libibverbs' recipe turns it into the address of the sender.
  ibv_ah_attr back{};
  ASSERT_EQ(0, ibv_init_ah_from_wc(ctx_, 1, &r[0], reinterpret_cast<ibv_grh*>(b_.slot(0)), &back));
  EXPECT_EQ(1, back.is_global);
  EXPECT_EQ(0, back.grh.sgid_index);
  EXPECT_EQ(0, memcmp(back.grh.dgid.raw + 12, &lo, 4));
  ibv_ah* reply = ibv_create_ah_from_wc(b_.pd, &r[0], reinterpret_cast<ibv_grh*>(b_.slot(0)), 1);
  ASSERT_NE(nullptr, reply);
  ASSERT_EQ(0, a_.postRecv(2, 1));
  ASSERT_EQ(0, b_.send(reply, r[0].src_qp, 4));
  EXPECT_EQ(1u, b_.poll(1).size());
  auto back2 = a_.poll(1);
  ASSERT_EQ(1u, back2.size());
  EXPECT_EQ(2u, back2[0].wr_id);
  EXPECT_EQ(0, ibv_destroy_ah(reply));
}

TEST_F(Ud, DatagramWithTheWrongQkeyIsDroppedSilently) {
  ASSERT_EQ(0, b_.postRecv(1, 0));
  ASSERT_EQ(0, a_.send(ah_, b_.qp->qp_num, 16, kQkey + 1));
  expectSent();
  EXPECT_TRUE(collectFor(b_.cq).empty()) << "a qkey violation is dropped";
  ASSERT_EQ(0, a_.send(ah_, b_.qp->qp_num, 16));
  expectSent();
  auto r = b_.poll(1);
  ASSERT_EQ(1u, r.size()) << "the receive WQE was left for the next datagram";
  EXPECT_EQ(1u, r[0].wr_id);
}

TEST_F(Ud, DatagramToNobodyIsDroppedAndNeverAnErrorToTheSender) {
  ASSERT_EQ(0, a_.send(ah_, 0x7ffff1, 16)) << "no such QP";
  expectSent();
  const int64_t accepted = softrdma_counter("ud_accepted");
  ASSERT_EQ(0, a_.send(ah_, b_.qp->qp_num, 16)) << "no receive posted";
  expectSent();
  ASSERT_TRUE(waitFor([&] { return softrdma_counter("ud_accepted") > accepted; }, kDeadline))
      << "the datagram reached the QP";
  ASSERT_EQ(0, b_.postRecv(1, 0));
  EXPECT_TRUE(collectFor(b_.cq).empty()) << "a datagram without a receive is not kept";
  UdEnd notReady;
  ASSERT_NO_FATAL_FAILURE(notReady.create(ctx_, false));
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = kQkey;
  ASSERT_EQ(0, ibv_modify_qp(notReady.qp, &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY));
  ASSERT_EQ(0, notReady.postRecv(1, 0)) << "receives may be posted from INIT";
  ASSERT_EQ(0, a_.send(ah_, notReady.qp->qp_num, 16)) << "a QP in INIT takes nothing";
  expectSent();
  EXPECT_TRUE(collectFor(notReady.cq).empty());
  notReady.destroy();
  EXPECT_EQ(0u, collectFor(a_.cq).size()) << "nothing more for the sender";
}

TEST_F(Ud, MessageLongerThanTheMtuLeavesNothingAndCompletesSuccessfully) {
  ASSERT_EQ(0, b_.postRecv(1, 0));
  ASSERT_EQ(0, b_.postRecv(2, 1));
  ASSERT_EQ(0, a_.send(ah_, b_.qp->qp_num, 4097));
  expectSent();
  EXPECT_TRUE(collectFor(b_.cq).empty()) << "C10-93.1.1: no packet for it";
  ASSERT_EQ(0, a_.send(ah_, b_.qp->qp_num, 4096));
  expectSent();
  auto r = b_.poll(1);
  ASSERT_EQ(1u, r.size());
  EXPECT_EQ(kGrh + 4096, r[0].byte_len);
}

TEST_F(Ud, MessageLongerThanTheReceiveIsDroppedAndTheReceiveKept) {
  ASSERT_EQ(0, b_.postRecv(1, 0, kGrh + 8));
  ASSERT_EQ(0, a_.send(ah_, b_.qp->qp_num, 9));
  expectSent();
  EXPECT_TRUE(collectFor(b_.cq).empty());
  ASSERT_EQ(0, a_.send(ah_, b_.qp->qp_num, 8));
  expectSent();
  auto r = b_.poll(1);
  ASSERT_EQ(1u, r.size());
  EXPECT_EQ(IBV_WC_SUCCESS, r[0].status);
  EXPECT_EQ(kGrh + 8, r[0].byte_len);
}

TEST_F(Ud, AddressHandleLifetime) {
  EXPECT_EQ(EBUSY, ibv_dealloc_pd(a_.pd)) << "the PD holds an AH";
  ibv_ah_attr attr = ahTo("127.0.0.1");
  ibv_ah* once = ibv_create_ah(a_.pd, &attr);
  ASSERT_NE(nullptr, once);
  ASSERT_EQ(0, b_.postRecv(1, 0));
  ASSERT_EQ(0, a_.send(once, b_.qp->qp_num, 16));
  EXPECT_EQ(0, ibv_destroy_ah(once)) << "a posted send does not need its AH any longer";
  expectSent();
  EXPECT_EQ(1u, b_.poll(1).size());
  EXPECT_EQ(EINVAL, a_.send(once, b_.qp->qp_num, 16)) << "a destroyed AH";
  EXPECT_EQ(EINVAL, ibv_destroy_ah(once));
  attr.is_global = 0;
  errno = 0;
  EXPECT_EQ(nullptr, ibv_create_ah(a_.pd, &attr)) << "RoCE needs a GRH";
  EXPECT_EQ(EINVAL, errno);
  attr = ahTo("127.0.0.1");
  attr.grh.sgid_index = 200;
  EXPECT_EQ(nullptr, ibv_create_ah(a_.pd, &attr));
}

TEST_F(Ud, StateMachineNeedsTheQkeyAndSendsOnlyInRts) {
  UdEnd c;
  ASSERT_NO_FATAL_FAILURE(c.create(ctx_, false));
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = 0x1234;
  EXPECT_EQ(EINVAL, ibv_modify_qp(c.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT))
      << "INIT needs the qkey";
  ASSERT_EQ(0,
            ibv_modify_qp(c.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY));
  a.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(0, ibv_modify_qp(c.qp, &a, IBV_QP_STATE)) << "RTR needs no remote attributes";
  EXPECT_EQ(EINVAL, c.send(ah_, b_.qp->qp_num, 4)) << "sends need RTS";
  a.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(EINVAL, ibv_modify_qp(c.qp, &a, IBV_QP_STATE)) << "RTS needs the send PSN";
  ASSERT_EQ(0, ibv_modify_qp(c.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
  ibv_qp_attr q{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(0, ibv_query_qp(c.qp, &q, IBV_QP_QKEY, &init));
  EXPECT_EQ(0x1234u, q.qkey);
  EXPECT_EQ(IBV_QPT_UD, init.qp_type);
  EXPECT_EQ(EINVAL, c.send(ah_, b_.qp->qp_num, 4, kQkey, 7, IBV_WR_RDMA_WRITE)) << "UD sends only";
  c.destroy();
}

TEST_F(Ud, MulticastReachesEveryAttachedQpUntilDetached) {
  ibv_ah_attr attr = ahTo("239.1.2.3");
  ibv_ah* group = ibv_create_ah(a_.pd, &attr);
  ASSERT_NE(nullptr, group);
  UdEnd c;
  ASSERT_NO_FATAL_FAILURE(c.create(ctx_));
  EXPECT_EQ(EINVAL, ibv_detach_mcast(b_.qp, &attr.grh.dgid, 0)) << "not attached";
  ASSERT_EQ(0, ibv_attach_mcast(b_.qp, &attr.grh.dgid, 0));
  ASSERT_EQ(0, ibv_attach_mcast(b_.qp, &attr.grh.dgid, 0)) << "attaching twice is harmless";
  ASSERT_EQ(0, ibv_attach_mcast(c.qp, &attr.grh.dgid, 0));
  ibv_gid unicast = ahTo("127.0.0.1").grh.dgid;
  EXPECT_EQ(EINVAL, ibv_attach_mcast(c.qp, &unicast, 0)) << "not a multicast GID";
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ(0, b_.postRecv(i, i));
    ASSERT_EQ(0, c.postRecv(i, i));
  }
  ASSERT_EQ(0, a_.send(group, 0xFFFFFF, 32));
  expectSent();
  auto rb = b_.poll(1);
  auto rc = c.poll(1);
  ASSERT_EQ(1u, rb.size());
  ASSERT_EQ(1u, rc.size());
  EXPECT_EQ(kGrh + 32, rb[0].byte_len);
  EXPECT_EQ(a_.qp->qp_num, rc[0].src_qp);
  EXPECT_EQ(239, c.slot(0)[36]) << "the GRH's destination is the group";
  ASSERT_EQ(0, ibv_detach_mcast(b_.qp, &attr.grh.dgid, 0));
  ASSERT_EQ(0, a_.send(group, 0xFFFFFF, 32));
  expectSent();
  EXPECT_EQ(1u, c.poll(1).size());
  EXPECT_TRUE(collectFor(b_.cq).empty()) << "a detached QP gets nothing";
  EXPECT_EQ(0, ibv_destroy_ah(group));
  c.destroy();
}

TEST_F(Ud, ExtendedQpPostsWithTheWrApiAndAnAddressPerRequest) {
  ibv_qp_init_attr_ex ax{};
  ax.send_cq = ax.recv_cq = a_.cq;
  ax.qp_type = IBV_QPT_UD;
  ax.cap = {8, 8, 1, 1, 0};
  ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ax.pd = a_.pd;
  ax.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
  errno = 0;
  EXPECT_EQ(nullptr, ibv_create_qp_ex(ctx_, &ax)) << "UD sends only, as rxe";
  EXPECT_EQ(EOPNOTSUPP, errno);
  ax.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
  UdEnd x;
  x.ctx = ctx_;
  x.qp = ibv_create_qp_ex(ctx_, &ax);
  ASSERT_NE(nullptr, x.qp) << strerror(errno);
  ASSERT_NO_FATAL_FAILURE(x.moveToRts());
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(x.qp);
  ASSERT_NE(nullptr, qpx);
  ASSERT_NE(nullptr, qpx->wr_set_ud_addr);
  ASSERT_EQ(0, b_.postRecv(1, 0));
  memcpy(a_.buf.data(), "wr api", 6);
  ibv_wr_start(qpx);
  qpx->wr_id = 42;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qpx);
  ibv_wr_set_ud_addr(qpx, ah_, b_.qp->qp_num, kQkey);
  ibv_wr_set_sge(qpx, a_.mr->lkey, reinterpret_cast<uint64_t>(a_.buf.data()), 6);
  ASSERT_EQ(0, ibv_wr_complete(qpx));
  auto s = a_.poll(1);
  ASSERT_EQ(1u, s.size());
  EXPECT_EQ(42u, s[0].wr_id);
  auto r = b_.poll(1);
  ASSERT_EQ(1u, r.size());
  EXPECT_EQ(0, memcmp("wr api", b_.slot(0) + kGrh, 6));
  EXPECT_EQ(0, ibv_destroy_qp(x.qp));
}

}  // namespace
}  // namespace rdmamsg::test
