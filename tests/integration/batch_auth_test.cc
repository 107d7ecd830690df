// Integration: every batch authenticated (docs/security.md). alpha, beta and
// gamma share a mesh secret; softrdma's tamper hook (softrdma/tamper.h)
// alters what alpha sends to beta on the wire, as an attacker who can
// inject into the RC connection would: a forged batch, a replayed one, a
// flipped bit, two batches reordered, one truncated. Each time beta rejects
// the batch before acting on it, counts it under its reason, closes the
// connection and the two re-handshake; the listener never sees a forged
// message or a message twice, and gamma's connection to beta is not
// touched. A handshake relayed between alpha and beta by a third party
// (tests/integration/handshake_relay.cc) fails on both ends.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include "daemon/peer/protocol.h"
#include "harness.h"
#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s));
}

const std::string kSecret = "batch-auth-secret-0123456789abcdefghijklmnopqrstuvwxyz";

uint64_t rejectedBatches(const Json& status, const std::string& peer, const std::string& reason) {
  const Json* p = peerEntry(status, peer);
  if (p == nullptr || !p->contains("batches_rejected")) return 0;
  return (*p)["batches_rejected"].value(reason, uint64_t{0});
}

uint64_t connectsOf(const Json& status, const std::string& peer) {
  const Json* p = peerEntry(status, peer);
  return p != nullptr ? p->value("connects", uint64_t{0}) : 0;
}

// A batch made up by someone without the keys: well formed, carrying a
// message for the listener and returning 1000 credits (taken before the
// check, they would close the connection as a protocol error instead of a
// rejection), its trailer a guess. As hex, for `tamper inject:`.
std::string forgedBatchHex() {
  std::vector<std::byte> b(256);
  peer::BatchWriter w;
  w.reset(b.data(), b.size());
  w.addMessage(1, peer::kFirstFragment | peer::kLastFragment, "intruder", "svc", 0,
               bytes("forged"));
  const size_t n = w.finish(1000);
  std::string hex;
  char two[3];
  for (size_t i = 0; i < n + 24; i++) {
    std::snprintf(two, sizeof two, "%02x", i < n ? static_cast<unsigned>(b[i]) : (i == n ? 7 : 0));
    hex += two;
  }
  return hex;
}

class BatchAuthAttack : public ::testing::Test {
 protected:
  void SetUp() override { startMesh(false); }
  void startMesh(bool encryption) {
    const std::string secret = scratch_.file("mesh.secret");
    writeFile(secret, kSecret + "\n");
    ::chmod(secret.c_str(), 0600);
    control_ = scratch_.file("alpha.ctl");
    MeshOptions o;
    o.extra = "secret_file: " + secret + "\n" + (encryption ? "encryption: on\n" : "");
    // Few heartbeats: the SEND the hook alters is most often the test's message.
    o.heartbeatInterval = "1s";
    o.heartbeatTimeout = "5s";
    o.nodeWrapper["alpha"] = {"/usr/bin/env", "SOFTRDMA_CONTROL=" + control_};
    cluster_ = std::make_unique<Cluster>(std::vector<std::string>{"alpha", "beta", "gamma"}, o);
    ASSERT_TRUE(cluster_->start());
    ASSERT_TRUE(cluster_->waitFullMesh(10s));
  }
  Cluster& c() { return *cluster_; }

  int ctl(const std::vector<std::string>& command) {
    Process p;
    Process::Options o;
    o.argv = {softrdmaCtl(), control_};
    o.argv.insert(o.argv.end(), command.begin(), command.end());
    o.stdoutPath = c().dir().file("ctl.out");
    if (!p.start(o)) return -1;
    return p.wait(10s).value_or(-1);
  }

  // Arms `tamper` on alpha's next SEND to beta and sends a message across:
  // beta rejects a batch for `reason`, the two connect again, and the
  // listener got every message at most once and nothing forged.
  void attack(const std::string& tamper, const std::string& reason) {
    auto listener = Taker::start(c().socket("beta"), "svc");
    auto sender = Client::connect(c().socket("alpha"));
    auto bystander = Client::connect(c().socket("gamma"));
    ASSERT_TRUE(listener && sender && bystander);
    ASSERT_TRUE(sender->sendAndWait("beta", "svc", bytes("before"), 5s).ok());
    auto status = statusOf(c().socket("beta"));
    ASSERT_TRUE(status);
    const uint64_t alphaConnects = connectsOf(*status, "alpha");
    const uint64_t gammaConnects = connectsOf(*status, "gamma");
    EXPECT_EQ(rejectedBatches(*status, "alpha", reason), 0u);

    ASSERT_EQ(ctl({"tamper", tamper, c().address("beta")}), 0);
    const Status during = sender->sendAndWait("beta", "svc", bytes("during"), 5s);
    ASSERT_TRUE(waitForStatus(
        c().socket("beta"), [&](const Json& s) { return rejectedBatches(s, "alpha", reason) == 1; },
        10s))
        << c()["beta"].log();
    EXPECT_TRUE(c()["beta"].waitLog("batch rejected", 2s)) << c()["beta"].log();
    // The mesh recovers: a new connection, proven again.
    ASSERT_TRUE(waitForStatus(
        c().socket("beta"),
        [&](const Json& s) {
          return connectsOf(s, "alpha") > alphaConnects && allPeersEstablished(s);
        },
        10s))
        << c()["beta"].log();
    ASSERT_TRUE(c().waitFullMesh(10s));
    ASSERT_TRUE(sender->sendAndWait("beta", "svc", bytes("after"), 5s).ok());
    ASSERT_TRUE(bystander->sendAndWait("beta", "svc", bytes("bystander"), 5s).ok());

    std::vector<std::string> got;
    Message m;
    while (std::count(got.begin(), got.end(), "bystander") == 0 && listener->receive(m, 5s).ok())
      got.emplace_back(m.text());
    const auto count = [&](const char* text) { return std::count(got.begin(), got.end(), text); };
    EXPECT_EQ(count("before"), 1);
    EXPECT_EQ(count("after"), 1);
    EXPECT_EQ(count("bystander"), 1);
    EXPECT_EQ(count("forged"), 0) << "a forged message reached the application";
    // Taken at most once; and when its sender was told it was, exactly once.
    EXPECT_LE(count("during"), 1);
    if (during.ok()) {
      EXPECT_EQ(count("during"), 1);
    }
    EXPECT_EQ(got.size(), static_cast<size_t>(count("before") + count("after") + count("during") +
                                              count("bystander")));
    // Only that batch, only that connection.
    status = statusOf(c().socket("beta"));
    ASSERT_TRUE(status);
    for (const char* other : {"bad_mac", "replayed", "reordered", "truncated"})
      if (reason != other) {
        EXPECT_EQ(rejectedBatches(*status, "alpha", other), 0u) << other;
      }
    EXPECT_EQ(connectsOf(*status, "gamma"), gammaConnects) << "gamma's connection was touched";
    EXPECT_TRUE(c()["beta"].running());
  }

  TempDir scratch_;
  std::string control_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(BatchAuthAttack, AForgedBatchIsRejected) {
  attack("inject:" + forgedBatchHex(), "bad_mac");
}

TEST_F(BatchAuthAttack, AFlippedBitIsRejected) {
  attack("flip", "bad_mac");
}

TEST_F(BatchAuthAttack, AReplayedBatchIsRejected) {
  attack("replay", "replayed");
}

TEST_F(BatchAuthAttack, ReorderedBatchesAreRejected) {
  attack("reorder", "reordered");
}

TEST_F(BatchAuthAttack, ATruncatedBatchIsRejected) {
  attack("truncate", "truncated");
}

// The rejections are in the metrics too, by peer and reason.
TEST_F(BatchAuthAttack, RejectionsAreCountedInTheMetrics) {
  attack("truncate", "truncated");
  const CliResult r = runCli(c().dir(), {"--socket", c().socket("beta"), "metrics"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(
      r.out.find("rdmamsg_peer_batches_rejected_total{peer=\"alpha\",reason=\"truncated\"} 1"),
      std::string::npos)
      << r.out;
}

// With encryption: on the batches are AES-256-GCM under the same keys, and
// an altered one is rejected the same way.
class EncryptedBatchAttack : public BatchAuthAttack {
 protected:
  void SetUp() override { startMesh(true); }
};

TEST_F(EncryptedBatchAttack, AFlippedBitIsRejected) {
  auto status = statusOf(c().socket("beta"));
  ASSERT_TRUE(status);
  const Json* alpha = peerEntry(*status, "alpha");
  ASSERT_NE(alpha, nullptr);
  EXPECT_EQ(alpha->value("batch_protection", ""), "aes-256-gcm");
  attack("flip", "bad_mac");
}

TEST_F(EncryptedBatchAttack, AReplayedBatchIsRejected) {
  attack("replay", "replayed");
}

// Both ends must agree on encryption: a peer without it is refused, never
// taken unencrypted.
TEST(BatchEncryption, APeerThatDoesNotEncryptIsRefused) {
  TempDir dir;
  const std::string secret = dir.file("mesh.secret");
  writeFile(secret, kSecret + "\n");
  ::chmod(secret.c_str(), 0600);
  MeshOptions o;
  o.extra = "secret_file: " + secret + "\n";
  o.nodeExtra["alpha"] = "encryption: on\n";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  const auto refused = [](const Json& s) {
    return s.contains("rejected_connections") &&
           s["rejected_connections"].value("authentication", uint64_t{0}) > 0;
  };
  EXPECT_TRUE(waitForStatus(c.socket("alpha"), refused, 10s)) << c["alpha"].log();
  EXPECT_TRUE(waitForStatus(c.socket("beta"), refused, 10s)) << c["beta"].log();
  auto a = statusOf(c.socket("alpha"));
  ASSERT_TRUE(a);
  EXPECT_NE(peerState(*a, "beta"), "established");
  EXPECT_TRUE(c["alpha"].waitLog("encryption: on", 2s));
}

// alpha dials beta at the relay's address; the relay dials beta from
// alpha's host with alpha's Hello, answers alpha with beta's, and forwards
// the batches. The proofs are bound to each end's own connection: beta
// refuses alpha's proof, and neither end is ever established through it.
TEST(BatchAuthRelay, AHandshakeRelayedOntoAnotherConnectionFails) {
  TempDir dir;
  const std::string secret = dir.file("mesh.secret");
  writeFile(secret, kSecret + "\n");
  ::chmod(secret.c_str(), 0600);
  const uint16_t port = pickPort({"127.0.0.1", "127.0.0.2", "127.0.0.3"});
  const std::string p = std::to_string(port);
  const auto config = [&](const std::string& node, const std::string& betaAt) {
    const std::string path = dir.file(node + ".yaml");
    writeFile(path, "node: " + node + "\nsocket: " + dir.file(node + ".sock") +
                        "\nsecret_file: " + secret + "\nconnect_timeout: 2s\n" +
                        "reconnect_backoff_min: 200ms\nreconnect_backoff_max: 1s\npeers:\n" +
                        "  - {name: alpha, address: 127.0.0.1:" + p + "}\n" +
                        "  - {name: beta, address: " + betaAt + ":" + p + "}\n");
    return path;
  };
  // alpha has beta at the relay's host; beta has the real addresses.
  DaemonProcess alpha("alpha", config("alpha", "127.0.0.3"), dir.file("alpha.sock"),
                      dir.file("alpha.log"));
  DaemonProcess beta("beta", config("beta", "127.0.0.2"), dir.file("beta.sock"),
                     dir.file("beta.log"));
  Process relay;
  Process::Options o;
  o.argv = {softrdmaRun(), handshakeRelayBinary(), "--listen", "127.0.0.3:" + p,
            "--connect",   "127.0.0.2:" + p,       "--bind",   "127.0.0.1"};
  o.stdoutPath = dir.file("relay.out");
  ASSERT_TRUE(relay.start(o));
  ASSERT_TRUE(test::waitFor(
      [&] { return readFile(dir.file("relay.out")).find("listening") != std::string::npos; }, 10s));
  ASSERT_TRUE(beta.start());
  ASSERT_TRUE(alpha.start());
  ASSERT_TRUE(relay.wait(20s)) << readFile(dir.file("relay.out"));
  const std::string out = readFile(dir.file("relay.out"));
  ASSERT_NE(out.find("relaying"), std::string::npos) << out << beta.log();
  EXPECT_NE(out.find("forwarded 1"), std::string::npos) << "alpha's proof went through: " << out;
  // beta checked the proof and refused it.
  EXPECT_TRUE(beta.waitLog("its proof does not match", 5s)) << beta.log();
  auto b = statusOf(beta.socket());
  auto a = statusOf(alpha.socket());
  ASSERT_TRUE(a && b);
  EXPECT_GE((*b)["rejected_connections"].value("authentication", uint64_t{0}), 1u);
  EXPECT_EQ(connectsOf(*b, "alpha"), 0u) << beta.log();
  EXPECT_EQ(connectsOf(*a, "beta"), 0u) << alpha.log();
  EXPECT_EQ(alpha.log().find("peer beta: established"), std::string::npos) << alpha.log();
}

}  // namespace
}  // namespace rdmamsg::itest
