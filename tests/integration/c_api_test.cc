// Integration: the C API (rdmamsg/rdmamsg.h) through its example program
// examples/c/ping.c, compiled as C11, against a real daemon.
#include <gtest/gtest.h>

#include "harness.h"

namespace rdmamsg::itest {
namespace {

TEST(CApi, TheCExampleSendsReceivesAndNamesFailures) {
  Cluster c({"alpha", "beta"});
  ASSERT_TRUE(c.start());
  Process ping;
  Process::Options o;
  o.argv = {RDMAMSG_ITEST_C_PING, c.socket("alpha")};
  o.stdoutPath = c.dir().file("ping.out");
  ASSERT_TRUE(ping.start(o));
  EXPECT_EQ(ping.wait(30s), 0) << readFile(c.dir().file("ping.out"));
  EXPECT_NE(readFile(c.dir().file("ping.out"))
                .find("3 messages through rdmamsgd on alpha, and unknown_service"),
            std::string::npos)
      << readFile(c.dir().file("ping.out"));
}

}  // namespace
}  // namespace rdmamsg::itest
