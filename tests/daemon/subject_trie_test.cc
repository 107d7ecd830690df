// The subject trie (daemon/pubsub/subject_trie.h): it finds exactly the
// values whose patterns match, as the token-by-token reference says, for
// random patterns and subjects; erase takes back one filing and prunes.
#include "daemon/pubsub/subject_trie.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/subject.h"

namespace rdmamsg::pubsub {
namespace {

std::vector<int> matchAll(const SubjectTrie<int>& trie, std::string_view s) {
  std::vector<int> out;
  trie.match(s, [&](int v) { out.push_back(v); });
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SubjectTrieTest, FindsLiteralStarAndRestPatterns) {
  SubjectTrie<int> t;
  t.insert("orders.*.eu", 1);
  t.insert("orders.>", 2);
  t.insert("orders.x.eu", 3);
  t.insert(">", 4);
  t.insert("payments.x", 5);
  EXPECT_EQ(matchAll(t, "orders.x.eu"), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(matchAll(t, "orders.y.eu"), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(matchAll(t, "orders"), (std::vector<int>{4}));
  EXPECT_EQ(matchAll(t, "payments.x"), (std::vector<int>{4, 5}));
  EXPECT_EQ(t.size(), 5u);
}

TEST(SubjectTrieTest, EraseTakesBackOneFilingAndPrunes) {
  SubjectTrie<int> t;
  t.insert("a.b", 1);
  t.insert("a.b", 1);
  t.insert("a.*", 2);
  EXPECT_FALSE(t.erase("a.b", 9));
  EXPECT_FALSE(t.erase("x.y", 1));
  EXPECT_TRUE(t.erase("a.b", 1));
  EXPECT_EQ(matchAll(t, "a.b"), (std::vector<int>{1, 2}));
  EXPECT_TRUE(t.erase("a.b", 1));
  EXPECT_TRUE(t.erase("a.*", 2));
  EXPECT_TRUE(t.empty());
  EXPECT_TRUE(matchAll(t, "a.b").empty());
}

std::string randomPattern(std::mt19937& rng, bool wildcards) {
  static const char* kTokens[] = {"a", "b", "c", "orders", "eu"};
  std::uniform_int_distribution<int> len(1, 4), pick(0, 4), wild(0, 5);
  const int n = len(rng);
  std::string out;
  for (int i = 0; i < n; i++) {
    if (i) out += '.';
    const int w = wildcards ? wild(rng) : 5;
    if (w == 0) {
      out += '*';
    } else if (w == 1 && i == n - 1) {
      out += '>';
    } else {
      out += kTokens[pick(rng)];
    }
  }
  return out;
}

TEST(SubjectTrieTest, AgreesWithTheReferenceOnRandomPatternsAndSubjects) {
  std::mt19937 rng(42);
  SubjectTrie<int> t;
  std::vector<std::string> patterns;
  for (int i = 0; i < 300; i++) {
    patterns.push_back(randomPattern(rng, true));
    ASSERT_TRUE(subject::checkPattern(patterns.back()).ok()) << patterns.back();
    t.insert(patterns.back(), i);
  }
  for (int round = 0; round < 2; round++) {
    for (int k = 0; k < 500; k++) {
      const std::string s = randomPattern(rng, false);
      std::vector<int> want;
      for (size_t i = 0; i < patterns.size(); i++)
        if (!patterns[i].empty() && subject::matches(patterns[i], s))
          want.push_back(static_cast<int>(i));
      ASSERT_EQ(matchAll(t, s), want) << s;
    }
    // Half of the patterns go: the rest still match exactly.
    for (size_t i = 0; i < patterns.size(); i += 2) {
      if (patterns[i].empty()) continue;
      ASSERT_TRUE(t.erase(patterns[i], static_cast<int>(i)));
      patterns[i].clear();
    }
  }
}

}  // namespace
}  // namespace rdmamsg::pubsub
