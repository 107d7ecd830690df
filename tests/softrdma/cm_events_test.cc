// rdma_cm event sequences on both sides (rdma_get_cm_event.3, rdma_connect.3, rdma_accept.3,
// rdma_reject.3, rdma_disconnect.3) and the IB private data sizes: 56 (REQ), 196 (REP),
// 148 (REJ), zero-padded.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "support.h"

namespace rdmamsg::test {
namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> data(n);
  for (size_t i = 0; i < n; ++i)
    data[i] = static_cast<uint8_t>(seed + i * 7 + 1);
  return data;
}

// `received` is `sent` followed by zeros up to `expectedSize`.
void expectPadded(const std::vector<uint8_t>& received, const std::vector<uint8_t>& sent,
                  size_t expectedSize) {
  ASSERT_EQ(expectedSize, received.size());
  EXPECT_TRUE(std::equal(sent.begin(), sent.end(), received.begin()));
  EXPECT_TRUE(std::all_of(received.begin() + static_cast<long>(sent.size()), received.end(),
                          [](uint8_t b) { return b == 0; }))
      << "padding must be zeroed";
}

class CmEvents : public CmFixture {
 protected:
  // Resolves, creates the client QP and calls rdma_connect with `data`.
  void startConnect(const std::vector<uint8_t>& data = {}) {
    ASSERT_NO_FATAL_FAILURE(resolveClient());
    ASSERT_NO_FATAL_FAILURE(client_.create(client_.id));
    rdma_conn_param param{};
    param.private_data = data.data();
    param.private_data_len = static_cast<uint8_t>(data.size());
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    ASSERT_EQ(0, rdma_connect(client_.id, &param)) << strerror(errno);
  }
};

TEST_F(CmEvents, ConnectRunsAddrRouteEstablishedOnActiveSideAndLeavesBothQpsRts) {
  ASSERT_NO_FATAL_FAILURE(connect());
  EXPECT_EQ(client_.id, clientEstablished_.id);
  EXPECT_EQ(0, clientEstablished_.status);
  EXPECT_EQ(IBV_QPS_RTS, client_.qpState());
  EXPECT_EQ(IBV_QPS_RTS, server_.qpState());
  EXPECT_FALSE(nextCmEvent(clientCh_, kQuiet)) << "no further client event";
  EXPECT_FALSE(nextCmEvent(serverCh_, Millis(0))) << "no further server event";
}

TEST_F(CmEvents, ConnectRequestCarriesNewIdAndListenerAndPrivateDataPaddedTo56) {
  const auto data = pattern(10, 3);
  ASSERT_NO_FATAL_FAILURE(startConnect(data));
  auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_NE(listenId_, request->id) << "event->id is a new id";
  EXPECT_EQ(listenId_, request->listenId);
  EXPECT_EQ(serverCh_, request->id->channel);
  EXPECT_NE(nullptr, request->id->verbs);
  expectPadded(request->privateData, data, 56);
  EXPECT_EQ(0, rdma_reject(request->id, nullptr, 0));
  EXPECT_EQ(0, rdma_destroy_id(request->id));
}

TEST_F(CmEvents, ConnectAcceptsExactly56BytesOfPrivateData) {
  const auto data = pattern(56, 9);
  ASSERT_NO_FATAL_FAILURE(startConnect(data));
  auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(data, request->privateData);
  EXPECT_EQ(0, rdma_reject(request->id, nullptr, 0));
  EXPECT_EQ(0, rdma_destroy_id(request->id));
}

TEST_F(CmEvents, ConnectWith57BytesOfPrivateDataFailsWithEinval) {
  ASSERT_NO_FATAL_FAILURE(resolveClient());
  ASSERT_NO_FATAL_FAILURE(client_.create(client_.id));
  const auto data = pattern(57, 1);
  rdma_conn_param param{};
  param.private_data = data.data();
  param.private_data_len = 57;
  errno = 0;
  EXPECT_EQ(-1, rdma_connect(client_.id, &param));
  EXPECT_EQ(EINVAL, errno);
  EXPECT_FALSE(nextCmEvent(serverCh_, kQuiet)) << "no request reached the listener";
}

TEST_F(CmEvents, AcceptPrivateDataArrivesInEstablishedPaddedTo196) {
  ConnectOptions options;
  options.acceptData = pattern(20, 5);
  ASSERT_NO_FATAL_FAILURE(connect(options));
  expectPadded(clientEstablished_.privateData, options.acceptData, 196);
}

TEST_F(CmEvents, AcceptCarriesExactly196BytesOfPrivateData) {
  ConnectOptions options;
  options.acceptData = pattern(196, 11);
  ASSERT_NO_FATAL_FAILURE(connect(options));
  EXPECT_EQ(options.acceptData, clientEstablished_.privateData);
}

TEST_F(CmEvents, AcceptWith197BytesOfPrivateDataFailsWithEinval) {
  ASSERT_NO_FATAL_FAILURE(startConnect());
  auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NO_FATAL_FAILURE(server_.create(request->id));
  const auto data = pattern(197, 2);
  rdma_conn_param param{};
  param.private_data = data.data();
  param.private_data_len = 197;
  errno = 0;
  EXPECT_EQ(-1, rdma_accept(server_.id, &param));
  EXPECT_EQ(EINVAL, errno);
  auto event = nextCmEvent(clientCh_, kQuiet);
  if (event) {
    EXPECT_NE(RDMA_CM_EVENT_ESTABLISHED, event->type);
  }
}

TEST_F(CmEvents, RejectDeliversStatus28AndPrivateDataPaddedTo148AndMovesQpToError) {
  ASSERT_NO_FATAL_FAILURE(startConnect());
  auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST);
  const auto data = pattern(20, 4);
  ASSERT_EQ(0, rdma_reject(request->id, data.data(), static_cast<uint8_t>(data.size())));
  EXPECT_EQ(0, rdma_destroy_id(request->id));
  auto rejected = expectCmEvent(clientCh_, RDMA_CM_EVENT_REJECTED);
  ASSERT_TRUE(rejected && rejected->type == RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(28, rejected->status) << "IB_CM_REJ_CONSUMER_DEFINED";
  expectPadded(rejected->privateData, data, 148);
  EXPECT_EQ(IBV_QPS_ERR, client_.qpState()) << "librdmacm moves the QP to ERR on REJECTED";
}

TEST_F(CmEvents, ConnectToPortWithoutListenerIsRejectedOrUnreachable) {
  // A port that was free a moment ago and has no listener.
  rdma_cm_id* probe = nullptr;
  ASSERT_EQ(0, rdma_create_id(clientCh_, &probe, nullptr, RDMA_PS_TCP));
  sockaddr_in any = ipv4("127.0.0.1", 0);
  ASSERT_EQ(0, rdma_bind_addr(probe, reinterpret_cast<sockaddr*>(&any)));
  const uint16_t freePort = ntohs(rdma_get_src_port(probe));
  ASSERT_EQ(0, rdma_destroy_id(probe));

  ASSERT_NO_FATAL_FAILURE(resolveClient(freePort));
  ASSERT_NO_FATAL_FAILURE(client_.create(client_.id));
  rdma_conn_param param{};
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  ASSERT_EQ(0, rdma_connect(client_.id, &param));
  auto event = nextCmEvent(clientCh_, Millis(10000));
  ASSERT_TRUE(event) << "connect to a port without listener must end, not hang";
  ASSERT_TRUE(event->type == RDMA_CM_EVENT_REJECTED || event->type == RDMA_CM_EVENT_UNREACHABLE)
      << rdma_event_str(event->type);
  if (event->type == RDMA_CM_EVENT_REJECTED) {
    EXPECT_EQ(8, event->status) << "IB_CM_REJ_INVALID_SERVICE_ID";
  }
}

TEST_F(CmEvents, DisconnectGivesBothSidesDisconnectedThenTimewaitExit) {
  ASSERT_NO_FATAL_FAILURE(connect());
  ASSERT_EQ(0, rdma_disconnect(client_.id));
  EXPECT_EQ(IBV_QPS_ERR, client_.qpState()) << "rdma_disconnect moves the QP to ERR";
  auto serverDisconnected = expectCmEvent(serverCh_, RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_TRUE(serverDisconnected && serverDisconnected->type == RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_EQ(server_.id, serverDisconnected->id);
  EXPECT_EQ(0, rdma_disconnect(server_.id)) << "the peer answers with rdma_disconnect";
  EXPECT_EQ(IBV_QPS_ERR, server_.qpState());
  auto clientDisconnected = expectCmEvent(clientCh_, RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_TRUE(clientDisconnected && clientDisconnected->type == RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_EQ(client_.id, clientDisconnected->id);
  // Both ids are kept: each sees TIMEWAIT_EXIT.
  auto clientExit = expectCmEvent(clientCh_, RDMA_CM_EVENT_TIMEWAIT_EXIT, Millis(10000));
  ASSERT_TRUE(clientExit);
  EXPECT_EQ(client_.id, clientExit->id);
  auto serverExit = expectCmEvent(serverCh_, RDMA_CM_EVENT_TIMEWAIT_EXIT, Millis(10000));
  ASSERT_TRUE(serverExit);
  EXPECT_EQ(server_.id, serverExit->id);
}

TEST_F(CmEvents, UnroutableDestinationFailsAddressResolution) {
  // From a loopback source no route leads to a non-loopback address (the kernel's route lookup
  // says EINVAL); check that on this machine with a plain socket first.
  const int probe = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in src = ipv4("127.0.0.1", 0);
  sockaddr_in dst = ipv4("198.51.100.1", 7471);
  ASSERT_EQ(0, bind(probe, reinterpret_cast<sockaddr*>(&src), sizeof src));
  const bool routed = ::connect(probe, reinterpret_cast<sockaddr*>(&dst), sizeof dst) == 0;
  close(probe);
  if (routed) GTEST_SKIP() << "this machine routes 127.0.0.1 -> 198.51.100.1";

  ASSERT_EQ(0, rdma_create_id(clientCh_, &client_.id, nullptr, RDMA_PS_TCP));
  errno = 0;
  const int ret = rdma_resolve_addr(client_.id, reinterpret_cast<sockaddr*>(&src),
                                    reinterpret_cast<sockaddr*>(&dst), 1000);
  if (ret != 0) {
    // The kernel's rdma_resolve_ip reports a failed route lookup synchronously.
    EXPECT_EQ(-1, ret);
    EXPECT_NE(0, errno);
    return;
  }
  auto event = nextCmEvent(clientCh_, Millis(10000));
  ASSERT_TRUE(event) << "address resolution must end, not hang";
  EXPECT_EQ(RDMA_CM_EVENT_ADDR_ERROR, event->type) << rdma_event_str(event->type);
  EXPECT_NE(0, event->status);
}

TEST_F(CmEvents, RouteResolutionBeforeAddressResolutionFailsWithEinval) {
  ASSERT_EQ(0, rdma_create_id(clientCh_, &client_.id, nullptr, RDMA_PS_TCP));
  errno = 0;
  EXPECT_EQ(-1, rdma_resolve_route(client_.id, 1000));
  EXPECT_EQ(EINVAL, errno);
}

TEST_F(CmEvents, DestroyingListenerStopsNewConnections) {
  ASSERT_EQ(0, rdma_destroy_id(listenId_));
  listenId_ = nullptr;
  ASSERT_NO_FATAL_FAILURE(startConnect());
  auto event = nextCmEvent(clientCh_, Millis(10000));
  ASSERT_TRUE(event);
  EXPECT_TRUE(event->type == RDMA_CM_EVENT_REJECTED || event->type == RDMA_CM_EVENT_UNREACHABLE)
      << rdma_event_str(event->type);
  EXPECT_FALSE(nextCmEvent(serverCh_, Millis(0)));
}

// Every request the passive side accepts ends ESTABLISHED on the active side, never REJECTED
// or UNREACHABLE (REJECTED means a REJ, which an accepted request never gets): many connects
// at once to one listener whose backlog is smaller than their number, half of them from ids
// bound to an address first (rdma_bind_addr, then resolve).
TEST_F(CmEvents, ConcurrentConnectsToOneListenerAreAllAcceptedAndEstablished) {
  constexpr int kClients = 16;
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(0, rdma_create_id(serverCh_, &listener, nullptr, RDMA_PS_TCP));
  sockaddr_in any = ipv4("127.0.0.1", 0);
  ASSERT_EQ(0, rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&any))) << strerror(errno);
  ASSERT_EQ(0, rdma_listen(listener, 2)) << strerror(errno);
  const uint16_t port = ntohs(rdma_get_src_port(listener));

  QpOptions small;
  small.bufSize = 4 * kSlot;
  std::vector<std::unique_ptr<Side>> clients;
  std::vector<std::unique_ptr<Side>> servers;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<Side>());
    rdma_cm_id*& id = clients.back()->id;
    ASSERT_EQ(0, rdma_create_id(clientCh_, &id, nullptr, RDMA_PS_TCP));
    if (i % 2 == 1) {
      sockaddr_in src = ipv4("127.0.0.1", 0);
      ASSERT_EQ(0, rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&src))) << strerror(errno);
    }
    sockaddr_in dst = ipv4("127.0.0.1", port);
    ASSERT_EQ(0, rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000))
        << strerror(errno);
  }
  auto clientOf = [&](rdma_cm_id* id) -> int {
    for (int i = 0; i < kClients; ++i)
      if (clients[i]->id == id) return i;
    return -1;
  };

  // One event loop for both sides, bounded in time and in events.
  int clientEstablished = 0;
  int serverEstablished = 0;
  const auto deadline = std::chrono::steady_clock::now() + 4 * kDeadline;
  for (int events = 0; events < 20 * kClients && std::chrono::steady_clock::now() < deadline &&
                       (clientEstablished < kClients || serverEstablished < kClients);) {
    if (auto ev = nextCmEvent(serverCh_, Millis(0))) {
      ++events;
      if (ev->type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        servers.push_back(std::make_unique<Side>());
        ASSERT_NO_FATAL_FAILURE(servers.back()->create(ev->id, small));
        rdma_conn_param accept{};
        accept.responder_resources = 1;
        accept.initiator_depth = 1;
        accept.rnr_retry_count = 7;
        ASSERT_EQ(0, rdma_accept(ev->id, &accept)) << strerror(errno);
      } else {
        ASSERT_EQ(RDMA_CM_EVENT_ESTABLISHED, ev->type) << rdma_event_str(ev->type);
        ++serverEstablished;
      }
    }
    auto ev = nextCmEvent(clientCh_, Millis(10));
    if (!ev) continue;
    ++events;
    const int index = clientOf(ev->id);
    ASSERT_LE(0, index);
    Side* side = clients[index].get();
    switch (ev->type) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
        ASSERT_EQ(0, rdma_resolve_route(side->id, 2000)) << strerror(errno);
        break;
      case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        ASSERT_NO_FATAL_FAILURE(side->create(side->id, small));
        rdma_conn_param param{};
        param.responder_resources = 1;
        param.initiator_depth = 1;
        param.retry_count = 7;
        param.rnr_retry_count = 7;
        ASSERT_EQ(0, rdma_connect(side->id, &param)) << strerror(errno);
        break;
      }
      case RDMA_CM_EVENT_ESTABLISHED:
        ++clientEstablished;
        break;
      default:
        FAIL() << "client " << index << ": " << rdma_event_str(ev->type) << " status " << ev->status
               << " for an accepted request";
    }
  }
  EXPECT_EQ(kClients, static_cast<int>(servers.size())) << "connect requests";
  EXPECT_EQ(kClients, clientEstablished);
  EXPECT_EQ(kClients, serverEstablished);
  for (auto& c : clients)
    EXPECT_EQ(IBV_QPS_RTS, c->qpState());
  clients.clear();
  servers.clear();
  EXPECT_EQ(0, rdma_destroy_id(listener));
}

}  // namespace
}  // namespace rdmamsg::test
