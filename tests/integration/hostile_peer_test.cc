// Integration: a hostile peer. hostile_peer (over softrdma) connects to
// alpha as beta, from beta's address, completes the handshake and then
// breaks the peer protocol one way per run. Alpha disconnects it with a
// reason for every violation, answers well-formed messages it cannot take
// (unknown service, too large) with an error confirmation, and serves its
// other peer (gamma) and its clients throughout.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <string_view>
#include <thread>

#include "harness.h"

namespace rdmamsg::itest {
namespace {

class HostilePeer : public ::testing::Test {
 protected:
  void SetUp() override { startCluster({}); }
  void startCluster(const std::string& extra) {
    MeshOptions o;
    o.extra = extra;
    // Connections lost are logged at warning five a minute, the rest at
    // debug: every case's reason is in the log only at debug.
    o.logLevel = "debug";
    cluster_ = std::make_unique<Cluster>(std::vector<std::string>{"alpha", "beta", "gamma"}, o);
    ASSERT_TRUE(cluster_->start());
    ASSERT_TRUE(cluster_->waitFullMesh());
    ASSERT_TRUE(c()["beta"].stop());  // the hostile peer takes beta's place
    ASSERT_TRUE(waitForStatus(c().socket("alpha"),
                              [](const Json& s) { return peerState(s, "beta") != "established"; }));
  }
  Cluster& c() { return *cluster_; }

  // Runs hostile_peer in `mode`; returns what it printed. Modes acceptor-*
  // listen at beta's address for alpha's dial; the others dial alpha.
  std::string run(const std::string& mode) {
    const std::string out = c().dir().file("hostile-" + mode + ".out");
    Process p;
    Process::Options o;
    const std::string port = std::to_string(c().port());
    o.argv = {softrdmaRun(), hostilePeerBinary()};
    if (mode.rfind("acceptor-", 0) == 0)
      o.argv.insert(o.argv.end(), {"--listen", c().address("beta") + ":" + port});
    else
      o.argv.insert(o.argv.end(), {"--connect", c().address("alpha") + ":" + port, "--bind",
                                   c().address("beta")});
    o.argv.insert(o.argv.end(), {"--name", "beta", "--target", "alpha", "--mode", mode});
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
      {"bad-batch", "malformed batch from peer: not a batch (wrong magic)"},
      {"bad-record", "malformed record from peer: record 1 of 1: unknown record type 99"},
      {"credits", "peer returned more credits than it has receive buffers"},
      {"release", "peer released more credits than it holds"},
      {"sequence", "message out of sequence from peer"},
      {"fragment", "fragments exceed the announced message length"},
      {"confirm", "confirmation for a message not in flight"},
      {"auth", "authentication record after the handshake"},
      {"resume", "a resume record on a connection without resume"},
      {"move", "a move before the session was resumed"},
      {"results", "a results record on a connection without result acknowledgements"},
  };
  for (const auto& [mode, reason] : cases) {
    SCOPED_TRACE(mode);
    EXPECT_EQ(run(mode), "established\ndisconnected\n");
    EXPECT_TRUE(c()["alpha"].waitLog(std::string("peer beta: connection lost: ") + reason))
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
  // Lines of `log` holding both `a` and `b`.
  static size_t linesWith(const std::string& log, const std::string& a, const std::string& b) {
    size_t n = 0, at = 0;
    while (at < log.size()) {
      size_t end = log.find('\n', at);
      if (end == std::string::npos) end = log.size();
      const std::string_view l(log.data() + at, end - at);
      if (l.find(a) != std::string_view::npos && l.find(b) != std::string_view::npos) n++;
      at = end + 1;
    }
    return n;
  }
  // Waits (bounded) until alpha's log has `count` such lines.
  bool logLinesWith(const std::string& a, const std::string& b, size_t count) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (linesWith(c()["alpha"].log(), a, b) >= count) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
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
      // alpha dialing a listener that lies about the secret
      {"acceptor-wrong-proof", "its proof does not match this node's mesh secret"},
      {"acceptor-data-first", "its first batch is not an authentication record"},
  };
  uint64_t n = 0;
  for (const auto& [mode, reason] : cases) {
    SCOPED_TRACE(mode);
    const std::string line = std::string("peer beta: authentication failed on the connection ") +
                             (std::string(mode).rfind("acceptor-", 0) == 0 ? "to" : "from") +
                             " 127.0.0.2:";
    const size_t seen = linesWith(c()["alpha"].log(), line, reason);
    EXPECT_EQ(run(mode), "established\ndisconnected\n");
    ++n;
    // Each failure is counted once, and logged on one line with the address
    // and the reason.
    EXPECT_TRUE(waitForStatus(c().socket("alpha"), [&](const Json& st) {
      return st["rejected_connections"].value("authentication", uint64_t{0}) == before + n;
    }));
    EXPECT_TRUE(logLinesWith(line, reason, seen + 1)) << c()["alpha"].log();
    auto st = statusOf(c().socket("alpha"));
    ASSERT_TRUE(st);
    EXPECT_NE(peerState(*st, "beta"), "established");
    EXPECT_EQ(peerEntry(*st, "beta")->value("messages_received", uint64_t{0}), 0u);
    expectGammaServed(gammaConnects);
  }
}

}  // namespace
}  // namespace rdmamsg::itest
