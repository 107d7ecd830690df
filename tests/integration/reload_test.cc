// Integration: SIGHUP reloads the configuration of a running daemon. Peers
// added are dialed, peers removed are closed (their messages in flight
// failed with the reason), a changed address is dialed anew, live settings
// apply, and a file with problems changes nothing — and every peer the
// change does not concern keeps its connection.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <regex>

#include "harness.h"
#include "rdmamsg/client.h"

namespace rdmamsg::itest {
namespace {

// The config file of a Cluster node with one peer entry taken out.
std::string withoutPeer(const std::string& yaml, const std::string& name) {
  return std::regex_replace(yaml, std::regex("  - name: " + name + "\n    address: [^\n]*\n"), "");
}
// ... or with that peer's address changed.
std::string withAddress(const std::string& yaml, const std::string& name,
                        const std::string& address) {
  return std::regex_replace(yaml, std::regex("(  - name: " + name + "\n    address: )[^\n]*\n"),
                            "$01" + address + "\n");
}

uint64_t generation(const Json& s) {
  return s.contains("config") ? s["config"].value("generation", uint64_t{0}) : 0;
}

// A peer's `connects` counter: it moves when its connection is replaced.
uint64_t connects(const std::string& socket, const std::string& peer) {
  auto s = statusOf(socket);
  const Json* e = s ? peerEntry(*s, peer) : nullptr;
  return e != nullptr ? e->value("connects", uint64_t{0}) : 0;
}

class Reload : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(std::vector<std::string>{"alpha", "beta", "gamma"});
    ASSERT_TRUE(cluster_->start());
    ASSERT_TRUE(cluster_->waitFullMesh());
  }
  Cluster& c() { return *cluster_; }
  // Rewrites `node`'s file, sends SIGHUP and waits for `generation`.
  bool reload(const std::string& node, const std::string& yaml, uint64_t gen) {
    writeFile(c().configPath(node), yaml);
    c()[node].signal(SIGHUP);
    return waitForStatus(c().socket(node), [&](const Json& s) { return generation(s) == gen; });
  }
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(Reload, ARemovedPeerIsClosedWithItsMessagesFailedAndOthersKeepTheirConnection) {
  const std::string original = readFile(c().configPath("alpha"));
  const uint64_t betaConnects = connects(c().socket("alpha"), "beta");
  ASSERT_GT(betaConnects, 0u);

  // A listener on gamma that takes nothing: alpha's messages to it stay in
  // flight (unconfirmed) until the reload.
  Process listener;
  ASSERT_TRUE(startListener(listener, c(), "gamma", "svc", 1000000, c().dir().file("svc.out")));
  listener.signal(SIGSTOP);
  auto client = Client::connect(c().socket("alpha"));
  ASSERT_TRUE(client.ok()) << client.status().toString();
  ASSERT_TRUE(client->registerService("src").ok());
  const std::string payload(16 * 1024, 'x');
  constexpr int kMessages = 200;  // 3.2 MiB: more than the listener's socket holds
  for (int i = 0; i < kMessages; ++i)
    ASSERT_TRUE(client->send("gamma", "svc", payload).ok());
  ASSERT_TRUE(client->flush().ok());
  ASSERT_TRUE(waitForStatus(c().socket("alpha"), [](const Json& s) {
    const Json* g = peerEntry(s, "gamma");
    return g != nullptr && g->value("in_flight", 0) > 0;
  })) << "no message stayed in flight to gamma";

  ASSERT_TRUE(reload("alpha", withoutPeer(original, "gamma"), 2));
  auto s = statusOf(c().socket("alpha"));
  ASSERT_TRUE(s);
  EXPECT_EQ(peerEntry(*s, "gamma"), nullptr) << "a removed peer is still listed";
  EXPECT_EQ((*s)["config"]["last_reload"], "applied");

  // Every message has an outcome; those still in flight failed, naming why.
  int failed = 0;
  for (int i = 0; i < kMessages; ++i) {
    Completion done;
    ASSERT_TRUE(client->waitCompletion(done, 10s).ok()) << "message without an outcome";
    if (done.status.ok()) continue;
    ++failed;
    EXPECT_EQ(done.status.code(), Errc::peer_unreachable) << done.status.toString();
    EXPECT_NE(done.status.message().find("gamma was removed from the configuration of alpha"),
              std::string::npos)
        << done.status.toString();
  }
  EXPECT_GT(failed, 0);
  // A removed peer is no longer a destination, and does not come back by dialing.
  auto r = client->sendAndWait("gamma", "svc", std::as_bytes(std::span(payload.data(), 1)), 5s);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message().find("not in the peers of alpha"), std::string::npos) << r.toString();
  EXPECT_TRUE(waitForStatus(c().socket("gamma"),
                            [](const Json& g) { return peerState(g, "alpha") != "established"; }));

  // Added back: dialed and established; beta's connection never moved.
  ASSERT_TRUE(reload("alpha", original, 3));
  EXPECT_TRUE(waitForStatus(c().socket("alpha"), allPeersEstablished));
  auto after = statusOf(c().socket("alpha"));
  ASSERT_TRUE(after);
  EXPECT_EQ((*after)["peers"].size(), 2u) << "gamma is listed twice";
  EXPECT_EQ(connects(c().socket("alpha"), "beta"), betaConnects);
  EXPECT_TRUE(client->sendAndWait("beta", "nobody", std::as_bytes(std::span(payload.data(), 1)), 5s)
                  .code() == Errc::unknown_service)
      << "alpha to beta is not working after the reloads";
  listener.kill9();
}

TEST_F(Reload, AChangedAddressIsDialed) {
  const std::string alpha = readFile(c().configPath("alpha"));
  const std::string gamma = readFile(c().configPath("gamma"));
  const uint64_t betaConnects = connects(c().socket("alpha"), "beta");
  const std::string nowhere = "127.0.0.9:" + std::to_string(c().port());
  // alpha looks for gamma where it is not; gamma forgets alpha.
  ASSERT_TRUE(reload("gamma", withoutPeer(gamma, "alpha"), 2));
  ASSERT_TRUE(reload("alpha", withAddress(alpha, "gamma", nowhere), 2));
  EXPECT_TRUE(waitForStatus(c().socket("alpha"), [&](const Json& s) {
    const Json* g = peerEntry(s, "gamma");
    return g != nullptr && (*g)["address"] == nowhere && (*g)["state"] != "established";
  }));
  // Back to the right address (and gamma knows alpha again): connected.
  ASSERT_TRUE(reload("gamma", gamma, 3));
  ASSERT_TRUE(reload("alpha", alpha, 3));
  EXPECT_TRUE(waitForStatus(c().socket("alpha"), allPeersEstablished));
  EXPECT_TRUE(c()["alpha"].waitLog("peer gamma: address changed from " + nowhere));
  EXPECT_EQ(connects(c().socket("alpha"), "beta"), betaConnects);
}

TEST_F(Reload, AFileWithProblemsChangesNothing) {
  const std::string original = readFile(c().configPath("alpha"));
  const uint64_t betaConnects = connects(c().socket("alpha"), "beta");
  std::string broken = withoutPeer(original, "gamma");
  broken = std::regex_replace(broken, std::regex("heartbeat_interval: [^\n]*"),
                              "heartbeat_interval: soon");
  broken += "buffer_sise: 1MiB\n";
  writeFile(c().configPath("alpha"), broken);
  c()["alpha"].signal(SIGHUP);
  ASSERT_TRUE(waitForStatus(c().socket("alpha"), [](const Json& s) {
    return s.contains("config") && s["config"].value("reloads_failed", 0) == 1;
  }));
  auto s = statusOf(c().socket("alpha"));
  ASSERT_TRUE(s);
  EXPECT_EQ(generation(*s), 1u);
  EXPECT_EQ((*s)["config"]["last_reload"].get<std::string>().rfind("refused: ", 0), 0u);
  EXPECT_NE(peerEntry(*s, "gamma"), nullptr) << "a refused reload removed a peer";
  EXPECT_TRUE(allPeersEstablished(*s));
  EXPECT_EQ(connects(c().socket("alpha"), "beta"), betaConnects);
  // Each problem is logged with its place in the file.
  EXPECT_TRUE(c()["alpha"].waitLog("reload refused (2 problems)"));
  const std::string log = c()["alpha"].log();
  EXPECT_NE(log.find("heartbeat_interval"), std::string::npos) << log;
  EXPECT_NE(log.find("buffer_sise"), std::string::npos) << log;
  // ExecReload's first step (rdmamsgd --check-config) refuses the same file.
  Process check;
  Process::Options o;
  o.argv = {daemonBinary(), "--check-config", c().configPath("alpha")};
  ASSERT_TRUE(check.start(o));
  EXPECT_EQ(check.wait(10s), 78);
}

TEST_F(Reload, LiveSettingsApplyAndRestartOnesWaitForARestart) {
  std::string yaml = readFile(c().configPath("alpha"));
  yaml = std::regex_replace(yaml, std::regex("log_level: [^\n]*"), "log_level: debug");
  yaml += "buffer_size: 128KiB\n";
  ASSERT_TRUE(reload("alpha", yaml, 2));
  auto s = statusOf(c().socket("alpha"));
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)["config"]["log_level"], "debug");
  const auto pending = (*s)["config"]["restart_pending"].dump();
  EXPECT_NE(pending.find("buffer_size"), std::string::npos) << pending;
  EXPECT_TRUE(allPeersEstablished(*s));
  // Debug lines now appear: the status request above was one client session.
  EXPECT_TRUE(c()["alpha"].waitLog("hello from 'itest-status'"));
  EXPECT_TRUE(c()["alpha"].waitLog("takes effect when rdmamsgd restarts"));
}

// More peers than the completion queue was sized for: it grows
// (ibv_resize_cq) before they are dialed.
TEST_F(Reload, AddedPeersGrowTheCompletionQueue) {
  const uint64_t betaConnects = connects(c().socket("alpha"), "beta");
  std::string yaml = readFile(c().configPath("alpha"));
  const std::string anchor = "peers:\n";
  std::string more;
  for (int i = 0; i < 4; ++i)
    more += "  - name: extra" + std::to_string(i) + "\n    address: 127.0.0." +
            std::to_string(20 + i) + ":" + std::to_string(c().port()) + "\n";
  yaml.insert(yaml.find(anchor) + anchor.size(), more);
  ASSERT_TRUE(reload("alpha", yaml, 2));
  EXPECT_TRUE(c()["alpha"].waitLog("CQ resized from"));
  auto s = statusOf(c().socket("alpha"));
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)["peers"].size(), 6u);
  EXPECT_EQ(peerState(*s, "beta"), "established");
  EXPECT_EQ(peerState(*s, "gamma"), "established");
  EXPECT_EQ(connects(c().socket("alpha"), "beta"), betaConnects);
  EXPECT_TRUE(waitForStatus(c().socket("alpha"), [](const Json& st) {
    const Json* e = peerEntry(st, "extra3");
    return e != nullptr && e->value("dials", 0) > 0;
  })) << "an added peer was not dialed";
}

// alpha alone, with a name service that takes `ms` for "slow-" names
// (slow_names.c), reloading a local_policy that names slow-user: the
// reload's lookup is under way when it returns.
struct SlowLookup {
  std::unique_ptr<Cluster> c;
  bool start(int ms) {
    MeshOptions o;
    o.nodeWrapper["alpha"] = {"/usr/bin/env", "LD_PRELOAD=" + slowNamesLibrary(),
                              "SLOW_NAMES_MS=" + std::to_string(ms)};
    const std::string uid = std::to_string(::getuid());
    o.nodeExtra["alpha"] = "local_policy:\n  connect:\n    users: [" + uid + "]\n";
    c = std::make_unique<Cluster>(std::vector<std::string>{"alpha"}, o);
    if (!c->start()) return false;
    std::string yaml = readFile(c->configPath("alpha"));
    yaml.replace(yaml.find("users: [" + uid + "]"), 9 + uid.size(),
                 "users: [" + uid + ", slow-user]");
    writeFile(c->configPath("alpha"), yaml);
    (*c)["alpha"].signal(SIGHUP);
    return (*c)["alpha"].waitLog("SIGHUP: reloading");
  }
};

// local_policy names users and groups; a reload resolves them off the loop
// (daemon/config_reader.h): a name service that takes 3 s (slow_names.c)
// delays the new policy, not the daemon, which keeps answering meanwhile.
TEST(ReloadNames, ASlowNameLookupDoesNotStopTheLoop) {
  SlowLookup l;
  ASSERT_TRUE(l.start(3000));
  Cluster& c = *l.c;
  const auto asked = std::chrono::steady_clock::now();
  auto s = statusOf(c.socket("alpha"), 1s);
  ASSERT_TRUE(s) << "the daemon did not answer while a name was being looked up";
  EXPECT_EQ(generation(*s), 1u) << "the new policy applied before its names were resolved";
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 1s);
  EXPECT_TRUE(waitForStatus(
      c.socket("alpha"), [](const Json& st) { return generation(st) == 2; }, 10s))
      << c["alpha"].log();
}

// Stopping does not wait for a name lookup under way: SIGTERM while a
// reload waits 60 s for a name service ends the daemon at once, cleanly.
TEST(ReloadNames, SigtermDuringASlowLookupStopsAtOnce) {
  SlowLookup l;
  ASSERT_TRUE(l.start(60000));
  Cluster& c = *l.c;
  ASSERT_TRUE(statusOf(c.socket("alpha"), 1s)) << "the lookup is not under way off the loop";
  const auto asked = std::chrono::steady_clock::now();
  auto code = c["alpha"].stop(10s);
  ASSERT_TRUE(code) << "the daemon did not stop within 10 s of SIGTERM";
  EXPECT_EQ(*code, 0) << c["alpha"].log();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 5s) << "stopping waited for the lookup";
}

}  // namespace
}  // namespace rdmamsg::itest
