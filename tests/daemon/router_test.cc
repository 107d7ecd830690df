// Unit tests of the Router between the local server and the mesh: two
// daemons' routers, local servers and meshes in one process on one real
// event loop over softrdma. The applications are librdmamsg clients in their
// own threads (their calls block); the test thread steps the loop.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "daemon/local/local_server.h"
#include "daemon/loop/counters.h"
#include "daemon/router.h"
#include "mesh_fixture.h"
#include "rdmamsg/client.h"

namespace rdmamsg::peer::test {
namespace {

struct Daemon {
  config::Config config;
  Router router;
  std::unique_ptr<Mesh> mesh;
  std::unique_ptr<local::LocalServer> server;
  Daemon(loop::EventLoop& loop, config::Config c, const std::string& socket)
      : config(std::move(c)), router(config, loop) {
    config.local.socket = socket;
    mesh = std::make_unique<Mesh>(loop, config, router, 0x2000 + config.node.size());
    local::LocalServerConfig l;
    l.listener.path = socket;
    l.nodeName = config.node;
    l.maxMessageSize = 1u << 20;
    l.outputHighWatermark = 64 * 1024;  // small, so that a listener lags soon
    l.outputLowWatermark = 16 * 1024;
    server = std::make_unique<local::LocalServer>(loop, l, router);
    router.attach(server.get(), mesh.get());
    server->setDrainedCallback([this](local::SessionId s) { router.onSessionDrained(s); });
    mesh->start();
  }
  Peer& peer(const std::string& name) { return *mesh->peer(name); }
};

class RouterPair : public ::testing::Test {
 protected:
  loop::EventLoop loop;
  std::string dir;
  std::unique_ptr<Daemon> alpha, beta;

  void SetUp() override {
    char tmpl[] = "/tmp/rdmamsg-router-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    uint16_t port = freePort();
    ASSERT_NE(port, 0);
    std::vector<std::pair<std::string, std::string>> nodes{{"alpha", "127.0.0.1"},
                                                           {"beta", "127.0.0.2"}};
    auto tune = [](config::Config c) {
      c.buffers.flowWindow = 64 * 1024;
      c.buffers.sendQueueLimit = 32 * 1024;
      return c;
    };
    alpha =
        std::make_unique<Daemon>(loop, tune(meshConfig("alpha", nodes, port)), dir + "/alpha.sock");
    beta =
        std::make_unique<Daemon>(loop, tune(meshConfig("beta", nodes, port)), dir + "/beta.sock");
    ASSERT_TRUE(stepUntil(loop, [&] {
      return alpha->peer("beta").established() && beta->peer("alpha").established();
    }));
  }
  void TearDown() override {
    alpha.reset();
    beta.reset();
    std::filesystem::remove_all(dir);
  }
  // Runs `f` in a thread while stepping the loop until it returns.
  template <typename F>
  auto inThread(F&& f, std::chrono::milliseconds timeout = 20s) {
    auto fut = std::async(std::launch::async, std::forward<F>(f));
    bool done = stepUntil(
        loop, [&] { return fut.wait_for(0s) == std::future_status::ready; }, timeout);
    EXPECT_TRUE(done) << "the client thread did not finish";
    if (!done) std::abort();  // a blocked client thread cannot be joined
    return fut.get();
  }
  std::unique_ptr<Client> connect(Daemon& d) {
    return inThread([&] {
      auto c = Client::connect(d.config.local.socket);
      return c ? std::make_unique<Client>(std::move(*c)) : nullptr;
    });
  }
};

std::span<const std::byte> bytes(const std::string& s) {
  return std::as_bytes(std::span(s));
}

TEST_F(RouterPair, RoutesToARemoteServiceAndReportsUnknownOnes) {
  auto listener = connect(*beta);
  auto sender = connect(*alpha);
  ASSERT_TRUE(listener && sender);
  ASSERT_TRUE(inThread([&] { return listener->registerService("svc").ok(); }));
  // Confirmed once the listener has taken it, and not before.
  Message m;
  Status st = inThread([&] {
    Result<uint64_t> id = sender->send("beta", "svc", bytes("hello"));
    Completion c;
    if (!id.ok() || sender->waitCompletion(c, 300ms).ok())
      return Status(Errc::bad_request, "confirmed before the listener took it");
    if (Status r = listener->receive(m, 5s); !r.ok()) return r;
    Status w = sender->waitCompletion(c, 5s);
    return w.ok() ? c.status : w;
  });
  EXPECT_TRUE(st.ok()) << st.toString();
  EXPECT_EQ(m.text(), "hello");
  EXPECT_EQ(m.srcNode, "alpha");
  st = inThread([&] { return sender->sendAndWait("beta", "nobody", bytes("x"), 5s); });
  EXPECT_EQ(st.code(), Errc::unknown_service);
  EXPECT_NE(st.message().find("nobody"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("beta"), std::string::npos) << st.message();
}

// A listener that does not read: its deliveries are confirmed only as it
// consumes them, so its flow's window stays in use and only that flow's
// sender waits; another service on the same daemons is not held up.
TEST_F(RouterPair, ALaggingListenerIsConfirmedAsItConsumes) {
  auto stuck = connect(*beta);
  auto live = connect(*beta);
  auto sender = connect(*alpha);
  ASSERT_TRUE(stuck && live && sender);
  ASSERT_TRUE(inThread(
      [&] { return stuck->registerService("stuck").ok() && live->registerService("live").ok(); }));
  std::string payload(1000, 's');
  // 400 KB: more than the listener's socket buffer, high-water mark, window and queue hold.
  std::atomic<int> sent{0};
  auto flood = std::async(std::launch::async, [&] {
    for (int i = 0; i < 400; i++) {
      if (!sender->send("beta", "stuck", bytes(payload))) return;
      sent++;
    }
    (void)sender->flush(30s);
  });
  auto unconfirmed = [&] {
    for (const auto& f : alpha->peer("beta").flowStats())
      if (f.service == "stuck") return f.unconfirmed;
    return uint64_t{0};
  };
  // Past the listener's socket buffer and high-water mark, deliveries are
  // tracked and the window fills and stays full: nothing consumes.
  ASSERT_TRUE(stepUntil(
      loop, [&] { return beta->server->trackedBytes() > 0 && unconfirmed() >= 60 * 1024; }, 10s))
      << unconfirmed() << " unconfirmed, " << beta->server->trackedBytes() << " tracked";
  EXPECT_LE(unconfirmed(), 64u * 1024 + 2000) << "more than the window is unconfirmed";
  EXPECT_GT(beta->server->trackedBytes(), 0u);

  // Another service flows meanwhile, over the same link.
  auto other = connect(*alpha);
  ASSERT_TRUE(other);
  // Its listener takes it: only then is it confirmed.
  Status st = inThread([&] {
    Result<uint64_t> id = other->send("beta", "live", bytes("hi"));
    if (!id.ok()) return id.status();
    if (Status f = other->flush(5s); !f.ok()) return f;
    Message m;
    if (Status r = live->receive(m, 5s); !r.ok()) return r;
    Completion c;
    Status w = other->waitCompletion(c, 5s);
    return w.ok() ? c.status : w;
  });
  EXPECT_TRUE(st.ok()) << st.toString();

  // The listener reads everything: every message arrives, the window returns.
  int got = inThread(
      [&] {
        Message m;
        int n = 0;
        while (n < 400 && stuck->receive(m, 10s).ok())
          n++;
        return n;
      },
      30s);
  EXPECT_EQ(got, 400);
  ASSERT_TRUE(stepUntil(
      loop, [&] { return flood.wait_for(0s) == std::future_status::ready; }, 20s));
  EXPECT_EQ(sent.load(), 400);
  ASSERT_TRUE(stepUntil(
      loop, [&] { return unconfirmed() == 0; }, 5s))
      << unconfirmed();
  EXPECT_EQ(beta->server->trackedBytes(), 0u);
  EXPECT_EQ(alpha->peer("beta").counters().connects, 1u);
}

// Deliveries queued for a listener that goes away before taking them are
// answered: its senders learn unknown_service, not silence.
TEST_F(RouterPair, AListenerThatGoesAwayFailsWhatItDidNotTake) {
  auto stuck = connect(*beta);
  auto sender = connect(*alpha);
  ASSERT_TRUE(stuck && sender);
  ASSERT_TRUE(inThread([&] { return stuck->registerService("stuck").ok(); }));
  std::string payload(1000, 'x');
  // Past the listener's socket buffer and high-water mark, until the daemon
  // holds the destination (trySend: would_block).
  int accepted = 0;
  ASSERT_TRUE(inThread([&] {
    for (int i = 0; i < 400; i++) {
      Result<uint64_t> id = sender->trySend("beta", "stuck", bytes(payload));
      if (!id.ok() && id.status().code() == Errc::would_block) break;
      if (!id.ok()) return false;
      accepted++;
      (void)sender->processIo();
    }
    return sender->flush(10s).ok();
  }));
  EXPECT_GT(accepted, 64) << "held before the window was used";
  ASSERT_TRUE(stepUntil(
      loop, [&] { return beta->server->trackedBytes() > 0; }, 10s));
  inThread([&] {
    stuck->close();
    return true;
  });
  int ok = 0, failed = 0;
  Status lastError;
  inThread(
      [&] {
        Completion c;
        while (ok + failed < accepted && sender->waitCompletion(c, 10s).ok()) {
          if (c.status.ok()) {
            ok++;
          } else {
            failed++;
            lastError = c.status;
          }
        }
        return true;
      },
      30s);
  EXPECT_EQ(ok + failed, accepted) << "messages without an answer";
  EXPECT_EQ(ok, 0) << "confirmed although the listener never took them";
  EXPECT_EQ(lastError.code(), Errc::unknown_service) << lastError.toString();
  ASSERT_TRUE(stepUntil(
      loop, [&] { return beta->server->trackedBytes() == 0; }, 5s));
}

// A message put together in its listener's delivery block (it came in
// fragments) whose listener went meanwhile, another client taking the
// service: it is answered unknown_service — a delivery the listener never
// took — and nothing is copied from the old listener's memory to the new.
TEST_F(RouterPair, AMessageWhoseListenerChangedWhileItCameIsNotCopiedToTheNext) {
  auto first = connect(*beta);
  auto second = connect(*beta);
  ASSERT_TRUE(first && second);
  if (!first->usesSharedMemory()) GTEST_SKIP() << "RDMAMSG_SHM=0";
  ASSERT_TRUE(inThread([&] { return first->registerService("svc").ok(); }));
  Peer& from = beta->peer("alpha");
  const std::string payload(100000, 'p');
  std::unique_ptr<DeliveryRoom> room =
      beta->router.reserveIncoming(from, "src", "svc", payload.size());
  ASSERT_NE(room, nullptr) << "a block of the listener's delivery area";
  std::memcpy(room->payload().data(), payload.data(), payload.size());
  inThread([&] {
    first->close();
    return true;
  });
  ASSERT_TRUE(stepUntil(
      loop, [&] { return inThread([&] { return second->registerService("svc").ok(); }); }));
  const uint64_t reassembled = loop::copies().reassembly;
  EXPECT_EQ(beta->router.deliverIncoming(from, 1, 1, "src", "svc", room->payload(), room.get()),
            Delivery::kUnknownService);
  EXPECT_EQ(loop::copies().reassembly - reassembled, payload.size())
      << "the room was a reassembly buffer after all";
  room.reset();
  Message m;
  EXPECT_EQ(inThread([&] { return second->receive(m, 300ms).code(); }), Errc::timeout);
}

}  // namespace
}  // namespace rdmamsg::peer::test
