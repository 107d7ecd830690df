// Integration: daemons on hosts joined through a switch (netns_hosts.h,
// SwitchedHosts: one bridge per rail), so that one host's port can go down
// while the other hosts' ports stay up. The host whose port went down sees
// it (its device's port, its connections closed); its peers see nothing
// but what it does next. A peer with one rail beside peers with two keeps
// what it shares with them; a rail that failed on the peer's side alone is
// not moved back to while it is down, and the move back once it is up is
// one connection that stays.
// Needs root (ip netns); skipped otherwise.
#include <gtest/gtest.h>

#include "netns_hosts.h"
#include "rail_mesh.h"

namespace rdmamsg::itest {
namespace {

// Daemons alpha, beta, gamma, ... on switched hosts with `links[i]` rails
// each; one mesh file lists every node with its rails.
struct SwitchedMesh {
  SwitchedHosts hosts;
  TempDir dir;
  std::vector<int> links;
  std::string extra;  // more of the mesh file
  std::vector<std::unique_ptr<DaemonProcess>> d;
  std::vector<std::string> names{"alpha", "beta", "gamma"};

  explicit SwitchedMesh(std::vector<int> l, std::string more = "")
      : hosts(l), links(std::move(l)), extra(std::move(more)) {}

  std::string socket(int i) const { return dir.file(names[i] + ".sock"); }
  std::string logs() const {
    std::string all;
    for (const auto& p : d)
      all += p->log();
    return all;
  }

  bool start() {
    if (!hosts.create()) return false;
    const std::string port = "7471";
    std::string mesh = "peers:\n";
    for (std::size_t h = 0; h < links.size(); h++) {
      const int host = static_cast<int>(h);
      mesh += "  - name: " + names[h] + "\n    address: ";
      mesh += links[h] > 1 ? "[" + TwoHosts::ip(host, 0) + ":" + port + ", " +
                                 TwoHosts::ip(host, 1) + ":" + port + "]\n"
                           : TwoHosts::ip(host, 0) + ":" + port + "\n";
    }
    mesh +=
        "heartbeat_interval: 200ms\nheartbeat_timeout: 1s\nreconnect_backoff_min: 50ms\n"
        "reconnect_backoff_max: 1s\nconnect_timeout: 2s\nmessage_timeout: 10s\n" +
        extra;
    for (std::size_t i = 0; i < links.size(); i++) {
      const std::string yaml = dir.file(names[i] + ".yaml");
      const int host = static_cast<int>(i);
      writeFile(yaml, "node: " + names[i] + "\nsocket: " + socket(host) + "\n" + mesh);
      d.push_back(std::make_unique<DaemonProcess>(names[i], yaml, socket(host),
                                                  dir.file(names[i] + ".log")));
      d[i]->setWrapper({ipBinary(), "netns", "exec", hosts.ns(host), "/usr/bin/env",
                        "SOFTRDMA_DEVICES=" + hosts.devices(host)});
      if (!d[i]->start(10s)) return false;
    }
    return true;
  }

  // `from`'s peer `to` is established over `to`'s rail `link`.
  bool over(int from, int to, int link) {
    return waitForStatus(
        socket(from),
        [&](const Json& s) {
          const Json* p = peerEntry(s, names[to]);
          return p != nullptr && p->value("state", "") == "established" &&
                 p->value("remote_address", "").rfind(TwoHosts::ip(to, link) + ":", 0) == 0;
        },
        10s);
  }
  // `from`'s peer `to` is not established.
  bool down(int from, int to) {
    return waitForStatus(
        socket(from),
        [&](const Json& s) {
          const Json* p = peerEntry(s, names[to]);
          return p != nullptr && p->value("state", "") != "established";
        },
        10s);
  }
  // A message from `from`'s client to a listener at `to`, confirmed and received.
  Status send(int from, int to, const std::string& text) {
    auto listener = Taker::start(socket(to), "svc");
    auto sender = Client::connect(socket(from));
    if (!listener || !sender) return Status(Errc::io_error, "no client");
    Status st = sender->sendAndWait(names[to], "svc", bytes(text), 5s);
    if (!st.ok()) return st;
    Message msg;
    if (Status r = listener->receive(msg, 5s); !r.ok()) return r;
    return msg.text() == text ? Status() : Status(Errc::io_error, "received something else");
  }
  // `from`'s status entry of peer `to` (null: none).
  std::optional<Json> peerStatus(int from, int to) {
    auto st = statusOf(socket(from));
    if (!st) return std::nullopt;
    const Json* p = peerEntry(*st, names[to]);
    return p == nullptr ? std::nullopt : std::optional<Json>(*p);
  }
};

// A peer with one rail beside peers with two: alpha and beta share two
// rails, gamma has only rail 0 (three hosts on a switch). When alpha's rail
// 0 goes down, alpha and beta go on over rail 1, alpha cannot reach gamma
// (its sends fail at once, peer_unreachable), and beta and gamma are not
// disturbed; when it comes back, alpha and gamma connect again over it.
TEST(RailsSwitched, APeerWithOneRailBesidePeersWithTwo) {
  if (!canMakeNamespaces()) GTEST_SKIP() << "needs root and ip netns";
  SwitchedMesh m({2, 2, 1});
  ASSERT_TRUE(m.start()) << m.logs();
  ASSERT_TRUE(waitForStatus(m.socket(0), allPeersEstablished, 10s) &&
              waitForStatus(m.socket(1), allPeersEstablished, 10s))
      << m.logs();
  ASSERT_TRUE(m.over(0, 2, 0) && m.over(2, 0, 0) && m.over(1, 2, 0) && m.over(2, 1, 0)) << m.logs();

  ASSERT_TRUE(m.hosts.setPort(0, 0, false));  // alpha's rail 0
  EXPECT_TRUE(m.over(0, 1, 1) && m.over(1, 0, 1)) << m.logs();
  EXPECT_TRUE(m.down(0, 2) && m.down(2, 0)) << m.logs();
  EXPECT_TRUE(m.send(1, 2, "beta to gamma, undisturbed").ok());
  EXPECT_TRUE(m.send(0, 1, "alpha to beta over rail 1").ok());
  Status st = m.send(0, 2, "alpha to gamma: no rail");
  EXPECT_EQ(st.code(), Errc::peer_unreachable) << st.toString();

  // Back: gamma is reached again, and alpha and beta move back to rail 0
  // once it is healthy (probed), without losing what they carry.
  ASSERT_TRUE(m.hosts.setPort(0, 0, true));
  EXPECT_TRUE(m.over(0, 2, 0) && m.over(2, 0, 0)) << m.logs();
  EXPECT_TRUE(m.send(0, 2, "alpha to gamma again").ok());
  EXPECT_TRUE(m.over(0, 1, 0) && m.over(1, 0, 0)) << "alpha and beta stayed on rail 1\n"
                                                  << m.logs();
  EXPECT_TRUE(m.send(0, 1, "alpha to beta over rail 0 again").ok());
}

// Alpha's port on rail 0 goes down: alpha resumes the session over rail 1
// at once. Beta saw no loss (its port is up, nothing reached it) and only
// the peer's connection replacing its own over another rail: for beta too
// rail 0 failed (the peer left it). So neither end moves the session back
// while the port is down (probes over it fail at both ends). Once it is up
// and probed back to health the session moves back with one dial (the
// lower name's), and the failback holds: nothing is held down, no
// connection is taken for another.
TEST(RailsSwitched, ARailThatFailedOnThePeersSideIsNotMovedBackToWhileItIsDown) {
  if (!canMakeNamespaces()) GTEST_SKIP() << "needs root and ip netns";
  SwitchedMesh m({2, 2}, "rail_probe_interval: 100ms\n");
  ASSERT_TRUE(m.start()) << m.logs();
  ASSERT_TRUE(m.over(0, 1, 0) && m.over(1, 0, 0)) << m.logs();
  auto rail0 = [&](int from, const std::function<bool(const Json&)>& pred) {
    return waitForStatus(
        m.socket(from),
        [&](const Json& s) {
          const Json* p = peerEntry(s, m.names[1 - from]);
          return p != nullptr && p->contains("rails") && (*p)["rails"].size() == 2 &&
                 pred((*p)["rails"][0]);
        },
        10s);
  };

  ASSERT_TRUE(m.hosts.setPort(0, 0, false));
  ASSERT_TRUE(m.over(0, 1, 1) && m.over(1, 0, 1)) << m.logs();
  // Both ends find rail 0 down, and their probes over it keep failing.
  for (int i = 0; i < 2; i++)
    EXPECT_TRUE(rail0(i,
                      [](const Json& r) {
                        return r.value("state", "") == "down" && r.value("probes_failed", 0) >= 3;
                      }))
        << m.names[i] << "\n"
        << statusOf(m.socket(i))->dump();
  for (int i = 0; i < 2; i++) {
    auto p = m.peerStatus(i, 1 - i);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->value("rail_failbacks", -1), 0)
        << m.names[i] << " moved the session back to a rail that is down\n"
        << m.logs();
    EXPECT_EQ((*p)["rails"][0].value("failovers", 0), 1) << m.names[i] << "\n" << p->dump();
  }
  EXPECT_TRUE(m.send(0, 1, "over rail 1").ok());

  ASSERT_TRUE(m.hosts.setPort(0, 0, true));
  ASSERT_TRUE(m.over(0, 1, 0) && m.over(1, 0, 0)) << m.logs();
  EXPECT_TRUE(m.send(0, 1, "over rail 0 again").ok());
  for (int i = 0; i < 2; i++) {
    EXPECT_TRUE(rail0(i, [](const Json& r) { return r.value("health", 0) == 1000; }))
        << statusOf(m.socket(i))->dump();
    auto p = m.peerStatus(i, 1 - i);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->value("rail_failbacks", -1), 1) << m.names[i] << "\n" << m.logs();
    EXPECT_EQ((*p)["rails"][0].value("failbacks_failed", -1), 0) << p->dump() << m.logs();
    EXPECT_EQ((*p)["rails"][0].value("held_down_ms", -1), 0) << p->dump();
    // The first connection and the failback's: a dial crossing it would
    // have replaced it with a third.
    EXPECT_EQ((*p)["rails"][0].value("connects", -1), 2) << p->dump() << m.logs();
  }
}

}  // namespace
}  // namespace rdmamsg::itest
