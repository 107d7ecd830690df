// Subjects and patterns (common/subject.h): NATS's rules and rdmamsg's limits.
#include "common/subject.h"

#include <gtest/gtest.h>

#include <string>

namespace rdmamsg::subject {
namespace {

TEST(SubjectTest, APublishNamesTokensWithoutWildcards) {
  EXPECT_EQ(checkSubject("orders"), nullptr);
  EXPECT_EQ(checkSubject("orders.x.eu"), nullptr);
  EXPECT_EQ(checkSubject("a-b_c:d$e.9"), nullptr);
  EXPECT_NE(checkSubject(""), nullptr);
  EXPECT_NE(checkSubject("orders..eu"), nullptr);
  EXPECT_NE(checkSubject(".orders"), nullptr);
  EXPECT_NE(checkSubject("orders."), nullptr);
  EXPECT_NE(checkSubject("orders.*"), nullptr);
  EXPECT_NE(checkSubject("orders.>"), nullptr);
  EXPECT_NE(checkSubject("orders eu"), nullptr);
  EXPECT_NE(checkSubject("orders\teu"), nullptr);
  EXPECT_NE(checkSubject("caf\xc3\xa9"), nullptr) << "printable ASCII only";
}

TEST(SubjectTest, APatternUsesWildcardsAsWholeTokensAndGreaterOnlyLast) {
  EXPECT_EQ(checkPattern("orders.*.eu"), nullptr);
  EXPECT_EQ(checkPattern("orders.>"), nullptr);
  EXPECT_EQ(checkPattern(">"), nullptr);
  EXPECT_EQ(checkPattern("*"), nullptr);
  EXPECT_EQ(checkPattern("*.*.>"), nullptr);
  EXPECT_NE(checkPattern("orders.>.eu"), nullptr);
  EXPECT_NE(checkPattern("orders.x*"), nullptr);
  EXPECT_NE(checkPattern("orders.>x"), nullptr);
  EXPECT_NE(checkPattern("orders..*"), nullptr);
}

TEST(SubjectTest, LimitsOnLengthAndTokensNameTheLimit) {
  std::string longest(kMaxSubjectLength, 'a');
  EXPECT_EQ(checkSubject(longest), nullptr);
  const char* why = checkSubject(longest + "a");
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why).find("255"), std::string::npos) << why;
  std::string tokens = "t";
  for (size_t i = 1; i < kMaxTokens; i++)
    tokens += ".t";
  EXPECT_EQ(checkSubject(tokens), nullptr);
  why = checkSubject(tokens + ".t");
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why).find("32"), std::string::npos) << why;
}

TEST(SubjectTest, MatchingFollowsNatsRules) {
  EXPECT_TRUE(matches("orders.*.eu", "orders.x.eu"));
  EXPECT_FALSE(matches("orders.*.eu", "orders.x.y.eu"));
  EXPECT_FALSE(matches("orders.*.eu", "orders.eu"));
  EXPECT_TRUE(matches("orders.>", "orders.x"));
  EXPECT_TRUE(matches("orders.>", "orders.x.y.z"));
  EXPECT_FALSE(matches("orders.>", "orders")) << "'>' needs at least one token";
  EXPECT_TRUE(matches(">", "anything.at.all"));
  EXPECT_TRUE(matches("*", "one"));
  EXPECT_FALSE(matches("*", "one.two"));
  EXPECT_TRUE(matches("a.b", "a.b"));
  EXPECT_FALSE(matches("a.b", "a.bc"));
}

}  // namespace
}  // namespace rdmamsg::subject
