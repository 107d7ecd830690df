// Tests of the keys of the local data path and the loop: shared_memory and
// idle_strategy, their defaults, their problems (at their line) and reloads.
#include <gtest/gtest.h>

#include "config/loader.h"
#include "config/reload.h"
#include "config_test_util.h"

namespace rdmamsg::config {
namespace {

using test::kMinimal;
using test::load;
using test::onlyProblem;

LoadResult withLines(const std::string& lines) {
  return load(std::string(kMinimal) + lines);
}

TEST(LocalPathTest, SharedMemoryIsOnByDefault) {
  const LoadResult result = load(kMinimal);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result.config().local.sharedMemory);
  const std::string line = describe(result.config());
  EXPECT_NE(line.find(" shared_memory=true "), std::string::npos) << line;
}

TEST(LocalPathTest, SharedMemoryCanBeTurnedOff) {
  const LoadResult result = withLines("shared_memory: false\n");
  ASSERT_TRUE(result.ok()) << testing::PrintToString(test::problemStrings(result));
  EXPECT_FALSE(result.config().local.sharedMemory);
  EXPECT_NE(describe(result.config()).find(" shared_memory=false "), std::string::npos);
  EXPECT_TRUE(withLines("shared_memory: true\n").config().local.sharedMemory);
}

TEST(LocalPathTest, ABadSharedMemoryValueIsRefusedAtItsLine) {
  for (const char* bad : {"yes", "off", "1", "[true]"}) {
    const ConfigProblem p = onlyProblem(withLines(std::string("shared_memory: ") + bad + "\n"));
    EXPECT_EQ(p.file, "test.yaml") << bad;
    EXPECT_EQ(p.line, 6) << bad;
    EXPECT_NE(p.message.find("shared_memory: "), std::string::npos) << p.message;
  }
  EXPECT_EQ(onlyProblem(withLines("shared_memory: yes\n")).toString(),
            "test.yaml:6:16: shared_memory: 'yes' is not true or false");
}

TEST(LocalPathTest, SharedMemoryChangesByAReload) {
  const Config running = load(kMinimal).config();
  const LoadResult file = withLines("shared_memory: false\n");
  ASSERT_TRUE(file.ok());
  auto planned = planReload(running, file.config());
  ASSERT_TRUE(std::holds_alternative<ReloadPlan>(planned));
  const ReloadPlan& plan = std::get<ReloadPlan>(planned);
  EXPECT_TRUE(plan.restartPending.empty());
  EXPECT_EQ(plan.changed, (std::vector<std::string>{"shared_memory: true -> false"}));
  EXPECT_FALSE(plan.next.local.sharedMemory);
}

TEST(LocalPathTest, IdleStrategyIsSleepByDefaultAndTakesItsThreeValues) {
  const LoadResult result = load(kMinimal);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.config().idleStrategy, IdleStrategy::sleep);
  EXPECT_NE(describe(result.config()).find(" idle_strategy=sleep "), std::string::npos);
  for (auto [text, value] :
       {std::pair{"sleep", IdleStrategy::sleep}, std::pair{"adaptive", IdleStrategy::adaptive},
        std::pair{"busy", IdleStrategy::busy}}) {
    const LoadResult r = withLines(std::string("idle_strategy: ") + text + "\n");
    ASSERT_TRUE(r.ok()) << text << ": " << testing::PrintToString(test::problemStrings(r));
    EXPECT_EQ(r.config().idleStrategy, value) << text;
    EXPECT_NE(describe(r.config()).find(std::string(" idle_strategy=") + text + " "),
              std::string::npos);
  }
}

TEST(LocalPathTest, ABadIdleStrategyIsRefusedAtItsLine) {
  EXPECT_EQ(onlyProblem(withLines("shared_memory: true\nidle_strategy: spin\n")).toString(),
            "test.yaml:7:16: idle_strategy: 'spin' is not sleep, adaptive or busy");
  const ConfigProblem p = onlyProblem(withLines("idle_strategy:\n"));
  EXPECT_EQ(p.line, 6);
  EXPECT_EQ(p.message, "idle_strategy: has no value");
}

TEST(LocalPathTest, IdleStrategyWaitsForARestart) {
  const Config running = load(kMinimal).config();
  const LoadResult file = withLines("idle_strategy: busy\n");
  ASSERT_TRUE(file.ok());
  auto planned = planReload(running, file.config());
  ASSERT_TRUE(std::holds_alternative<ReloadPlan>(planned));
  const ReloadPlan& plan = std::get<ReloadPlan>(planned);
  EXPECT_TRUE(plan.changed.empty());
  EXPECT_EQ(plan.restartPending, (std::vector<std::string>{"idle_strategy: sleep -> busy"}));
  EXPECT_EQ(plan.next.idleStrategy, IdleStrategy::sleep);
}

}  // namespace
}  // namespace rdmamsg::config
