// Integration: two daemons on two hosts — network namespaces made by the test
// and joined by a veth pair (198.51.100.0/24) — whose link goes down and up
// for real. A daemon started before its network is up connects once it is;
// a link cut mid-stream loses nothing silently and heals by itself; a new
// hardware address under a daemon's address moves its listener and redials.
// Needs root (ip netns); skipped otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>

#include "harness.h"
#include "netns_hosts.h"
#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

struct Mesh2 {
  TempDir dir;
  TwoHosts hosts;
  std::unique_ptr<DaemonProcess> d[2];
  const char* names[2] = {"alpha", "beta"};
  uint16_t port = 7471;
  // SOFTRDMA_DEVICES=<its veth>: each daemon's device is its host's
  // interface, as rxe over it (not one device for every address).
  bool devicePerInterface = false;

  std::string socket(int i) const { return dir.file(std::string(names[i]) + ".sock"); }

  void writeConfigs() {
    for (int i = 0; i < 2; i++) {
      std::string y = "node: " + std::string(names[i]) + "\nlisten: " + TwoHosts::ip(i) + ":" +
                      std::to_string(port) + "\nsocket: " + socket(i) + "\npeers:\n";
      for (int j = 0; j < 2; j++)
        y += "  - name: " + std::string(names[j]) + "\n    address: " + TwoHosts::ip(j) + ":" +
             std::to_string(port) + "\n";
      y += "heartbeat_interval: 200ms\nheartbeat_timeout: 1s\nreconnect_backoff_min: 50ms\n"
           "reconnect_backoff_max: 1s\nconnect_timeout: 2s\nmessage_timeout: 10s\n";
      writeFile(dir.file(std::string(names[i]) + ".yaml"), y);
    }
  }
  bool start() {
    writeConfigs();
    for (int i = 0; i < 2; i++) {
      d[i] = std::make_unique<DaemonProcess>(names[i], dir.file(std::string(names[i]) + ".yaml"),
                                             socket(i), dir.file(std::string(names[i]) + ".log"));
      std::vector<std::string> wrapper = {ipBinary(), "netns", "exec", hosts.ns(i)};
      if (devicePerInterface)
        wrapper.insert(wrapper.end(), {"/usr/bin/env", "SOFTRDMA_DEVICES=" + hosts.veth(i)});
      d[i]->setWrapper(wrapper);
      if (!d[i]->start(10s)) return false;
    }
    return true;
  }
  bool connected(std::chrono::milliseconds timeout) {
    for (int i = 0; i < 2; i++)
      if (!waitForStatus(socket(i), allPeersEstablished, timeout)) return false;
    return true;
  }
};

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s));
}

TEST(Netns, DaemonsStartedBeforeTheirNetworkConnectOnceItIsUp) {
  if (!canMakeNamespaces()) GTEST_SKIP() << "needs root and ip netns";
  Mesh2 m;
  ASSERT_TRUE(m.hosts.create());
  ASSERT_TRUE(m.start());
  // Both keep trying while the link is down: several failed dials each.
  for (int i = 0; i < 2; i++) {
    const std::string other = m.names[1 - i];
    EXPECT_TRUE(waitForStatus(
        m.socket(i),
        [&](const Json& s) {
          const Json* p = peerEntry(s, other);
          return p != nullptr && p->value("dials", 0) >= 3;
        },
        10s))
        << m.names[i] << " stopped dialing while the link was down\n"
        << m.d[i]->log();
    auto s = statusOf(m.socket(i));
    ASSERT_TRUE(s);
    EXPECT_NE(peerState(*s, other), "established");
  }
  ASSERT_TRUE(m.hosts.setLink(true));
  auto t0 = std::chrono::steady_clock::now();
  // reconnect_backoff_max is 1 s: a dial is due within it, plus the connect itself.
  EXPECT_TRUE(m.connected(5s)) << "not connected 5 s after the link came up\n"
                               << m.d[0]->log() << m.d[1]->log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  auto onBeta = Taker::start(m.socket(1), "svc");
  auto onAlpha = Client::connect(m.socket(0));
  ASSERT_TRUE(onBeta && onAlpha);
  EXPECT_TRUE(onAlpha->sendAndWait("beta", "svc", bytes("over the veth"), 5s).ok());
  Message msg;
  ASSERT_TRUE(onBeta->receive(msg, 5s).ok());
  EXPECT_EQ(msg.text(), "over the veth");
}

// Messages streamed while the link is cut and healed: every message gets a
// completion, every confirmed one was received exactly once, and traffic
// resumes on its own after the link heals.
TEST(Netns, LinkCutAndHealedMidStreamLosesNothingSilently) {
  if (!canMakeNamespaces()) GTEST_SKIP() << "needs root and ip netns";
  Mesh2 m;
  ASSERT_TRUE(m.hosts.create());
  ASSERT_TRUE(m.hosts.setLink(true));
  ASSERT_TRUE(m.start());
  ASSERT_TRUE(m.connected(10s));
  auto listener = Client::connect(m.socket(1));
  auto sender = Client::connect(m.socket(0));
  ASSERT_TRUE(listener && sender);
  ASSERT_TRUE(listener->registerService("svc").ok());

  std::map<uint64_t, std::string> sent;  // msgId → text
  std::map<uint64_t, Status> outcome;
  std::multiset<std::string> received;
  auto pump = [&] {
    Completion comp;
    while (sender->pollCompletion(comp))
      outcome[comp.msgId] = comp.status;
    Message msg;
    while (listener->tryReceive(msg))
      received.insert(std::string(msg.text()));
    (void)sender->processIo();
    (void)listener->processIo();
  };
  int next = 0;
  auto sendSome = [&](int n) {
    for (int i = 0; i < n; i++) {
      std::string text = "m" + std::to_string(++next);
      auto id = sender->send("beta", "svc", text);
      ASSERT_TRUE(id) << id.status().toString();
      sent[*id] = text;
    }
    (void)sender->flush(5s);
  };
  auto okCount = [&] {
    size_t n = 0;
    for (const auto& [id, st] : outcome)
      n += st.ok() ? 1 : 0;
    return n;
  };

  sendSome(200);
  ASSERT_TRUE(test::waitFor([&] { return pump(), outcome.size() == sent.size(); }, 10s));
  ASSERT_EQ(okCount(), sent.size());

  // Cut the link while streaming; heartbeats (1 s) detect it.
  sendSome(200);
  ASSERT_TRUE(m.hosts.setLink(false));
  sendSome(200);
  EXPECT_TRUE(test::waitFor([&] { return pump(), outcome.size() == sent.size(); }, 10s))
      << "messages without an outcome after the cut: " << sent.size() - outcome.size();
  for (const auto& [id, st] : outcome)
    if (!st.ok()) {
      EXPECT_EQ(st.code(), Errc::peer_unreachable) << st.toString();
    }

  // Heal: the daemons reconnect by themselves and the stream goes on.
  ASSERT_TRUE(m.hosts.setLink(true));
  ASSERT_TRUE(m.connected(10s)) << m.d[0]->log();
  size_t okBefore = okCount();
  sendSome(200);
  ASSERT_TRUE(test::waitFor([&] { return pump(), outcome.size() == sent.size(); }, 10s));
  EXPECT_EQ(okCount(), okBefore + 200) << "messages after the heal failed";
  // Let late deliveries arrive, then compare: every confirmed message was
  // received, none twice, nothing that was not sent.
  test::waitFor([&] { return pump(), received.size() >= okCount(); }, 5s);
  std::set<std::string> texts;
  for (const auto& [id, t] : sent)
    texts.insert(t);
  for (const auto& t : received) {
    EXPECT_EQ(received.count(t), 1u) << t << " received twice";
    EXPECT_TRUE(texts.count(t)) << t << " was never sent";
  }
  for (const auto& [id, st] : outcome)
    if (st.ok()) {
      EXPECT_EQ(received.count(sent[id]), 1u) << sent[id] << " confirmed, not received";
    }
}

// A new hardware address under a daemon's address (what a bond's failover
// does): rdma_cm raises ADDR_CHANGE on the ids over that interface. The
// daemon listens again on a new id and closes its connection, which is
// dialed again; messages flow both ways afterwards.
TEST(Netns, AnAddressChangeMovesTheListenerAndRedialsTheConnection) {
  if (!canMakeNamespaces()) GTEST_SKIP() << "needs root and ip netns";
  Mesh2 m;
  m.devicePerInterface = true;
  ASSERT_TRUE(m.hosts.create());
  ASSERT_TRUE(m.hosts.setLink(true));
  // Beta announces its new hardware address (gratuitous ARP), as a bond does.
  ASSERT_TRUE(sh(ipBinary() + " netns exec " + m.hosts.ns(1) +
                 " sh -c 'echo 1 > /proc/sys/net/ipv4/conf/" + m.hosts.veth(1) + "/arp_notify'"));
  ASSERT_TRUE(m.start());
  ASSERT_TRUE(m.connected(10s));
  auto connects = [&](int i) {
    auto s = statusOf(m.socket(i));
    const Json* p = s ? peerEntry(*s, m.names[1 - i]) : nullptr;
    return p != nullptr ? p->value("connects", uint64_t{0}) : 0;
  };
  const uint64_t before = connects(1);
  ASSERT_GT(before, 0u);

  ASSERT_TRUE(
      sh("ip -n " + m.hosts.ns(1) + " link set " + m.hosts.veth(1) + " address 02:00:5e:00:53:42"));
  EXPECT_TRUE(m.d[1]->waitLog("(ADDR_CHANGE): listening again", 5s)) << m.d[1]->log();
  EXPECT_TRUE(m.d[1]->waitLog(
      "listening for peers on " + TwoHosts::ip(1) + ":" + std::to_string(m.port) + " again", 5s))
      << m.d[1]->log();
  EXPECT_TRUE(m.d[1]->waitLog("connection lost: the local address's device changed", 5s))
      << m.d[1]->log();
  ASSERT_TRUE(test::waitFor([&] { return connects(1) > before; }, 10s)) << m.d[1]->log();
  ASSERT_TRUE(m.connected(10s)) << m.d[0]->log() << m.d[1]->log();
  auto status = statusOf(m.socket(1));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->value("listening", false), true) << status->dump();

  for (int from = 0; from < 2; from++) {
    auto listener = Taker::start(m.socket(1 - from), "svc");
    auto sender = Client::connect(m.socket(from));
    ASSERT_TRUE(listener && sender);
    const std::string text = std::string("after the change, from ") + m.names[from];
    EXPECT_TRUE(sender->sendAndWait(m.names[1 - from], "svc", bytes(text), 5s).ok()) << text;
    Message msg;
    ASSERT_TRUE(listener->receive(msg, 5s).ok()) << text;
    EXPECT_EQ(msg.text(), text);
  }
}

}  // namespace
}  // namespace rdmamsg::itest
