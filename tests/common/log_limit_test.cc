// LogLimit: a burst of lines per window, the rest counted and reported by
// the next line written.
#include "common/log_limit.h"

#include <gtest/gtest.h>

namespace rdmamsg {
namespace {

using namespace std::chrono_literals;

TEST(LogLimit, ABurstPassesThenLinesAreCountedAndReportedInTheNextWindow) {
  LogLimit limit(3, 10s);
  const auto t0 = LogLimit::Clock::time_point{} + 1h;
  const uint64_t before = logLinesSuppressed();
  for (int i = 0; i < 3; i++) {
    EXPECT_TRUE(limit.admit(t0 + std::chrono::seconds(i)));
    EXPECT_EQ(limit.suffix(), "");
  }
  for (int i = 0; i < 7; i++)
    EXPECT_FALSE(limit.admit(t0 + 5s));
  EXPECT_EQ(limit.suppressedTotal(), 7u);
  EXPECT_EQ(logLinesSuppressed() - before, 7u);
  // A new window: the first line says how many were left out.
  ASSERT_TRUE(limit.admit(t0 + 10s));
  EXPECT_EQ(limit.suffix(), " (7 similar lines suppressed)");
  ASSERT_TRUE(limit.admit(t0 + 11s));
  EXPECT_EQ(limit.suffix(), "");
}

TEST(LogLimit, LinesSpreadOutAreNeverSuppressed) {
  LogLimit limit(1, 1s);
  const auto t0 = LogLimit::Clock::time_point{} + 1h;
  for (int i = 0; i < 100; i++)
    EXPECT_TRUE(limit.admit(t0 + std::chrono::seconds(i)));
  EXPECT_EQ(limit.suppressedTotal(), 0u);
}

}  // namespace
}  // namespace rdmamsg
