// librdmamsg's zero-copy receive (Client::receiveView) against an in-test
// LocalServer: payloads of every size intact and in order, read in place,
// confirmed at release, untouched by what arrives while held, and misuse
// answered with an error. Runs over shared memory and, with the "socket."
// prefix, over the socket.
#include <gtest/gtest.h>

#include <poll.h>
#include <memory>

#include <cstdio>
#include <thread>
#include <vector>

#include "../support/taker.h"
#include "rdmamsg/client.h"
#include "rdmamsg/rdmamsg.h"
#include "test_server.h"

namespace rdmamsg {
namespace {

using namespace std::chrono_literals;
using test::ThreadedServer;

constexpr uint32_t kMaxMessage = 8u << 20;

// Message i: its size and its bytes, so that the receiver can check both.
size_t sizeOf(uint64_t i) {
  return i % 10 == 3 ? (size_t{3} << 20) + i * 7 : 1 + (i * 37) % 3000;
}
std::vector<std::byte> payloadOf(uint64_t i) {
  std::vector<std::byte> p(sizeOf(i));
  for (size_t j = 0; j < p.size(); ++j)
    p[j] = static_cast<std::byte>((i * 131 + j) & 0xff);
  return p;
}
bool intact(uint64_t i, std::span<const std::byte> got) {
  if (got.size() != sizeOf(i)) return false;
  for (size_t j = 0; j < got.size(); ++j)
    if (got[j] != static_cast<std::byte>((i * 131 + j) & 0xff)) return false;
  return true;
}

// Sends messages first..last-1 to nodeA/inbox from a thread of its own (a
// blocking send() waits while the daemon holds the listener).
class Sender {
 public:
  Sender(const std::string& socket, uint64_t first, uint64_t last)
      : thread_([this, socket, first, last] { run(socket, first, last); }) {}
  ~Sender() {
    if (thread_.joinable()) thread_.join();
  }
  // Once every message was sent and confirmed: ok, or the first failure.
  Status join() {
    if (thread_.joinable()) thread_.join();
    return result_;
  }

 private:
  void run(const std::string& socket, uint64_t first, uint64_t last) {
    auto c = Client::connect(socket);
    if (!c) {
      result_ = c.status();
      return;
    }
    result_ = c->registerService("outbox");
    for (uint64_t i = first; i < last && result_.ok(); ++i)
      result_ = c->send("nodeA", "inbox", payloadOf(i)).status();
    Completion done;
    for (uint64_t i = first; i < last && result_.ok(); ++i) {
      result_ = c->waitCompletion(done, 30s);
      if (result_.ok()) result_ = done.status;
    }
  }
  Status result_;
  std::thread thread_;
};

Client listen(const ThreadedServer& server) {
  auto c = Client::connect(server.socket());
  EXPECT_TRUE(c.ok()) << c.status().toString();
  EXPECT_TRUE(c->registerService("inbox").ok());
  return std::move(*c);
}

// A long stream of small and 3 MiB messages (frames across ring records and
// the ring's wrap, and across socket reads), viewed one by one — in the
// first half some taken with receive() between them: every payload arrives
// intact and in order, and in the second half, where only views are taken,
// the large ones are read in place rather than copied.
TEST(ReceiveViewTest, ViewsCarryEveryPayloadInOrderWithoutCopying) {
  ThreadedServer server(kMaxMessage);
  Client listener = listen(server);
  constexpr uint64_t kCount = 400;
  // The second half is sent once the first is read: a receive() of the
  // first half, reading ahead, cannot queue (copy) its messages.
  auto sender = std::make_unique<Sender>(server.socket(), 0, kCount / 2);
  MessageView v;
  Message m;
  uint64_t large = 0, largeInPlace = 0;
  for (uint64_t i = 0; i < kCount; ++i) {
    if (i == kCount / 2) {
      const Status first = sender->join();
      EXPECT_TRUE(first.ok()) << first.toString();
      sender = std::make_unique<Sender>(server.socket(), kCount / 2, kCount);
    }
    if (i < kCount / 2 && i % 7 == 6) {
      ASSERT_TRUE(listener.receive(m, 30s).ok()) << i;
      ASSERT_TRUE(intact(i, m.payload)) << "message " << i;
      continue;
    }
    ASSERT_TRUE(listener.receiveView(v, 30s).ok()) << i;
    EXPECT_EQ(v.srcNode, "nodeA");
    EXPECT_EQ(v.srcService, "outbox");
    EXPECT_EQ(v.service, "inbox");
    ASSERT_TRUE(intact(i, v.payload)) << "message " << i << " of " << v.payload.size() << " bytes";
    if (i >= kCount / 2 && v.payload.size() > (1u << 20)) {
      ++large;
      largeInPlace += v.inPlace ? 1 : 0;
    }
    ASSERT_TRUE(listener.release(v).ok());
  }
  const Status sent = sender->join();
  EXPECT_TRUE(sent.ok()) << sent.toString();
  EXPECT_EQ(listener.receiveView(v, 0ms).code(), Errc::timeout);
  // A large message is read in place unless the library had already queued
  // it.
  EXPECT_GT(largeInPlace * 2, large) << largeInPlace << " of " << large << " in place";
  std::printf("large messages viewed in place: %llu of %llu\n",
              static_cast<unsigned long long>(largeInPlace),
              static_cast<unsigned long long>(large));
}

// The sender is confirmed when the view is released, not when it is returned.
TEST(ReceiveViewTest, ASenderIsConfirmedOnlyAtRelease) {
  ThreadedServer server(kMaxMessage);
  Client listener = listen(server);
  auto sender = Client::connect(server.socket());
  ASSERT_TRUE(sender.ok());
  auto id = sender->send("nodeA", "inbox", "one");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(sender->flush(5s).ok());
  MessageView v;
  ASSERT_TRUE(listener.receiveView(v, 5s).ok());
  EXPECT_EQ(v.text(), "one");
  Completion done;
  EXPECT_EQ(sender->waitCompletion(done, 300ms).code(), Errc::timeout);
  ASSERT_TRUE(listener.release(v).ok());
  ASSERT_TRUE(sender->waitCompletion(done, 5s).ok());
  EXPECT_EQ(done.msgId, *id);
  EXPECT_TRUE(done.status.ok()) << done.status.toString();
}

// While a view is held, more messages arrive and are read (the listener
// waits for its daemon's status, which comes after them): the view's bytes
// stay as they were, receiving refuses, and after the release the rest
// follow in order.
// A listener, a sender, and a taker of "marker" messages: the daemon
// handles a client's frames in order, so once a marker sent after messages
// is confirmed, those messages were delivered to the listener.
class HeldView : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(marker, nullptr);
    ASSERT_TRUE(sender.ok());
  }
  ThreadedServer server{kMaxMessage};
  Client listener = listen(server);
  std::unique_ptr<test::Taker> marker = test::Taker::start(server.socket(), "marker");
  Result<Client> sender = Client::connect(server.socket());
};

TEST_F(HeldView, AHeldViewIsUntouchedByWhatArrives) {
  ASSERT_TRUE(sender->send("nodeA", "inbox", payloadOf(3)).ok());
  ASSERT_TRUE(sender->flush(5s).ok());
  MessageView v;
  ASSERT_TRUE(listener.receiveView(v, 5s).ok());
  const std::span<const std::byte> held = v.payload;
  for (uint64_t i = 4; i < 14; ++i)
    ASSERT_TRUE(sender->send("nodeA", "inbox", payloadOf(i)).ok());
  ASSERT_TRUE(sender->sendAndWait("nodeA", "marker", payloadOf(0), 30s).ok());
  ASSERT_TRUE(listener.status(5s).ok());
  ASSERT_TRUE(listener.processIo().ok());
  Message m;
  EXPECT_EQ(listener.receive(m, 0ms).code(), Errc::bad_request);
  EXPECT_FALSE(listener.tryReceive(m));
  MessageView other;
  EXPECT_EQ(listener.receiveView(other, 0ms).code(), Errc::bad_request);
  EXPECT_FALSE(listener.tryReceiveView(other));
  EXPECT_EQ(v.payload.data(), held.data());
  EXPECT_TRUE(intact(3, v.payload));
  ASSERT_TRUE(listener.release(v).ok());
  for (uint64_t i = 4; i < 14; ++i) {
    ASSERT_TRUE(listener.receiveView(v, 5s).ok()) << i;
    ASSERT_TRUE(intact(i, v.payload)) << "message " << i;
    ASSERT_TRUE(listener.release(v).ok());
  }
}

// A view taken in place while a large delivery waits behind the frames
// read with it (in the delivery area, over shared memory): the library
// reads on — a send, a completion — taking those frames first, in order,
// and the connection goes on.
TEST_F(HeldView, ReadingOnWhileAViewIsHeldKeepsTheOrderOfWhatFollows) {
  for (uint64_t i = 1; i <= 3; ++i)  // small, small, 3 MiB
    ASSERT_TRUE(sender->send("nodeA", "inbox", payloadOf(i)).ok());
  ASSERT_TRUE(sender->sendAndWait("nodeA", "marker", payloadOf(0), 30s).ok());
  MessageView v;
  ASSERT_TRUE(listener.receiveView(v, 5s).ok());
  ASSERT_TRUE(intact(1, v.payload));
  // The listener sends (a large message: the library reads at once) and
  // waits while it holds the view: it reads on.
  ASSERT_TRUE(listener.sendAndWait("nodeA", "marker", payloadOf(13), 30s).ok());
  EXPECT_TRUE(intact(1, v.payload));
  ASSERT_TRUE(listener.release(v).ok());
  Message m;
  ASSERT_TRUE(listener.receive(m, 5s).ok());
  EXPECT_TRUE(intact(2, m.payload));
  ASSERT_TRUE(listener.receiveView(v, 5s).ok());
  EXPECT_TRUE(intact(3, v.payload));
  ASSERT_TRUE(listener.release(v).ok());
}

// An application's own loop: poll fd(), then tryReceiveView() until it
// says nothing more; a long stream of views, each released before the next.
TEST(ReceiveViewTest, TryReceiveViewDrainsALongStreamFromAPolledLoop) {
  ThreadedServer server(kMaxMessage);
  Client listener = listen(server);
  constexpr uint64_t kFirst = 1000, kLast = 4000;  // small ones (sizeOf: i % 10 != 3)
  auto c = Client::connect(server.socket());
  ASSERT_TRUE(c.ok());
  uint64_t next = kFirst, received = kFirst;
  MessageView v;
  for (int round = 0; round < 100000 && received < kLast; ++round) {
    while (next < kLast && c->inFlight() < 200) {
      if (next % 10 == 3) ++next;
      if (!c->trySend("nodeA", "inbox", payloadOf(next)).ok()) break;
      ++next;
    }
    pollfd p{listener.fd(), POLLIN, 0};
    ASSERT_GE(::poll(&p, 1, 100), 0);
    while (listener.tryReceiveView(v)) {
      if (received % 10 == 3) ++received;
      ASSERT_TRUE(intact(received, v.payload)) << "message " << received;
      ASSERT_TRUE(listener.release(v).ok());
      ++received;
    }
    Completion done;
    while (c->pollCompletion(done))
      ASSERT_TRUE(done.status.ok()) << done.status.toString();
  }
  EXPECT_EQ(received, kLast);
}

// Misuse is an error, never undefined: a view released twice, or never
// received; a view held across close() stays readable until released, and
// its message — not taken — fails back to its sender.
TEST(ReceiveViewTest, MisuseIsAnErrorAndCloseKeepsAHeldViewReadable) {
  ThreadedServer server(kMaxMessage);
  Client listener = listen(server);
  auto sender = Client::connect(server.socket());
  ASSERT_TRUE(sender.ok());
  MessageView none;
  EXPECT_EQ(listener.release(none).code(), Errc::bad_request);
  auto id = sender->send("nodeA", "inbox", payloadOf(3));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(sender->flush(5s).ok());
  MessageView v;
  ASSERT_TRUE(listener.receiveView(v, 5s).ok());
  MessageView copy = v;
  listener.close();
  EXPECT_TRUE(intact(3, v.payload));
  EXPECT_TRUE(listener.release(v).ok());
  EXPECT_TRUE(v.payload.empty());
  EXPECT_EQ(listener.release(v).code(), Errc::bad_request);
  EXPECT_EQ(listener.release(copy).code(), Errc::bad_request);
  EXPECT_EQ(listener.receiveView(v, 0ms).code(), Errc::not_connected);
  EXPECT_FALSE(listener.tryReceiveView(v));
  Completion done;
  ASSERT_TRUE(sender->waitCompletion(done, 5s).ok());
  EXPECT_EQ(done.msgId, *id);
  EXPECT_FALSE(done.status.ok()) << "a message never released was confirmed";
}

// The C API's views: the payload and names as rdmamsg_receive_view()
// gives them, one view at a time, and release twice an error.
TEST(ReceiveViewTest, TheCApiViewsAndReleases) {
  ThreadedServer server(kMaxMessage);
  rdmamsg_client* listener = nullptr;
  rdmamsg_client* sender = nullptr;
  ASSERT_EQ(rdmamsg_connect(server.socket().c_str(), "c-listener", 5000, &listener), RDMAMSG_OK);
  ASSERT_EQ(rdmamsg_connect(server.socket().c_str(), "c-sender", 5000, &sender), RDMAMSG_OK);
  ASSERT_EQ(rdmamsg_register(listener, "inbox", 5000), RDMAMSG_OK);
  for (uint64_t i = 0; i < 6; ++i) {
    const std::vector<std::byte> p = payloadOf(i);
    ASSERT_EQ(rdmamsg_send(sender, "nodeA", "inbox", p.data(), p.size(), nullptr), RDMAMSG_OK);
  }
  ASSERT_EQ(rdmamsg_flush(sender, 5000), RDMAMSG_OK);
  rdmamsg_message m{};
  EXPECT_EQ(rdmamsg_release_view(listener), RDMAMSG_BAD_REQUEST);
  for (uint64_t i = 0; i < 6; ++i) {
    ASSERT_EQ(rdmamsg_receive_view(listener, &m, 5000), RDMAMSG_OK) << i;
    EXPECT_STREQ(m.src_node, "nodeA");
    EXPECT_STREQ(m.service, "inbox");
    EXPECT_TRUE(intact(i, {static_cast<const std::byte*>(m.payload), m.size})) << i;
    rdmamsg_message other{};
    EXPECT_EQ(rdmamsg_try_receive_view(listener, &other), 0);
    EXPECT_EQ(rdmamsg_receive(listener, &other, 0), RDMAMSG_BAD_REQUEST);
    EXPECT_NE(std::string_view(rdmamsg_last_error(listener)).find("release"), std::string::npos);
    ASSERT_EQ(rdmamsg_release_view(listener), RDMAMSG_OK);
    EXPECT_EQ(rdmamsg_release_view(listener), RDMAMSG_BAD_REQUEST);
  }
  rdmamsg_completion done{};
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(rdmamsg_wait_completion(sender, &done, 5000), RDMAMSG_OK);
    EXPECT_EQ(done.code, RDMAMSG_OK) << done.message;
  }
  rdmamsg_close(listener);
  rdmamsg_close(sender);
}

}  // namespace
}  // namespace rdmamsg
