// rdma_set_option (issue 24): every option is honoured or refused as the kernel's ucma_set_option
// does. TOS becomes the path's and the QP's traffic class; REUSEADDR and AFONLY are checked for
// the id's state and give rdma_cm's port rules and IPv6 dual-stack listeners; ACK_TIMEOUT is the
// QP's timeout (device_attrs_test.cc); RDMA_OPTION_IB_PATH resolves the route with the program's
// path record; unknown levels and names are ENOSYS, wrong lengths EINVAL.
#include <arpa/inet.h>
#include <infiniband/sa.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "support.h"

namespace rdmamsg::test {
namespace {

// `call` returns -1 with errno `expected`; `why` says what is checked.
#define EXPECT_FAILS_WITH(expected, call, why)                           \
  do {                                                                   \
    errno = 0;                                                           \
    const int ret_ = (call);                                             \
    EXPECT_EQ(-1, ret_) << why;                                          \
    EXPECT_EQ(expected, errno) << why << " (" << strerror(errno) << ")"; \
  } while (false)

class CmSetOption : public CmFixture {
 protected:
  void TearDown() override {
    for (rdma_cm_id* id : ids_)
      EXPECT_EQ(0, rdma_destroy_id(id));
    CmFixture::TearDown();
  }

  rdma_cm_id* newId() {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(0, rdma_create_id(clientCh_, &id, nullptr, RDMA_PS_TCP));
    if (id != nullptr) ids_.push_back(id);
    return id;
  }

  void destroyId(rdma_cm_id* id) {
    EXPECT_EQ(0, rdma_destroy_id(id));
    ids_.erase(std::find(ids_.begin(), ids_.end(), id));
  }

  static int setInt(rdma_cm_id* id, int optname, int value) {
    return rdma_set_option(id, RDMA_OPTION_ID, optname, &value, sizeof value);
  }

  static int bindTo(rdma_cm_id* id, const sockaddr_storage& addr) {
    return rdma_bind_addr(id, const_cast<sockaddr*>(reinterpret_cast<const sockaddr*>(&addr)));
  }

  static sockaddr_storage v4(const char* ip, uint16_t port) {
    sockaddr_storage s{};
    sockaddr_in a = ipv4(ip, port);
    memcpy(&s, &a, sizeof a);
    return s;
  }

  static sockaddr_storage v6Any(uint16_t port) {
    sockaddr_storage s{};
    auto* a = reinterpret_cast<sockaddr_in6*>(&s);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    a->sin6_addr = in6addr_any;
    return s;
  }

  // Binds `id` to a free port on 127.0.0.1 and returns the port.
  static uint16_t holdPort(rdma_cm_id* id) {
    EXPECT_EQ(0, bindTo(id, v4("127.0.0.1", 0)));
    return ntohs(rdma_get_src_port(id));
  }

  // Resolves address and route of a new id on clientCh_ to 127.0.0.1:port.
  void resolve(rdma_cm_id* id, uint16_t port) {
    sockaddr_in dst = ipv4("127.0.0.1", port);
    ASSERT_EQ(0, rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
    ASSERT_TRUE(expectCmEvent(clientCh_, RDMA_CM_EVENT_ADDR_RESOLVED));
    ASSERT_EQ(0, rdma_resolve_route(id, 2000));
    ASSERT_TRUE(expectCmEvent(clientCh_, RDMA_CM_EVENT_ROUTE_RESOLVED));
  }

  // From a routed client_ (QP created here) to the fixture's listener, both ends ESTABLISHED.
  void connectRouted() {
    ASSERT_NO_FATAL_FAILURE(client_.create(client_.id));
    rdma_conn_param param{};
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.rnr_retry_count = 7;
    ASSERT_EQ(0, rdma_connect(client_.id, &param));
    auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_TRUE(request);
    ASSERT_NO_FATAL_FAILURE(server_.create(request->id));
    ASSERT_EQ(0, rdma_accept(server_.id, &param));
    ASSERT_TRUE(expectCmEvent(clientCh_, RDMA_CM_EVENT_ESTABLISHED));
    ASSERT_TRUE(expectCmEvent(serverCh_, RDMA_CM_EVENT_ESTABLISHED));
  }

  static int trafficClass(ibv_qp* qp) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(qp, &attr, IBV_QP_AV, &init) != 0) return -1;
    return attr.ah_attr.grh.traffic_class;
  }

  std::vector<rdma_cm_id*> ids_;
};

TEST_F(CmSetOption, UnknownLevelsAndNamesAreEnosysWrongLengthsEinval) {
  rdma_cm_id* id = newId();
  ASSERT_NE(nullptr, id);
  int value = 1;
  uint8_t byte = 1;
  EXPECT_FAILS_WITH(ENOSYS, rdma_set_option(id, 77, RDMA_OPTION_ID_TOS, &byte, 1), "level");
  EXPECT_FAILS_WITH(ENOSYS, rdma_set_option(id, RDMA_OPTION_ID, 77, &value, sizeof value),
                    "RDMA_OPTION_ID name");
  EXPECT_FAILS_WITH(ENOSYS, rdma_set_option(id, RDMA_OPTION_IB, 77, &value, sizeof value),
                    "RDMA_OPTION_IB name");
  EXPECT_FAILS_WITH(EINVAL, rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &value, 4),
                    "TOS length");
  EXPECT_FAILS_WITH(EINVAL,
                    rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &value, 4),
                    "ACK_TIMEOUT length");
  EXPECT_FAILS_WITH(EINVAL, rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &byte, 1),
                    "REUSEADDR length");
  EXPECT_FAILS_WITH(EINVAL, rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &byte, 1),
                    "AFONLY length");
  EXPECT_FAILS_WITH(EFAULT,
                    rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, nullptr, 4),
                    "no value");
  EXPECT_FAILS_WITH(EINVAL, rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &value, 3),
                    "IB_PATH length");
  EXPECT_EQ(0, rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &byte, 1));
  EXPECT_EQ(0, setInt(id, RDMA_OPTION_ID_REUSEADDR, 1));
  EXPECT_EQ(0, setInt(id, RDMA_OPTION_ID_AFONLY, 1));
}

TEST_F(CmSetOption, ReuseaddrAndAfonlyFollowTheIdsState) {
  rdma_cm_id* id = newId();
  ASSERT_NE(nullptr, id);
  holdPort(id);
  EXPECT_FAILS_WITH(EINVAL, setInt(id, RDMA_OPTION_ID_AFONLY, 1), "AFONLY after binding");
  EXPECT_FAILS_WITH(EINVAL, setInt(id, RDMA_OPTION_ID_REUSEADDR, 0), "no reuse after binding");
  EXPECT_EQ(0, setInt(id, RDMA_OPTION_ID_REUSEADDR, 1)) << "reuse: until listening";
  ASSERT_EQ(0, rdma_listen(id, 4));
  EXPECT_FAILS_WITH(EINVAL, setInt(id, RDMA_OPTION_ID_REUSEADDR, 1), "reuse when listening");
}

TEST_F(CmSetOption, PortsAreSharedOnlyWithReuseaddrOnBothAndNeverByAListener) {
  rdma_cm_id* a = newId();
  ASSERT_NE(nullptr, a);
  ASSERT_EQ(0, setInt(a, RDMA_OPTION_ID_REUSEADDR, 1));
  const uint16_t port = holdPort(a);
  ASSERT_NE(0, port);

  rdma_cm_id* b = newId();
  ASSERT_NE(nullptr, b);
  EXPECT_FAILS_WITH(EADDRINUSE, bindTo(b, v4("127.0.0.1", port)), "b did not ask for reuse");
  rdma_cm_id* wildcard = newId();
  ASSERT_NE(nullptr, wildcard);
  EXPECT_FAILS_WITH(EADDRNOTAVAIL, bindTo(wildcard, v4("0.0.0.0", port)),
                    "a wildcard meets every address of the port");
  EXPECT_EQ(0, bindTo(newId(), v4("127.0.0.2", port))) << "another address of the port";

  rdma_cm_id* c = newId();
  ASSERT_NE(nullptr, c);
  ASSERT_EQ(0, setInt(c, RDMA_OPTION_ID_REUSEADDR, 1));
  EXPECT_EQ(0, bindTo(c, v4("127.0.0.1", port))) << "both asked for reuse";
  EXPECT_FAILS_WITH(EADDRINUSE, rdma_listen(a, 4), "a listener holds its port alone");
  destroyId(c);
  EXPECT_EQ(0, rdma_listen(a, 4));
  rdma_cm_id* d = newId();
  ASSERT_NE(nullptr, d);
  ASSERT_EQ(0, setInt(d, RDMA_OPTION_ID_REUSEADDR, 1));
  EXPECT_FAILS_WITH(EADDRINUSE, bindTo(d, v4("127.0.0.1", port)),
                    "no reuse with a listener, even if both asked");
}

TEST_F(CmSetOption, TosBecomesTheTrafficClassOfThePathAndOfBothQps) {
  uint8_t tos = 0x28;
  ASSERT_EQ(0, rdma_set_option(listenId_, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1));
  ASSERT_EQ(0, rdma_create_id(clientCh_, &client_.id, nullptr, RDMA_PS_TCP));
  tos = 0x48;
  ASSERT_EQ(0, rdma_set_option(client_.id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1));
  ASSERT_NO_FATAL_FAILURE(resolve(client_.id, port_));
  ASSERT_NE(nullptr, client_.id->route.path_rec);
  EXPECT_EQ(0x48, client_.id->route.path_rec->traffic_class);
  ASSERT_NO_FATAL_FAILURE(connectRouted());
  EXPECT_EQ(0x48, trafficClass(client_.qp));
  EXPECT_EQ(0x28, trafficClass(server_.qp)) << "the listener's TOS";
}

TEST_F(CmSetOption, AnIpv6WildcardListenerTakesIpv4UnlessAfonly) {
  for (int afonly : {-1, 0, 1}) {
    SCOPED_TRACE(afonly < 0 ? "AFONLY not set" : afonly ? "AFONLY 1" : "AFONLY 0");
    rdma_event_channel* ch = createChannel();
    ASSERT_NE(nullptr, ch);
    rdma_cm_id* listener = nullptr;
    ASSERT_EQ(0, rdma_create_id(ch, &listener, nullptr, RDMA_PS_TCP));
    if (afonly >= 0) {
      ASSERT_EQ(0, setInt(listener, RDMA_OPTION_ID_AFONLY, afonly));
    }
    ASSERT_EQ(0, bindTo(listener, v6Any(0))) << strerror(errno);
    ASSERT_EQ(0, rdma_listen(listener, 4));
    const uint16_t port = ntohs(rdma_get_src_port(listener));

    rdma_cm_id* active = nullptr;
    ASSERT_EQ(0, rdma_create_id(clientCh_, &active, nullptr, RDMA_PS_TCP));
    ASSERT_NO_FATAL_FAILURE(resolve(active, port));
    ibv_qp_init_attr qpAttr{};
    qpAttr.qp_type = IBV_QPT_RC;
    qpAttr.cap.max_send_wr = qpAttr.cap.max_recv_wr = 1;
    qpAttr.cap.max_send_sge = qpAttr.cap.max_recv_sge = 1;
    ASSERT_EQ(0, rdma_create_qp(active, nullptr, &qpAttr));
    rdma_conn_param param{};
    ASSERT_EQ(0, rdma_connect(active, &param));
    if (afonly == 1) {
      auto rejected = expectCmEvent(clientCh_, RDMA_CM_EVENT_REJECTED);
      ASSERT_TRUE(rejected);
      EXPECT_EQ(8, rejected->status) << "nobody listens for IPv4 on the port";
    } else {
      auto request = expectCmEvent(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
      ASSERT_TRUE(request);
      EXPECT_EQ(AF_INET, rdma_get_peer_addr(request->id)->sa_family)
          << "an IPv4 peer, as the kernel reports it";
      EXPECT_EQ(AF_INET, rdma_get_local_addr(request->id)->sa_family);
      EXPECT_EQ(0, rdma_reject(request->id, nullptr, 0));
      EXPECT_EQ(0, rdma_destroy_id(request->id));
      ASSERT_TRUE(expectCmEvent(clientCh_, RDMA_CM_EVENT_REJECTED));
    }
    rdma_destroy_qp(active);
    EXPECT_EQ(0, rdma_destroy_id(active));
    EXPECT_EQ(0, rdma_destroy_id(listener));
    rdma_destroy_event_channel(ch);
  }
}

TEST_F(CmSetOption, IbPathResolvesTheRouteWithTheProgramsRecord) {
  ASSERT_EQ(0, rdma_create_id(clientCh_, &client_.id, nullptr, RDMA_PS_TCP));
  ibv_path_data path[2]{};
  path[0].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_ALTERNATE | IBV_PATH_FLAG_BIDIRECTIONAL;
  path[1].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
  path[1].path.tclass = 0x10;
  path[1].path.mtu = IBV_MTU_1024;
  path[1].path.pkey = htons(0xffff);
  path[1].path.flowlabel_hoplimit = htonl(64);
  EXPECT_FAILS_WITH(
      EINVAL, rdma_set_option(client_.id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, path, sizeof path),
      "before the address is resolved");
  sockaddr_in dst = ipv4("127.0.0.1", port_);
  ASSERT_EQ(0, rdma_resolve_addr(client_.id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  ASSERT_TRUE(expectCmEvent(clientCh_, RDMA_CM_EVENT_ADDR_RESOLVED));
  path[1].path.sgid = client_.id->route.addr.addr.ibaddr.sgid;
  path[1].path.dgid = client_.id->route.addr.addr.ibaddr.dgid;
  EXPECT_FAILS_WITH(
      EINVAL,
      rdma_set_option(client_.id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, path, sizeof path[0]),
      "no primary record");
  ASSERT_EQ(0, rdma_set_option(client_.id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, path, sizeof path));
  ASSERT_TRUE(expectCmEvent(clientCh_, RDMA_CM_EVENT_ROUTE_RESOLVED));
  ASSERT_EQ(1, client_.id->route.num_paths);
  EXPECT_EQ(0x10, client_.id->route.path_rec->traffic_class);
  EXPECT_EQ(IBV_MTU_1024, client_.id->route.path_rec->mtu);
  EXPECT_EQ(64, client_.id->route.path_rec->hop_limit);
  EXPECT_FAILS_WITH(EINVAL, rdma_resolve_route(client_.id, 2000), "the route is resolved");
  ASSERT_NO_FATAL_FAILURE(connectRouted());  // the connection works on that route
  EXPECT_EQ(0x10, trafficClass(client_.qp));
}

}  // namespace
}  // namespace rdmamsg::test
