// rdma_cm on UD ids (rdma_cm.7, rdma_connect.3, rdma_accept.3, rdma_join_multicast.3,
// udaddy.1, mckey.1): service ID resolution with param.ud, its rejects, and multicast joins.
#include <arpa/inet.h>

#include <cstring>

#include "support.h"

namespace rdmamsg::test {
namespace {

// A UDP id's verbs objects: PD, CQ, buffer, and a UD QP made by rdma_create_qp (ready at once).
struct UdCmEnd {
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(8192);

  void create(rdma_cm_id* cmId) {
    id = cmId;
    pd = ibv_alloc_pd(id->verbs);
    ASSERT_NE(nullptr, pd);
    cq = ibv_create_cq(id->verbs, 64, nullptr, nullptr, 0);
    ASSERT_NE(nullptr, cq);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(nullptr, mr);
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq;
    a.qp_type = IBV_QPT_UD;
    a.cap = {8, 8, 1, 1, 0};
    ASSERT_EQ(0, rdma_create_qp(id, pd, &a)) << strerror(errno);
  }
  void destroy() {
    if (id != nullptr && id->qp != nullptr) rdma_destroy_qp(id);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    if (id) rdma_destroy_id(id);
    *this = UdCmEnd{};
  }
  int postRecv() {
    ibv_sge s{reinterpret_cast<uint64_t>(buf.data()), 4096, mr->lkey};
    ibv_recv_wr wr{};
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(id->qp, &wr, &bad);
  }
  int send(ibv_ah* ah, uint32_t qpn, uint32_t qkey) {
    ibv_sge s{reinterpret_cast<uint64_t>(buf.data() + 4096), 64, mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(id->qp, &wr, &bad);
  }
};

// Waits for the next event, which must be `type`; copies it into `out` and acks it.
void expectRaw(rdma_event_channel* ch, rdma_cm_event_type type, rdma_cm_event& out,
               std::vector<uint8_t>* pdata = nullptr) {
  rdma_cm_event* e = getRawCmEvent(ch);
  ASSERT_NE(nullptr, e) << "no " << rdma_event_str(type);
  out = *e;
  if (pdata != nullptr && e->param.ud.private_data != nullptr) {
    const auto* p = static_cast<const uint8_t*>(e->param.ud.private_data);
    pdata->assign(p, p + e->param.ud.private_data_len);
  }
  EXPECT_EQ(0, rdma_ack_cm_event(e));
  ASSERT_EQ(type, out.event) << rdma_event_str(out.event) << " status " << out.status;
}

class CmUd : public ::testing::Test {
 protected:
  void SetUp() override {
    ch_ = createChannel();
    ASSERT_NE(nullptr, ch_);
  }
  void TearDown() override {
    client_.destroy();
    server_.destroy();
    if (listen_) rdma_destroy_id(listen_);
    if (ch_) rdma_destroy_event_channel(ch_);
  }
  void listen() {
    ASSERT_EQ(0, rdma_create_id(ch_, &listen_, nullptr, RDMA_PS_UDP));
    EXPECT_EQ(IBV_QPT_UD, listen_->qp_type);
    sockaddr_in a = ipv4("127.0.0.1", 0);
    ASSERT_EQ(0, rdma_bind_addr(listen_, reinterpret_cast<sockaddr*>(&a)));
    ASSERT_EQ(0, rdma_listen(listen_, 4));
    port_ = ntohs(rdma_get_src_port(listen_));
  }
  // Resolves a client id to 127.0.0.1:port, creates its QP and connects with `pdata`.
  void connectClient(uint16_t port, const std::vector<uint8_t>& pdata) {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(0, rdma_create_id(ch_, &id, nullptr, RDMA_PS_UDP));
    sockaddr_in dst = ipv4("127.0.0.1", port);
    ASSERT_EQ(0, rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
    rdma_cm_event e{};
    ASSERT_NO_FATAL_FAILURE(expectRaw(ch_, RDMA_CM_EVENT_ADDR_RESOLVED, e));
    ASSERT_EQ(0, rdma_resolve_route(id, 2000));
    ASSERT_NO_FATAL_FAILURE(expectRaw(ch_, RDMA_CM_EVENT_ROUTE_RESOLVED, e));
    ASSERT_NO_FATAL_FAILURE(client_.create(id));
    ibv_qp_attr q{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(0, ibv_query_qp(id->qp, &q, IBV_QP_STATE | IBV_QP_QKEY, &init));
    EXPECT_EQ(IBV_QPS_RTS, q.qp_state) << "a UD QP of rdma_cm is ready at once";
    EXPECT_EQ(uint32_t(RDMA_UDP_QKEY), q.qkey);
    rdma_conn_param p{};
    p.private_data = pdata.data();
    p.private_data_len = static_cast<uint8_t>(pdata.size());
    ASSERT_EQ(0, rdma_connect(id, &p));
  }

  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* listen_ = nullptr;
  uint16_t port_ = 0;
  UdCmEnd client_, server_;
};

TEST_F(CmUd, ResolutionGivesTheServersQpQkeyAndAddress) {
  ASSERT_NO_FATAL_FAILURE(listen());
  std::vector<uint8_t> hello(180, 0x5a);  // a SIDR REQ carries 180 bytes
  ASSERT_NO_FATAL_FAILURE(connectClient(port_, hello));
  rdma_cm_event req{};
  std::vector<uint8_t> got;
  ASSERT_NO_FATAL_FAILURE(expectRaw(ch_, RDMA_CM_EVENT_CONNECT_REQUEST, req, &got));
  EXPECT_EQ(hello, got);
  EXPECT_EQ(IBV_QPT_UD, req.id->qp_type);
  ASSERT_NO_FATAL_FAILURE(server_.create(req.id));
  ASSERT_EQ(0, server_.postRecv());
  rdma_conn_param p{};
  p.qp_num = req.id->qp->qp_num;
  ASSERT_EQ(0, rdma_accept(req.id, &p));
  rdma_cm_event est{};
  std::vector<uint8_t> reply;
  ASSERT_NO_FATAL_FAILURE(expectRaw(ch_, RDMA_CM_EVENT_ESTABLISHED, est, &reply));
  EXPECT_EQ(client_.id, est.id);
  EXPECT_EQ(136u, reply.size()) << "a SIDR REP's private data, padded";
  EXPECT_EQ(server_.id->qp->qp_num, est.param.ud.qp_num);
  EXPECT_EQ(uint32_t(RDMA_UDP_QKEY), est.param.ud.qkey);
  EXPECT_EQ(1, est.param.ud.ah_attr.is_global);
  in_addr lo{};
  inet_pton(AF_INET, "127.0.0.1", &lo);
  EXPECT_EQ(0, memcmp(&est.param.ud.ah_attr.grh.dgid.raw[12], &lo, 4));
  ibv_ah* ah = ibv_create_ah(client_.pd, &est.param.ud.ah_attr);
  ASSERT_NE(nullptr, ah);
  ASSERT_EQ(0, client_.send(ah, est.param.ud.qp_num, est.param.ud.qkey));
  EXPECT_EQ(1u, pollCompletions(client_.cq, 1).size());
  auto r = pollCompletions(server_.cq, 1);
  ASSERT_EQ(1u, r.size()) << "the datagram reached the accepted QP";
  EXPECT_EQ(client_.id->qp->qp_num, r[0].src_qp);
  EXPECT_TRUE(collectFor(client_.cq).empty());
  EXPECT_EQ(0, ibv_destroy_ah(ah));
}

TEST_F(CmUd, RejectAndNoListenerAreUnreachableWithTheSidrStatus) {
  ASSERT_NO_FATAL_FAILURE(listen());
  ASSERT_NO_FATAL_FAILURE(connectClient(port_, {}));
  rdma_cm_event req{};
  ASSERT_NO_FATAL_FAILURE(expectRaw(ch_, RDMA_CM_EVENT_CONNECT_REQUEST, req));
  ASSERT_EQ(0, rdma_reject(req.id, nullptr, 0));
  ASSERT_EQ(0, rdma_destroy_id(req.id));
  rdma_cm_event e{};
  ASSERT_NO_FATAL_FAILURE(expectRaw(ch_, RDMA_CM_EVENT_UNREACHABLE, e));
  EXPECT_EQ(2, e.status) << "IB_SIDR_REJECT";
  client_.destroy();
  // A port bound but not listened on: the connection is refused at once.
  rdma_cm_id* bound = nullptr;
  ASSERT_EQ(0, rdma_create_id(ch_, &bound, nullptr, RDMA_PS_UDP));
  sockaddr_in a = ipv4("127.0.0.1", 0);
  ASSERT_EQ(0, rdma_bind_addr(bound, reinterpret_cast<sockaddr*>(&a)));
  ASSERT_NO_FATAL_FAILURE(connectClient(ntohs(rdma_get_src_port(bound)), {}));
  ASSERT_NO_FATAL_FAILURE(expectRaw(ch_, RDMA_CM_EVENT_UNREACHABLE, e));
  EXPECT_EQ(0, rdma_destroy_id(bound));
  EXPECT_EQ(1, e.status) << "IB_SIDR_UNSUPPORTED: nobody serves the port";
}

TEST_F(CmUd, MulticastJoinAttachesTheQpAndLeaveDetachesIt) {
  rdma_cm_id* ids[2] = {};
  UdCmEnd* ends[2] = {&client_, &server_};
  sockaddr_in group = ipv4("239.9.8.7", 0);
  sockaddr_in src = ipv4("127.0.0.1", 0);
  rdma_cm_event join[2]{};
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ(0, rdma_create_id(ch_, &ids[i], nullptr, RDMA_PS_UDP));
    ASSERT_EQ(0, rdma_resolve_addr(ids[i], reinterpret_cast<sockaddr*>(&src),
                                   reinterpret_cast<sockaddr*>(&group), 2000));
    rdma_cm_event e{};
    ASSERT_NO_FATAL_FAILURE(expectRaw(ch_, RDMA_CM_EVENT_ADDR_RESOLVED, e));
    ASSERT_NO_FATAL_FAILURE(ends[i]->create(ids[i]));
    ASSERT_EQ(0, ends[i]->postRecv());
    ASSERT_EQ(0, rdma_join_multicast(ids[i], reinterpret_cast<sockaddr*>(&group), ends[i]));
    ASSERT_NO_FATAL_FAILURE(expectRaw(ch_, RDMA_CM_EVENT_MULTICAST_JOIN, join[i]));
    EXPECT_EQ(ends[i], join[i].param.ud.private_data) << "the join's context";
    EXPECT_EQ(0xFFFFFFu, join[i].param.ud.qp_num);
    EXPECT_EQ(uint32_t(RDMA_UDP_QKEY), join[i].param.ud.qkey);
    EXPECT_EQ(239, join[i].param.ud.ah_attr.grh.dgid.raw[12]);
  }
  ibv_ah* ah = ibv_create_ah(client_.pd, &join[0].param.ud.ah_attr);
  ASSERT_NE(nullptr, ah);
  ASSERT_EQ(0, client_.send(ah, join[0].param.ud.qp_num, join[0].param.ud.qkey));
  EXPECT_EQ(1u, pollCompletions(server_.cq, 1).size()) << "the other member";
  auto own = pollCompletions(client_.cq, 2);
  EXPECT_EQ(2u, own.size()) << "the send, and the sender's own copy (multicast loopback)";
  sockaddr_in other = ipv4("239.9.8.6", 0);
  EXPECT_EQ(-1, rdma_leave_multicast(ids[1], reinterpret_cast<sockaddr*>(&other)));
  EXPECT_EQ(EADDRNOTAVAIL, errno);
  ASSERT_EQ(0, rdma_leave_multicast(ids[1], reinterpret_cast<sockaddr*>(&group)));
  ASSERT_EQ(0, server_.postRecv());
  ASSERT_EQ(0, client_.send(ah, join[0].param.ud.qp_num, join[0].param.ud.qkey));
  EXPECT_EQ(1u, pollCompletions(client_.cq, 1).size());
  EXPECT_TRUE(collectFor(server_.cq).empty()) << "left the group: nothing more";
  EXPECT_EQ(0, ibv_destroy_ah(ah));
}

TEST_F(CmUd, UdPortSpacesAreAcceptedAndMulticastNeedsAnAddress) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(0, rdma_create_id(ch_, &id, nullptr, RDMA_PS_IPOIB));
  EXPECT_EQ(IBV_QPT_UD, id->qp_type);
  sockaddr_in group = ipv4("239.9.8.7", 0);
  EXPECT_EQ(-1, rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&group), nullptr))
      << "neither bound nor resolved";
  EXPECT_EQ(EINVAL, errno);
  EXPECT_EQ(0, rdma_destroy_id(id));
}

}  // namespace
}  // namespace rdmamsg::test
