// The extended verbs as rdma-core's inline wrappers reach them (issue 24): ibv_query_device_ex,
// ibv_create_cq_ex with the ibv_start_poll / ibv_next_poll / ibv_end_poll iterator and its read_*
// accessors, ibv_create_qp_ex (and rdma_create_qp_ex) with the ibv_wr_* post API on RC, each over a
// loopback connection; the capabilities ibv_create_qp grants (inline data as rxe rounds it).
// Errors are those of rxe's provider: EOPNOTSUPP for what it does not offer, ENOSPC for a work
// request batch that does not fit.
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>

#include "../support/wait.h"
#include "support.h"

namespace rdmamsg::test {
namespace {

constexpr uint64_t kWcFlags =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP;
constexpr uint64_t kRcOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                            IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                            IBV_QP_EX_WITH_RDMA_READ;

// A completion read through the extended CQ's accessors.
struct Polled {
  uint64_t wrId;
  ibv_wc_status status;
  ibv_wc_opcode opcode;
  uint32_t byteLen;
  uint32_t imm;  // host order
  uint32_t qpNum;
  uint32_t srcQp;
  unsigned wcFlags;
};

Polled readCurrent(ibv_cq_ex* cq) {
  Polled p{};
  p.wrId = cq->wr_id;
  p.status = cq->status;
  p.opcode = ibv_wc_read_opcode(cq);
  p.byteLen = ibv_wc_read_byte_len(cq);
  p.wcFlags = ibv_wc_read_wc_flags(cq);
  if (p.wcFlags & IBV_WC_WITH_IMM) p.imm = ntohl(ibv_wc_read_imm_data(cq));
  p.qpNum = ibv_wc_read_qp_num(cq);
  p.srcQp = ibv_wc_read_src_qp(cq);
  return p;
}

// Polls `cq` with start/next/end until `n` completions were read or `timeout` passed.
std::vector<Polled> pollEx(ibv_cq_ex* cq, size_t n, Millis timeout = kDeadline) {
  std::vector<Polled> out;
  waitFor(
      [&] {
        ibv_poll_cq_attr attr{};
        int rc = ibv_start_poll(cq, &attr);
        if (rc == ENOENT) return false;  // nothing: no end_poll (ibv_create_cq_ex.3)
        if (rc != 0) {
          ADD_FAILURE() << "ibv_start_poll: " << rc;
          return true;
        }
        do {
          out.push_back(readCurrent(cq));
          rc = out.size() < n ? ibv_next_poll(cq) : ENOENT;
        } while (rc == 0);
        EXPECT_EQ(ENOENT, rc);
        ibv_end_poll(cq);
        return out.size() >= n;
      },
      timeout);
  return out;
}

// One side of a connection whose CQ (and, optionally, QP) are extended objects.
struct ExSide {
  Side side;  // owns everything: its destroy() releases the objects created here
  ibv_cq_ex* cqx = nullptr;
  ibv_qp_ex* qpx = nullptr;

  void create(rdma_cm_id* id, bool extendedQp, uint32_t sendWr = 64) {
    Side& s = side;
    s.id = id;
    s.pd = ibv_alloc_pd(id->verbs);
    ASSERT_NE(nullptr, s.pd);
    s.comp = ibv_create_comp_channel(id->verbs);
    ASSERT_NE(nullptr, s.comp);
    ASSERT_TRUE(setNonBlocking(s.comp->fd));
    ibv_cq_init_attr_ex cqAttr{};
    cqAttr.cqe = 256;
    cqAttr.channel = s.comp;
    cqAttr.wc_flags = kWcFlags;
    cqx = ibv_create_cq_ex(id->verbs, &cqAttr);
    ASSERT_NE(nullptr, cqx) << strerror(errno);
    s.cq = ibv_cq_ex_to_cq(cqx);
    s.buf.assign(1 << 20, 0);
    s.mr = ibv_reg_mr(s.pd, s.buf.data(), s.buf.size(),
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(nullptr, s.mr);
    ibv_qp_init_attr_ex attr{};
    attr.send_cq = s.cq;
    attr.recv_cq = s.cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = sendWr;
    attr.cap.max_recv_wr = 64;
    attr.cap.max_send_sge = 4;
    attr.cap.max_recv_sge = 4;
    attr.cap.max_inline_data = 64;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD;
    attr.pd = s.pd;
    if (extendedQp) {
      attr.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      attr.send_ops_flags = kRcOps;
    }
    ASSERT_EQ(0, rdma_create_qp_ex(id, &attr)) << strerror(errno);
    s.qp = id->qp;
    s.cap = attr.cap;
    qpx = ibv_qp_to_qp_ex(s.qp);
    if (extendedQp) {
      ASSERT_NE(nullptr, qpx);
    } else {
      EXPECT_EQ(nullptr, qpx);
    }
  }
};

// A connection whose client QP is extended (the ibv_wr_* API) and both CQs are extended.
class ExtendedVerbs : public CmFixture {
 protected:
  void SetUp() override {
    CmFixture::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_NO_FATAL_FAILURE(resolveClient());
    ASSERT_NO_FATAL_FAILURE(clientEx_.create(client_.id, true, kClientSendWr));
    client_.id = nullptr;  // owned by clientEx_.side from now on
    rdma_conn_param param{};
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    ASSERT_EQ(0, rdma_connect(clientEx_.side.id, &param)) << strerror(errno);
    auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_NO_FATAL_FAILURE(serverEx_.create(request->id, false));
    rdma_conn_param accept{};
    accept.responder_resources = 1;
    accept.initiator_depth = 1;
    accept.rnr_retry_count = 7;
    ASSERT_EQ(0, rdma_accept(serverEx_.side.id, &accept)) << strerror(errno);
    auto established = expectCmEvent(clientCh_, RDMA_CM_EVENT_ESTABLISHED);
    ASSERT_TRUE(established && established->type == RDMA_CM_EVENT_ESTABLISHED);
    established = expectCmEvent(serverCh_, RDMA_CM_EVENT_ESTABLISHED);
    ASSERT_TRUE(established && established->type == RDMA_CM_EVENT_ESTABLISHED);
  }

  void TearDown() override {
    clientEx_.side.destroy();
    serverEx_.side.destroy();
    CmFixture::TearDown();
  }

  Side& client() { return clientEx_.side; }
  Side& server() { return serverEx_.side; }
  ibv_qp_ex* qpx() { return clientEx_.qpx; }

  static constexpr uint32_t kClientSendWr = 16;
  ExSide clientEx_;
  ExSide serverEx_;
};

TEST_F(ExtendedVerbs, WrApiPostsSendsWritesAndReadsInOneBatch) {
  Side& c = client();
  Side& s = server();
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(0, s.postRecv(kRecvBase + i, i * kSlot, kSlot));
  std::memset(c.at(0), 0xa1, 100);
  std::memset(c.at(kSlot), 0xb1, 50);
  std::memset(c.at(kSlot + 1000), 0xb2, 30);
  std::memset(s.at(8 * kSlot), 0xc1, 200);  // what the READ fetches
  std::array<uint8_t, 40> inlineData{};
  inlineData.fill(0x5a);

  ibv_qp_ex* x = qpx();
  ibv_wr_start(x);
  x->wr_id = 1;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, c.mr->lkey, c.addr(0), 100);
  x->wr_id = 2;
  ibv_wr_send_imm(x, htonl(0x1234));
  ibv_wr_set_inline_data(x, inlineData.data(), inlineData.size());
  inlineData.fill(0);  // copied by the setter: reusable at once
  x->wr_id = 3;
  ibv_wr_rdma_write(x, s.mr->rkey, s.addr(4 * kSlot));
  const ibv_sge list[2] = {{c.addr(kSlot), 50, c.mr->lkey}, {c.addr(kSlot + 1000), 30, c.mr->lkey}};
  ibv_wr_set_sge_list(x, 2, list);
  x->wr_id = 4;
  ibv_wr_rdma_write_imm(x, s.mr->rkey, s.addr(5 * kSlot), htonl(0x5678));
  ibv_wr_set_sge(x, c.mr->lkey, c.addr(0), 10);
  x->wr_id = 5;
  ibv_wr_rdma_read(x, s.mr->rkey, s.addr(8 * kSlot));
  ibv_wr_set_sge(x, c.mr->lkey, c.addr(2 * kSlot), 200);
  ASSERT_EQ(0, ibv_wr_complete(x));

  auto sent = pollEx(clientEx_.cqx, 5);
  ASSERT_EQ(5u, sent.size());
  const ibv_wc_opcode ops[5] = {IBV_WC_SEND, IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE,
                                IBV_WC_RDMA_READ};
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(i + 1, sent[i].wrId);
    EXPECT_EQ(IBV_WC_SUCCESS, sent[i].status) << ibv_wc_status_str(sent[i].status);
    EXPECT_EQ(ops[i], sent[i].opcode);
    EXPECT_EQ(c.qp->qp_num, sent[i].qpNum);
  }
  EXPECT_EQ(200u, sent[4].byteLen);
  EXPECT_EQ(0xc1, *c.at(2 * kSlot));
  EXPECT_EQ(0xc1, *c.at(2 * kSlot + 199));

  auto received = pollEx(serverEx_.cqx, 3);
  ASSERT_EQ(3u, received.size());
  EXPECT_EQ(IBV_WC_RECV, received[0].opcode);
  EXPECT_EQ(100u, received[0].byteLen);
  EXPECT_EQ(0u, received[0].wcFlags & IBV_WC_WITH_IMM);
  EXPECT_EQ(IBV_WC_RECV, received[1].opcode);
  EXPECT_EQ(40u, received[1].byteLen);
  EXPECT_TRUE(received[1].wcFlags & IBV_WC_WITH_IMM);
  EXPECT_EQ(0x1234u, received[1].imm);
  EXPECT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, received[2].opcode);
  EXPECT_EQ(0x5678u, received[2].imm);
  for (const auto& r : received) {
    EXPECT_EQ(IBV_WC_SUCCESS, r.status);
    EXPECT_EQ(s.qp->qp_num, r.qpNum);
    EXPECT_EQ(c.qp->qp_num, r.srcQp);
  }
  EXPECT_EQ(0xa1, *s.at(0));
  EXPECT_EQ(0x5a, *s.at(kSlot));
  EXPECT_EQ(0x5a, *s.at(kSlot + 39));
  EXPECT_EQ(0xb1, *s.at(4 * kSlot + 49));
  EXPECT_EQ(0xb2, *s.at(4 * kSlot + 50));
  EXPECT_EQ(0xb2, *s.at(4 * kSlot + 79));
  EXPECT_EQ(0xa1, *s.at(5 * kSlot + 9));
}

TEST_F(ExtendedVerbs, AbortAndFailedBatchesPostNothing) {
  Side& c = client();
  Side& s = server();
  ASSERT_EQ(0, s.postRecv(kRecvBase, 0, kSlot));
  ibv_qp_ex* x = qpx();
  x->wr_flags = IBV_SEND_SIGNALED;

  ibv_wr_start(x);
  x->wr_id = 10;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, c.mr->lkey, c.addr(0), 8);
  ibv_wr_abort(x);

  // Too many SGEs in the second WR: the first is not posted either.
  std::vector<ibv_sge> many(c.cap.max_send_sge + 1, ibv_sge{c.addr(0), 1, c.mr->lkey});
  ibv_wr_start(x);
  x->wr_id = 11;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, c.mr->lkey, c.addr(0), 8);
  x->wr_id = 12;
  ibv_wr_send(x);
  ibv_wr_set_sge_list(x, many.size(), many.data());
  EXPECT_EQ(ENOSPC, ibv_wr_complete(x));

  // More inline data than granted.
  std::vector<uint8_t> big(c.cap.max_inline_data + 1, 1);
  ibv_wr_start(x);
  x->wr_id = 13;
  ibv_wr_send(x);
  ibv_wr_set_inline_data(x, big.data(), big.size());
  EXPECT_EQ(ENOSPC, ibv_wr_complete(x));

  // More WRs than the send queue holds.
  ibv_wr_start(x);
  for (uint32_t i = 0; i <= c.cap.max_send_wr; ++i) {
    x->wr_id = 100 + i;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, c.mr->lkey, c.addr(0), 8);
  }
  EXPECT_EQ(ENOSPC, ibv_wr_complete(x));

  // A setter without a builder.
  ibv_wr_start(x);
  ibv_wr_set_sge(x, c.mr->lkey, c.addr(0), 8);
  EXPECT_EQ(EINVAL, ibv_wr_complete(x));

  EXPECT_TRUE(collectFor(c.cq).empty()) << "nothing was posted";
  EXPECT_TRUE(collectFor(s.cq).empty()) << "nothing arrived";

  // The QP is fine: the next batch goes.
  ibv_wr_start(x);
  x->wr_id = 20;
  ibv_wr_send(x);
  ibv_wr_set_sge(x, c.mr->lkey, c.addr(0), 8);
  ASSERT_EQ(0, ibv_wr_complete(x));
  auto sent = c.poll(1);
  ASSERT_EQ(1u, sent.size());
  EXPECT_EQ(20u, sent[0].wr_id);
  EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status);
  auto received = s.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(8u, received[0].byte_len);
}

TEST_F(ExtendedVerbs, PollIteratorReleasesTheCqAndMixesWithPollCqAndEvents) {
  Side& c = client();
  Side& s = server();
  ibv_poll_cq_attr attr{};
  // Empty: ENOENT, and the CQ is not held (a second start_poll does not block).
  EXPECT_EQ(ENOENT, ibv_start_poll(serverEx_.cqx, &attr));
  EXPECT_EQ(ENOENT, ibv_start_poll(serverEx_.cqx, &attr));
  attr.comp_mask = 1;
  EXPECT_EQ(EINVAL, ibv_start_poll(serverEx_.cqx, &attr));
  attr.comp_mask = 0;

  ASSERT_EQ(0, ibv_req_notify_cq(s.cq, 0));
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(0, s.postRecv(kRecvBase + i, i * kSlot, kSlot));
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(0, c.postSend(i, 0, 16));
  // The completion channel works for an extended CQ.
  ibv_cq* evCq = getCqEvent(s.comp);
  ASSERT_EQ(s.cq, evCq);
  ibv_ack_cq_events(s.cq, 1);
  auto sent = c.poll(4);
  ASSERT_EQ(4u, sent.size());

  // Batches until three completions were read; inside a batch the program may post (here: a
  // receive per completion) without deadlock.
  size_t read = 0;
  waitFor(
      [&] {
        if (ibv_start_poll(serverEx_.cqx, &attr) != 0) return false;
        int rc = 0;
        do {
          ++read;
          EXPECT_EQ(IBV_WC_SUCCESS, serverEx_.cqx->status);
          EXPECT_EQ(kRecvBase + read - 1, serverEx_.cqx->wr_id);
          EXPECT_EQ(0, s.postRecv(kRecvBase + 10 + read, (4 + read) * kSlot, kSlot));
          rc = read < 3 ? ibv_next_poll(serverEx_.cqx) : ENOENT;
        } while (rc == 0);
        ibv_end_poll(serverEx_.cqx);
        return read >= 3;
      },
      kDeadline);
  EXPECT_EQ(3u, read);
  // The last one through ibv_poll_cq on the same CQ.
  auto rest = pollCompletions(s.cq, 1);
  ASSERT_EQ(1u, rest.size());
  EXPECT_EQ(kRecvBase + 3, rest[0].wr_id);
  EXPECT_EQ(ENOENT, ibv_start_poll(serverEx_.cqx, &attr));
}

// --- creation ----------------------------------------------------------------------------------

class ExtendedCreate : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx = openFirstDevice();
    ASSERT_NE(nullptr, ctx);
    pd = ibv_alloc_pd(ctx);
    ASSERT_NE(nullptr, pd);
    cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    ASSERT_NE(nullptr, cq);
  }
  void TearDown() override {
    if (cq != nullptr) {
      EXPECT_EQ(0, ibv_destroy_cq(cq));
    }
    if (pd != nullptr) {
      EXPECT_EQ(0, ibv_dealloc_pd(pd));
    }
    if (ctx != nullptr) {
      EXPECT_EQ(0, ibv_close_device(ctx));
    }
  }

  ibv_qp_init_attr_ex qpAttr(uint32_t mask) {
    ibv_qp_init_attr_ex a{};
    a.send_cq = cq;
    a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 4;
    a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.comp_mask = mask;
    a.pd = pd;
    return a;
  }

  // ibv_create_qp_ex fails with `err`.
  void expectRefused(ibv_qp_init_attr_ex a, int err) {
    errno = 0;
    ibv_qp* qp = ibv_create_qp_ex(ctx, &a);
    EXPECT_EQ(nullptr, qp);
    EXPECT_EQ(err, errno) << strerror(errno);
    if (qp != nullptr) ibv_destroy_qp(qp);
  }

  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
};

TEST_F(ExtendedCreate, QueryDeviceExReportsThePortCountAndTheBaseAttributes) {
  ibv_device_attr base{};
  ASSERT_EQ(0, ibv_query_device(ctx, &base));
  ibv_device_attr_ex ex{};
  ASSERT_EQ(0, ibv_query_device_ex(ctx, nullptr, &ex));
  EXPECT_EQ(1u, ex.phys_port_cnt_ex);
  EXPECT_EQ(0, memcmp(&base, &ex.orig_attr, sizeof base));
  EXPECT_EQ(base.device_cap_flags, ex.device_cap_flags_ex & 0xffffffffu);
  EXPECT_EQ(0u, ex.completion_timestamp_mask);  // no timestamps, as rxe
  EXPECT_EQ(0u, ex.odp_caps.general_caps);
  ibv_query_device_ex_input input{};
  input.comp_mask = 1;
  EXPECT_EQ(EINVAL, ibv_query_device_ex(ctx, &input, &ex));
  // A program built against an older, shorter ibv_device_attr_ex: nothing written past it.
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_device_ex);
  ASSERT_NE(nullptr, vctx);
  std::vector<uint8_t> buf(sizeof(ibv_device_attr_ex), 0xee);
  const size_t shortSize = offsetof(ibv_device_attr_ex, phys_port_cnt_ex);
  ASSERT_EQ(0, vctx->query_device_ex(ctx, nullptr,
                                     reinterpret_cast<ibv_device_attr_ex*>(buf.data()), shortSize));
  EXPECT_EQ(0xee, buf[shortSize]);
  EXPECT_EQ(EINVAL, vctx->query_device_ex(ctx, nullptr,
                                          reinterpret_cast<ibv_device_attr_ex*>(buf.data()), 8));
}

TEST_F(ExtendedCreate, CreateCqExTakesRxesFlagsAndRefusesTheRest) {
  ibv_cq_init_attr_ex a{};
  a.cqe = 8;
  a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
               IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
               IBV_WC_EX_WITH_DLID_PATH_BITS;
  a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  a.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
  ibv_cq_ex* cqx = ibv_create_cq_ex(ctx, &a);
  ASSERT_NE(nullptr, cqx) << strerror(errno);
  EXPECT_GE(cqx->cqe, 8);
  EXPECT_NE(nullptr, cqx->read_byte_len);
  EXPECT_NE(nullptr, cqx->read_dlid_path_bits);
  EXPECT_EQ(nullptr, cqx->read_completion_ts);  // not asked for, not offered
  ibv_poll_cq_attr pollAttr{};
  EXPECT_EQ(ENOENT, ibv_start_poll(cqx, &pollAttr));
  EXPECT_EQ(0, ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)));

  // Only the fields asked for have accessors.
  a = {};
  a.cqe = 8;
  a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
  cqx = ibv_create_cq_ex(ctx, &a);
  ASSERT_NE(nullptr, cqx);
  EXPECT_EQ(nullptr, cqx->read_imm_data);
  EXPECT_NE(nullptr, cqx->read_opcode);
  EXPECT_EQ(0, ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)));

  for (uint64_t flag :
       {static_cast<uint64_t>(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP),
        static_cast<uint64_t>(IBV_WC_EX_WITH_CVLAN), static_cast<uint64_t>(IBV_WC_EX_WITH_FLOW_TAG),
        static_cast<uint64_t>(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)}) {
    a = {};
    a.cqe = 8;
    a.wc_flags = flag;
    errno = 0;
    EXPECT_EQ(nullptr, ibv_create_cq_ex(ctx, &a));
    EXPECT_EQ(EOPNOTSUPP, errno) << "wc_flags " << flag;
  }
  a = {};
  a.cqe = 8;
  a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  a.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
  errno = 0;
  EXPECT_EQ(nullptr, ibv_create_cq_ex(ctx, &a));
  EXPECT_EQ(EOPNOTSUPP, errno);
  a = {};
  a.cqe = 8;
  a.comp_mask = 1u << 7;
  errno = 0;
  EXPECT_EQ(nullptr, ibv_create_cq_ex(ctx, &a));
  EXPECT_EQ(EOPNOTSUPP, errno);
  a = {};
  a.cqe = 0;
  errno = 0;
  EXPECT_EQ(nullptr, ibv_create_cq_ex(ctx, &a));
  EXPECT_EQ(EINVAL, errno);
}

TEST_F(ExtendedCreate, CreateQpExSetsOnlyTheRequestedBuilders) {
  ibv_qp_init_attr_ex a = qpAttr(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS);
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  ibv_qp* qp = ibv_create_qp_ex(ctx, &a);
  ASSERT_NE(nullptr, qp) << strerror(errno);
  EXPECT_GE(a.cap.max_send_wr, 4u);
  EXPECT_GE(a.cap.max_inline_data, 16u) << "granted capabilities are written back";
  ibv_qp_ex* x = ibv_qp_to_qp_ex(qp);
  ASSERT_NE(nullptr, x);
  EXPECT_EQ(qp, &x->qp_base);
  EXPECT_NE(nullptr, x->wr_send);
  EXPECT_EQ(nullptr, x->wr_rdma_write);
  EXPECT_EQ(nullptr, x->wr_atomic_fetch_add);
  EXPECT_NE(nullptr, x->wr_set_sge);
  // Not in RTS: the batch fails as ibv_post_send would.
  ibv_wr_start(x);
  x->wr_id = 1;
  ibv_wr_send(x);
  EXPECT_EQ(EINVAL, ibv_wr_complete(x));
  EXPECT_EQ(0, ibv_destroy_qp(qp));

  // Only IBV_QP_INIT_ATTR_PD: the inline wrapper calls ibv_create_qp, a QP without the API.
  a = qpAttr(IBV_QP_INIT_ATTR_PD);
  qp = ibv_create_qp_ex(ctx, &a);
  ASSERT_NE(nullptr, qp);
  EXPECT_EQ(nullptr, ibv_qp_to_qp_ex(qp));
  EXPECT_EQ(0, ibv_destroy_qp(qp));

  // Create flags present but zero: an extended QP with no builders.
  a = qpAttr(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS);
  qp = ibv_create_qp_ex(ctx, &a);
  ASSERT_NE(nullptr, qp);
  x = ibv_qp_to_qp_ex(qp);
  ASSERT_NE(nullptr, x);
  EXPECT_EQ(nullptr, x->wr_send);
  EXPECT_EQ(0, ibv_destroy_qp(qp));
}

TEST_F(ExtendedCreate, CreateQpExRefusesWhatRxeRefuses) {
  const uint32_t ops = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  // Memory windows are taken (mw_test.cc); atomic write needs a newer rxe.
  for (uint64_t op : {static_cast<uint64_t>(IBV_QP_EX_WITH_ATOMIC_WRITE),
                      static_cast<uint64_t>(IBV_QP_EX_WITH_TSO)}) {
    ibv_qp_init_attr_ex a = qpAttr(ops);
    a.send_ops_flags = IBV_QP_EX_WITH_SEND | op;
    SCOPED_TRACE(op);
    expectRefused(a, EOPNOTSUPP);
  }
  ibv_qp_init_attr_ex a = qpAttr(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS);
  a.create_flags = IBV_QP_CREATE_SCATTER_FCS;
  expectRefused(a, EOPNOTSUPP);
  a = qpAttr(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER);
  expectRefused(a, EOPNOTSUPP);
  a = qpAttr(ops);
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  a.qp_type = IBV_QPT_RAW_PACKET;  // rxe's provider takes RC, UC and UD only
  expectRefused(a, EOPNOTSUPP);
  a.qp_type = IBV_QPT_UD;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;  // UD: sends only
  expectRefused(a, EOPNOTSUPP);
  a = qpAttr(IBV_QP_INIT_ATTR_SEND_OPS_FLAGS);  // no PD
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  expectRefused(a, EINVAL);
}

TEST_F(ExtendedCreate, CreateQpExTakesUcWithRxesUcOperations) {
  ibv_qp_init_attr_ex a = qpAttr(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS);
  a.qp_type = IBV_QPT_UC;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                     IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  ibv_qp* qp = ibv_create_qp_ex(ctx, &a);
  ASSERT_NE(nullptr, qp) << strerror(errno);
  EXPECT_EQ(IBV_QPT_UC, qp->qp_type);
  ibv_qp_ex* x = ibv_qp_to_qp_ex(qp);
  ASSERT_NE(nullptr, x);
  EXPECT_NE(nullptr, x->wr_rdma_write);
  EXPECT_EQ(nullptr, x->wr_rdma_read);
  EXPECT_EQ(0, ibv_destroy_qp(qp));
  // pyverbs' random attributes: create flags 0 under IBV_QP_INIT_ATTR_CREATE_FLAGS.
  a = qpAttr(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS);
  a.qp_type = IBV_QPT_UC;
  qp = ibv_create_qp_ex(ctx, &a);
  ASSERT_NE(nullptr, qp) << strerror(errno);
  EXPECT_EQ(0, ibv_destroy_qp(qp));
  // UC has neither reads nor atomics.
  for (uint64_t op : {static_cast<uint64_t>(IBV_QP_EX_WITH_RDMA_READ),
                      static_cast<uint64_t>(IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)}) {
    a = qpAttr(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS);
    a.qp_type = IBV_QPT_UC;
    a.send_ops_flags = IBV_QP_EX_WITH_SEND | op;
    SCOPED_TRACE(op);
    expectRefused(a, EOPNOTSUPP);
  }
}

// A context's cmd_fd is a real fd a program can dup (pyverbs' shared-PD test does before
// ibv_import_device, see import_test.cc).
TEST_F(ExtendedCreate, CommandFdIsARealFd) {
  ASSERT_GE(ctx->cmd_fd, 0);
  int dup = ::dup(ctx->cmd_fd);
  ASSERT_GE(dup, 0) << strerror(errno);
  EXPECT_NE(-1, fcntl(ctx->cmd_fd, F_GETFD));
  EXPECT_EQ(0, close(dup));
}

TEST_F(ExtendedCreate, CreateQpGrantsInlineDataAsRxe) {
  struct Case {
    uint32_t sge, inl;        // asked
    uint32_t gotSge, gotInl;  // granted
  };
  for (const Case& k : {Case{1, 0, 1, 16}, Case{0, 0, 1, 16}, Case{4, 64, 4, 64},
                        Case{2, 100, 6, 100}, Case{32, 0, 32, 512}, Case{1, 512, 32, 512}}) {
    ibv_qp_init_attr a{};
    a.send_cq = cq;
    a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 2;
    a.cap.max_recv_wr = 2;
    a.cap.max_send_sge = k.sge;
    a.cap.max_inline_data = k.inl;
    ibv_qp* qp = ibv_create_qp(pd, &a);
    ASSERT_NE(nullptr, qp) << k.sge << "/" << k.inl;
    EXPECT_EQ(k.gotSge, a.cap.max_send_sge) << k.sge << "/" << k.inl;
    EXPECT_EQ(k.gotInl, a.cap.max_inline_data) << k.sge << "/" << k.inl;
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(0, ibv_query_qp(qp, &attr, IBV_QP_CAP, &init));
    EXPECT_EQ(a.cap.max_inline_data, init.cap.max_inline_data);
    EXPECT_EQ(a.cap.max_send_sge, attr.cap.max_send_sge);
    EXPECT_EQ(0, ibv_destroy_qp(qp));
  }
  ibv_qp_init_attr a{};
  a.send_cq = cq;
  a.recv_cq = cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 2;
  a.cap.max_inline_data = 513;
  const ibv_qp_cap asked = a.cap;
  errno = 0;
  EXPECT_EQ(nullptr, ibv_create_qp(pd, &a));
  EXPECT_EQ(EINVAL, errno);
  EXPECT_EQ(0, memcmp(&asked, &a.cap, sizeof asked)) << "a failed create writes nothing back";
}

// rdma-core's rdma_xclient asks for one SGE and no inline data, then sends 16 bytes inline:
// rxe granted them.
class GrantedInline : public CmFixture {};

TEST_F(GrantedInline, SixteenBytesInlineOnAQpThatAskedForNone) {
  ConnectOptions options;
  options.clientQp.sge = 1;
  options.clientQp.inlineData = 0;
  options.serverRecvs = 1;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  EXPECT_EQ(16u, client_.cap.max_inline_data) << "rdma_create_qp writes the grant back";
  std::array<uint8_t, 17> data{};
  data.fill(0x3c);
  ibv_sge sge{reinterpret_cast<uint64_t>(data.data()), 16, 0};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(0, ibv_post_send(client_.qp, &wr, &bad));
  auto received = server_.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(16u, received[0].byte_len);
  EXPECT_EQ(0x3c, *server_.at(0));
  auto sent = client_.poll(1);
  ASSERT_EQ(1u, sent.size());
  sge.length = 17;
  EXPECT_EQ(EINVAL, ibv_post_send(client_.qp, &wr, &bad));
}

}  // namespace
}  // namespace rdmamsg::test
