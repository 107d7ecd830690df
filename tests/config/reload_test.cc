// planReload(): what a reload applies, what waits for a restart, and what
// it refuses.
#include "config/reload.h"

#include <gtest/gtest.h>

#include "config_test_util.h"

namespace rdmamsg::config {
namespace {

Config parse(const std::string& yaml) {
  auto r = test::load(yaml, "alpha");
  EXPECT_TRUE(r.ok()) << ::testing::PrintToString(test::problemStrings(r));
  return r.ok() ? r.config() : Config{};
}

const std::string kMesh = R"(listen: 127.0.0.1:7471
peers:
  - {name: alpha, address: 127.0.0.1:7471}
  - {name: beta, address: 127.0.0.2:7471}
  - {name: gamma, address: 127.0.0.3:7471}
)";

TEST(ReloadPlan, TheSameFileChangesNothing) {
  auto plan = std::get<ReloadPlan>(planReload(parse(kMesh), parse(kMesh)));
  EXPECT_FALSE(plan.changesAnything());
  EXPECT_TRUE(plan.restartPending.empty());
}

TEST(ReloadPlan, PeersAddedRemovedAndReaddressedAreNamed) {
  Config running = parse(kMesh);
  Config file = parse(R"(listen: 127.0.0.1:7471
peers:
  - {name: alpha, address: 127.0.0.1:7471}
  - {name: beta, address: 127.0.0.2:7471}
  - {name: gamma, address: 127.0.0.9:7471}
  - {name: delta, address: 127.0.0.4:7471}
)");
  auto plan = std::get<ReloadPlan>(planReload(running, file));
  EXPECT_EQ(plan.added, std::vector<std::string>{"delta"});
  EXPECT_TRUE(plan.removed.empty());
  EXPECT_EQ(plan.readdressed, std::vector<std::string>{"gamma"});
  EXPECT_EQ(plan.next.peers.size(), 3u);

  plan = std::get<ReloadPlan>(planReload(file, running));
  EXPECT_EQ(plan.removed, std::vector<std::string>{"delta"});
  EXPECT_EQ(plan.readdressed, std::vector<std::string>{"gamma"});
}

TEST(ReloadPlan, LiveKeysChangeAndRestartKeysKeepTheirRunningValue) {
  Config running = parse(kMesh);
  Config file = parse(kMesh + R"(heartbeat_interval: 500ms
log_level: debug
buffer_size: 512KiB
socket: /run/other.sock
)");
  auto plan = std::get<ReloadPlan>(planReload(running, file));
  EXPECT_EQ(plan.next.timers.heartbeatInterval, std::chrono::milliseconds(500));
  EXPECT_EQ(plan.next.logLevel, LogLevel::kDebug);
  EXPECT_EQ(plan.next.buffers.bufferSize, running.buffers.bufferSize);
  EXPECT_EQ(plan.next.local.socket, running.local.socket);
  ASSERT_EQ(plan.changed.size(), 2u);
  EXPECT_EQ(plan.changed[0], "heartbeat_interval: 1s -> 500ms");
  EXPECT_EQ(plan.changed[1].rfind("log_level: info -> debug", 0), 0u);
  ASSERT_EQ(plan.restartPending.size(), 2u);
  EXPECT_NE(plan.restartPending[0].find("socket: "), std::string::npos);
  EXPECT_NE(plan.restartPending[1].find("buffer_size: 256"), std::string::npos);
}

// The listener and every connection have their ToS from the start: a new
// value waits for a restart, and the running one stays.
TEST(ReloadPlan, TosWaitsForARestart) {
  Config running = parse(kMesh);
  Config file = parse(std::string(kMesh) + "tos: 106\n");
  auto plan = std::get<ReloadPlan>(planReload(running, file));
  EXPECT_FALSE(plan.next.tos);
  EXPECT_TRUE(plan.changed.empty());
  ASSERT_EQ(plan.restartPending.size(), 1u);
  EXPECT_EQ(plan.restartPending[0], "tos: - -> 106");
}

TEST(ReloadPlan, ANodeCannotBeRenamedWhileItRuns) {
  Config running = parse(kMesh);
  std::string asBeta = kMesh;
  asBeta.replace(asBeta.find("127.0.0.1"), 9, "127.0.0.2");  // listen: beta's address
  auto r = test::load(asBeta, "beta");
  ASSERT_TRUE(r.ok()) << ::testing::PrintToString(test::problemStrings(r));
  auto result = planReload(running, r.config());
  ASSERT_TRUE(std::holds_alternative<std::string>(result));
  EXPECT_NE(std::get<std::string>(result).find("cannot be renamed"), std::string::npos);
}

}  // namespace
}  // namespace rdmamsg::config
