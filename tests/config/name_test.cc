// Tests of the shared name rule, isValidName().
#include <gtest/gtest.h>

#include <string>

#include "config/name.h"

namespace rdmamsg::config {
namespace {

TEST(NameTest, AcceptsLettersDigitsDotUnderscoreDash) {
  EXPECT_TRUE(isValidName("alpha"));
  EXPECT_TRUE(isValidName("Node-7.rack_2"));
  EXPECT_TRUE(isValidName("0"));
  EXPECT_TRUE(isValidName("..."));
}

TEST(NameTest, LengthIsOneTo63) {
  EXPECT_FALSE(isValidName(""));
  EXPECT_TRUE(isValidName(std::string(63, 'a')));
  EXPECT_FALSE(isValidName(std::string(64, 'a')));
}

TEST(NameTest, RejectsOtherCharacters) {
  for (const char* name : {"a b", "a/b", "a:b", "a@b", "é", "a\tb", "node\n", "a*"}) {
    EXPECT_FALSE(isValidName(name)) << name;
  }
}

TEST(NameTest, UsableAtCompileTime) {
  static_assert(isValidName("beta"));
}

}  // namespace
}  // namespace rdmamsg::config
