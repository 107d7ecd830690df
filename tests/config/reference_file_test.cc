// Tests of the reference configuration config/rdmamsgd.yaml: it is valid, documents
// every key, and its tuning values are the built-in defaults, as it says.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "config/loader.h"
#include "config_test_util.h"

namespace rdmamsg::config {
namespace {

std::string referenceText() {
  std::ifstream in(RDMAMSG_REFERENCE_CONFIG);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ReferenceFileTest, IsValid) {
  const LoadResult result = loadConfig(RDMAMSG_REFERENCE_CONFIG);
  ASSERT_TRUE(result.ok()) << testing::PrintToString(test::problemStrings(result));
  EXPECT_EQ(result.config().node, "alpha");
  EXPECT_EQ(result.config().listen.toString(), "127.0.0.1:7471");
  ASSERT_EQ(result.config().peers.size(), 1u);
  EXPECT_EQ(result.config().peers[0].name, "beta");
}

TEST(ReferenceFileTest, TuningValuesAreTheDefaults) {
  const LoadResult result = loadConfig(RDMAMSG_REFERENCE_CONFIG);
  ASSERT_TRUE(result.ok());
  Config expected;  // built-in defaults, plus the identity the file sets
  expected.sourceFile = RDMAMSG_REFERENCE_CONFIG;
  expected.node = result.config().node;
  expected.listen = result.config().listen;
  expected.peers = result.config().peers;
  EXPECT_EQ(describe(result.config()), describe(expected));
}

TEST(ReferenceFileTest, DocumentsEveryKeyWithItsDefault) {
  const std::string text = referenceText();
  for (std::string_view key : kTopLevelKeys) {
    const std::string set = "\n" + std::string(key) + ":";
    const std::string commented = "\n# " + std::string(key) + ":";
    EXPECT_TRUE(text.find(set) != std::string::npos || text.find(commented) != std::string::npos)
        << key << " is not in the reference file";
  }
  for (std::string_view key : kPeerKeys) {
    EXPECT_NE(text.find(std::string(key) + ":"), std::string::npos) << key;
  }
  // Every optional key says what its default is.
  std::size_t defaults = 0;
  for (std::size_t at = text.find("Default:"); at != std::string::npos;
       at = text.find("Default:", at + 1)) {
    ++defaults;
  }
  EXPECT_EQ(defaults, kTopLevelKeys.size() - 3);  // all but node, listen and peers
}

TEST(ReferenceFileTest, ServesEveryHostOfItsMeshWithNodeOverride) {
  const LoadResult result = loadConfig(RDMAMSG_REFERENCE_CONFIG, "beta");
  ASSERT_TRUE(result.ok()) << testing::PrintToString(test::problemStrings(result));
  EXPECT_EQ(result.config().node, "beta");
  ASSERT_EQ(result.config().peers.size(), 1u);
  EXPECT_EQ(result.config().peers[0].name, "alpha");
}

}  // namespace
}  // namespace rdmamsg::config
