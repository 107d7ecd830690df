// Integration: connect on demand (connect: on_demand) and idle close
// (idle_timeout): peers dialed at their first message, idle connections
// closed by agreement without losing a message, dial failures that keep
// messages queued until message_timeout, and meshes mixing both modes.
#include <gtest/gtest.h>

#include <csignal>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

const std::string kOnDemand = "connect: on_demand\n";
const std::string kIdle300 = "connect: on_demand\nidle_timeout: 300ms\n";

std::span<const std::byte> bytesOf(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

uint64_t peerCount(const std::string& socket, const std::string& peer, const char* key) {
  auto s = statusOf(socket);
  if (!s) return UINT64_MAX;
  const Json* p = peerEntry(*s, peer);
  return p != nullptr ? p->value(key, uint64_t{0}) : UINT64_MAX;
}

bool peerIs(const Json& s, const std::string& peer, const std::string& state, uint64_t connects) {
  const Json* p = peerEntry(s, peer);
  return p != nullptr && p->value("state", "") == state &&
         p->value("connects", uint64_t{0}) == connects;
}

TEST(OnDemand, PeersAreDialedAtTheirFirstMessage) {
  MeshOptions o;
  o.extra = kOnDemand;
  Cluster c({"alpha", "beta", "gamma"}, o);
  ASSERT_TRUE(c.start());
  // Every daemon answers its socket (start() waited for that): nobody dialed.
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    auto s = statusOf(c.socket(n));
    ASSERT_TRUE(s) << n;
    for (const auto& p : (*s)["peers"]) {
      EXPECT_EQ(p.value("state", ""), "idle") << n << "\n" << s->dump(2);
      EXPECT_EQ(p.value("connect", ""), "on_demand");
      EXPECT_EQ(p.value("connects", -1), 0);
      EXPECT_EQ(p.value("dials", -1), 0);
    }
  }
  // A listener registers on beta: still no connection, over several ticks
  // (heartbeat_interval 200ms).
  Process listener;
  ASSERT_TRUE(startListener(listener, c, "beta", "inbox", 1, c.dir().file("inbox.out")));
  bool dialed = test::waitFor(
      [&] {
        for (const std::string n : {"alpha", "beta", "gamma"}) {
          auto s = statusOf(c.socket(n));
          if (!s) return true;
          for (const auto& p : (*s)["peers"])
            if (p.value("state", "") != "idle" || p.value("dials", 0) != 0) return true;
        }
        return false;
      },
      1000ms);
  EXPECT_FALSE(dialed) << "a peer was dialed with no message for it";

  // The first message dials beta and is delivered; gamma stays idle.
  auto sender = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(sender) << sender.status().toString();
  Status st = sender->sendAndWait("beta", "inbox", bytesOf("first"), 10s);
  EXPECT_TRUE(st.ok()) << st.toString();
  ASSERT_TRUE(listener.wait(10s).has_value());
  EXPECT_EQ(readFile(c.dir().file("inbox.out")).find("first") != std::string::npos, true);
  auto a = statusOf(c.socket("alpha"));
  ASSERT_TRUE(a);
  EXPECT_TRUE(peerIs(*a, "beta", "established", 1)) << a->dump(2);
  EXPECT_TRUE(peerIs(*a, "gamma", "idle", 0)) << a->dump(2);
  EXPECT_TRUE(waitForStatus(c.socket("beta"), [](const Json& s) {
    return peerIs(s, "alpha", "established", 1) && peerIs(s, "gamma", "idle", 0);
  }));
}

TEST(OnDemand, IdleConnectionsCloseOnBothEndsAndReopenForTheNextMessage) {
  MeshOptions o;
  o.extra = kIdle300;
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  auto listener = Taker::start(c.socket("beta"), "inbox");
  ASSERT_TRUE(listener);
  auto sender = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(sender);
  ASSERT_TRUE(sender->sendAndWait("beta", "inbox", bytesOf("one"), 10s).ok());
  Message m;
  ASSERT_TRUE(listener->receive(m, 10s).ok());
  EXPECT_EQ(m.text(), "one");

  // No traffic: both ends close the connection by agreement and go idle.
  const auto idleClosed = [](const std::string& peer) {
    return [peer](const Json& s) {
      const Json* p = peerEntry(s, peer);
      return p != nullptr && p->value("state", "") == "idle" && p->value("idle_closes", 0) == 1 &&
             p->value("last_error", "").find("idle-closed") != std::string::npos;
    };
  };
  EXPECT_TRUE(waitForStatus(c.socket("alpha"), idleClosed("beta"), 5s))
      << statusOf(c.socket("alpha"))->dump(2);
  EXPECT_TRUE(waitForStatus(c.socket("beta"), idleClosed("alpha"), 5s))
      << statusOf(c.socket("beta"))->dump(2);
  EXPECT_TRUE(c["alpha"].waitLog("peer beta: idle connection closed"));
  for (const std::string n : {"alpha", "beta"}) {
    auto s = statusOf(c.socket(n));
    ASSERT_TRUE(s);
    EXPECT_EQ((*s)["peers"][0].value("failed", -1), 0) << n;
  }

  // The next message dials again and is delivered on a new connection.
  ASSERT_TRUE(sender->sendAndWait("beta", "inbox", bytesOf("two"), 10s).ok());
  ASSERT_TRUE(listener->receive(m, 10s).ok());
  EXPECT_EQ(m.text(), "two");
  EXPECT_EQ(peerCount(c.socket("alpha"), "beta", "connects"), 2u);
  // ...and goes idle again.
  EXPECT_TRUE(waitForStatus(
      c.socket("beta"),
      [](const Json& s) {
        const Json* p = peerEntry(s, "alpha");
        return p != nullptr && p->value("state", "") == "idle" && p->value("idle_closes", 0) == 2;
      },
      5s));
}

// Two clients stream to each other's node in bursts, with pauses around the
// idle timeout: requests to close cross messages, each other and the dials
// that follow. Every message is delivered, in order, exactly once.
TEST(OnDemand, NoMessageIsLostAcrossIdleCloses) {
  MeshOptions o;
  o.extra = "connect: on_demand\nidle_timeout: 150ms\n";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  std::map<std::string, Client> clients;
  std::map<std::string, std::unique_ptr<Taker>> inboxes;  // listeners that keep up
  for (const std::string n : {"alpha", "beta"}) {
    auto cl = Client::connect(c.socket(n));
    ASSERT_TRUE(cl) << cl.status().toString();
    clients.emplace(n, std::move(*cl));
    inboxes[n] = Taker::start(c.socket(n), "inbox");
    ASSERT_TRUE(inboxes[n]);
  }
  const std::map<std::string, std::string> other = {{"alpha", "beta"}, {"beta", "alpha"}};
  std::map<std::string, int> sent, okCount, failCount;
  std::map<std::string, std::vector<std::string>> errors;
  // Pauses from well under to well over the idle timeout (with the tick,
  // a close starts 150..225 ms after the last message).
  const std::vector<int> pauses = {100, 140, 150, 160, 175, 190, 200, 215, 230, 260, 320, 400};
  constexpr int kBurst = 20;
  for (size_t round = 0; round < 2 * pauses.size(); round++) {
    for (const std::string from : {"alpha", "beta"}) {
      if (from == "beta" && round % 3 == 2) continue;  // sometimes only one direction
      for (int i = 0; i < kBurst; i++) {
        std::string text = from + "-" + std::to_string(sent[from]++);
        auto id = clients.at(from).send(other.at(from), "inbox", bytesOf(text));
        ASSERT_TRUE(id) << id.status().toString();
      }
      ASSERT_TRUE(clients.at(from).flush(10s).ok());
    }
    // The pause is the workload (traffic stops for this long), not a wait
    // for anything to happen.
    std::this_thread::sleep_for(std::chrono::milliseconds(pauses[round % pauses.size()]));
    for (auto& [n, cl] : clients) {
      Completion done;
      while (cl.pollCompletion(done)) {
        if (done.status.ok())
          okCount[n]++;
        else
          failCount[n]++, errors[n].push_back(done.status.toString());
      }
    }
  }
  // Every message gets its outcome, and every one is a delivery.
  for (auto& [n, cl] : clients) {
    Completion done;
    while (okCount[n] + failCount[n] < sent[n]) {
      ASSERT_TRUE(cl.waitCompletion(done, 15s).ok())
          << n << ": " << okCount[n] + failCount[n] << " outcomes of " << sent[n];
      if (done.status.ok())
        okCount[n]++;
      else
        failCount[n]++, errors[n].push_back(done.status.toString());
    }
    EXPECT_EQ(failCount[n], 0) << n << ": " << testing::PrintToString(errors[n]);
  }
  // Each listener has every message of the other node once, in order.
  for (const std::string to : {"alpha", "beta"}) {
    const std::string from = other.at(to);
    Message m;
    for (int i = 0; i < sent[from]; i++) {
      ASSERT_TRUE(inboxes.at(to)->receive(m, 10s).ok())
          << to << " got " << i << " of " << sent[from];
      ASSERT_EQ(m.text(), from + "-" + std::to_string(i));
    }
    EXPECT_FALSE(inboxes.at(to)->receive(m, 0ms).ok()) << "a message arrived twice";
  }
  // The connection was closed for idleness and reopened along the way.
  uint64_t closes = peerCount(c.socket("alpha"), "beta", "idle_closes");
  uint64_t connects = peerCount(c.socket("alpha"), "beta", "connects");
  EXPECT_GE(closes, 2u);
  EXPECT_NE(closes, UINT64_MAX);
  EXPECT_GE(connects, closes);
  EXPECT_EQ(peerCount(c.socket("alpha"), "beta", "failed"), 0u);
  EXPECT_EQ(peerCount(c.socket("beta"), "alpha", "failed"), 0u);
}

// The same under pressure: an idle timeout of 2ms closes the connection in
// nearly every pause of a paced stream each way, so requests to close race
// messages already on their way. Every message is delivered, in order.
TEST(OnDemand, NoMessageIsLostWhenIdleClosesRaceTraffic) {
  MeshOptions o;
  o.extra = "connect: on_demand\nidle_timeout: 2ms\n";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  const std::map<std::string, std::string> other = {{"alpha", "beta"}, {"beta", "alpha"}};
  constexpr int kMessages = 600;
  // Listeners that keep up (a listener that lags holds messages, which keeps
  // the connection open), each in its own thread with its own client.
  std::map<std::string, std::vector<std::string>> got;
  std::vector<std::thread> listeners;
  for (const std::string n : {"alpha", "beta"}) {
    auto cl = Client::connect(c.socket(n));
    ASSERT_TRUE(cl) << cl.status().toString();
    ASSERT_TRUE(cl->registerService("inbox").ok());
    listeners.emplace_back([cl = std::move(*cl), &out = got[n]]() mutable {
      Message m;
      while (cl.receive(m, 5s).ok())
        out.emplace_back(m.text());
    });
  }
  std::map<std::string, Client> senders;
  for (const std::string n : {"alpha", "beta"}) {
    auto cl = Client::connect(c.socket(n));
    ASSERT_TRUE(cl) << cl.status().toString();
    ASSERT_TRUE(cl->registerService("outbox").ok());
    senders.emplace(n, std::move(*cl));
  }
  std::map<std::string, int> sent;
  // At least kMessages rounds, and more (up to three times as many) until
  // the race happened often enough: how many idle closes the pacing makes
  // depends on the machine's speed (fewer under ASan).
  auto enoughCloses = [&] {
    const uint64_t n = peerCount(c.socket("alpha"), "beta", "idle_closes");
    return n != UINT64_MAX && n >= 10;
  };
  for (int i = 0; i < 3 * kMessages; i++) {
    if (i >= kMessages && i % 50 == 0 && enoughCloses()) break;
    for (const std::string from : {"alpha", "beta"}) {
      if ((i + (from == "beta")) % 4 == 0) continue;  // the two streams drift apart
      std::string text = from + "-" + std::to_string(sent[from]++);
      ASSERT_TRUE(senders.at(from).send(other.at(from), "inbox", bytesOf(text)));
      ASSERT_TRUE(senders.at(from).flush(10s).ok());
    }
    // Pacing (the workload): pauses of 0..6 ms around the idle timeout.
    std::this_thread::sleep_for(std::chrono::microseconds((i * 7919) % 6000));
  }
  for (auto& [n, cl] : senders) {
    Completion done;
    std::vector<std::string> errors;
    for (int outcomes = 0; outcomes < sent[n]; outcomes++) {
      ASSERT_TRUE(cl.waitCompletion(done, 15s).ok()) << n << ": " << outcomes << " of " << sent[n];
      if (!done.status.ok()) errors.push_back(done.status.toString());
    }
    EXPECT_TRUE(errors.empty()) << n << ": " << errors.size() << " failed, e.g. "
                                << (errors.empty() ? "" : errors[0]);
  }
  for (auto& t : listeners)
    t.join();  // each stops 5 s after its last message
  for (const std::string to : {"alpha", "beta"}) {
    const std::string from = other.at(to);
    ASSERT_EQ(got[to].size(), static_cast<size_t>(sent[from])) << to;
    for (int i = 0; i < sent[from]; i++)
      ASSERT_EQ(got[to][i], from + "-" + std::to_string(i));
  }
  const uint64_t closes = peerCount(c.socket("alpha"), "beta", "idle_closes");
  EXPECT_GE(closes, 10u);
  EXPECT_NE(closes, UINT64_MAX);
}

// One node connects on demand with an idle timeout, the other always: the
// always node dials at start and keeps the connection (it refuses to close
// it for idleness); messages flow both ways.
TEST(OnDemand, MixedWithAlwaysNodes) {
  MeshOptions o;
  o.nodeExtra["alpha"] = kIdle300;
  Cluster c({"alpha", "beta", "gamma"}, o);
  o.nodeExtra["gamma"] = kOnDemand;
  Cluster d({"alpha", "gamma"}, o);  // both on demand: only the pair below
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(d.start());
  // beta (always) dials both; gamma (always in c) dials alpha too.
  ASSERT_TRUE(waitForStatus(c.socket("alpha"), allPeersEstablished));
  auto a = statusOf(c.socket("alpha"));
  ASSERT_TRUE(a);
  EXPECT_EQ(peerEntry(*a, "beta")->value("connect", ""), "on_demand");
  auto b = statusOf(c.socket("beta"));
  ASSERT_TRUE(b);
  EXPECT_EQ(peerEntry(*b, "alpha")->value("connect", ""), "always");

  std::map<std::string, Client> clients;
  std::map<std::string, std::unique_ptr<Taker>> inboxes;
  for (const std::string n : {"alpha", "beta"}) {
    auto cl = Client::connect(c.socket(n));
    ASSERT_TRUE(cl);
    clients.emplace(n, std::move(*cl));
    inboxes[n] = Taker::start(c.socket(n), "inbox");
    ASSERT_TRUE(inboxes[n]);
  }
  ASSERT_TRUE(clients.at("alpha").sendAndWait("beta", "inbox", bytesOf("a->b"), 10s).ok());
  ASSERT_TRUE(clients.at("beta").sendAndWait("alpha", "inbox", bytesOf("b->a"), 10s).ok());
  Message m;
  ASSERT_TRUE(inboxes.at("beta")->receive(m, 10s).ok());
  EXPECT_EQ(m.text(), "a->b");
  ASSERT_TRUE(inboxes.at("alpha")->receive(m, 10s).ok());
  EXPECT_EQ(m.text(), "b->a");

  // alpha asks to close its idle connections every 300ms; beta and gamma
  // (always) refuse: over several idle timeouts nothing closes.
  bool closed = test::waitFor(
      [&] {
        auto s = statusOf(c.socket("alpha"));
        if (!s) return true;
        for (const auto& p : (*s)["peers"])
          if (p.value("state", "") != "established" || p.value("connects", 0) != 1 ||
              p.value("idle_closes", 0) != 0)
            return true;
        return false;
      },
      1500ms);
  EXPECT_FALSE(closed) << statusOf(c.socket("alpha"))->dump(2);

  // Both on demand (mesh d): nobody dials until a message, then it is
  // delivered and the connection closes for idleness.
  auto da = statusOf(d.socket("alpha"));
  ASSERT_TRUE(da);
  EXPECT_TRUE(peerIs(*da, "gamma", "idle", 0)) << da->dump(2);
  auto listener = Taker::start(d.socket("alpha"), "inbox");
  ASSERT_TRUE(listener);
  auto sender = Client::connect(d.socket("gamma"));
  ASSERT_TRUE(sender);
  ASSERT_TRUE(sender->sendAndWait("alpha", "inbox", bytesOf("g->a"), 10s).ok());
  ASSERT_TRUE(listener->receive(m, 10s).ok());
  EXPECT_EQ(m.text(), "g->a");
  EXPECT_TRUE(waitForStatus(
      d.socket("gamma"),
      [](const Json& s) {
        const Json* p = peerEntry(s, "alpha");
        return p != nullptr && p->value("state", "") == "idle" && p->value("idle_closes", 0) == 1;
      },
      5s));
}

// A dial on demand that fails keeps the message queued while it retries
// (backoff): the peer coming up in time delivers it; one that does not
// comes up fails it with timeout at message_timeout, never at once.
TEST(OnDemand, FailedDialsKeepMessagesQueuedUntilMessageTimeout) {
  MeshOptions o;
  o.extra = kOnDemand;
  o.messageTimeout = "2s";
  o.reconnectBackoffMax = "200ms";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c["beta"].stop().has_value());
  auto sender = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(sender);

  // beta is down: the message waits while alpha dials and dials again.
  auto first = sender->send("beta", "inbox", bytesOf("waits"));
  ASSERT_TRUE(first);
  ASSERT_TRUE(sender->flush(5s).ok());
  EXPECT_TRUE(waitForStatus(c.socket("alpha"), [](const Json& s) {
    const Json* p = peerEntry(s, "beta");
    return p != nullptr && p->value("dials", 0) >= 2 && p->value("queued_bytes", 0) > 0;
  })) << statusOf(c.socket("alpha"))->dump(2);
  Completion done;
  EXPECT_FALSE(sender->pollCompletion(done)) << done.status.toString();
  ASSERT_TRUE(c["beta"].restart());
  auto listener = Taker::start(c.socket("beta"), "inbox");
  ASSERT_TRUE(listener);
  // The message was sent before the listener registered: it may have been
  // answered unknown_service if the connection came first. Either way it
  // has an outcome, and it is not peer_unreachable.
  ASSERT_TRUE(sender->waitCompletion(done, 5s).ok());
  EXPECT_EQ(done.msgId, *first);
  EXPECT_NE(done.status.code(), Errc::peer_unreachable) << done.status.toString();
  EXPECT_NE(done.status.code(), Errc::timeout) << done.status.toString();
  Status st = sender->sendAndWait("beta", "inbox", bytesOf("delivered"), 10s);
  EXPECT_TRUE(st.ok()) << st.toString();
  Message m;
  while (listener->receive(m, 5s).ok() && m.text() != "delivered") {
  }
  EXPECT_EQ(m.text(), "delivered");

  // beta down for good: the next message fails with timeout at message_timeout.
  ASSERT_TRUE(c["beta"].stop().has_value());
  ASSERT_TRUE(waitForStatus(c.socket("alpha"),
                            [](const Json& s) { return peerState(s, "beta") != "established"; }));
  const auto start = std::chrono::steady_clock::now();
  st = sender->sendAndWait("beta", "inbox", bytesOf("lost peer"), 10s);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(st.code(), Errc::timeout) << st.toString();
  EXPECT_NE(st.toString().find("no connection to beta"), std::string::npos) << st.toString();
  EXPECT_GE(took, 1500ms);
  // Nothing left to send: alpha stops dialing and beta is idle.
  EXPECT_TRUE(waitForStatus(c.socket("alpha"),
                            [](const Json& s) { return peerState(s, "beta") == "idle"; }));
}

// A reload switches the mode: to always, idle peers are dialed at once; to
// on_demand with an idle timeout, connections that carry nothing close.
TEST(OnDemand, AReloadChangesTheMode) {
  MeshOptions o;
  o.extra = kOnDemand;
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  auto s = statusOf(c.socket("alpha"));
  ASSERT_TRUE(s);
  EXPECT_TRUE(peerIs(*s, "beta", "idle", 0)) << s->dump(2);
  const auto reload = [&](const std::string& node, const std::string& from, const std::string& to,
                          uint64_t generation) {
    std::string yaml = readFile(c.configPath(node));
    const size_t at = yaml.find(from);
    if (at == std::string::npos) return false;
    yaml.replace(at, from.size(), to);
    writeFile(c.configPath(node), yaml);
    c[node].signal(SIGHUP);
    return waitForStatus(c.socket(node), [&](const Json& st) {
      return st.contains("config") && st["config"].value("generation", 0u) == generation;
    });
  };
  ASSERT_TRUE(reload("alpha", "connect: on_demand\n", "connect: always\n", 2));
  EXPECT_TRUE(waitForStatus(c.socket("alpha"), [](const Json& st) {
    return peerIs(st, "beta", "established", 1) &&
           peerEntry(st, "beta")->value("connect", "") == "always";
  })) << statusOf(c.socket("alpha"))->dump(2);
  EXPECT_TRUE(c["alpha"].waitLog("reload: connect: on_demand -> always"));

  // Back to on_demand, now with an idle timeout: the idle connection closes
  // and stays closed.
  ASSERT_TRUE(reload("alpha", "connect: always\n", "connect: on_demand\nidle_timeout: 200ms\n", 3));
  EXPECT_TRUE(waitForStatus(c.socket("alpha"), [](const Json& st) {
    const Json* p = peerEntry(st, "beta");
    return p != nullptr && p->value("state", "") == "idle" && p->value("idle_closes", 0) == 1;
  })) << statusOf(c.socket("alpha"))->dump(2);
}

}  // namespace
}  // namespace rdmamsg::itest
