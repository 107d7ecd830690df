// fork() after using softrdma (issue 24), with the semantics of rdma-core's fork support
// (ibv_fork_init, RDMAV_FORK_SAFE): the parent keeps its connections, listener and progress; the
// child opens the device itself, connects (to itself, to the parent, to a sibling) and exchanges
// messages; the child's copies of the parent's sockets change nothing for the parent, whether the
// child uses softrdma or just exits.
//
// A child runs its part with the usual assertions (failures print at once) and ends with _exit:
// 0 when it recorded no failure. alarm() bounds its life; the parent kills and reaps it after a
// deadline in any case.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>

#include "../support/wait.h"
#include "support.h"

namespace rdmamsg::test {
namespace {

constexpr Millis kChildDeadline{15000};
constexpr unsigned kChildAlarmSeconds = 20;
constexpr uint32_t kMessage = 64;

// A forked child running `body`.
class Child {
 public:
  explicit Child(const std::function<void()>& body) {
    pid_ = fork();
    if (pid_ == 0) {
      alarm(kChildAlarmSeconds);
      body();
      std::fflush(stdout);
      _exit(::testing::Test::HasFailure() ? 1 : 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }

  bool started() const { return pid_ > 0; }

  // Waits for the child's exit; true if it exited with 0.
  bool succeeded(Millis timeout = kChildDeadline) {
    int status = 0;
    const bool exited = waitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout);
    if (!exited) {
      ADD_FAILURE() << "child " << pid_ << " still running after " << timeout.count() << " ms";
      return false;
    }
    pid_ = -1;
    if (WIFSIGNALED(status)) ADD_FAILURE() << "child killed by signal " << WTERMSIG(status);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

 private:
  pid_t pid_ = -1;
};

// `from` sends kMessage bytes of `fill` from its slot 0; `to` receives them into slot 1.
void exchange(Side& from, Side& to, uint8_t fill) {
  ASSERT_EQ(0, to.postRecv(kRecvBase, kSlot, kSlot));
  memset(from.at(0), fill, kMessage);
  ASSERT_EQ(0, from.postSend(fill, 0, kMessage));
  auto sent = from.poll(1);
  ASSERT_EQ(1u, sent.size());
  EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status) << ibv_wc_status_str(sent[0].status);
  auto got = to.poll(1);
  ASSERT_EQ(1u, got.size());
  EXPECT_EQ(IBV_WC_SUCCESS, got[0].status) << ibv_wc_status_str(got[0].status);
  EXPECT_EQ(kMessage, got[0].byte_len);
  EXPECT_EQ(fill, *to.at(kSlot));
  EXPECT_EQ(fill, *to.at(kSlot + kMessage - 1));
}

// Accepts the next connection request on `ch` into `side`, with `recvs` receives posted (slots
// 1...).
void accept(rdma_event_channel* ch, Side& side, int recvs) {
  auto request = expectCmEvent(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NO_FATAL_FAILURE(side.create(request->id));
  for (int i = 0; i < recvs; ++i)
    ASSERT_EQ(0, side.postRecv(kRecvBase + i, (i + 1) * kSlot, kSlot));
  rdma_conn_param param{};
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.rnr_retry_count = 7;
  ASSERT_EQ(0, rdma_accept(side.id, &param)) << strerror(errno);
}

void expectEstablished(rdma_event_channel* ch) {
  auto established = expectCmEvent(ch, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_TRUE(established && established->type == RDMA_CM_EVENT_ESTABLISHED);
}

// accept, then ESTABLISHED (the active side is another process).
void acceptOne(rdma_event_channel* ch, Side& side, int recvs) {
  ASSERT_NO_FATAL_FAILURE(accept(ch, side, recvs));
  ASSERT_NO_FATAL_FAILURE(expectEstablished(ch));
}

// Both ends of a connection in this process: `active` on `activeCh` to the listener at
// 127.0.0.1:`port` whose events come on `passiveCh`, accepted into `passive`.
void connectPair(rdma_event_channel* activeCh, Side& active, rdma_event_channel* passiveCh,
                 Side& passive, uint16_t port) {
  ASSERT_EQ(0, rdma_create_id(activeCh, &active.id, nullptr, RDMA_PS_TCP));
  sockaddr_in dst = ipv4("127.0.0.1", port);
  ASSERT_EQ(0, rdma_resolve_addr(active.id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  auto addr = expectCmEvent(activeCh, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_TRUE(addr && addr->type == RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_EQ(0, rdma_resolve_route(active.id, 2000));
  auto route = expectCmEvent(activeCh, RDMA_CM_EVENT_ROUTE_RESOLVED);
  ASSERT_TRUE(route && route->type == RDMA_CM_EVENT_ROUTE_RESOLVED);
  ASSERT_NO_FATAL_FAILURE(active.create(active.id));
  rdma_conn_param param{};
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  ASSERT_EQ(0, rdma_connect(active.id, &param)) << strerror(errno);
  ASSERT_NO_FATAL_FAILURE(accept(passiveCh, passive, 0));
  // The active side sends the RTU as it gets its ESTABLISHED: it goes first.
  ASSERT_NO_FATAL_FAILURE(expectEstablished(activeCh));
  ASSERT_NO_FATAL_FAILURE(expectEstablished(passiveCh));
}

// A listener on 127.0.0.1 (any port) whose events come on `ch`; returns its port.
uint16_t listenOn(rdma_event_channel* ch, rdma_cm_id** id) {
  EXPECT_EQ(0, rdma_create_id(ch, id, nullptr, RDMA_PS_TCP));
  sockaddr_in any = ipv4("127.0.0.1", 0);
  EXPECT_EQ(0, rdma_bind_addr(*id, reinterpret_cast<sockaddr*>(&any))) << strerror(errno);
  EXPECT_EQ(0, rdma_listen(*id, 8)) << strerror(errno);
  return ntohs(rdma_get_src_port(*id));
}

// Disconnects `side` (the initiator) and waits for DISCONNECTED on `ch`.
void disconnect(rdma_event_channel* ch, Side& side) {
  ASSERT_EQ(0, rdma_disconnect(side.id));
  auto disconnected = expectCmEvent(ch, RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_TRUE(disconnected && disconnected->type == RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_EQ(0, disconnected->status);  // the peer answered (DREP), no timeout
}

// After the peer disconnected: DISCONNECTED on `ch`, then this side's rdma_disconnect.
void peerDisconnected(rdma_event_channel* ch, Side& side) {
  auto disconnected = expectCmEvent(ch, RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_TRUE(disconnected && disconnected->type == RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_EQ(side.id, disconnected->id);
  ASSERT_EQ(0, rdma_disconnect(side.id));
}

// Both ends in this process: `active` disconnects, `passive` answers.
void disconnectPair(rdma_event_channel* activeCh, Side& active, rdma_event_channel* passiveCh,
                    Side& passive) {
  ASSERT_EQ(0, rdma_disconnect(active.id));
  ASSERT_NO_FATAL_FAILURE(peerDisconnected(passiveCh, passive));
  auto disconnected = expectCmEvent(activeCh, RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_TRUE(disconnected && disconnected->type == RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_EQ(0, disconnected->status);
}

// In the child: a device of its own, a listener, a connection to itself, messages both ways,
// and a clean disconnect.
void childLoopback() {
  ibv_context* ctx = openFirstDevice();
  ASSERT_NE(nullptr, ctx);
  ibv_device_attr attr{};
  EXPECT_EQ(0, ibv_query_device(ctx, &attr));
  ibv_pd* pd = ibv_alloc_pd(ctx);
  EXPECT_NE(nullptr, pd);
  if (pd != nullptr) {
    EXPECT_EQ(0, ibv_dealloc_pd(pd));
  }
  EXPECT_EQ(0, ibv_close_device(ctx));

  rdma_event_channel* activeCh = createChannel();
  rdma_event_channel* passiveCh = createChannel();
  ASSERT_TRUE(activeCh != nullptr && passiveCh != nullptr);
  rdma_cm_id* listener = nullptr;
  const uint16_t port = listenOn(passiveCh, &listener);
  ASSERT_NE(0, port);
  {
    Side active, passive;
    ASSERT_NO_FATAL_FAILURE(connectPair(activeCh, active, passiveCh, passive, port));
    ASSERT_NO_FATAL_FAILURE(exchange(active, passive, 0xc1));
    ASSERT_NO_FATAL_FAILURE(exchange(passive, active, 0xc2));
    ASSERT_NO_FATAL_FAILURE(disconnectPair(activeCh, active, passiveCh, passive));
  }
  EXPECT_EQ(0, rdma_destroy_id(listener));
  rdma_destroy_event_channel(activeCh);
  rdma_destroy_event_channel(passiveCh);
}

// In the child: connects to the parent's listener at `port`, sends a message, waits for the
// parent's answer, disconnects.
void childTalksToParent(uint16_t port) {
  rdma_event_channel* ch = createChannel();
  ASSERT_NE(nullptr, ch);
  {
    Side toParent;
    ASSERT_NO_FATAL_FAILURE(connectTo(ch, toParent, "127.0.0.1", port, 1));
    memset(toParent.at(kSlot * 2), 0xd1, kMessage);
    ASSERT_EQ(0, toParent.postSend(1, kSlot * 2, kMessage));
    auto completions = toParent.poll(2);  // the send and the parent's answer
    ASSERT_EQ(2u, completions.size());
    for (const auto& wc : completions) {
      EXPECT_EQ(IBV_WC_SUCCESS, wc.status) << ibv_wc_status_str(wc.status);
      if (wc.opcode == IBV_WC_RECV) {
        EXPECT_EQ(kMessage, wc.byte_len);
      }
    }
    EXPECT_EQ(0xd2, *toParent.at(0));  // the receive posted by connectTo: slot 0
    ASSERT_NO_FATAL_FAILURE(disconnect(ch, toParent));
  }
  rdma_destroy_event_channel(ch);
}

class Fork : public CmFixture {
 protected:
  // The fixture's connection carries messages both ways.
  void exchangeBothWays(uint8_t fill) {
    ASSERT_NO_FATAL_FAILURE(exchange(client_, server_, fill));
    ASSERT_NO_FATAL_FAILURE(exchange(server_, client_, static_cast<uint8_t>(fill + 1)));
  }

  // No CM event on either of the fixture's channels for a while.
  void expectNoCmEvents() {
    for (rdma_event_channel* ch : {clientCh_, serverCh_}) {
      auto event = nextCmEvent(ch, kQuiet);
      EXPECT_FALSE(event) << "unexpected " << rdma_event_str(event->type);
    }
  }

  // A new connection to the fixture's listener works.
  void expectListenerWorks() {
    rdma_event_channel* ch = createChannel();
    ASSERT_NE(nullptr, ch);
    {
      Side active, passive;
      ASSERT_NO_FATAL_FAILURE(connectPair(ch, active, serverCh_, passive, port_));
      ASSERT_NO_FATAL_FAILURE(exchange(active, passive, 0x71));
      ASSERT_NO_FATAL_FAILURE(disconnectPair(ch, active, serverCh_, passive));
    }
    rdma_destroy_event_channel(ch);
  }
};

TEST_F(Fork, ChildOpensItsOwnDeviceAndConnectsWhileTheParentKeepsWorking) {
  ASSERT_NO_FATAL_FAILURE(connect());
  ASSERT_NO_FATAL_FAILURE(exchangeBothWays(0x10));

  const uint16_t parentPort = port_;
  Child child([parentPort] {
    childLoopback();
    if (!::testing::Test::HasFatalFailure()) childTalksToParent(parentPort);
  });
  ASSERT_TRUE(child.started());

  // The parent's connection works while the child runs.
  ASSERT_NO_FATAL_FAILURE(exchangeBothWays(0x20));
  // The child connects to the parent's listener: its message, the parent's answer, its
  // disconnect.
  {
    Side fromChild;
    ASSERT_NO_FATAL_FAILURE(acceptOne(serverCh_, fromChild, 1));
    auto got = fromChild.poll(1);
    ASSERT_EQ(1u, got.size());
    EXPECT_EQ(IBV_WC_SUCCESS, got[0].status) << ibv_wc_status_str(got[0].status);
    EXPECT_EQ(0xd1, *fromChild.at(kSlot));
    memset(fromChild.at(0), 0xd2, kMessage);
    ASSERT_EQ(0, fromChild.postSend(2, 0, kMessage));
    auto sent = fromChild.poll(1);
    ASSERT_EQ(1u, sent.size());
    EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status) << ibv_wc_status_str(sent[0].status);
    ASSERT_NO_FATAL_FAILURE(peerDisconnected(serverCh_, fromChild));
  }
  EXPECT_TRUE(child.succeeded());

  // After the child's exit: the old connection, no stray events, the listener.
  ASSERT_NO_FATAL_FAILURE(exchangeBothWays(0x30));
  expectNoCmEvents();
  ASSERT_NO_FATAL_FAILURE(expectListenerWorks());
}

TEST_F(Fork, ChildThatOnlyExitsChangesNothingForTheParent) {
  ASSERT_NO_FATAL_FAILURE(connect());
  ASSERT_NO_FATAL_FAILURE(exchangeBothWays(0x10));
  {
    Child child([] { exit(0); });  // a normal exit: atexit handlers, closing every descriptor
    ASSERT_TRUE(child.started());
    EXPECT_TRUE(child.succeeded());
  }
  expectNoCmEvents();
  ASSERT_NO_FATAL_FAILURE(exchangeBothWays(0x20));
  ASSERT_NO_FATAL_FAILURE(expectListenerWorks());
  // A disconnect still reaches the other end (the child held no copy of the socket).
  ASSERT_NO_FATAL_FAILURE(disconnectPair(clientCh_, client_, serverCh_, server_));
}

// rdma-core's rdma_cm tests: a process that used the device forks two children, which connect to
// each other.
TEST_F(Fork, TwoChildrenConnectToEachOther) {
  ASSERT_NO_FATAL_FAILURE(connect());
  int portPipe[2];
  ASSERT_EQ(0, pipe(portPipe));
  Child passive([&] {
    close(portPipe[0]);
    rdma_event_channel* ch = createChannel();
    ASSERT_NE(nullptr, ch);
    rdma_cm_id* listener = nullptr;
    uint16_t port = listenOn(ch, &listener);
    ASSERT_EQ(static_cast<ssize_t>(sizeof port), write(portPipe[1], &port, sizeof port));
    {
      Side side;
      ASSERT_NO_FATAL_FAILURE(acceptOne(ch, side, 1));
      auto got = side.poll(1);
      ASSERT_EQ(1u, got.size());
      EXPECT_EQ(IBV_WC_SUCCESS, got[0].status);
      memcpy(side.at(0), side.at(kSlot), kMessage);  // echo
      ASSERT_EQ(0, side.postSend(2, 0, kMessage));
      auto sent = side.poll(1);
      ASSERT_EQ(1u, sent.size());
      EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status);
      ASSERT_NO_FATAL_FAILURE(peerDisconnected(ch, side));
    }
    EXPECT_EQ(0, rdma_destroy_id(listener));
    rdma_destroy_event_channel(ch);
  });
  ASSERT_TRUE(passive.started());
  close(portPipe[1]);
  Child active([&] {
    uint16_t port = 0;
    ASSERT_TRUE(waitReadable(portPipe[0], kDeadline));
    ASSERT_EQ(static_cast<ssize_t>(sizeof port), read(portPipe[0], &port, sizeof port));
    rdma_event_channel* ch = createChannel();
    ASSERT_NE(nullptr, ch);
    {
      Side side;
      ASSERT_NO_FATAL_FAILURE(connectTo(ch, side, "127.0.0.1", port, 1));
      memset(side.at(kSlot), 0xe5, kMessage);
      ASSERT_EQ(0, side.postSend(1, kSlot, kMessage));
      auto completions = side.poll(2);
      ASSERT_EQ(2u, completions.size());
      for (const auto& wc : completions)
        EXPECT_EQ(IBV_WC_SUCCESS, wc.status) << ibv_wc_status_str(wc.status);
      EXPECT_EQ(0xe5, *side.at(0));
      ASSERT_NO_FATAL_FAILURE(disconnect(ch, side));
    }
    rdma_destroy_event_channel(ch);
  });
  ASSERT_TRUE(active.started());
  close(portPipe[0]);
  EXPECT_TRUE(passive.succeeded());
  EXPECT_TRUE(active.succeeded());
  expectNoCmEvents();
  ASSERT_NO_FATAL_FAILURE(exchangeBothWays(0x40));
}

// fork() while another thread keeps the progress thread busy: every child starts clean, and the
// traffic goes on.
TEST_F(Fork, ForkWhileTrafficFlows) {
  ASSERT_NO_FATAL_FAILURE(connect());
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::thread traffic([&] {
    for (uint8_t fill = 1; !stop.load() && !::testing::Test::HasFatalFailure(); ++fill) {
      exchangeBothWays(fill);
      rounds++;
    }
  });
  for (int i = 0; i < 5; ++i) {
    const int before = rounds.load();
    Child child([] {
      ibv_context* ctx = openFirstDevice();
      ASSERT_NE(nullptr, ctx);
      ibv_device_attr attr{};
      EXPECT_EQ(0, ibv_query_device(ctx, &attr));
      EXPECT_EQ(0, ibv_close_device(ctx));
    });
    ASSERT_TRUE(child.started());
    EXPECT_TRUE(child.succeeded());
    EXPECT_TRUE(waitFor([&] { return rounds.load() > before; }, kDeadline));
  }
  stop = true;
  traffic.join();
  EXPECT_GT(rounds.load(), 5);
}

TEST(ForkSupport, IsAlwaysOn) {
  EXPECT_EQ(0, ibv_fork_init());
  EXPECT_EQ(IBV_FORK_UNNEEDED, ibv_is_fork_initialized());
}

}  // namespace
}  // namespace rdmamsg::test
