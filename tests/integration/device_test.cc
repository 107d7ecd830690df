// Integration: a daemon survives its RDMA device going away and a port
// flapping (softrdma's control channel emulates both): its connections are
// torn down, the messages in flight are failed back to their senders, the
// device's resources are released, and once the device (or port) is back
// the daemon listens and dials again by itself.
#include <gtest/gtest.h>

#include "harness.h"
#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s));
}

class DeviceEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    control_ = scratch_.file("alpha.ctl");
    // Set before start(): the wrapper is applied when the daemons are made.
    MeshOptions o;
    o.nodeWrapper["alpha"] = {"/usr/bin/env", "SOFTRDMA_CONTROL=" + control_};
    cluster_ = std::make_unique<Cluster>(std::vector<std::string>{"alpha", "beta"}, o);
    ASSERT_TRUE(cluster_->start());
    ASSERT_TRUE(cluster_->waitFullMesh(10s));
  }
  Cluster& c() { return *cluster_; }
  // softrdma-ctl CONTROL COMMAND...: exit code.
  int ctl(const std::vector<std::string>& command) {
    Process p;
    Process::Options o;
    o.argv = {softrdmaCtl(), control_};
    o.argv.insert(o.argv.end(), command.begin(), command.end());
    o.stdoutPath = c().dir().file("ctl.out");
    if (!p.start(o)) return -1;
    return p.wait(10s).value_or(-1);
  }
  bool alphaSeesBeta(bool up, std::chrono::milliseconds timeout) {
    return waitForStatus(
        c().socket("alpha"),
        [&](const Json& s) { return (peerState(s, "beta") == "established") == up; }, timeout);
  }

  TempDir scratch_;
  std::string control_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(DeviceEvents, DeviceRemovalIsSurvived) {
  auto listener = Taker::start(c().socket("beta"), "svc");
  auto sender = Client::connect(c().socket("alpha"));
  ASSERT_TRUE(listener && sender);
  ASSERT_TRUE(sender->sendAndWait("beta", "svc", bytes("before"), 5s).ok());

  ASSERT_EQ(ctl({"remove-device", "1500"}), 0);
  ASSERT_TRUE(alphaSeesBeta(false, 5s)) << c()["alpha"].log();
  // While it is gone, sending fails at once with a clear reason.
  Status st = sender->sendAndWait("beta", "svc", bytes("while gone"), 5s);
  EXPECT_EQ(st.code(), Errc::peer_unreachable) << st.toString();
  EXPECT_TRUE(c()["alpha"].waitLog("failed or was removed", 5s)) << c()["alpha"].log();

  // Back after 1.5 s: listening and connected again without a restart.
  ASSERT_TRUE(c().waitFullMesh(10s)) << c()["alpha"].log();
  EXPECT_TRUE(c()["alpha"].waitLog("listening for peers", 1s));
  EXPECT_TRUE(c()["alpha"].running());
  ASSERT_TRUE(sender->sendAndWait("beta", "svc", bytes("after"), 5s).ok());
  Message m;
  ASSERT_TRUE(listener->receive(m, 5s).ok());
  EXPECT_EQ(m.text(), "before");
  ASSERT_TRUE(listener->receive(m, 5s).ok());
  EXPECT_EQ(m.text(), "after");
  // Incoming connections work too: beta's restart is accepted by alpha.
  ASSERT_TRUE(c()["beta"].restart());
  EXPECT_TRUE(c().waitFullMesh(10s)) << c()["alpha"].log();
}

TEST_F(DeviceEvents, PortDownClosesConnectionsAndPortUpRedials) {
  ASSERT_EQ(ctl({"port-down"}), 0);
  ASSERT_TRUE(alphaSeesBeta(false, 5s)) << c()["alpha"].log();
  EXPECT_TRUE(c()["alpha"].waitLog("port down", 2s)) << c()["alpha"].log();
  ASSERT_EQ(ctl({"port-up"}), 0);
  EXPECT_TRUE(alphaSeesBeta(true, 5s)) << c()["alpha"].log();
  EXPECT_TRUE(c().waitFullMesh(5s));
}

// Seed 004: the shared completion queue is sized within the device's max_cqe. softrdma reports
// (and enforces) the max_cqe that SOFTRDMA_MAX_CQE sets: one entry short of what the daemon needs
// keeps it from starting, naming the key and the limit; exactly what it needs is enough.
class CompletionQueueLimit : public ::testing::Test {
 protected:
  // Launches alpha (its peer beta never runs) on a device with `maxCqe` entries per CQ.
  std::unique_ptr<DaemonProcess> launch(int maxCqe) {
    const std::string port = std::to_string(pickPort({"127.0.0.1", "127.0.0.2"}));
    const std::string name = "alpha-" + std::to_string(maxCqe);
    writeFile(dir_.file(name + ".yaml"),
              "node: alpha\nsocket: " + dir_.file(name + ".sock") +
                  "\npeers:\n  - {name: alpha, address: 127.0.0.1:" + port +
                  "}\n  - {name: beta, address: 127.0.0.2:" + port + "}\n");
    auto d = std::make_unique<DaemonProcess>("alpha", dir_.file(name + ".yaml"),
                                             dir_.file(name + ".sock"), dir_.file(name + ".log"));
    d->setWrapper({"/usr/bin/env", "SOFTRDMA_MAX_CQE=" + std::to_string(maxCqe)});
    EXPECT_TRUE(d->launch());
    return d;
  }
  // The entries the daemon said it needs ("needs a completion queue of N entries"), or 0.
  static uint64_t needed(const std::string& log) {
    const std::string key = "needs a completion queue of ";
    auto at = log.find(key);
    return at == std::string::npos ? 0 : std::stoull(log.substr(at + key.size()));
  }
  TempDir dir_;
};

TEST_F(CompletionQueueLimit, OneEntryShortRefusesToStartAndExactlyEnoughRuns) {
  auto small = launch(64);
  ASSERT_TRUE(small->waitExit(10s)) << "started with a CQ over max_cqe";
  const std::string log = small->log();
  EXPECT_NE(log.find("over the max_cqe of 64"), std::string::npos) << log;
  const uint64_t needs = needed(log);
  ASSERT_GT(needs, 64u) << log;

  auto short1 = launch(static_cast<int>(needs - 1));
  auto code = short1->waitExit(10s);
  ASSERT_TRUE(code) << "started with max_cqe one short";
  EXPECT_NE(*code, 0);

  auto exact = launch(static_cast<int>(needs));
  EXPECT_TRUE(waitForStatus(
      exact->socket(), [](const Json&) { return true; }, 10s))
      << exact->log();
  EXPECT_TRUE(exact->running());
}

}  // namespace
}  // namespace rdmamsg::itest
