// Tests of `rdmamsgd --check-config`: output streams and exit status.
#include <gtest/gtest.h>

#include <sstream>

#include "config/check_command.h"
#include "config_test_util.h"

namespace rdmamsg::config {
namespace {

TEST(CheckCommandTest, ValidFilePrintsOneSummaryLine) {
  test::TempDir dir;
  const std::string path = dir.write("ok.yaml", test::kMinimal);
  std::ostringstream out, err;
  EXPECT_EQ(checkConfigCommand(path, std::nullopt, out, err), 0);
  EXPECT_EQ(out.str(), path + ": OK: node alpha, listen 127.0.0.1:7471, 1 peer\n");
  EXPECT_EQ(err.str(), "");
}

TEST(CheckCommandTest, NodeOverrideIsApplied) {
  test::TempDir dir;
  const std::string path = dir.write("mesh.yaml",
                                     "peers:\n"
                                     "  - {name: a, address: 127.0.0.1:1}\n"
                                     "  - {name: b, address: 127.0.0.2:1}\n"
                                     "  - {name: c, address: 127.0.0.3:1}\n");
  std::ostringstream out, err;
  EXPECT_EQ(checkConfigCommand(path, "b", out, err), 0);
  EXPECT_EQ(out.str(), path + ": OK: node b, listen 127.0.0.2:1, 2 peers\n");
}

TEST(CheckCommandTest, ProblemsGoToErrOnePerLineWithExConfig) {
  test::TempDir dir;
  const std::string path = dir.write("bad.yaml",
                                     "node: alpha\n"
                                     "listen: 127.0.0.1:70000\n"
                                     "peers: []\n"
                                     "buffer_count: 0\n");
  std::ostringstream out, err;
  EXPECT_EQ(checkConfigCommand(path, std::nullopt, out, err), 78);
  EXPECT_EQ(kExitConfig, 78);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(err.str(), path + ":2:9: listen: port 70000 out of range 1..65535\n" + path +
                           ":4:15: buffer_count: 0 out of range 2..16384\n");
}

TEST(CheckCommandTest, MissingFile) {
  test::TempDir dir;
  const std::string path = (dir.path() / "nope.yaml").string();
  std::ostringstream out, err;
  EXPECT_EQ(checkConfigCommand(path, std::nullopt, out, err), 78);
  EXPECT_EQ(err.str(), path + ": cannot read configuration file: No such file or directory\n");
}

}  // namespace
}  // namespace rdmamsg::config
