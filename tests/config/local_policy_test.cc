// The local access policy: reading `local_policy` (names resolved, every
// problem reported at its line) and the checks the daemon makes with it.
#include <gtest/gtest.h>

#include <vector>

#include "config/local_policy.h"
#include "config/reload.h"
#include "config_test_util.h"

namespace rdmamsg::config {
namespace {

using test::load;
using test::onlyProblem;
using test::problemStrings;

constexpr std::string_view kMesh =
    "node: alpha\n"
    "listen: 127.0.0.1:7471\n"
    "peers: []\n";

LoadResult withPolicy(const std::string& policy) {
  return load(std::string(kMesh) + "local_policy:\n" + policy);
}

const LocalPolicy& policyOf(const LoadResult& r) {
  static const LocalPolicy kNone;
  if (!r.ok() || !r.config().local.localPolicy) {
    ADD_FAILURE() << "no policy: " << ::testing::PrintToString(problemStrings(r));
    return kNone;
  }
  return *r.config().local.localPolicy;
}

Identity user(uid_t uid, gid_t gid, const std::vector<gid_t>& groups = {}) {
  static std::vector<std::vector<gid_t>> keep;  // the span must outlive the Identity
  keep.push_back(groups);
  return Identity{uid, gid, keep.back(), true};
}

TEST(LocalPolicy, AbsentMeansNoPolicy) {
  const LoadResult r = load(kMesh);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.config().local.localPolicy.has_value());
}

TEST(LocalPolicy, NamesAndIdsAreResolved) {
  const LoadResult r = withPolicy(
      "  connect:\n"
      "    users: [nobody, 1234]\n"
      "    groups: [daemon, 4321]\n");
  const LocalPolicy& p = policyOf(r);
  ASSERT_TRUE(p.connect.has_value());
  EXPECT_EQ(p.connect->uids, (std::vector<uid_t>{65534, 1234}));
  EXPECT_EQ(p.connect->gids, (std::vector<gid_t>{1, 4321}));
  EXPECT_FALSE(p.registerRules.has_value());  // absent: no restriction
  EXPECT_FALSE(p.sendRules.has_value());
}

TEST(LocalPolicy, UnknownUserOrGroupIsAProblemAtItsLine) {
  const LoadResult r = withPolicy(
      "  connect:\n"
      "    users: [nobody, no-such-user-xq]\n"
      "    groups: [no-such-group-xq]\n");
  const std::vector<std::string> problems = problemStrings(r);
  ASSERT_EQ(problems.size(), 2u) << ::testing::PrintToString(problems);
  EXPECT_EQ(problems[0],
            "test.yaml:6:21: local_policy.connect.users[1]: unknown user 'no-such-user-xq'");
  EXPECT_EQ(problems[1],
            "test.yaml:7:14: local_policy.connect.groups[0]: unknown group 'no-such-group-xq'");
}

TEST(LocalPolicy, EveryShapeProblemIsReported) {
  const LoadResult r = withPolicy(
      "  connect: everyone\n"                    // 5: not a mapping
      "  register:\n"                            //
      "    - services: [\"bill*ing\", ok]\n"     // 7: '*' inside
      "      users: [nobody]\n"                  //
      "    - users: [nobody]\n"                  // 9: no services
      "    - services: [x]\n"                    // 10: nobody to allow
      "  send:\n"                                //
      "    - destinations: [beta, \"a/b/c\"]\n"  // 12: no slash; two slashes
      "      groups: [\"*\"]\n"                  // 13: '*' group
      "  sned: []\n");                           // 14: typo
  const std::vector<std::string> problems = problemStrings(r);
  ASSERT_EQ(problems.size(), 8u) << ::testing::PrintToString(problems);
  EXPECT_NE(problems[0].find("test.yaml:5:12: local_policy.connect: expected a mapping"),
            std::string::npos)
      << problems[0];
  EXPECT_NE(problems[1].find("test.yaml:7:18: local_policy.register[0].services[0]: 'bill*ing' "
                             "is not a name"),
            std::string::npos)
      << problems[1];
  EXPECT_NE(problems[2].find("test.yaml:9:7: local_policy.register[1].services: missing"),
            std::string::npos)
      << problems[2];
  EXPECT_NE(problems[3].find("test.yaml:10:7: local_policy.register[2]: give users, groups"),
            std::string::npos)
      << problems[3];
  EXPECT_NE(problems[4].find("local_policy.send[0].destinations[0]: 'beta' is not NODE/SERVICE"),
            std::string::npos)
      << problems[4];
  EXPECT_NE(problems[5].find("local_policy.send[0].destinations[1]: 'a/b/c' is not NODE/SERVICE"),
            std::string::npos)
      << problems[5];
  EXPECT_NE(problems[6].find("test.yaml:13:16: local_policy.send[0].groups[0]: '*' is not a group"),
            std::string::npos)
      << problems[6];
  EXPECT_NE(problems[7].find("test.yaml:14:3: local_policy: unknown key 'sned', did you mean "
                             "'send'?"),
            std::string::npos)
      << problems[7];
}

TEST(LocalPolicy, AnEmptyPolicyValueIsAProblem) {
  const ConfigProblem p = onlyProblem(load(std::string(kMesh) + "local_policy:\n"));
  EXPECT_NE(p.message.find("local_policy: expected a mapping"), std::string::npos) << p.message;
}

TEST(LocalPolicy, ConnectAdmitsListedUsersAndGroupsIncludingSupplementaryOnes) {
  const LoadResult r = withPolicy(
      "  connect:\n"
      "    users: [1001]\n"
      "    groups: [2000]\n");
  const LocalPolicy& p = policyOf(r);
  EXPECT_TRUE(checkConnect(p, user(1001, 1001)));
  EXPECT_TRUE(checkConnect(p, user(1002, 2000)));             // primary group
  EXPECT_TRUE(checkConnect(p, user(1003, 1003, {5, 2000})));  // supplementary group
  EXPECT_TRUE(checkConnect(p, user(0, 0)));                   // root, always
  const Verdict v = checkConnect(p, user(1004, 1004, {5}));
  EXPECT_FALSE(v);
  EXPECT_EQ(v.rule, "local_policy.connect");
  EXPECT_NE(v.reason.find("uid 1004"), std::string::npos) << v.reason;
  // Credentials that could not be read are never admitted, not even as uid 0.
  Identity unknown{0, 0, {}, false};
  EXPECT_FALSE(checkConnect(p, unknown));
}

TEST(LocalPolicy, TheFirstRuleMatchingTheServiceDecides) {
  const LoadResult r = withPolicy(
      "  register:\n"
      "    - services: [billing, \"billing.*\"]\n"
      "      users: [1001]\n"
      "    - services: [\"*\"]\n"
      "      groups: [2000]\n");
  const LocalPolicy& p = policyOf(r);
  EXPECT_TRUE(checkRegister(p, user(1001, 1001), "billing"));
  EXPECT_TRUE(checkRegister(p, user(1001, 1001), "billing.eu"));
  // billing is reserved: group 2000 does not get it through the catch-all rule.
  const Verdict v = checkRegister(p, user(1002, 2000), "billing");
  EXPECT_FALSE(v);
  EXPECT_EQ(v.rule, "local_policy.register[0]");
  EXPECT_EQ(v.reason,
            "register billing: local_policy.register[0] (services billing, billing.*) does not "
            "allow uid 1002 (gid 2000)");
  EXPECT_TRUE(checkRegister(p, user(1002, 2000), "orders"));
  EXPECT_TRUE(checkRegister(p, user(1002, 2000), "billingx"));  // not "billing.*", so rule 1
  // 1001 has billing, but is not in group 2000 for the rest.
  const Verdict other = checkRegister(p, user(1001, 1001), "orders");
  EXPECT_FALSE(other);
  EXPECT_EQ(other.rule, "local_policy.register[1]");
  EXPECT_TRUE(checkRegister(p, user(0, 0), "billing"));
}

TEST(LocalPolicy, AServiceNoRuleMatchesCannotBeRegistered) {
  const LoadResult r = withPolicy(
      "  register:\n"
      "    - services: [\"app.*\"]\n"
      "      users: [\"*\"]\n");
  const LocalPolicy& p = policyOf(r);
  EXPECT_TRUE(checkRegister(p, user(1005, 1005), "app.x"));
  const Verdict v = checkRegister(p, user(1005, 1005), "other");
  EXPECT_FALSE(v);
  EXPECT_EQ(v.rule, "local_policy.register");
  EXPECT_EQ(v.reason, "register other: no rule of local_policy.register matches it");
  // An empty list: nothing may be registered (but by root).
  const LoadResult empty = withPolicy("  register: []\n");
  const LocalPolicy& none = policyOf(empty);
  EXPECT_FALSE(checkRegister(none, user(1005, 1005), "app.x"));
  EXPECT_TRUE(checkRegister(none, user(0, 0), "app.x"));
}

TEST(LocalPolicy, SendRulesMatchNodeAndServiceSeparately) {
  const LoadResult r = withPolicy(
      "  send:\n"
      "    - destinations: [beta/billing, \"*/audit*\"]\n"
      "      users: [1001]\n"
      "    - destinations: [\"gamma/*\"]\n"
      "      users: [\"*\"]\n");
  const LocalPolicy& p = policyOf(r);
  EXPECT_TRUE(checkSend(p, user(1001, 1001), "beta", "billing"));
  EXPECT_TRUE(checkSend(p, user(1001, 1001), "delta", "audit.log"));
  EXPECT_TRUE(checkSend(p, user(1002, 1002), "gamma", "anything"));
  const Verdict v = checkSend(p, user(1002, 1002), "beta", "audit");
  EXPECT_FALSE(v);
  EXPECT_EQ(v.rule, "local_policy.send[0]");
  EXPECT_EQ(v.reason,
            "send to beta/audit: local_policy.send[0] (destinations beta/billing, */audit*) does "
            "not allow uid 1002 (gid 1002)");
  const Verdict none = checkSend(p, user(1001, 1001), "beta", "orders");
  EXPECT_FALSE(none);
  EXPECT_EQ(none.rule, "local_policy.send");
}

TEST(LocalPolicy, PublishRulesMatchTheSubjectAndSubscribeRulesMustCoverThePattern) {
  const LoadResult r = withPolicy(
      "  publish:\n"
      "    - subjects: [\"prices.>\"]\n"
      "      users: [1001]\n"
      "    - subjects: [\">\"]\n"
      "      users: [\"*\"]\n"
      "  subscribe:\n"
      "    - subjects: [\"audit.>\"]\n"
      "      users: [1001]\n"
      "    - subjects: [\"orders.*\", \"public.>\"]\n"
      "      users: [\"*\"]\n");
  const LocalPolicy& p = policyOf(r);
  EXPECT_TRUE(checkPublish(p, user(1001, 1001), "prices.eu.x"));
  EXPECT_TRUE(checkPublish(p, user(1002, 1002), "orders.x"));
  const Verdict price = checkPublish(p, user(1002, 1002), "prices.eu");
  EXPECT_FALSE(price) << "the first rule matching decides: prices are 1001's";
  EXPECT_EQ(price.rule, "local_policy.publish[0]");
  EXPECT_EQ(price.reason,
            "publish to prices.eu: local_policy.publish[0] (subjects prices.>) does not allow "
            "uid 1002 (gid 1002)");
  EXPECT_TRUE(checkSubscribe(p, user(1001, 1001), "audit.*.login"));
  EXPECT_FALSE(checkSubscribe(p, user(1002, 1002), "audit.>"));
  EXPECT_TRUE(checkSubscribe(p, user(1002, 1002), "orders.eu"));
  EXPECT_TRUE(checkSubscribe(p, user(1002, 1002), "orders.*"));
  const Verdict wide = checkSubscribe(p, user(1002, 1002), "orders.>");
  EXPECT_FALSE(wide) << "orders.* does not cover orders.> (orders.a.b)";
  EXPECT_EQ(wide.rule, "local_policy.subscribe");
  EXPECT_FALSE(checkSubscribe(p, user(1002, 1002), ">")) << "nothing covers everything here";
}

TEST(LocalPolicy, APatternCoversWhatEverySubjectItMatchesNeeds) {
  EXPECT_TRUE(covers(">", "a.b.>"));
  EXPECT_TRUE(covers("a.>", "a.*.c"));
  EXPECT_TRUE(covers("a.*", "a.b"));
  EXPECT_TRUE(covers("a.*", "a.*"));
  EXPECT_FALSE(covers("a.*", "a.>"));
  EXPECT_FALSE(covers("a.b", "a.*"));
  EXPECT_FALSE(covers("a.>", "a")) << "'>' needs a token after a";
  EXPECT_FALSE(covers("a.*.c", "a.*"));
}

TEST(LocalPolicy, ABadSubjectPatternInARuleIsAProblemAtItsLine) {
  const LoadResult r = withPolicy(
      "  publish:\n"
      "    - subjects: [\"a..b\"]\n"
      "      users: [1001]\n");
  const ConfigProblem p = onlyProblem(r);
  EXPECT_NE(p.message.find("local_policy.publish[0].subjects[0]"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("empty token"), std::string::npos) << p.message;
  EXPECT_GT(p.line, 0);
}

TEST(LocalPolicy, WithoutAPolicyEverythingIsAllowed) {
  const LocalPolicy open;  // the key given with none of its parts
  EXPECT_TRUE(checkConnect(open, user(1001, 1001)));
  EXPECT_TRUE(checkRegister(open, user(1001, 1001), "x"));
  EXPECT_TRUE(checkSend(open, user(1001, 1001), "n", "x"));
}

TEST(LocalPolicy, AReloadReportsAChangedPolicyAndAppliesIt) {
  const LoadResult before = withPolicy("  register:\n    - services: [a]\n      users: [1001]\n");
  const LoadResult after = withPolicy("  register:\n    - services: [a]\n      users: [1002]\n");
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(after.ok());
  auto planned = planReload(before.config(), after.config());
  ASSERT_TRUE(std::holds_alternative<ReloadPlan>(planned));
  const ReloadPlan& plan = std::get<ReloadPlan>(planned);
  ASSERT_EQ(plan.changed.size(), 1u) << ::testing::PrintToString(plan.changed);
  EXPECT_EQ(plan.changed[0],
            "local_policy: connect[anyone] register[a: users 1001] send[any] -> connect[anyone] "
            "register[a: users 1002] send[any]");
  EXPECT_TRUE(plan.restartPending.empty());
  EXPECT_EQ(plan.next.local.localPolicy, after.config().local.localPolicy);
}

}  // namespace
}  // namespace rdmamsg::config
