// Subjects and patterns (common/subject.h): NATS's rules and rdmamsg's limits.
#include "common/subject.h"

#include <gtest/gtest.h>

#include <string>

namespace rdmamsg::subject {
namespace {

TEST(SubjectTest, APublishNamesTokensWithoutWildcards) {
  EXPECT_TRUE(checkSubject("orders").ok());
  EXPECT_TRUE(checkSubject("orders.x.eu").ok());
  EXPECT_TRUE(checkSubject("a-b_c:d$e.9").ok());
  EXPECT_FALSE(checkSubject("").ok());
  EXPECT_FALSE(checkSubject("orders..eu").ok());
  EXPECT_FALSE(checkSubject(".orders").ok());
  EXPECT_FALSE(checkSubject("orders.").ok());
  EXPECT_FALSE(checkSubject("orders.*").ok());
  EXPECT_FALSE(checkSubject("orders.>").ok());
  EXPECT_FALSE(checkSubject("orders eu").ok());
  EXPECT_FALSE(checkSubject("orders\teu").ok());
  EXPECT_FALSE(checkSubject("caf\xc3\xa9").ok()) << "printable ASCII only";
}

TEST(SubjectTest, APatternUsesWildcardsAsWholeTokensAndGreaterOnlyLast) {
  EXPECT_TRUE(checkPattern("orders.*.eu").ok());
  EXPECT_TRUE(checkPattern("orders.>").ok());
  EXPECT_TRUE(checkPattern(">").ok());
  EXPECT_TRUE(checkPattern("*").ok());
  EXPECT_TRUE(checkPattern("*.*.>").ok());
  EXPECT_FALSE(checkPattern("orders.>.eu").ok());
  EXPECT_FALSE(checkPattern("orders.x*").ok());
  EXPECT_FALSE(checkPattern("orders.>x").ok());
  EXPECT_FALSE(checkPattern("orders..*").ok());
}

TEST(SubjectTest, LimitsOnLengthAndTokensNameTheLimit) {
  std::string longest(kMaxSubjectLength, 'a');
  EXPECT_TRUE(checkSubject(longest).ok());
  Status why = checkSubject(longest + "a");
  ASSERT_EQ(why.code(), Errc::bad_request);
  EXPECT_NE(why.message().find("255"), std::string::npos) << why.message();
  std::string tokens = "t";
  for (size_t i = 1; i < kMaxTokens; i++)
    tokens += ".t";
  EXPECT_TRUE(checkSubject(tokens).ok());
  why = checkSubject(tokens + ".t");
  ASSERT_EQ(why.code(), Errc::bad_request);
  EXPECT_NE(why.message().find("32"), std::string::npos) << why.message();
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
