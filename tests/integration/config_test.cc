// Integration: rdmamsgd's configuration handling as an operator sees it —
// --check-config, refusing to start on a bad file or a taken address.
#include <gtest/gtest.h>

#include "harness.h"

namespace rdmamsg::itest {
namespace {

// Runs rdmamsgd (under softrdma-run) to completion with `args`.
CliResult runDaemon(const TempDir& dir, const std::vector<std::string>& args,
                    std::chrono::milliseconds timeout = 10s) {
  Process::Options o;
  o.argv = {softrdmaRun(), daemonBinary()};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.stdoutPath = dir.file("daemon.out");
  o.stderrPath = dir.file("daemon.err");
  CliResult r;
  Process p;
  if (!p.start(o)) return r;
  auto code = p.wait(timeout);
  if (!code) p.kill9();
  r.code = code.value_or(-9);
  r.out = readFile(o.stdoutPath);
  r.err = readFile(o.stderrPath);
  return r;
}

std::string goodConfig(const TempDir& dir, uint16_t port) {
  return "node: alpha\n"
         "listen: 127.0.0.1:" +
         std::to_string(port) +
         "\n"
         "socket: " +
         dir.file("alpha.sock") +
         "\n"
         "peers:\n"
         "  - name: beta\n"
         "    address: 127.0.0.2:" +
         std::to_string(port) + "\n";
}

TEST(Config, CheckConfigAcceptsAGoodFile) {
  TempDir dir;
  std::string path = dir.file("good.yaml");
  writeFile(path, goodConfig(dir, 7471));
  CliResult r = runDaemon(dir, {"--check-config", path});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(path + ": OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alpha"), std::string::npos) << r.out;
}

TEST(Config, CheckConfigReportsEveryProblemWithItsLine) {
  TempDir dir;
  std::string path = dir.file("bad.yaml");
  writeFile(path, goodConfig(dir, 7471) +
                      "bufer_size: 64KiB\n"          // line 7: misspelt key
                      "heartbeat_interval: 10s\n");  // line 8: not below the timeout
  CliResult r = runDaemon(dir, {"--check-config", path});
  EXPECT_EQ(r.code, 78) << r.out << r.err;
  EXPECT_NE(r.err.find(path + ":7:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("buffer_size"), std::string::npos) << "no suggestion: " << r.err;
  EXPECT_NE(r.err.find(path + ":8:"), std::string::npos) << r.err;
}

// Rails (docs/configuration.md): every rail's device is checked, and two
// rails on one device — softrdma's one device for every address here — are
// noted as a failure they share, not refused.
TEST(Config, CheckConfigChecksEveryRailAndNotesASharedDevice) {
  TempDir dir;
  std::string path = dir.file("rails.yaml");
  writeFile(path, "node: alpha\nlisten: [127.0.0.1:7471, 127.0.0.11:7471]\nsocket: " +
                      dir.file("alpha.sock") +
                      "\npeers:\n  - name: beta\n    address: [127.0.0.2:7471, 127.0.0.12:7471]\n");
  CliResult r = runDaemon(dir, {"--check-config", path});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("listen [127.0.0.1:7471, 127.0.0.11:7471]"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("note: rails 0 and 1 (127.0.0.1:7471, 127.0.0.11:7471) are both on RDMA "
                       "device softrdma0: a failure of that device takes both"),
            std::string::npos)
      << r.err;
}

TEST(Config, DaemonRefusesToStartOnABadFile) {
  TempDir dir;
  std::string path = dir.file("bad.yaml");
  writeFile(path, goodConfig(dir, 7471) + "  - name: gamma\n    address: 127.0.0.2:99999\n");
  CliResult r = runDaemon(dir, {"-c", path});
  EXPECT_EQ(r.code, 78) << r.out << r.err;
  EXPECT_NE(r.err.find(path + ":8:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("99999"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("alpha.sock")));

  CliResult missing = runDaemon(dir, {"-c", dir.file("nonexistent.yaml")});
  EXPECT_EQ(missing.code, 78) << missing.err;
  EXPECT_NE(missing.err.find("nonexistent.yaml"), std::string::npos) << missing.err;
}

TEST(Config, DaemonRefusesToStartOnATakenRdmaCmAddress) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  // A second daemon listening where alpha listens.
  std::string path = c.dir().file("intruder.yaml");
  writeFile(path, "node: alpha2\nlisten: " + c.address("alpha") + ":" + std::to_string(c.port()) +
                      "\nsocket: " + c.dir().file("alpha2.sock") + "\npeers: []\n");
  CliResult r = runDaemon(c.dir(), {"-c", path});
  EXPECT_NE(r.code, 0);
  EXPECT_GT(r.code, 0) << "crashed instead of exiting: " << r.code;
  std::string all = r.out + r.err;
  EXPECT_NE(all.find("cannot bind"), std::string::npos) << all;
  EXPECT_NE(all.find(c.address("alpha") + ":" + std::to_string(c.port())), std::string::npos)
      << all;
  EXPECT_NE(all.find("in use"), std::string::npos) << all;
  // alpha was not disturbed.
  EXPECT_TRUE(c["alpha"].running());
  EXPECT_TRUE(waitForStatus(c.socket("alpha"), allPeersEstablished, 10s));
}

// Every rail is bound at start: a second rail whose address is taken keeps
// the daemon from starting, and the message names that rail.
TEST(Config, DaemonRefusesToStartWhenOneOfItsRailsIsTaken) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  const std::string taken = c.address("alpha") + ":" + std::to_string(c.port());
  std::string path = c.dir().file("rails.yaml");
  writeFile(path, "node: gamma\nlisten: [127.0.0.99:" + std::to_string(c.port()) + ", " + taken +
                      "]\nsocket: " + c.dir().file("gamma.sock") + "\npeers: []\n");
  CliResult r = runDaemon(c.dir(), {"-c", path});
  EXPECT_GT(r.code, 0) << "started, or crashed: " << r.code;
  std::string all = r.out + r.err;
  EXPECT_NE(all.find("cannot bind rdma_cm to " + taken), std::string::npos) << all;
  EXPECT_TRUE(c["alpha"].running());
  EXPECT_TRUE(waitForStatus(c.socket("alpha"), allPeersEstablished, 10s));
}

TEST(Config, DaemonRefusesToStartOnASocketPathInUse) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  uint16_t port = pickPort({"127.0.0.3"});
  ASSERT_NE(port, 0);
  std::string path = c.dir().file("second.yaml");
  writeFile(path, "node: other\nlisten: 127.0.0.3:" + std::to_string(port) +
                      "\nsocket: " + c.socket("alpha") + "\npeers: []\n");
  CliResult r = runDaemon(c.dir(), {"-c", path});
  EXPECT_GT(r.code, 0) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("another daemon is listening"), std::string::npos)
      << r.out << r.err;
  // alpha still serves its clients on that socket.
  EXPECT_TRUE(statusOf(c.socket("alpha")).has_value());
}

// A configuration the RDMA device cannot hold is refused up front, naming
// the key, its value and the device limit — not accepted and then failing
// every dial.
TEST(Config, CheckConfigRefusesWhatTheDeviceCannotHold) {
  TempDir dir;
  std::string path = dir.file("big.yaml");
  writeFile(path, goodConfig(dir, 7471) + "buffer_size: 4KiB\nbuffer_count: 16384\n");
  CliResult r = runDaemon(dir, {"--check-config", path});
  EXPECT_EQ(r.code, 78) << r.out << r.err;
  std::string all = r.out + r.err;
  EXPECT_NE(all.find("buffer_count"), std::string::npos) << all;
  EXPECT_NE(all.find("16384"), std::string::npos) << all;
  EXPECT_NE(all.find("max_qp_wr"), std::string::npos) << all;
}

TEST(Config, DaemonRefusesToStartWithWhatTheDeviceCannotHold) {
  TempDir dir;
  uint16_t port = pickPort({"127.0.0.1"});
  ASSERT_NE(port, 0);
  std::string path = dir.file("big.yaml");
  writeFile(path, goodConfig(dir, port) + "buffer_size: 4KiB\nbuffer_count: 16384\n");
  CliResult r = runDaemon(dir, {"-c", path});
  EXPECT_EQ(r.code, 78) << r.out << r.err;
  std::string all = r.out + r.err;
  EXPECT_NE(all.find("buffer_count"), std::string::npos) << all;
  EXPECT_NE(all.find("max_qp_wr"), std::string::npos) << all;
}

}  // namespace
}  // namespace rdmamsg::itest
