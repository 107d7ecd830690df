// Integration: a hostile peer. hostile_peer (over softrdma) connects to
// alpha as beta, from beta's address, completes the handshake and then
// breaks the peer protocol one way per run. Alpha disconnects it with a
// reason for every violation, answers well-formed messages it cannot take
// (unknown service, too large) with an error confirmation, and serves its
// other peer (gamma) and its clients throughout.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "harness.h"

namespace rdmamsg::itest {
namespace {

class HostilePeer : public ::testing::Test {
 protected:
  void SetUp() override { startCluster({}); }
  void startCluster(const std::string& extra) {
    MeshOptions o;
    o.extra = extra;
    cluster_ = std::make_unique<Cluster>(std::vector<std::string>{"alpha", "beta", "gamma"}, o);
    ASSERT_TRUE(cluster_->start());
    ASSERT_TRUE(cluster_->waitFullMesh());
    ASSERT_TRUE(c()["beta"].stop());  // the hostile peer takes beta's place
    ASSERT_TRUE(waitForStatus(c().socket("alpha"),
                              [](const Json& s) { return peerState(s, "beta") != "established"; }));
  }
  Cluster& c() { return *cluster_; }

  // Runs hostile_peer in `mode`; returns what it printed.
  std::string run(const std::string& mode) {
    const std::string out = c().dir().file("hostile-" + mode + ".out");
    Process p;
    Process::Options o;
    o.argv = {softrdmaRun(), hostilePeerBinary(),
              "--connect",   c().address("alpha") + ":" + std::to_string(c().port()),
              "--bind",      c().address("beta"),
              "--name",      "beta",
              "--target",    "alpha",
              "--mode",      mode};
    o.stdoutPath = out;
    o.stderrPath = c().dir().file("hostile-" + mode + ".err");
    EXPECT_TRUE(p.start(o));
    auto code = p.wait(30s);
    EXPECT_EQ(code, std::optional<ExitCode>(0))
        << mode << ": " << readFile(out) << readFile(c().dir().file("hostile-" + mode + ".err"));
    return readFile(out);
  }

  // Alpha still carries gamma's traffic, on the connection it had.
  void expectGammaServed(uint64_t connects) {
    auto s = statusOf(c().socket("alpha"));
    ASSERT_TRUE(s);
    EXPECT_EQ(peerState(*s, "gamma"), "established");
    EXPECT_EQ(peerEntry(*s, "gamma")->value("connects", uint64_t{0}), connects);
    Process listener;
    const std::string out = c().dir().file("inbox-" + std::to_string(++round_) + ".out");
    ASSERT_TRUE(startListener(listener, c(), "gamma", "inbox", 1, out));
    CliResult sent =
        runCli(c().dir(), {"--socket", c().socket("alpha"), "send", "gamma/inbox"}, "still here\n");
    EXPECT_EQ(sent.code, 0) << sent.err;
    EXPECT_EQ(listener.wait(10s), 0);
    EXPECT_EQ(readFile(out), "still here\n");
  }

  std::unique_ptr<Cluster> cluster_;
  int round_ = 0;
};

TEST_F(HostilePeer, EveryProtocolViolationIsDisconnectedWithItsReasonAndOthersAreUnaffected) {
  auto s = statusOf(c().socket("alpha"));
  ASSERT_TRUE(s);
  const uint64_t gammaConnects = peerEntry(*s, "gamma")->value("connects", uint64_t{0});
  const std::pair<const char*, const char*> cases[] = {
      {"bad-batch", "malformed batch from peer"},
      {"bad-record", "malformed record from peer"},
      {"credits", "peer returned more credits than it has receive buffers"},
      {"sequence", "message out of sequence from peer"},
      {"fragment", "fragments exceed the announced message length"},
      {"confirm", "confirmation for a message not in flight"},
      {"auth", "authentication record after the handshake"},
  };
  for (const auto& [mode, reason] : cases) {
    SCOPED_TRACE(mode);
    EXPECT_EQ(run(mode), "established\ndisconnected\n");
    EXPECT_TRUE(c()["alpha"].waitLog(std::string("peer beta: closing connection: ") + reason))
        << c()["alpha"].log();
    expectGammaServed(gammaConnects);
  }
  EXPECT_TRUE(c()["alpha"].running());
}

TEST_F(HostilePeer, WellFormedMessagesItCannotTakeAreAnsweredAndTheLinkStays) {
  auto s = statusOf(c().socket("alpha"));
  ASSERT_TRUE(s);
  const uint64_t gammaConnects = peerEntry(*s, "gamma")->value("connects", uint64_t{0});
  // Error codes as in docs/protocol.md: 2 unknown service, 4 too large.
  EXPECT_EQ(run("unknown-service"), "established\nconfirm 1 2\n");
  EXPECT_EQ(run("oversize"), "established\nconfirm 1 4\n");
  expectGammaServed(gammaConnects);
}

// Against a mesh with a secret, which the hostile peer does not know: every
// way of not proving it ends the connection, counted once each, and beta's
// name is not taken.
class HostilePeerWithoutTheSecret : public HostilePeer {
 protected:
  void SetUp() override {
    const std::string file = secrets_.file("mesh.secret");
    writeFile(file, "mesh-secret-for-the-hostile-peer-test-0123456789\n");
    ::chmod(file.c_str(), 0600);
    startCluster("secret_file: " + file + "\n");
  }
  TempDir secrets_;
};

TEST_F(HostilePeerWithoutTheSecret, NoWayAroundTheProofGetsAConnection) {
  auto s = statusOf(c().socket("alpha"));
  ASSERT_TRUE(s);
  const uint64_t gammaConnects = peerEntry(*s, "gamma")->value("connects", uint64_t{0});
  const uint64_t before = (*s)["rejected_connections"].value("authentication", uint64_t{0});
  const std::pair<const char*, const char*> cases[] = {
      {"auth-wrong-proof", "its proof does not match this node's mesh secret"},
      {"auth-data-first", "its first batch is not an authentication record"},
      {"auth-silent", "the peer's proof did not come within 2000 ms"},
  };
  uint64_t n = 0;
  for (const auto& [mode, reason] : cases) {
    SCOPED_TRACE(mode);
    EXPECT_EQ(run(mode), "established\ndisconnected\n");
    ++n;
    // Each failure is counted once, and logged with the address it came from.
    EXPECT_TRUE(waitForStatus(c().socket("alpha"), [&](const Json& st) {
      return st["rejected_connections"].value("authentication", uint64_t{0}) == before + n;
    }));
    EXPECT_TRUE(c()["alpha"].waitLog(
        std::string("peer beta: authentication failed on the connection from 127.0.0.2:")))
        << c()["alpha"].log();
    EXPECT_TRUE(c()["alpha"].waitLog(reason)) << c()["alpha"].log();
    auto st = statusOf(c().socket("alpha"));
    ASSERT_TRUE(st);
    EXPECT_NE(peerState(*st, "beta"), "established");
    EXPECT_EQ(peerEntry(*st, "beta")->value("messages_received", uint64_t{0}), 0u);
    expectGammaServed(gammaConnects);
  }
}

}  // namespace
}  // namespace rdmamsg::itest
