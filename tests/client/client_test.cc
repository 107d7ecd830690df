// librdmamsg against an in-test LocalServer (loopback handler) running on
// its own thread: handshake, registration, pipelined sends, receive,
// completions, errors, status.
#include "rdmamsg/client.h"
#include "../support/taker.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/unique_fd.h"
#include "test_server.h"

namespace rdmamsg {
namespace {

using namespace std::chrono_literals;
using test::ThreadedServer;

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

TEST(ClientTest, ConnectFailsCleanlyWithoutDaemon) {
  test::TempDir dir;
  auto c = Client::connect(dir.file("nothing.sock"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::io_error);
  EXPECT_NE(c.status().message().find("nothing.sock"), std::string::npos);
}

// A daemon that has stopped accepting (its listen backlog full) makes
// connect() fail with a timeout at the deadline instead of hanging.
TEST(ClientTest, ConnectToADaemonThatDoesNotAcceptTimesOut) {
  test::TempDir dir;
  const std::string path = dir.file("stuck.sock");
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener.get(), 0), 0);
  std::vector<UniqueFd> queued;  // fill the backlog; nothing accepts
  for (int i = 0; i < 64; ++i) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) break;
    queued.push_back(std::move(fd));
  }
  ASSERT_LT(queued.size(), 64u) << "the backlog never filled";

  ConnectOptions opts;
  opts.timeout = 200ms;
  auto c = Client::connect(path, opts);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::timeout) << c.status().toString();
  EXPECT_NE(c.status().message().find("not accepting"), std::string::npos);
}

TEST(ClientTest, DefaultSocketPathHonoursTheEnvironment) {
  ::setenv("RDMAMSG_SOCKET", "/tmp/x.sock", 1);
  EXPECT_EQ(Client::defaultSocketPath(), "/tmp/x.sock");
  ::unsetenv("RDMAMSG_SOCKET");
  EXPECT_EQ(Client::defaultSocketPath(), "/run/rdmamsg/rdmamsgd.sock");
}

TEST(ClientTest, HandshakeReportsNodeAndLimit) {
  ThreadedServer server(8192);
  auto c = Client::connect(server.socket());
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->nodeName(), "nodeA");
  EXPECT_EQ(c->maxMessageSize(), 8192u);
  EXPECT_GE(c->fd(), 0);
}

// Client::counters() counts the system calls the library makes: a send
// over shared memory writes the ring, not the socket; a wait that sleeps
// polls; a busy client over shared memory never polls or reads its
// doorbell (over the socket every strategy sleeps in poll).
TEST(ClientTest, CountersCountTheSystemCallsTheLibraryMakes) {
  ThreadedServer server;
  auto listener = Client::connect(server.socket());
  auto sender = Client::connect(server.socket());
  ConnectOptions busyOptions;
  busyOptions.idleStrategy = IdleStrategy::busy;
  auto busy = Client::connect(server.socket(), busyOptions);
  ASSERT_TRUE(listener.ok() && sender.ok() && busy.ok());
  ASSERT_TRUE(listener->registerService("inbox").ok());
  const bool shm = sender->usesSharedMemory();

  const ClientCounters sent0 = sender->counters();
  ASSERT_TRUE(sender->send("nodeA", "inbox", "one").ok());
  ASSERT_TRUE(sender->flush(5s).ok());
  const ClientCounters sent1 = sender->counters();
  if (shm) {
    EXPECT_EQ(sent1.socketWrites, sent0.socketWrites)
        << "a send over shared memory wrote the socket";
  } else {
    EXPECT_GT(sent1.socketWrites, sent0.socketWrites);
  }
  EXPECT_EQ(sent1.syscalls(), sent1.socketReads + sent1.socketWrites + sent1.polls +
                                  sent1.doorbellRings + sent1.doorbellReads);

  Message m;
  ASSERT_TRUE(listener->receive(m, 5s).ok());
  const ClientCounters idle0 = listener->counters();
  EXPECT_EQ(listener->receive(m, 50ms).code(), Errc::timeout);
  EXPECT_GT(listener->counters().polls, idle0.polls) << "a wait that slept made no poll";

  const ClientCounters busy0 = busy->counters();
  EXPECT_EQ(busy->receive(m, 50ms).code(), Errc::timeout);
  const ClientCounters busy1 = busy->counters();
  if (shm) {
    EXPECT_EQ(busy1.polls, busy0.polls) << "a busy client slept";
    EXPECT_EQ(busy1.doorbellReads, busy0.doorbellReads);
  } else {
    EXPECT_GT(busy1.polls, busy0.polls);
  }
}

TEST(ClientTest, SendReceiveWithSenderAndCompletion) {
  ThreadedServer server;
  auto listener = Client::connect(server.socket());
  auto sender = Client::connect(server.socket());
  ASSERT_TRUE(listener.ok() && sender.ok());
  ASSERT_TRUE(listener->registerService("echo").ok());
  ASSERT_TRUE(sender->registerService("asker").ok());
  EXPECT_EQ(listener->registerService("echo").code(), Errc::duplicate_service);

  Result<uint64_t> id = sender->send("nodeA", "echo", "ping");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(sender->flush(5s).ok());
  // Not confirmed while the listener has not taken it.
  Completion done;
  EXPECT_EQ(sender->waitCompletion(done, 200ms).code(), Errc::timeout);

  Message m;
  ASSERT_TRUE(listener->receive(m, 5s).ok());
  EXPECT_EQ(m.srcNode, "nodeA");
  EXPECT_EQ(m.srcService, "asker");
  EXPECT_EQ(m.service, "echo");
  EXPECT_EQ(m.text(), "ping");
  EXPECT_EQ(listener->receive(m, 0ms).code(), Errc::timeout);

  ASSERT_TRUE(sender->waitCompletion(done, 5s).ok());
  EXPECT_EQ(done.msgId, *id);
  EXPECT_TRUE(done.status.ok());
  EXPECT_EQ(sender->inFlight(), 0u);
}

TEST(ClientTest, FailuresNameTheReason) {
  ThreadedServer server;
  auto c = Client::connect(server.socket());
  ASSERT_TRUE(c.ok());
  Status st = c->sendAndWait("nodeZ", "svc", bytes("x"), 5s);
  EXPECT_EQ(st.code(), Errc::unknown_node);
  EXPECT_NE(st.message().find("nodeZ"), std::string::npos);
  st = c->sendAndWait("nodeA", "ghost", bytes("x"), 5s);
  EXPECT_EQ(st.code(), Errc::unknown_service);
  EXPECT_NE(st.message().find("ghost"), std::string::npos);
  // Checked locally, before anything is sent.
  EXPECT_EQ(c->send("bad node", "svc", "x").status().code(), Errc::bad_request);
  EXPECT_EQ(c->send("nodeA", "svc", std::string(c->maxMessageSize() + 1, 'x')).status().code(),
            Errc::too_large);
  EXPECT_EQ(c->registerService("").code(), Errc::bad_request);
  EXPECT_TRUE(c->connectionStatus().ok());
}

TEST(ClientTest, PipelinedSendsArriveInOrderAndAllComplete) {
  ThreadedServer server;
  auto listener = Client::connect(server.socket());
  auto sender = Client::connect(server.socket());
  ASSERT_TRUE(listener.ok() && sender.ok());
  ASSERT_TRUE(listener->registerService("sink").ok());
  constexpr int kCount = 20000;
  for (int i = 0; i < kCount; ++i) {
    ASSERT_TRUE(sender->send("nodeA", "sink", "m" + std::to_string(i)).ok());
  }
  ASSERT_TRUE(sender->flush(10s).ok());
  Message m;
  for (int i = 0; i < kCount; ++i) {
    ASSERT_TRUE(listener->receive(m, 10s).ok()) << i;
    ASSERT_EQ(m.text(), "m" + std::to_string(i));
  }
  Completion c;
  uint64_t expect = 1;
  for (int i = 0; i < kCount; ++i) {
    ASSERT_TRUE(sender->waitCompletion(c, 10s).ok()) << i;
    ASSERT_TRUE(c.status.ok());
    EXPECT_EQ(c.msgId, expect++);
  }
  EXPECT_EQ(sender->inFlight(), 0u);
}

// A receive ring far smaller than a burst: deliveries are written into it
// in place while it has room and wait in the daemon's output buffer when it
// has not (or when one does not fit in a record), and every message still
// arrives whole and in order as the ring fills and drains.
TEST(ClientTest, ASmallReceiveRingKeepsEveryMessageWholeAndInOrder) {
  ThreadedServer server(256 * 1024);
  ConnectOptions small;
  small.receiveRingCapacity = size_t{64} << 10;
  auto listener = Client::connect(server.socket(), small);
  auto sender = Client::connect(server.socket());
  ASSERT_TRUE(listener.ok() && sender.ok());
  ASSERT_TRUE(listener->registerService("sink").ok());
  constexpr int kCount = 600;
  const size_t sizes[] = {7, 3000, 20000, 40000, 100000};  // the last two exceed a record
  auto body = [&](int i) {
    std::string b(sizes[i % 5], static_cast<char>('a' + i % 26));
    std::memcpy(b.data(), &i, std::min(sizeof i, b.size()));
    return b;
  };
  std::thread feed([&] {
    for (int i = 0; i < kCount; ++i)
      if (!sender->send("nodeA", "sink", body(i)).ok()) return;
    static_cast<void>(sender->flush(10s));
  });
  Message m;
  for (int i = 0; i < kCount; ++i) {
    Status st = listener->receive(m, 10s);
    if (!st.ok()) {
      ADD_FAILURE() << "message " << i << ": " << st.toString();
      break;
    }
    if (m.text() != body(i)) {
      ADD_FAILURE() << "message " << i << " differs (" << m.payload.size() << " bytes)";
      break;
    }
  }
  feed.join();
}

TEST(ClientTest, SendAndWaitLeavesEarlierCompletionsInOrder) {
  ThreadedServer server;
  auto listener = test::Taker::start(server.socket(), "sink");
  auto sender = Client::connect(server.socket());
  ASSERT_TRUE(listener && sender.ok());
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(sender->send("nodeA", "sink", "early").ok());
  // Its ack usually arrives in the same range as the 50 before it.
  ASSERT_TRUE(sender->sendAndWait("nodeA", "sink", bytes("last"), 10s).ok());
  Completion c;
  for (uint64_t id = 1; id <= 50; ++id) {
    ASSERT_TRUE(sender->waitCompletion(c, 10s).ok()) << id;
    EXPECT_EQ(c.msgId, id);
    EXPECT_TRUE(c.status.ok());
  }
  EXPECT_FALSE(sender->pollCompletion(c));
  EXPECT_EQ(sender->inFlight(), 0u);
}

TEST(ClientTest, StatusIsJsonFromTheDaemon) {
  ThreadedServer server;
  auto c = Client::connect(server.socket());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->registerService("svc1").ok());
  Result<std::string> text = c->status();
  ASSERT_TRUE(text.ok()) << text.status().toString();
  auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["node"], "nodeA");
  EXPECT_EQ(j["services"][0], "svc1");
}

TEST(ClientTest, UnregisterFreesTheService) {
  ThreadedServer server;
  auto a = Client::connect(server.socket());
  auto b = Client::connect(server.socket());
  ASSERT_TRUE(a->registerService("svc").ok());
  ASSERT_TRUE(a->unregisterService("svc").ok());
  // Requests on one connection are handled in order; status() is a barrier.
  ASSERT_TRUE(a->status().ok());
  EXPECT_TRUE(b->registerService("svc").ok());
}

TEST(ClientTest, EventLoopIntegrationThroughFd) {
  ThreadedServer server;
  auto c = Client::connect(server.socket());
  ASSERT_TRUE(c->registerService("self").ok());
  ASSERT_TRUE(c->send("nodeA", "self", "loop").ok());
  Message m;
  Completion done;
  bool gotMessage = false, gotCompletion = false;
  for (int i = 0; i < 500 && !(gotMessage && gotCompletion); ++i) {
    pollfd p{c->fd(), static_cast<short>(POLLIN | (c->wantsWrite() ? POLLOUT : 0)), 0};
    ::poll(&p, 1, 20);
    ASSERT_TRUE(c->processIo().ok());
    gotMessage = gotMessage || c->tryReceive(m);
    gotCompletion = gotCompletion || c->pollCompletion(done);
  }
  EXPECT_TRUE(gotMessage);
  EXPECT_TRUE(gotCompletion);
  EXPECT_EQ(m.text(), "loop");
}

// An application's own loop, as `rdmamsg bench` runs one: a sender and a
// listener polled together, each drained only when its fd() is readable.
// Every wait must be ended by the daemon's doorbell or socket, never by the
// poll's timeout: a lost wake-up would stall the stream.
TEST(ClientTest, PolledSenderAndListenerAreWokenForEveryAnswer) {
  ThreadedServer server;
  auto sink = Client::connect(server.socket());
  ASSERT_TRUE(sink.ok()) << sink.status().toString();
  ASSERT_TRUE(sink->registerService("sink").ok());
  auto sender = Client::connect(server.socket());
  ASSERT_TRUE(sender.ok()) << sender.status().toString();
  constexpr uint64_t kCount = 3000, kWindow = 100;
  uint64_t sent = 0, received = 0, completed = 0, timeouts = 0;
  Message m;
  Completion c;
  for (int round = 0; round < 100000 && (received < kCount || completed < kCount); ++round) {
    while (sent < kCount && sender->inFlight() < kWindow) {
      auto id = sender->trySend("nodeA", "sink", bytes("x"));
      if (!id.ok()) break;
      ++sent;
    }
    pollfd p[2] = {
        {sender->fd(), static_cast<short>(POLLIN | (sender->wantsWrite() ? POLLOUT : 0)), 0},
        {sink->fd(), static_cast<short>(POLLIN | (sink->wantsWrite() ? POLLOUT : 0)), 0}};
    if (::poll(p, 2, 2000) == 0) ++timeouts;
    if (p[0].revents != 0)
      while (sender->pollCompletion(c)) {
        ASSERT_TRUE(c.status.ok()) << c.status.toString();
        ++completed;
      }
    if (p[1].revents != 0)
      while (sink->tryReceive(m))
        ++received;
    ASSERT_TRUE(sender->connectionStatus().ok());
    ASSERT_TRUE(sink->connectionStatus().ok());
    ASSERT_EQ(timeouts, 0u) << "a wait was not woken: sent " << sent << ", received " << received
                            << ", completed " << completed;
  }
  EXPECT_EQ(received, kCount);
  EXPECT_EQ(completed, kCount);
}

}  // namespace
}  // namespace rdmamsg
