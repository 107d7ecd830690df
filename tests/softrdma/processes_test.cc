// Several processes: a peer that exits or is killed is noticed (DISCONNECTED) in bounded time;
// two processes listen on the same rdma_cm port at 127.0.0.1 and 127.0.0.2; dozens of
// connections share one event channel.
#include <arpa/inet.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <set>

#include "support.h"

namespace rdmamsg::test {
namespace {

class Processes : public CmFixture {
 protected:
  // Accepts the next connection request on the fixture's listener into server_, with `recvs`
  // receives posted; waits for ESTABLISHED.
  void acceptOne(int recvs) {
    auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_NO_FATAL_FAILURE(server_.create(request->id));
    ASSERT_NO_FATAL_FAILURE(postRecvs(server_, recvs));
    rdma_conn_param param{};
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.rnr_retry_count = 7;
    ASSERT_EQ(0, rdma_accept(server_.id, &param));
    auto established = expectCmEvent(serverCh_, RDMA_CM_EVENT_ESTABLISHED);
    ASSERT_TRUE(established && established->type == RDMA_CM_EVENT_ESTABLISHED);
  }

  // After the peer vanished: DISCONNECTED within the deadline, and after rdma_disconnect every
  // posted receive of `side` is flushed.
  void expectPeerGone(rdma_event_channel* ch, Side& side, int recvs) {
    auto disconnected = expectCmEvent(ch, RDMA_CM_EVENT_DISCONNECTED, kDeadline);
    ASSERT_TRUE(disconnected && disconnected->type == RDMA_CM_EVENT_DISCONNECTED);
    EXPECT_EQ(side.id, disconnected->id);
    ASSERT_EQ(0, rdma_disconnect(side.id));
    auto flushed = side.poll(recvs);
    ASSERT_EQ(static_cast<size_t>(recvs), flushed.size());
    for (const auto& wc : flushed) {
      EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status) << ibv_wc_status_str(wc.status);
    }
  }

  std::string portString() const { return std::to_string(port_); }
};

TEST_F(Processes, PeerProcessExitGivesDisconnectedAndReceivesFlush) {
  PeerProcess peer({"connect", "127.0.0.1", portString(), "exit"});
  ASSERT_TRUE(peer.started());
  ASSERT_NO_FATAL_FAILURE(acceptOne(4));
  EXPECT_EQ("established", peer.readLine());
  auto status = peer.wait();
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  expectPeerGone(serverCh_, server_, 4);
}

TEST_F(Processes, PeerProcessKilledGivesDisconnectedAndReceivesFlush) {
  PeerProcess peer({"connect", "127.0.0.1", portString(), "hang"});
  ASSERT_TRUE(peer.started());
  ASSERT_NO_FATAL_FAILURE(acceptOne(4));
  ASSERT_EQ("established", peer.readLine());
  peer.kill(SIGKILL);
  ASSERT_TRUE(peer.wait());
  expectPeerGone(serverCh_, server_, 4);
}

TEST_F(Processes, KilledPassivePeerGivesActiveSideDisconnected) {
  PeerProcess peer({"listen", "127.0.0.1", "0"});
  ASSERT_TRUE(peer.started());
  auto line = peer.readLine();
  ASSERT_TRUE(line && line->rfind("listening ", 0) == 0) << line.value_or("(nothing)");
  const auto port = static_cast<uint16_t>(std::stoi(line->substr(10)));
  ASSERT_NO_FATAL_FAILURE(connectTo(clientCh_, client_, "127.0.0.1", port, 4));
  peer.kill(SIGKILL);
  ASSERT_TRUE(peer.wait());
  expectPeerGone(clientCh_, client_, 4);
}

TEST_F(Processes, TwoProcessesListenOnSamePortAtDifferentAddresses) {
  PeerProcess peer({"listen", "127.0.0.2", portString()});
  ASSERT_TRUE(peer.started());
  EXPECT_EQ("listening " + portString(), peer.readLine())
      << "127.0.0.2 is free although 127.0.0.1 listens on the same port";

  // Through the other process, 127.0.0.2: the message comes back echoed.
  Side remote;
  rdma_event_channel* ch = createChannel();
  ASSERT_NE(nullptr, ch);
  ASSERT_NO_FATAL_FAILURE(connectTo(ch, remote, "127.0.0.2", port_, 1));
  memcpy(remote.at(8 * kSlot), "to the other process", 20);
  ASSERT_EQ(0, remote.postSend(1, 8 * kSlot, 20));
  auto wcs = remote.poll(2);
  ASSERT_EQ(2u, wcs.size());
  for (const auto& wc : wcs)
    EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
  EXPECT_EQ(0, memcmp(remote.at(0), "to the other process", 20));
  EXPECT_FALSE(nextCmEvent(serverCh_, Millis(0))) << "127.0.0.2 did not reach our listener";

  // Our own listener, 127.0.0.1, same port.
  ConnectOptions options;
  options.serverRecvs = 1;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ASSERT_EQ(0, client_.postSend(2, 0, 8));
  EXPECT_EQ(1u, server_.poll(1).size());

  remote.destroy();
  rdma_destroy_event_channel(ch);
  peer.closeStdin();
  auto status = peer.wait();
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

// Forty connections, their listener and all ids on ONE event channel, driven by one loop.
TEST_F(Processes, FortyConnectionsShareOneEventChannel) {
  constexpr int kConnections = 40;
  struct Conn {
    Side side;
    bool established = false;
  };
  std::vector<std::unique_ptr<Conn>> clients;
  std::vector<std::unique_ptr<Conn>> servers;
  QpOptions small;
  small.sendWr = small.recvWr = 4;
  small.cqe = 16;
  small.bufSize = 2 * kSlot;
  rdma_event_channel* ch = serverCh_;  // the listener's channel
  for (int i = 0; i < kConnections; ++i) {
    clients.push_back(std::make_unique<Conn>());
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(0, rdma_create_id(ch, &id, clients.back().get(), RDMA_PS_TCP));
    clients.back()->side.id = id;
    sockaddr_in dst = ipv4("127.0.0.1", port_);
    ASSERT_EQ(0, rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  }
  int established = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (established < 2 * kConnections && std::chrono::steady_clock::now() < deadline) {
    auto event = nextCmEvent(ch, Millis(1000));
    if (!event) continue;
    auto* conn = static_cast<Conn*>(event->id->context);
    rdma_conn_param param{};
    param.responder_resources = param.initiator_depth = 1;
    param.retry_count = param.rnr_retry_count = 7;
    switch (event->type) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
        ASSERT_EQ(0, rdma_resolve_route(event->id, 2000));
        break;
      case RDMA_CM_EVENT_ROUTE_RESOLVED:
        ASSERT_NO_FATAL_FAILURE(conn->side.create(event->id, small));
        ASSERT_EQ(0, conn->side.postRecv(1, 0, kSlot));
        ASSERT_EQ(0, rdma_connect(event->id, &param));
        break;
      case RDMA_CM_EVENT_CONNECT_REQUEST:
        ASSERT_EQ(listenId_, event->listenId);
        servers.push_back(std::make_unique<Conn>());
        event->id->context = servers.back().get();
        ASSERT_NO_FATAL_FAILURE(servers.back()->side.create(event->id, small));
        ASSERT_EQ(0, servers.back()->side.postRecv(1, 0, kSlot));
        ASSERT_EQ(0, rdma_accept(event->id, &param));
        break;
      case RDMA_CM_EVENT_ESTABLISHED:
        ASSERT_NE(nullptr, conn);
        EXPECT_FALSE(conn->established) << "one ESTABLISHED per id";
        conn->established = true;
        ++established;
        break;
      default:
        FAIL() << "unexpected " << rdma_event_str(event->type) << " status " << event->status;
    }
  }
  ASSERT_EQ(2 * kConnections, established);
  ASSERT_EQ(static_cast<size_t>(kConnections), servers.size());

  for (int i = 0; i < kConnections; ++i) {
    Side& side = clients[i]->side;
    const std::string text = "message " + std::to_string(i);
    memcpy(side.at(kSlot), text.c_str(), text.size() + 1);
    ASSERT_EQ(0, side.postSend(2, kSlot, static_cast<uint32_t>(text.size() + 1)));
  }
  std::set<std::string> received;
  for (auto& server : servers) {
    auto wcs = server->side.poll(1);
    ASSERT_EQ(1u, wcs.size());
    EXPECT_EQ(IBV_WC_SUCCESS, wcs[0].status);
    received.insert(reinterpret_cast<const char*>(server->side.at(0)));
  }
  EXPECT_EQ(static_cast<size_t>(kConnections), received.size()) << "each message arrived once";
  for (auto& client : clients) {
    auto wcs = client->side.poll(1);
    ASSERT_EQ(1u, wcs.size());
    EXPECT_EQ(IBV_WC_SUCCESS, wcs[0].status);
  }
}

}  // namespace
}  // namespace rdmamsg::test
