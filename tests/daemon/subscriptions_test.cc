// This host's subscriptions and its peers' interest (daemon/pubsub/):
// interest changes on a pair's first and last subscription, per-client
// limits, and a peer's interest bounded and gone with it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/pubsub/remote_interest.h"
#include "daemon/pubsub/subscriptions.h"

namespace rdmamsg::pubsub {
namespace {

local::SubscribeRequest sub(uint64_t id, std::string_view pattern, std::string_view group = "") {
  local::SubscribeRequest r;
  r.subId = id;
  r.pattern = pattern;
  r.group = group;
  return r;
}

std::vector<std::string> changes(Subscriptions& s) {
  std::vector<std::string> out;
  for (const InterestChange& c : s.takeChanges())
    out.push_back((c.op == peer::InterestOp::kAdd ? "+" : "-") + c.group + "|" + c.pattern);
  return out;
}

TEST(SubscriptionsTest, APairIsInterestFromItsFirstSubscriptionToItsLast) {
  Subscriptions s(100);
  ASSERT_TRUE(s.add(1, sub(1, "a.*"), 10).ok());
  ASSERT_TRUE(s.add(2, sub(1, "a.*"), 10).ok());
  ASSERT_TRUE(s.add(2, sub(2, "a.*", "g"), 10).ok());
  EXPECT_EQ(changes(s), (std::vector<std::string>{"+|a.*", "+g|a.*"}));
  EXPECT_TRUE(s.remove(1, 1));
  EXPECT_TRUE(changes(s).empty()) << "session 2 still holds a.*";
  s.removeSession(2);
  const auto gone = changes(s);
  EXPECT_EQ(gone.size(), 2u);
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.interestSize(), 0u);
}

TEST(SubscriptionsTest, MatchesFindTheSubscriptionsAndIdsAreTheClientsOwn) {
  Subscriptions s(100);
  Subscription* a = s.add(1, sub(5, "orders.>"), 10).value();
  ASSERT_TRUE(s.add(1, sub(6, "payments.>"), 10).ok());
  EXPECT_EQ(s.add(1, sub(5, "other"), 10).status().code(), Errc::bad_request)
      << "a client's id is taken";
  std::vector<uint64_t> found;
  s.match("orders.x", [&](Subscription& m) { found.push_back(m.clientId); });
  EXPECT_EQ(found, (std::vector<uint64_t>{5}));
  EXPECT_EQ(s.find(a->id), a);
  EXPECT_FALSE(s.remove(2, 5)) << "another session's id";
}

TEST(SubscriptionsTest, AClientHoldsAtMostMaxSubscriptions) {
  Subscriptions s(2);
  ASSERT_TRUE(s.add(1, sub(1, "a"), 10).ok());
  ASSERT_TRUE(s.add(1, sub(2, "b"), 10).ok());
  Result<Subscription*> third = s.add(1, sub(3, "c"), 10);
  EXPECT_EQ(third.status().code(), Errc::busy);
  EXPECT_NE(third.status().message().find("max_subscriptions"), std::string::npos);
  EXPECT_TRUE(s.add(2, sub(1, "c"), 10).ok()) << "another client has its own limit";
}

TEST(RemoteInterestTest, APeersInterestIsBoundedCheckedAndGoesWithIt) {
  RemoteInterest r(2);
  EXPECT_TRUE(r.add(7, "", "a.*").ok());
  EXPECT_TRUE(r.add(7, "g", "a.*").ok());
  EXPECT_TRUE(r.add(7, "", "a.*").ok()) << "announced twice: counted, not a third pattern";
  Status over = r.add(7, "", "b");
  EXPECT_EQ(over.code(), Errc::busy);
  EXPECT_NE(over.message().find("max_peer_interest"), std::string::npos);
  EXPECT_EQ(r.add(8, "", "a..b").code(), Errc::protocol_error) << "an invalid pattern";
  EXPECT_EQ(r.add(8, "bad group", "a").code(), Errc::protocol_error);
  EXPECT_TRUE(r.add(8, "", "a.x").ok());
  std::vector<std::string> found;
  r.match("a.x", [&](uint64_t peer, std::string_view group) {
    found.push_back(std::to_string(peer) + "/" + std::string(group));
  });
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, (std::vector<std::string>{"7/", "7/g", "8/"}));
  r.remove(7, "", "a.*");
  EXPECT_EQ(r.count(7), 2u) << "announced twice, removed once";
  r.clear(7);
  EXPECT_EQ(r.count(7), 0u);
  found.clear();
  r.match("a.x", [&](uint64_t peer, std::string_view) { found.push_back(std::to_string(peer)); });
  EXPECT_EQ(found, (std::vector<std::string>{"8"}));
}

}  // namespace
}  // namespace rdmamsg::pubsub
