// Tests of the connect-on-demand keys: connect (always | on_demand) and
// idle_timeout, their defaults, their problems (at their line) and reloads.
#include <gtest/gtest.h>

#include "config/loader.h"
#include "config/reload.h"
#include "config_test_util.h"

namespace rdmamsg::config {
namespace {

using std::chrono::milliseconds;
using test::kMinimal;
using test::load;
using test::onlyProblem;

LoadResult withLines(const std::string& lines) {
  return load(std::string(kMinimal) + lines);
}

TEST(ConnectTest, DefaultsAreAlwaysWithoutIdleTimeout) {
  const LoadResult result = load(kMinimal);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.config().connect, ConnectMode::kAlways);
  EXPECT_EQ(result.config().timers.idleTimeout, milliseconds(0));
  const std::string line = describe(result.config());
  EXPECT_NE(line.find("connect=always idle_timeout=off"), std::string::npos) << line;
}

TEST(ConnectTest, ReadsOnDemandAndIdleTimeout) {
  const LoadResult result = withLines("connect: on_demand\nidle_timeout: 10m\n");
  ASSERT_TRUE(result.ok()) << testing::PrintToString(test::problemStrings(result));
  EXPECT_EQ(result.config().connect, ConnectMode::kOnDemand);
  EXPECT_EQ(result.config().timers.idleTimeout, milliseconds(600'000));
  EXPECT_NE(describe(result.config()).find("connect=on_demand idle_timeout=10m"),
            std::string::npos);
  // On demand without an idle timeout: connections stay once made.
  const LoadResult kept = withLines("connect: on_demand\n");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept.config().timers.idleTimeout, milliseconds(0));
}

TEST(ConnectTest, ZeroOrOffMeansNeverAndIsValidWithAlways) {
  for (const char* off : {"0", "off", "0ms", "0s"}) {
    const LoadResult result = withLines(std::string("idle_timeout: ") + off + "\n");
    ASSERT_TRUE(result.ok()) << off << ": " << testing::PrintToString(test::problemStrings(result));
    EXPECT_EQ(result.config().timers.idleTimeout, milliseconds(0)) << off;
    EXPECT_EQ(result.config().connect, ConnectMode::kAlways);
  }
}

TEST(ConnectTest, AnUnknownModeIsRefusedAtItsLine) {
  const ConfigProblem p = onlyProblem(withLines("connect: sometimes\n"));
  EXPECT_EQ(p.line, 6);
  EXPECT_EQ(p.message, "connect: 'sometimes' is not always or on_demand");
}

TEST(ConnectTest, BadIdleTimeoutsAreRefusedAtTheirLine) {
  {
    const ConfigProblem p = onlyProblem(withLines("connect: on_demand\nidle_timeout: 10\n"));
    EXPECT_EQ(p.line, 7);
    EXPECT_NE(p.message.find("idle_timeout: '10' has no unit"), std::string::npos) << p.message;
    EXPECT_NE(p.message.find("or 0 (off)"), std::string::npos) << p.message;
  }
  {
    const ConfigProblem p = onlyProblem(withLines("connect: on_demand\nidle_timeout: 25h\n"));
    EXPECT_EQ(p.line, 7);
    EXPECT_EQ(p.message, "idle_timeout: 25h out of range 1ms..24h (or 0: off)");
  }
  {
    const ConfigProblem p = onlyProblem(withLines("connect: on_demand\nidle_timeout: soon\n"));
    EXPECT_EQ(p.line, 7);
  }
}

// With connect: always the daemon would dial an idle-closed peer again at once.
TEST(ConnectTest, IdleTimeoutNeedsOnDemand) {
  {
    const ConfigProblem p = onlyProblem(withLines("idle_timeout: 5m\n"));
    EXPECT_EQ(p.line, 6);
    EXPECT_EQ(p.message,
              "idle_timeout: closing idle connections needs connect: on_demand (connect is the "
              "default, always: every peer is dialed again at once)");
  }
  {
    const ConfigProblem p = onlyProblem(withLines("idle_timeout: 5m\nconnect: always\n"));
    EXPECT_EQ(p.line, 6);
    EXPECT_NE(p.message.find("(connect is always:"), std::string::npos) << p.message;
  }
  // A bad mode is reported once, not again through idle_timeout.
  const LoadResult r = withLines("connect: never\nidle_timeout: 5m\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.problems().size(), 1u) << testing::PrintToString(test::problemStrings(r));
}

TEST(ConnectTest, BothKeysChangeByAReload) {
  const Config running = withLines("connect: always\n").config();
  const LoadResult file = withLines("connect: on_demand\nidle_timeout: 90s\n");
  ASSERT_TRUE(file.ok());
  auto planned = planReload(running, file.config());
  ASSERT_TRUE(std::holds_alternative<ReloadPlan>(planned));
  const ReloadPlan& plan = std::get<ReloadPlan>(planned);
  EXPECT_TRUE(plan.restartPending.empty());
  EXPECT_EQ(plan.changed,
            (std::vector<std::string>{"connect: always -> on_demand", "idle_timeout: off -> 90s"}));
  EXPECT_EQ(plan.next.connect, ConnectMode::kOnDemand);
  EXPECT_EQ(plan.next.timers.idleTimeout, milliseconds(90'000));
}

}  // namespace
}  // namespace rdmamsg::config
