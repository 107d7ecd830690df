// Integration: idle strategies (sleep, adaptive, busy) of the clients and of
// the daemon — messages flow with every pairing, a spinning client still
// honours its timeouts, and the wake-up rule holds: a side that spins is
// never rung, a side that sleeps always wakes.
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>

#include <thread>

#include "harness.h"
#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

Result<Client> connectWith(const std::string& socket, IdleStrategy s) {
  ConnectOptions o;
  o.idleStrategy = s;
  return Client::connect(socket, o);
}

// The daemon's doorbell rings so far, asked by a busy client (which is
// never rung itself, so asking costs none).
uint64_t doorbellRings(const std::string& socket) {
  auto c = connectWith(socket, IdleStrategy::busy);
  if (!c.ok()) return UINT64_MAX;
  Result<std::string> text = c->status(5s);
  if (!text.ok()) return UINT64_MAX;
  return Json::parse(*text)["loop"].value("doorbell_rings", UINT64_MAX);
}

// `count` messages from a client with strategy `send` to one with `receive`
// through `node`'s daemon: all arrive, in order, and are confirmed.
void exchange(const std::string& node, const std::string& socket, IdleStrategy send,
              IdleStrategy receive, int count = 2000) {
  auto listener = connectWith(socket, receive);
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE(listener->usesSharedMemory());
  ASSERT_TRUE(listener->registerService("sink").ok());
  // The listener waits for the first message while the sender connects (a
  // handshake through the daemon): longer than an adaptive spin.
  std::jthread receiving([&] {  // joined however this function ends
    Message m;
    for (int i = 0; i < count; ++i) {
      ASSERT_TRUE(listener->receive(m, 10s).ok()) << i;
      ASSERT_EQ(m.text(), std::to_string(i));
    }
  });
  auto sender = connectWith(socket, send);
  ASSERT_TRUE(sender.ok() && sender->usesSharedMemory());
  for (int i = 0; i < count; ++i)
    ASSERT_TRUE(sender->send(node, "sink", std::to_string(i)).ok());
  ASSERT_TRUE(sender->flush(10s).ok());
  Completion done;
  for (int i = 0; i < count; ++i) {
    ASSERT_TRUE(sender->waitCompletion(done, 10s).ok()) << i;
    EXPECT_TRUE(done.status.ok()) << done.status.toString();
  }
  receiving.join();
}

TEST(IdleStrategy, ParsesItsNames) {
  for (IdleStrategy s : {IdleStrategy::sleep, IdleStrategy::adaptive, IdleStrategy::busy})
    EXPECT_EQ(parseIdleStrategy(toString(s)), s);
  EXPECT_EQ(parseIdleStrategy("spin"), std::nullopt);
}

TEST(IdleStrategy, BusyClientsWithASleepingDaemonAreNeverRung) {
  Cluster c({"alpha"});
  ASSERT_TRUE(c.start());
  const uint64_t before = doorbellRings(c.socket("alpha"));
  exchange("alpha", c.socket("alpha"), IdleStrategy::busy, IdleStrategy::busy);
  EXPECT_EQ(doorbellRings(c.socket("alpha")), before)
      << "the daemon rang a client that never slept";
}

TEST(IdleStrategy, AdaptiveAndSleepingClientsAreRungWhenTheySleep) {
  Cluster c({"alpha"});
  ASSERT_TRUE(c.start());
  const uint64_t before = doorbellRings(c.socket("alpha"));
  exchange("alpha", c.socket("alpha"), IdleStrategy::adaptive, IdleStrategy::adaptive);
  // The listener waits longer than the spin while the sender connects.
  const uint64_t afterAdaptive = doorbellRings(c.socket("alpha"));
  EXPECT_GT(afterAdaptive, before);
  exchange("alpha", c.socket("alpha"), IdleStrategy::sleep, IdleStrategy::sleep, 200);
  EXPECT_GT(doorbellRings(c.socket("alpha")), afterAdaptive);
}

TEST(IdleStrategy, ABusyWaitHonoursItsTimeout) {
  Cluster c({"alpha"});
  ASSERT_TRUE(c.start());
  auto client = connectWith(c.socket("alpha"), IdleStrategy::busy);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->registerService("quiet").ok());
  Message m;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(client->receive(m, 300ms).code(), Errc::timeout);
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 5s);
  Completion done;
  EXPECT_EQ(client->waitCompletion(done, 0ms).code(), Errc::timeout);
  // A message that is never taken is not confirmed: the wait times out too.
  ASSERT_TRUE(client->send("alpha", "quiet", "x").ok());
  EXPECT_EQ(client->waitCompletion(done, 200ms).code(), Errc::timeout);
  ASSERT_TRUE(client->receive(m, 5s).ok());
  EXPECT_EQ(m.text(), "x");
  ASSERT_TRUE(client->waitCompletion(done, 5s).ok());
  EXPECT_TRUE(done.status.ok());
}

// A spinning client in its own event loop: processIo() leaves the daemon
// unasked to ring; prepareToPoll() asks, and poll(fd()) then wakes.
TEST(IdleStrategy, ABusyClientPollsItsFdAfterPrepareToPoll) {
  Cluster c({"alpha"});
  ASSERT_TRUE(c.start());
  auto listener = connectWith(c.socket("alpha"), IdleStrategy::busy);
  auto sender = connectWith(c.socket("alpha"), IdleStrategy::sleep);
  ASSERT_TRUE(listener.ok() && sender.ok());
  ASSERT_TRUE(listener->registerService("loop").ok());
  ASSERT_TRUE(listener->processIo().ok());
  ASSERT_TRUE(listener->prepareToPoll());
  ASSERT_TRUE(sender->send("alpha", "loop", "wake").ok());
  ASSERT_TRUE(sender->flush(5s).ok());
  pollfd p{listener->fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "not rung after prepareToPoll";
  Message m;
  ASSERT_TRUE(test::waitFor([&] { return listener->tryReceive(m); }, 5s));
  EXPECT_EQ(m.text(), "wake");
}

TEST(IdleStrategy, TheEnvironmentSetsItAndABadValueIsRefused) {
  Cluster c({"alpha"});
  ASSERT_TRUE(c.start());
  ::setenv("RDMAMSG_IDLE", "busy", 1);
  auto busy = Client::connect(c.socket("alpha"));
  ::setenv("RDMAMSG_IDLE", "spin", 1);
  auto bad = Client::connect(c.socket("alpha"));
  ::unsetenv("RDMAMSG_IDLE");
  ASSERT_TRUE(busy.ok());
  EXPECT_EQ(busy->idleStrategy(), IdleStrategy::busy);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::bad_request);
  EXPECT_NE(bad.status().message().find("RDMAMSG_IDLE=spin"), std::string::npos);
}

TEST(IdleStrategy, TheCliTakesTheStrategyForSendAndListen) {
  Cluster c({"alpha"});
  ASSERT_TRUE(c.start());
  Process listen;
  Process::Options o;
  o.argv = {cliBinary(), "--socket", c.socket("alpha"), "listen", "cli",
            "-n",        "3",        "--idle-strategy", "busy"};
  o.stdoutPath = c.dir().file("listen.out");
  ASSERT_TRUE(listen.start(o));
  ASSERT_TRUE(test::waitFor(
      [&] {
        auto s = statusOf(c.socket("alpha"));
        return s && hasService(*s, "cli");
      },
      10s));
  CliResult sent = runCli(
      c.dir(), {"--socket", c.socket("alpha"), "send", "alpha/cli", "--idle-strategy", "adaptive"},
      "one\ntwo\nthree\n");
  EXPECT_EQ(sent.code, 0) << sent.err;
  EXPECT_EQ(listen.wait(10s), 0);
  EXPECT_EQ(readFile(o.stdoutPath), "one\ntwo\nthree\n");
  CliResult bad = runCli(c.dir(), {"--socket", c.socket("alpha"), "send", "alpha/cli", "x",
                                   "--idle-strategy", "spin"});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--idle-strategy"), std::string::npos) << bad.err;
}

Json statusJson(const std::string& socket) {
  auto s = statusOf(socket);
  return s ? *s : Json::object();
}

// A daemon that spins still serves everything: clients of either path and
// strategy, the mesh (rdma_cm events, completions, heartbeat timers).
void expectServesEverything(const std::string& strategy) {
  MeshOptions o;
  o.extra = "idle_strategy: " + strategy + "\n";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  EXPECT_EQ(statusJson(c.socket("alpha"))["loop"].value("idle_strategy", ""), strategy);
  exchange("alpha", c.socket("alpha"), IdleStrategy::sleep, IdleStrategy::sleep, 500);
  exchange("alpha", c.socket("alpha"), IdleStrategy::busy, IdleStrategy::adaptive, 500);
  // Across the mesh, and over the socket.
  ConnectOptions onSocket;
  onSocket.sharedMemory = false;
  auto listener = Client::connect(c.socket("beta"), onSocket);
  auto sender = Client::connect(c.socket("alpha"), onSocket);
  ASSERT_TRUE(listener.ok() && sender.ok());
  EXPECT_FALSE(listener->usesSharedMemory());
  ASSERT_TRUE(listener->registerService("far").ok());
  ASSERT_TRUE(sender->send("beta", "far", "over the mesh").ok());
  ASSERT_TRUE(sender->flush(5s).ok());
  Message m;
  ASSERT_TRUE(listener->receive(m, 10s).ok());
  EXPECT_EQ(m.text(), "over the mesh");
  Completion done;
  ASSERT_TRUE(sender->waitCompletion(done, 10s).ok());
  EXPECT_TRUE(done.status.ok()) << done.status.toString();
  // Timers fire: heartbeats go out while the link is idle, and the peers
  // stay connected through several heartbeat timeouts (1 s).
  const auto heartbeats = [&] {
    const Json st = statusJson(c.socket("alpha"));
    const Json* p = peerEntry(st, "beta");
    return p != nullptr ? p->value("heartbeats_sent", uint64_t{0}) : uint64_t{0};
  };
  const uint64_t beats = heartbeats();
  EXPECT_TRUE(test::waitFor([&] { return heartbeats() >= beats + 5; }, 10s));
  const Json s = statusJson(c.socket("alpha"));
  const Json* beta = peerEntry(s, "beta");
  ASSERT_NE(beta, nullptr);
  EXPECT_EQ(beta->value("connects", 0), 1) << s.dump(2);
  EXPECT_GT(s["loop"].value("spins", uint64_t{0}), 0u);
}

TEST(IdleStrategy, ABusyDaemonServesEveryClientThePeersAndTheTimers) {
  expectServesEverything("busy");
}

TEST(IdleStrategy, AnAdaptiveDaemonServesEveryClientThePeersAndTheTimers) {
  expectServesEverything("adaptive");
}

// While the daemon spins it never asks a client to ring it: a client that
// sleeps costs its daemon no doorbell read, and rings it never.
TEST(IdleStrategy, ABusyDaemonIsNeverRung) {
  MeshOptions o;
  o.extra = "idle_strategy: busy\n";
  Cluster c({"alpha"}, o);
  ASSERT_TRUE(c.start());
  const Json before = statusJson(c.socket("alpha"))["loop"];
  exchange("alpha", c.socket("alpha"), IdleStrategy::sleep, IdleStrategy::sleep);
  const Json after = statusJson(c.socket("alpha"))["loop"];
  EXPECT_EQ(after.value("doorbell_reads", 0), before.value("doorbell_reads", 0)) << after.dump();
  EXPECT_EQ(after.value("sleeps", 0), 0) << after.dump();
  EXPECT_GT(after.value("spins", 0), before.value("spins", 0));
}

// A daemon that spins polls its completion queue itself and asks for
// completion events only before it sleeps — a busy one never: messages
// across the mesh, each confirmed before the next, make no completion
// event to read (over softrdma each is a write and a read of the channel).
TEST(IdleStrategy, ABusyDaemonTakesCompletionsWithoutCompletionEvents) {
  MeshOptions o;
  o.extra = "idle_strategy: busy\n";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  auto listener = Client::connect(c.socket("beta"));
  auto sender = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(listener.ok() && sender.ok());
  ASSERT_TRUE(listener->registerService("far").ok());
  auto taken = [&] {
    Message m;
    while (listener->tryReceive(m)) {
    }
  };
  const auto eventReads = [&] {
    return statusJson(c.socket("alpha"))["loop"].value("cq_event_reads", uint64_t{0});
  };
  const uint64_t before = eventReads();
  constexpr int kMessages = 100;
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(sender->send("beta", "far", "one at a time").ok());
    ASSERT_TRUE(sender->flush(5s).ok());
    Completion done;
    ASSERT_TRUE(test::waitFor(
        [&] {
          taken();
          return sender->pollCompletion(done);
        },
        10s))
        << i;
    ASSERT_TRUE(done.status.ok()) << done.status.toString();
  }
  // At most the event the CQ was armed for when the loop began to spin.
  EXPECT_LE(eventReads() - before, 2u) << kMessages << " messages, each sent and confirmed";
}

// An adaptive daemon sleeps when idle, and every client's message still
// wakes it: round trips with pauses longer than its spin between them.
TEST(IdleStrategy, AnAdaptiveDaemonSleepsAndIsWokenByEveryStrategy) {
  MeshOptions o;
  o.extra = "idle_strategy: adaptive\n";
  Cluster c({"alpha"}, o);
  ASSERT_TRUE(c.start());
  for (IdleStrategy s : {IdleStrategy::sleep, IdleStrategy::adaptive, IdleStrategy::busy}) {
    auto listener = connectWith(c.socket("alpha"), s);
    auto sender = connectWith(c.socket("alpha"), s);
    ASSERT_TRUE(listener.ok() && sender.ok());
    const std::string service = std::string("nap-") + toString(s);
    ASSERT_TRUE(listener->registerService(service).ok());
    for (int i = 0; i < 20; ++i) {
      // Idle until the daemon slept again (its count of sleeps grows).
      const uint64_t sleeps = statusJson(c.socket("alpha"))["loop"].value("sleeps", uint64_t{0});
      ASSERT_TRUE(test::waitFor(
          [&] {
            return statusJson(c.socket("alpha"))["loop"].value("sleeps", uint64_t{0}) > sleeps;
          },
          5s));
      ASSERT_TRUE(sender->send("alpha", service, "x").ok());
      ASSERT_TRUE(sender->flush(5s).ok());
      Message m;
      ASSERT_TRUE(listener->receive(m, 5s).ok()) << toString(s) << " " << i;
      Completion done;
      ASSERT_TRUE(sender->waitCompletion(done, 5s).ok()) << toString(s) << " " << i;
    }
  }
}

}  // namespace
}  // namespace rdmamsg::itest
