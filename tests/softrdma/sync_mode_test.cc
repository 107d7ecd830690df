// Synchronous rdma_cm (NULL event channel, rdma_create_ep, rdma_get_request) with the inline
// helpers of <rdma/rdma_verbs.h>, the default PD and auto-created CQs, and rdma_migrate_id.
#include <arpa/inet.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "support.h"

namespace rdmamsg::test {
namespace {

// Blocking rdma_cm calls cannot be interrupted: if `future` is not ready within the deadline the
// process ends with a message instead of hanging until ctest's timeout.
template <typename T>
T getOrDie(std::future<T>& future, const char* what, Millis deadline = Millis(15000)) {
  if (future.wait_for(deadline) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: %s did not return within %lld ms\n", what,
                 static_cast<long long>(deadline.count()));
    std::_Exit(1);
  }
  return future.get();
}

ibv_qp_init_attr smallQpAttr() {
  ibv_qp_init_attr attr{};
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = 16;
  attr.sq_sig_all = 1;
  return attr;
}

// rdma_server.c from rdma-core's examples, reporting each step's outcome.
std::string serveOnce(std::promise<uint16_t>& port) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  if (rdma_getaddrinfo("127.0.0.1", "0", &hints, &res) != 0) return "rdma_getaddrinfo";
  ibv_qp_init_attr attr = smallQpAttr();
  rdma_cm_id* listenId = nullptr;
  const int created = rdma_create_ep(&listenId, res, nullptr, &attr);
  rdma_freeaddrinfo(res);
  if (created != 0) return "rdma_create_ep(listen)";
  if (rdma_listen(listenId, 0) != 0) return "rdma_listen";
  port.set_value(ntohs(rdma_get_src_port(listenId)));
  rdma_cm_id* id = nullptr;
  if (rdma_get_request(listenId, &id) != 0) return "rdma_get_request";
  if (id->qp == nullptr) return "rdma_get_request created no QP";
  char recvMsg[16] = {};
  char sendMsg[16] = "pong";
  ibv_mr* recvMr = rdma_reg_msgs(id, recvMsg, sizeof recvMsg);
  ibv_mr* sendMr = rdma_reg_msgs(id, sendMsg, sizeof sendMsg);
  if (recvMr == nullptr || sendMr == nullptr) return "rdma_reg_msgs";
  if (rdma_post_recv(id, nullptr, recvMsg, sizeof recvMsg, recvMr) != 0) return "rdma_post_recv";
  if (rdma_accept(id, nullptr) != 0) return "rdma_accept";
  ibv_wc wc{};
  if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS) {
    return std::string("recv comp: ") + ibv_wc_status_str(wc.status);
  }
  if (std::string(recvMsg) != "ping") return "received '" + std::string(recvMsg) + "'";
  if (rdma_post_send(id, nullptr, sendMsg, sizeof sendMsg, sendMr, 0) != 0) return "post send";
  if (rdma_get_send_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS) {
    return std::string("send comp: ") + ibv_wc_status_str(wc.status);
  }
  rdma_disconnect(id);
  rdma_dereg_mr(recvMr);
  rdma_dereg_mr(sendMr);
  rdma_destroy_ep(id);
  rdma_destroy_ep(listenId);
  return "ok";
}

// rdma_client.c from rdma-core's examples.
std::string connectOnce(uint16_t port) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (rdma_getaddrinfo("127.0.0.1", service.c_str(), &hints, &res) != 0) {
    return "rdma_getaddrinfo";
  }
  ibv_qp_init_attr attr = smallQpAttr();
  attr.qp_context = nullptr;
  rdma_cm_id* id = nullptr;
  const int created = rdma_create_ep(&id, res, nullptr, &attr);
  rdma_freeaddrinfo(res);
  if (created != 0) return "rdma_create_ep";
  if (id->qp == nullptr || id->send_cq == nullptr || id->recv_cq == nullptr) return "no QP/CQs";
  char recvMsg[16] = {};
  char sendMsg[16] = "ping";
  ibv_mr* recvMr = rdma_reg_msgs(id, recvMsg, sizeof recvMsg);
  ibv_mr* sendMr = rdma_reg_msgs(id, sendMsg, sizeof sendMsg);
  if (recvMr == nullptr || sendMr == nullptr) return "rdma_reg_msgs";
  if (rdma_post_recv(id, nullptr, recvMsg, sizeof recvMsg, recvMr) != 0) return "rdma_post_recv";
  if (rdma_connect(id, nullptr) != 0) return std::string("rdma_connect: ") + strerror(errno);
  if (rdma_post_send(id, nullptr, sendMsg, sizeof sendMsg, sendMr, 0) != 0) return "post send";
  ibv_wc wc{};
  if (rdma_get_send_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS) {
    return std::string("send comp: ") + ibv_wc_status_str(wc.status);
  }
  if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status != IBV_WC_SUCCESS) {
    return std::string("recv comp: ") + ibv_wc_status_str(wc.status);
  }
  if (std::string(recvMsg) != "pong") return "received '" + std::string(recvMsg) + "'";
  rdma_disconnect(id);
  rdma_dereg_mr(recvMr);
  rdma_dereg_mr(sendMr);
  rdma_destroy_ep(id);
  return "ok";
}

TEST(SyncMode, CreateEpListenGetRequestAcceptAndConnectOnTwoThreads) {
  std::promise<uint16_t> port;
  auto portFuture = port.get_future();
  auto server = std::async(std::launch::async, [&port] { return serveOnce(port); });
  ASSERT_EQ(std::future_status::ready, portFuture.wait_for(kDeadline))
      << "server failed before listening: " << getOrDie(server, "server");
  const uint16_t listenPort = portFuture.get();
  ASSERT_NE(0, listenPort);
  auto client = std::async(std::launch::async, [listenPort] { return connectOnce(listenPort); });
  const std::string clientResult = getOrDie(client, "client");
  if (clientResult != "ok") {
    // The server thread waits in rdma_get_request for a client that will never come.
    std::fprintf(stderr, "FATAL: the client failed at: %s\n", clientResult.c_str());
    std::_Exit(1);
  }
  EXPECT_EQ("ok", getOrDie(server, "server"));
}

class SyncCm : public CmFixture {
 protected:
  void TearDown() override {
    watchdog_.step("TearDown (rdma_destroy_id of a synchronous id must not wait for acks)");
    CmFixture::TearDown();
  }
  // Also covers TearDown: members are destroyed after it.
  Watchdog watchdog_{Millis(15000)};
};

TEST_F(SyncCm, NullChannelMakesResolveAndConnectSynchronous) {
  ASSERT_EQ(0, rdma_create_id(nullptr, &client_.id, nullptr, RDMA_PS_TCP));
  sockaddr_in dst = ipv4("127.0.0.1", port_);
  watchdog_.step("synchronous rdma_resolve_addr");
  ASSERT_EQ(0, rdma_resolve_addr(client_.id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  EXPECT_NE(nullptr, client_.id->verbs) << "address resolved when the call returns";
  watchdog_.step("synchronous rdma_resolve_route");
  ASSERT_EQ(0, rdma_resolve_route(client_.id, 2000));
  watchdog_.step("connect");
  ASSERT_NO_FATAL_FAILURE(client_.create(client_.id));
  ASSERT_EQ(0, client_.postRecv(1, 0, kSlot));
  auto connected = std::async(std::launch::async, [this] {
    rdma_conn_param param{};
    param.retry_count = param.rnr_retry_count = 7;
    return rdma_connect(client_.id, &param);
  });
  // The passive side, asynchronous, on this thread.
  auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
  if (!request || request->type != RDMA_CM_EVENT_CONNECT_REQUEST) {
    getOrDie(connected, "rdma_connect");  // never leave the blocked call behind
    FAIL() << "no connection request";
  }
  ASSERT_NO_FATAL_FAILURE(server_.create(request->id));
  ASSERT_EQ(0, rdma_accept(server_.id, nullptr));
  EXPECT_EQ(0, getOrDie(connected, "synchronous rdma_connect"));
  EXPECT_EQ(IBV_QPS_RTS, client_.qpState());
  ASSERT_EQ(0, server_.postSend(2, 0, 8));
  EXPECT_EQ(1u, client_.poll(1).size());
  EXPECT_EQ(1u, server_.poll(1).size());
}

TEST_F(SyncCm, DestroyingSynchronousIdReturnsAlthoughLibraryHeldItsLastEvent) {
  // librdmacm keeps the last event of a synchronous id and acks it inside rdma_destroy_id.
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(0, rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP));
  sockaddr_in dst = ipv4("127.0.0.1", port_);
  watchdog_.step("synchronous rdma_resolve_addr");
  ASSERT_EQ(0, rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  watchdog_.step("rdma_destroy_id of a synchronous id");
  EXPECT_EQ(0, rdma_destroy_id(id));
}

TEST_F(SyncCm, SynchronousConnectWithoutListenerFailsWithConnectionRefused) {
  rdma_cm_id* probe = nullptr;
  ASSERT_EQ(0, rdma_create_id(clientCh_, &probe, nullptr, RDMA_PS_TCP));
  sockaddr_in any = ipv4("127.0.0.1", 0);
  ASSERT_EQ(0, rdma_bind_addr(probe, reinterpret_cast<sockaddr*>(&any)));
  const uint16_t freePort = ntohs(rdma_get_src_port(probe));
  ASSERT_EQ(0, rdma_destroy_id(probe));

  ASSERT_EQ(0, rdma_create_id(nullptr, &client_.id, nullptr, RDMA_PS_TCP));
  sockaddr_in dst = ipv4("127.0.0.1", freePort);
  watchdog_.step("synchronous rdma_resolve_addr");
  ASSERT_EQ(0, rdma_resolve_addr(client_.id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  watchdog_.step("synchronous rdma_resolve_route");
  ASSERT_EQ(0, rdma_resolve_route(client_.id, 2000));
  watchdog_.step("synchronous rdma_connect");
  ASSERT_NO_FATAL_FAILURE(client_.create(client_.id));
  auto connected = std::async(std::launch::async, [this] {
    rdma_conn_param param{};
    param.retry_count = param.rnr_retry_count = 7;
    errno = 0;
    const int ret = rdma_connect(client_.id, &param);
    return std::make_pair(ret, errno);
  });
  const auto [ret, error] = getOrDie(connected, "rdma_connect without listener");
  EXPECT_EQ(-1, ret);
  EXPECT_TRUE(error == ECONNREFUSED || error == ETIMEDOUT)
      << "REJECTED maps to ECONNREFUSED, UNREACHABLE to ETIMEDOUT; got " << strerror(error);
}

TEST_F(SyncCm, CreateQpWithoutPdAndCqsUsesDefaultPdAndCreatesCqsWithChannels) {
  ASSERT_NO_FATAL_FAILURE(resolveClient());
  ibv_qp_init_attr attr = smallQpAttr();
  attr.qp_type = IBV_QPT_RC;
  ASSERT_EQ(0, rdma_create_qp(client_.id, nullptr, &attr)) << strerror(errno);
  EXPECT_NE(nullptr, client_.id->qp);
  EXPECT_NE(nullptr, client_.id->pd);
  EXPECT_NE(nullptr, client_.id->send_cq);
  EXPECT_NE(nullptr, client_.id->recv_cq);
  EXPECT_NE(nullptr, client_.id->send_cq_channel);
  EXPECT_NE(nullptr, client_.id->recv_cq_channel);
  rdma_destroy_qp(client_.id);
}

TEST_F(SyncCm, MigrateIdDeliversLaterEventsOnTheNewChannel) {
  rdma_event_channel* other = createChannel();
  ASSERT_NE(nullptr, other);
  ASSERT_EQ(0, rdma_create_id(clientCh_, &client_.id, nullptr, RDMA_PS_TCP));
  ASSERT_EQ(0, rdma_migrate_id(client_.id, other));
  EXPECT_EQ(other, client_.id->channel);
  sockaddr_in dst = ipv4("127.0.0.1", port_);
  ASSERT_EQ(0, rdma_resolve_addr(client_.id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  auto event = expectCmEvent(other, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_TRUE(event);
  EXPECT_EQ(client_.id, event->id);
  EXPECT_FALSE(nextCmEvent(clientCh_, kQuiet)) << "nothing arrives on the old channel";
  ASSERT_EQ(0, rdma_destroy_id(client_.id));
  client_.id = nullptr;
  rdma_destroy_event_channel(other);
}

// Without node and service, the answer is the hints' own (librdmacm's rdma_getaddrinfo):
// pyverbs' AddrInfo(src=...) resolves a multicast group's address this way.
TEST(GetAddrInfo, HintsAloneGiveTheirAddressesAndKinds) {
  sockaddr_in src = ipv4("230.0.0.1", 0);
  rdma_addrinfo hints{};
  hints.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
  hints.ai_src_len = sizeof src;
  hints.ai_port_space = RDMA_PS_UDP;
  hints.ai_qp_type = IBV_QPT_UD;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(0, rdma_getaddrinfo(nullptr, nullptr, &hints, &res));
  ASSERT_NE(nullptr, res);
  ASSERT_EQ(sizeof src, res->ai_src_len);
  EXPECT_EQ(0, memcmp(&src, res->ai_src_addr, sizeof src));
  EXPECT_EQ(nullptr, res->ai_dst_addr);
  EXPECT_EQ(RDMA_PS_UDP, res->ai_port_space);
  EXPECT_EQ(IBV_QPT_UD, res->ai_qp_type);
  rdma_freeaddrinfo(res);
  errno = 0;
  EXPECT_NE(0, rdma_getaddrinfo(nullptr, nullptr, nullptr, &res));
  EXPECT_EQ(EINVAL, errno);
}

}  // namespace
}  // namespace rdmamsg::test
