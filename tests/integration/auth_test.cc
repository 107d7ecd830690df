// Integration: peers prove the mesh secret (secret_file) before a connection
// counts. With the secret on alpha and beta, a third daemon that calls
// itself beta and dials alpha from beta's own host (so the address check
// passes) is refused once it fails its proof — with another secret, or with
// none — and the real beta keeps its connection, its incarnation and its
// traffic. Rotation: a previous secret keeps peers with the old one
// connected while the new one is rolled out.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <csignal>

#include "harness.h"

namespace rdmamsg::itest {
namespace {

uint64_t rejectedFor(const Json& status, const char* reason) {
  if (!status.contains("rejected_connections")) return 0;
  return status["rejected_connections"].value(reason, uint64_t{0});
}

std::string authOf(const Json& status, const std::string& peer) {
  const Json* p = peerEntry(status, peer);
  return p != nullptr ? p->value("authenticated", "") : "";
}

// A secret file of the test's own, readable by its owner only.
std::string writeSecret(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  writeFile(path, text + "\n");
  ::chmod(path.c_str(), 0600);
  return path;
}

const std::string kSecretA = "mesh-secret-A-0123456789abcdefghijklmnopqrstuvwxyz";
const std::string kSecretB = "mesh-secret-B-9876543210zyxwvutsrqponmlkjihgfedcba";

class MeshSecret : public ::testing::Test {
 protected:
  void start(const std::map<std::string, std::string>& nodeExtra) {
    MeshOptions o;
    o.nodeExtra = nodeExtra;
    cluster_ = std::make_unique<Cluster>(std::vector<std::string>{"alpha", "beta"}, o);
    ASSERT_TRUE(cluster_->start());
    ASSERT_TRUE(cluster_->waitFullMesh());
  }
  Cluster& c() { return *cluster_; }

  // A daemon on `host` (by default beta's, 127.0.0.2, on another port) whose
  // configuration says `node: beta`, with `secretLine` (a secret_file line,
  // or nothing).
  void startImpostor(const std::string& secretLine, const std::string& host = "127.0.0.2") {
    impostor_ = itest::startImpostor(c(), "beta", host, 0, secretLine);
  }
  bool impostorTried(uint64_t dials) { return dialedAtLeast(impostor_->socket(), "alpha", dials); }
  void expectBetaUntouched(uint64_t connects, const std::string& incarnation) {
    expectPeerUntouched(c(), "alpha", "beta", connects, incarnation);
  }

  TempDir secrets_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<DaemonProcess> impostor_;
};

TEST_F(MeshSecret, PeersProveItBothWaysAndShowOnlyItsFingerprint) {
  const std::string file = writeSecret(secrets_, "mesh.secret", kSecretA);
  start({{"alpha", "secret_file: " + file + "\n"}, {"beta", "secret_file: " + file + "\n"}});
  auto a = statusOf(c().socket("alpha"));
  auto b = statusOf(c().socket("beta"));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(authOf(*a, "beta"), "current secret");
  EXPECT_EQ(authOf(*b, "alpha"), "current secret");
  const std::string fingerprint = (*a)["authentication"].value("secret", "");
  EXPECT_EQ(fingerprint.size(), 16u);
  EXPECT_EQ((*b)["authentication"].value("secret", ""), fingerprint);
  // The secret itself is in neither the status nor the log.
  EXPECT_EQ(a->dump().find("mesh-secret-A"), std::string::npos);
  EXPECT_EQ(c()["alpha"].log().find("mesh-secret-A"), std::string::npos);
  EXPECT_TRUE(c()["alpha"].waitLog("peer beta: established"));
  EXPECT_TRUE(c()["alpha"].waitLog(", authenticated)"));
  EXPECT_EQ(c()["alpha"].log().find("peers are not authenticated"), std::string::npos);
}

TEST_F(MeshSecret, AnImpostorWithAnotherSecretFromBetasHostIsRefusedAndBetaKeepsItsTraffic) {
  const std::string file = writeSecret(secrets_, "mesh.secret", kSecretA);
  start({{"alpha", "secret_file: " + file + "\n"}, {"beta", "secret_file: " + file + "\n"}});
  auto before = statusOf(c().socket("alpha"));
  ASSERT_TRUE(before);
  const uint64_t connects = peerEntry(*before, "beta")->value("connects", uint64_t{0});
  const std::string incarnation = peerEntry(*before, "beta")->value("incarnation", "");
  ASSERT_FALSE(incarnation.empty());

  // A restarted beta (a new incarnation) would replace the connection; this
  // one cannot prove the secret, so it never does.
  const std::string wrong = writeSecret(secrets_, "wrong.secret", kSecretB);
  startImpostor("secret_file: " + wrong + "\n");
  ASSERT_TRUE(impostorTried(2)) << "the impostor's dials to alpha have no outcome";
  EXPECT_TRUE(waitForStatus(c().socket("alpha"),
                            [](const Json& s) { return rejectedFor(s, "authentication") >= 1; }));
  EXPECT_TRUE(
      c()["alpha"].waitLog("peer beta: authentication failed on the connection from "
                           "127.0.0.2:"));
  EXPECT_TRUE(c()["alpha"].waitLog("its proof does not match this node's mesh secret"));
  auto imp = statusOf(impostor_->socket());
  ASSERT_TRUE(imp);
  EXPECT_NE(peerState(*imp, "alpha"), "established");
  // The impostor's end counts and logs the refusal of its proof too.
  EXPECT_TRUE(waitForStatus(impostor_->socket(),
                            [](const Json& st) { return rejectedFor(st, "authentication") >= 1; }));
  EXPECT_TRUE(
      impostor_->waitLog("peer alpha: authentication failed on the connection to "
                         "127.0.0.1:"));
  expectBetaUntouched(connects, incarnation);

  CliResult metrics = runCli(c().dir(), {"--socket", c().socket("alpha"), "metrics"});
  EXPECT_EQ(metrics.code, 0) << metrics.err;
  EXPECT_NE(metrics.out.find("rdmamsg_rejected_connections_total{reason=\"authentication\"}"),
            std::string::npos)
      << metrics.out;
}

TEST_F(MeshSecret, AnImpostorWithoutASecretIsRefusedAtTheHandshake) {
  const std::string file = writeSecret(secrets_, "mesh.secret", kSecretA);
  start({{"alpha", "secret_file: " + file + "\n"}, {"beta", "secret_file: " + file + "\n"}});
  auto before = statusOf(c().socket("alpha"));
  ASSERT_TRUE(before);
  const uint64_t connects = peerEntry(*before, "beta")->value("connects", uint64_t{0});
  const std::string incarnation = peerEntry(*before, "beta")->value("incarnation", "");

  startImpostor("");
  ASSERT_TRUE(impostorTried(2));
  EXPECT_TRUE(waitForStatus(c().socket("alpha"),
                            [](const Json& s) { return rejectedFor(s, "authentication") >= 1; }));
  EXPECT_TRUE(
      c()["alpha"].waitLog("does not authenticate, and this node requires the mesh secret"));
  EXPECT_TRUE(impostor_->waitLog("connection rejected: authentication failed"));
  EXPECT_TRUE(impostor_->waitLog("peers are not authenticated"));
  expectBetaUntouched(connects, incarnation);
}

// A restarted beta (a new incarnation, from beta's host) that proves the
// secret replaces beta's established connection, once proven. hostile_peer
// plays it: it knows the secret and authenticates like a daemon.
TEST_F(MeshSecret, ANewIncarnationThatProvesTheSecretReplacesTheEstablishedConnection) {
  const std::string file = writeSecret(secrets_, "mesh.secret", kSecretA);
  start({{"alpha", "secret_file: " + file + "\n"}, {"beta", "secret_file: " + file + "\n"}});
  auto before = statusOf(c().socket("alpha"));
  auto beta = statusOf(c().socket("beta"));
  ASSERT_TRUE(before && beta);
  const uint64_t connects = peerEntry(*before, "beta")->value("connects", uint64_t{0});
  const std::string realIncarnation = beta->value("incarnation", "");

  Process p;
  Process::Options o;
  o.argv = {softrdmaRun(), hostilePeerBinary(),
            "--connect",   c().address("alpha") + ":" + std::to_string(c().port()),
            "--bind",      c().address("beta"),
            "--name",      "beta",
            "--target",    "alpha",
            "--mode",      "auth-good",
            "--secret",    file};
  o.stdoutPath = c().dir().file("restarted.out");
  o.stderrPath = c().dir().file("restarted.err");
  ASSERT_TRUE(p.start(o));
  EXPECT_EQ(p.wait(30s), std::optional<ExitCode>(0)) << readFile(o.stderrPath);
  EXPECT_EQ(readFile(o.stdoutPath), "established\nauthenticated\ndisconnected\n");
  EXPECT_TRUE(c()["alpha"].waitLog(
      "peer beta: connection lost: replaced by an authenticated connection from a restarted "
      "peer"))
      << c()["alpha"].log();
  // The real beta is still beta: its next connection is proven and replaces that one.
  EXPECT_TRUE(waitForStatus(c().socket("alpha"), [&](const Json& s) {
    const Json* b = peerEntry(s, "beta");
    return b != nullptr && (*b)["state"] == "established" &&
           b->value("incarnation", "") == realIncarnation &&
           b->value("connects", uint64_t{0}) >= connects + 2;
  })) << "beta did not come back";
  auto s = statusOf(c().socket("alpha"));
  ASSERT_TRUE(s);
  EXPECT_EQ(rejectedFor(*s, "authentication"), 0u);
}

TEST_F(MeshSecret, TheAddressIsCheckedFirstEvenForAPeerWithTheSecret) {
  const std::string file = writeSecret(secrets_, "mesh.secret", kSecretA);
  start({{"alpha", "secret_file: " + file + "\n"}, {"beta", "secret_file: " + file + "\n"}});
  auto before = statusOf(c().socket("alpha"));
  ASSERT_TRUE(before);
  const uint64_t connects = peerEntry(*before, "beta")->value("connects", uint64_t{0});
  const std::string incarnation = peerEntry(*before, "beta")->value("incarnation", "");
  // The right secret from the wrong host: refused before any proof.
  startImpostor("secret_file: " + file + "\n", "127.0.0.3");
  ASSERT_TRUE(impostorTried(2));
  EXPECT_TRUE(waitForStatus(c().socket("alpha"),
                            [](const Json& s) { return rejectedFor(s, "wrong_address") >= 1; }));
  auto s = statusOf(c().socket("alpha"));
  ASSERT_TRUE(s);
  EXPECT_EQ(rejectedFor(*s, "authentication"), 0u);
  expectBetaUntouched(connects, incarnation);
}

TEST_F(MeshSecret, APreviousSecretKeepsPeersConnectedWhileANewOneIsRolledOut) {
  const std::string oldFile = writeSecret(secrets_, "old.secret", kSecretA);
  const std::string newFile = writeSecret(secrets_, "new.secret", kSecretB);
  // alpha has the new secret already; beta still the old one.
  start({{"alpha", "secret_file: " + newFile + "\nprevious_secret_file: " + oldFile + "\n"},
         {"beta", "secret_file: " + oldFile + "\n"}});
  auto a = statusOf(c().socket("alpha"));
  auto b = statusOf(c().socket("beta"));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(authOf(*a, "beta"), "previous secret");
  EXPECT_EQ(authOf(*b, "alpha"), "current secret");
  EXPECT_TRUE(c()["alpha"].waitLog("authenticated with the previous mesh secret"));
  const uint64_t connects = peerEntry(*a, "beta")->value("connects", uint64_t{0});

  // beta moves to the new secret by a reload: the connection stays up.
  std::string yaml = readFile(c().configPath("beta"));
  const size_t at = yaml.find("secret_file: " + oldFile);
  ASSERT_NE(at, std::string::npos) << yaml;
  yaml.replace(at, ("secret_file: " + oldFile).size(),
               "secret_file: " + newFile + "\nprevious_secret_file: " + oldFile);
  writeFile(c().configPath("beta"), yaml);
  c()["beta"].signal(SIGHUP);
  const std::string newFingerprint = (*a)["authentication"].value("secret", "");
  EXPECT_TRUE(waitForStatus(c().socket("beta"), [&](const Json& s) {
    return s["authentication"].value("secret", "") == newFingerprint;
  }));
  a = statusOf(c().socket("alpha"));
  ASSERT_TRUE(a);
  EXPECT_EQ(peerEntry(*a, "beta")->value("connects", uint64_t{0}), connects);
  // beta's connection was proven with what is now its previous secret.
  b = statusOf(c().socket("beta"));
  ASSERT_TRUE(b);
  EXPECT_EQ(authOf(*b, "alpha"), "previous secret");

  // Its next connection proves the new secret.
  ASSERT_TRUE(c()["beta"].restart());
  EXPECT_TRUE(waitForStatus(c().socket("alpha"),
                            [](const Json& s) { return authOf(s, "beta") == "current secret"; }));
}

TEST_F(MeshSecret, ConfiguringItByAReloadReconnectsUnauthenticatedPeers) {
  start({});
  auto a = statusOf(c().socket("alpha"));
  ASSERT_TRUE(a);
  EXPECT_EQ(authOf(*a, "beta"), "no");
  EXPECT_TRUE(c()["alpha"].waitLog("peers are not authenticated"));
  const std::string file = writeSecret(secrets_, "mesh.secret", kSecretA);
  for (const char* node : {"alpha", "beta"}) {
    writeFile(c().configPath(node), "secret_file: " + file + "\n" + readFile(c().configPath(node)));
    c()[node].signal(SIGHUP);
  }
  EXPECT_TRUE(waitForStatus(c().socket("alpha"), [](const Json& s) {
    return authOf(s, "beta") == "current secret" && peerState(s, "beta") == "established";
  })) << "the link was not made again with the secret";
  EXPECT_TRUE(c()["alpha"].waitLog("the mesh secret is required now") ||
              c()["beta"].waitLog("the mesh secret is required now"));
}

TEST(MeshSecretFile, ReadableByOthersKeepsTheDaemonFromStarting) {
  TempDir dir;
  const std::string secret = dir.file("mesh.secret");
  writeFile(secret, kSecretA + "\n");
  ::chmod(secret.c_str(), 0644);
  const std::string config = dir.file("alpha.yaml");
  writeFile(config, "node: alpha\nsocket: " + dir.file("alpha.sock") + "\nsecret_file: " + secret +
                        "\npeers:\n  - {name: alpha, address: 127.0.0.1:" +
                        std::to_string(pickPort({"127.0.0.1"})) + "}\n");
  DaemonProcess d("alpha", config, dir.file("alpha.sock"), dir.file("alpha.log"));
  ASSERT_TRUE(d.launch());
  auto code = d.waitExit(10s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 78);
  EXPECT_NE(d.log().find("secret_file"), std::string::npos) << d.log();
  EXPECT_NE(d.log().find("is accessible by other users (mode 0644)"), std::string::npos) << d.log();
  EXPECT_EQ(d.log().find("mesh-secret-A"), std::string::npos);
}

}  // namespace
}  // namespace rdmamsg::itest
