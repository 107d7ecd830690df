// Integration: a peer is who it claims to be. An impostor — a third rdmamsgd
// on 127.0.0.3 whose configuration says `node: beta` — dials alpha while the
// real beta (127.0.0.2) is connected. Alpha refuses it (the connection does
// not come from beta's configured address), says so with the impostor's
// address, counts it, and the real beta keeps its connection and its
// traffic. Relaxed with `verify_address: false` for beta, alpha accepts it,
// as it warns at the reload that relaxes it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include "harness.h"

namespace rdmamsg::itest {
namespace {

uint64_t rejectedFor(const Json& status, const char* reason) {
  if (!status.contains("rejected_connections")) return 0;
  return status["rejected_connections"].value(reason, uint64_t{0});
}

class Impostor : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(std::vector<std::string>{"alpha", "beta"});
    ASSERT_TRUE(cluster_->start());
    ASSERT_TRUE(cluster_->waitFullMesh());
  }
  Cluster& c() { return *cluster_; }
  // Starts a daemon on 127.0.0.3 that calls itself beta and knows alpha.
  void startImpostor() { impostor_ = itest::startImpostor(c(), "beta", "127.0.0.3", c().port()); }
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<DaemonProcess> impostor_;
};

TEST_F(Impostor, IsRejectedAndTheRealPeerKeepsItsConnectionAndItsTraffic) {
  auto before = statusOf(c().socket("alpha"));
  ASSERT_TRUE(before);
  const uint64_t betaConnects = peerEntry(*before, "beta")->value("connects", uint64_t{0});
  const std::string betaIncarnation = peerEntry(*before, "beta")->value("incarnation", "");
  ASSERT_FALSE(betaIncarnation.empty());

  startImpostor();
  // The impostor's dials have an outcome: taken (the failure this guards
  // against) or refused at least twice.
  ASSERT_TRUE(dialedAtLeast(impostor_->socket(), "alpha", 2))
      << "the impostor's dials to alpha have no outcome";
  // The real beta's connection was never replaced, and its traffic still reaches it.
  expectPeerUntouched(c(), "alpha", "beta", betaConnects, betaIncarnation);

  // Each refusal is counted and logged with the impostor's address, and the
  // impostor is told why.
  EXPECT_TRUE(waitForStatus(c().socket("alpha"),
                            [](const Json& st) { return rejectedFor(st, "wrong_address") >= 2; }));
  EXPECT_TRUE(c()["alpha"].waitLog("rejected connection from 127.0.0.3:"));
  EXPECT_TRUE(c()["alpha"].waitLog("it claims to be node beta, whose address is 127.0.0.2:"));
  EXPECT_TRUE(impostor_->waitLog("not from the node's configured address"));

  // The refusals are in the metrics too.
  CliResult metrics = runCli(c().dir(), {"--socket", c().socket("alpha"), "metrics"});
  EXPECT_EQ(metrics.code, 0) << metrics.err;
  EXPECT_NE(metrics.out.find("rdmamsg_rejected_connections_total{reason=\"wrong_address\"}"),
            std::string::npos)
      << metrics.out;
}

TEST_F(Impostor, IsAcceptedOnlyWhereVerifyAddressIsRelaxedWithAWarning) {
  startImpostor();
  ASSERT_TRUE(waitForStatus(c().socket("alpha"),
                            [](const Json& s) { return rejectedFor(s, "wrong_address") >= 1; }));
  auto impostorStatus = statusOf(impostor_->socket());
  ASSERT_TRUE(impostorStatus);
  const std::string impostorIncarnation = impostorStatus->value("incarnation", "");
  ASSERT_FALSE(impostorIncarnation.empty());

  // Relax alpha's check of beta: a reload applies it, with a warning.
  const std::string address =
      "    address: " + c().address("beta") + ":" + std::to_string(c().port()) + "\n";
  std::string yaml = readFile(c().configPath("alpha"));
  const size_t at = yaml.find(address);
  ASSERT_NE(at, std::string::npos) << yaml;
  yaml.insert(at + address.size(), "    verify_address: false\n");
  writeFile(c().configPath("alpha"), yaml);
  c()["alpha"].signal(SIGHUP);
  EXPECT_TRUE(c()["alpha"].waitLog("peer beta: verify_address is false"));
  // Now a connection from 127.0.0.3 that claims beta is taken as beta.
  EXPECT_TRUE(waitForStatus(c().socket("alpha"), [&](const Json& s) {
    const Json* b = peerEntry(s, "beta");
    return b != nullptr && b->value("incarnation", "") == impostorIncarnation;
  })) << "alpha did not accept the impostor with verify_address: false";
}

// A node that listens on every address (listen: 0.0.0.0) dials its peers
// from its own entry's address, which they check. Here alpha has beta at a
// port where nothing listens, so the link can only form from beta's dial:
// from 127.0.0.1, the source loopback routing would pick, alpha refuses it.
// In a network namespace of the test's own (the wildcard listens there only).
TEST(WildcardListen, ANodeListeningOnEveryAddressDialsFromItsOwnEntry) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ip netns)";
  const std::string ns = "rmsgw" + std::to_string(getpid() % 100000);
  struct Namespace {
    std::string name;
    ~Namespace() { sh("ip netns del " + name); }
  } netns{ns};
  ASSERT_TRUE(sh("ip netns add " + ns) && sh("ip -n " + ns + " link set lo up"));
  TempDir dir;
  writeFile(dir.file("alpha.yaml"), "node: alpha\nsocket: " + dir.file("alpha.sock") +
                                        "\nreconnect_backoff_max: 200ms\npeers:\n"
                                        "  - {name: alpha, address: 127.0.0.1:7471}\n"
                                        "  - {name: beta, address: 127.0.0.2:7479}\n");
  writeFile(dir.file("beta.yaml"),
            "node: beta\nlisten: 0.0.0.0:7472\nsocket: " + dir.file("beta.sock") +
                "\nreconnect_backoff_max: 200ms\npeers:\n"
                "  - {name: alpha, address: 127.0.0.1:7471}\n"
                "  - {name: beta, address: 127.0.0.2:7472}\n");
  DaemonProcess alpha("alpha", dir.file("alpha.yaml"), dir.file("alpha.sock"),
                      dir.file("alpha.log"));
  DaemonProcess beta("beta", dir.file("beta.yaml"), dir.file("beta.sock"), dir.file("beta.log"));
  alpha.setWrapper({ipBinary(), "netns", "exec", ns});
  beta.setWrapper({ipBinary(), "netns", "exec", ns});
  ASSERT_TRUE(alpha.start());
  ASSERT_TRUE(beta.start());
  EXPECT_TRUE(waitForStatus(alpha.socket(), [](const Json& s) {
    return peerState(s, "beta") == "established";
  })) << "alpha did not take beta's connection";
  auto s = statusOf(alpha.socket());
  ASSERT_TRUE(s);
  EXPECT_EQ(rejectedFor(*s, "wrong_address"), 0u);
}

}  // namespace
}  // namespace rdmamsg::itest
