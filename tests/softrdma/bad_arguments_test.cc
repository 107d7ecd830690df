// rdma_cm calls with NULL, garbage or out-of-state arguments fail with -1/errno (EINVAL where
// librdmacm or the kernel's ucma says so) and never crash.
#include <arpa/inet.h>

#include <cerrno>

#include "support.h"

namespace rdmamsg::test {
namespace {

class BadArguments : public CmFixture {
 protected:
  rdma_cm_id* newId() {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(0, rdma_create_id(clientCh_, &id, nullptr, RDMA_PS_TCP));
    if (id != nullptr) ids_.push_back(id);
    return id;
  }
  void TearDown() override {
    for (rdma_cm_id* id : ids_)
      EXPECT_EQ(0, rdma_destroy_id(id));
    CmFixture::TearDown();
  }
  std::vector<rdma_cm_id*> ids_;
};

// Expects `ret == -1 && errno == expected`.
#define EXPECT_FAILS_WITH(expected, call) \
  do {                                    \
    errno = 0;                            \
    const int ret_ = (call);              \
    EXPECT_EQ(-1, ret_);                  \
    EXPECT_EQ(expected, errno);           \
  } while (false)

TEST_F(BadArguments, GetCmEventWithNullEventPointerIsEinval) {
  EXPECT_FAILS_WITH(EINVAL, rdma_get_cm_event(clientCh_, nullptr));
}

TEST_F(BadArguments, CreateIdWithUnknownPortSpaceIsEinval) {
  rdma_cm_id* id = nullptr;
  EXPECT_FAILS_WITH(EINVAL,
                    rdma_create_id(clientCh_, &id, nullptr, static_cast<rdma_port_space>(0x7777)));
}

TEST_F(BadArguments, BindWithNullOrUnknownFamilyAddressIsEinval) {
  rdma_cm_id* id = newId();
  ASSERT_NE(nullptr, id);
  EXPECT_FAILS_WITH(EINVAL, rdma_bind_addr(id, nullptr));
  sockaddr_storage garbage{};
  garbage.ss_family = 0x7777;
  EXPECT_FAILS_WITH(EINVAL, rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&garbage)));
}

TEST_F(BadArguments, BindingTwiceIsEinval) {
  rdma_cm_id* id = newId();
  ASSERT_NE(nullptr, id);
  sockaddr_in addr = ipv4("127.0.0.1", 0);
  ASSERT_EQ(0, rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&addr)));
  EXPECT_FAILS_WITH(EINVAL, rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&addr)));
}

TEST_F(BadArguments, BindingAPortInUseIsEaddrinuse) {
  rdma_cm_id* id = newId();
  ASSERT_NE(nullptr, id);
  sockaddr_in addr = ipv4("127.0.0.1", port_);
  EXPECT_FAILS_WITH(EADDRINUSE, rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&addr)));
}

TEST_F(BadArguments, BindingAnAddressNotOnThisHostFails) {
  rdma_cm_id* id = newId();
  ASSERT_NE(nullptr, id);
  sockaddr_in addr = ipv4("198.51.100.1", 0);
  errno = 0;
  EXPECT_EQ(-1, rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&addr)));
  EXPECT_TRUE(errno == EADDRNOTAVAIL || errno == ENODEV) << strerror(errno);
}

TEST_F(BadArguments, ResolveAddrWithNullOrUnknownFamilyDestinationIsEinval) {
  rdma_cm_id* id = newId();
  ASSERT_NE(nullptr, id);
  EXPECT_FAILS_WITH(EINVAL, rdma_resolve_addr(id, nullptr, nullptr, 1000));
  sockaddr_storage garbage{};
  garbage.ss_family = 0x7777;
  EXPECT_FAILS_WITH(EINVAL,
                    rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&garbage), 1000));
  EXPECT_FALSE(nextCmEvent(clientCh_, kQuiet)) << "a failed call queues no event";
}

TEST_F(BadArguments, ConnectWithoutQpAndWithoutParamIsEinval) {
  ASSERT_NO_FATAL_FAILURE(resolveClient());
  EXPECT_FAILS_WITH(EINVAL, rdma_connect(client_.id, nullptr));
}

TEST_F(BadArguments, SecondQpOnAnIdIsEinval) {
  ASSERT_NO_FATAL_FAILURE(resolveClient());
  ASSERT_NO_FATAL_FAILURE(client_.create(client_.id));
  ibv_qp_init_attr attr{};
  attr.send_cq = client_.cq;
  attr.recv_cq = client_.cq;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  EXPECT_FAILS_WITH(EINVAL, rdma_create_qp(client_.id, client_.pd, &attr));
  EXPECT_EQ(client_.qp, client_.id->qp);
}

TEST_F(BadArguments, DisconnectAcceptRejectOnUnconnectedIdAreEinval) {
  rdma_cm_id* id = newId();
  ASSERT_NE(nullptr, id);
  EXPECT_FAILS_WITH(EINVAL, rdma_disconnect(id));
  EXPECT_FAILS_WITH(EINVAL, rdma_accept(id, nullptr));
  EXPECT_FAILS_WITH(EINVAL, rdma_reject(id, nullptr, 0));
}

TEST_F(BadArguments, AcceptOnListenerIsEinval) {
  EXPECT_FAILS_WITH(EINVAL, rdma_accept(listenId_, nullptr));
}

TEST_F(BadArguments, ListenerStillWorksAfterBadCalls) {
  rdma_cm_id* id = newId();
  ASSERT_NE(nullptr, id);
  EXPECT_EQ(-1, rdma_bind_addr(id, nullptr));
  EXPECT_EQ(-1, rdma_resolve_addr(id, nullptr, nullptr, 1000));
  EXPECT_EQ(-1, rdma_disconnect(id));
  ASSERT_NO_FATAL_FAILURE(connect());
}

}  // namespace
}  // namespace rdmamsg::test
