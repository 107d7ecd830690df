// Integration: daemons find each other and form a full mesh, one connection
// per pair, and reject daemons that are not in their configuration.
#include <gtest/gtest.h>

#include <set>

#include "harness.h"
#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

TEST(Mesh, ThreeDaemonsFormAFullMeshWithOneConnectionPerPair) {
  Cluster c({"alpha", "beta", "gamma"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));

  std::map<std::string, Json> st;
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    auto s = statusOf(c.socket(n));
    ASSERT_TRUE(s) << n;
    st[n] = *s;
    EXPECT_EQ(s->value("node", ""), n);
    ASSERT_EQ((*s)["peers"].size(), 2u) << s->dump(2);
  }
  // Both ends dialled, yet each pair came up once and stays up: every peer
  // has connected exactly once, and both ends agree on who is on the other end.
  for (const auto& [self, s] : st) {
    for (const auto& p : s["peers"]) {
      std::string peer = p.value("name", "");
      EXPECT_EQ(p.value("state", ""), "established") << self << " -> " << peer;
      EXPECT_EQ(p.value("connects", 0), 1) << self << " -> " << peer << "\n" << s.dump(2);
      EXPECT_EQ(p.value("incarnation", ""), st[peer].value("incarnation", ""))
          << self << " sees " << peer << " with another incarnation";
    }
  }
  // Stays that way: no reconnect churn over a few heartbeat periods.
  bool churn = test::waitFor(
      [&] {
        for (const std::string n : {"alpha", "beta", "gamma"}) {
          auto s = statusOf(c.socket(n));
          if (!s || !allPeersEstablished(*s)) return true;
          for (const auto& p : (*s)["peers"])
            if (p.value("connects", 0) != 1) return true;
        }
        return false;
      },
      1500ms);
  EXPECT_FALSE(churn) << "a connection was lost or replaced in a stable mesh";
}

// What the buffers cost is said at start and shown in status: per peer, for
// all configured peers, and what the devices have registered now.
TEST(Mesh, RegisteredMemoryIsPrintedAtStartAndShownInStatus) {
  Cluster c({"alpha", "beta", "gamma"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  auto s = statusOf(c.socket("alpha"));
  ASSERT_TRUE(s);
  const Json& r = (*s)["registered_memory"];
  // The defaults: 256KiB buffers; a peer is granted 3 of the shared receive
  // queue's; 32 send buffers and 32 to lend, per device.
  constexpr uint64_t kMiB = 1024 * 1024;
  EXPECT_EQ(r.value("receive_queue", ""), "shared") << r.dump();
  EXPECT_EQ(r.value("per_peer_bytes", uint64_t{0}), 3 * kMiB / 4) << r.dump();
  EXPECT_EQ(r.value("send_pool_bytes", uint64_t{0}), 8 * kMiB) << r.dump();
  EXPECT_EQ(r.value("lendable_bytes", uint64_t{0}), 8 * kMiB) << r.dump();
  EXPECT_EQ(r.value("all_peers_bytes", uint64_t{0}), 16 * kMiB + 2 * 3 * kMiB / 4) << r.dump();
  EXPECT_EQ(r.value("limit_bytes", uint64_t{0}), 1024 * kMiB) << r.dump();
  uint64_t devices = 0;
  for (const auto& d : (*s)["devices"])
    devices += d.value("registered_bytes", uint64_t{0});
  EXPECT_EQ(r.value("bytes", uint64_t{0}), devices);
  // The send pool, and the receive buffers in chunks of 16: both peers'
  // grants (6) and the 32 to lend, 48 buffers: 20MiB, not 2 x 8MiB per peer
  // plus the pools.
  EXPECT_EQ(devices, 8 * kMiB + 48 * kMiB / 4) << s->dump();
  EXPECT_TRUE(c["alpha"].waitLog(
      "registered memory: 768KiB per connected peer (3 shared receive buffers granted x "
      "buffer_size 256KiB), 8MiB of send buffers (send_buffers 32), up to 8MiB lent to busy "
      "peers (shared_receive_buffers 32); 17920KiB with all 2 peers connected, within "
      "registered_memory_limit 1GiB"))
      << c["alpha"].log();
}

TEST(Mesh, MessagesFlowBetweenEveryPair) {
  Cluster c({"alpha", "beta", "gamma"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  std::map<std::string, Client> clients;
  std::map<std::string, std::unique_ptr<Taker>> inboxes;
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    auto cl = Client::connect(c.socket(n));
    ASSERT_TRUE(cl) << cl.status().toString();
    ASSERT_TRUE(cl->registerService("outbox").ok());
    clients.emplace(n, std::move(*cl));
    inboxes[n] = Taker::start(c.socket(n), "inbox");
    ASSERT_TRUE(inboxes[n]);
  }
  for (auto& [from, client] : clients) {
    for (const std::string to : {"alpha", "beta", "gamma"}) {
      std::string text = from + "->" + to;
      Status st =
          client.sendAndWait(to, "inbox", std::as_bytes(std::span(text.data(), text.size())), 10s);
      EXPECT_TRUE(st.ok()) << text << ": " << st.toString();
      Message m;
      ASSERT_TRUE(inboxes.at(to)->receive(m, 10s).ok()) << text;
      EXPECT_EQ(m.text(), text);
      EXPECT_EQ(m.srcNode, from);
      EXPECT_EQ(m.srcService, "outbox");
      EXPECT_EQ(m.service, "inbox");
    }
  }
}

TEST(Mesh, PeerNotInTheConfigurationIsRejected) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));

  // mallory lists alpha and itself; alpha has never heard of mallory.
  std::string cfg = c.dir().file("mallory.yaml");
  uint16_t ownPort = pickPort({"127.0.0.3"});
  ASSERT_NE(ownPort, 0);
  writeFile(cfg, "peers:\n  - name: alpha\n    address: " + c.address("alpha") + ":" +
                     std::to_string(c.port()) + "\n  - name: mallory\n    address: 127.0.0.3:" +
                     std::to_string(ownPort) + "\nsocket: " + c.dir().file("mallory.sock") +
                     "\nheartbeat_interval: 200ms\nheartbeat_timeout: 1s\n"
                     "reconnect_backoff_min: 50ms\nreconnect_backoff_max: 200ms\n");
  DaemonProcess mallory("mallory", cfg, c.dir().file("mallory.sock"), c.dir().file("mallory.log"));
  ASSERT_TRUE(mallory.start());

  // alpha turns it away, saying why...
  EXPECT_TRUE(c["alpha"].waitLog("unknown peer", 10s));
  // ...and mallory, attempt after attempt, is told why (its status says so)
  // and never gets a connection.
  std::set<std::string> errors;
  bool established = false;
  test::waitFor(
      [&] {
        if (auto s = statusOf(mallory.socket())) {
          established = established || peerState(*s, "alpha") == "established";
          if (const Json* p = peerEntry(*s, "alpha")) errors.insert(p->value("last_error", ""));
        }
        return false;
      },
      2s);
  EXPECT_FALSE(established);
  errors.erase("not connected yet");
  EXPECT_FALSE(errors.empty());
  for (const auto& e : errors)
    EXPECT_NE(e.find("unknown peer"), std::string::npos)
        << "mallory's status hides why alpha refused it: last_error \"" << e << "\"";
  auto a = statusOf(c.socket("alpha"));
  ASSERT_TRUE(a);
  EXPECT_EQ(peerEntry(*a, "mallory"), nullptr);
  EXPECT_EQ(a->at("peers").size(), 1u);
  EXPECT_EQ(a->at("counters").value("failures", 0), 0);
  EXPECT_EQ(c["alpha"].log().find("peer mallory"), std::string::npos);
  // ...and keeps serving: beta's connection was untouched, messages flow.
  EXPECT_EQ(peerState(*a, "beta"), "established");
  EXPECT_EQ(peerEntry(*a, "beta")->value("connects", 0), 1);
  auto listener = Taker::start(c.socket("beta"), "svc");
  ASSERT_TRUE(listener);
  auto sender = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(sender);
  std::string text = "still serving";
  EXPECT_TRUE(
      sender->sendAndWait("beta", "svc", std::as_bytes(std::span(text.data(), text.size())), 10s)
          .ok());
  Message msg;
  ASSERT_TRUE(listener->receive(msg, 10s).ok());
  EXPECT_EQ(msg.text(), text);
  EXPECT_TRUE(mallory.running());
  EXPECT_TRUE(c["alpha"].running());
}

}  // namespace
}  // namespace rdmamsg::itest
