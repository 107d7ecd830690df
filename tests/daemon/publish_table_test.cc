// The table of publishes not answered yet (daemon/pubsub/publish_table.h):
// tokens find their entry and never a reused one; deadlines expire in time
// order whether they came in order or not; an entry removed takes its
// deadline with it, so nothing is left behind however many publishes pass.
#include "daemon/pubsub/publish_table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace rdmamsg::pubsub {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Value {
  int n = 0;
  std::vector<int> kept;
  void reset() {
    n = 0;
    kept.clear();
  }
};

TEST(PublishTableTest, ATokenFindsItsEntryAndAStaleOneFindsNothing) {
  PublishTable<Value> t;
  auto [a, va] = t.add();
  va.n = 1;
  auto [b, vb] = t.add();
  vb.n = 2;
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  ASSERT_NE(t.find(a), nullptr);
  EXPECT_EQ(t.find(a)->n, 1);
  EXPECT_EQ(t.find(b)->n, 2);
  EXPECT_TRUE(t.remove(a));
  EXPECT_EQ(t.find(a), nullptr);
  EXPECT_FALSE(t.remove(a));
  // The entry is reused under a new token; the old one still finds nothing.
  auto [c, vc] = t.add();
  EXPECT_EQ(vc.n, 0);
  EXPECT_NE(c, a);
  EXPECT_EQ(t.find(a), nullptr);
  EXPECT_EQ(t.find(c), &vc);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.find(0), nullptr);
  EXPECT_EQ(t.find(uint64_t{7} << 32 | 12345), nullptr);
}

TEST(PublishTableTest, AReusedEntryIsResetButKeepsItsCapacity) {
  PublishTable<Value> t;
  auto [a, v] = t.add();
  v.kept.assign(100, 1);
  v.n = 5;
  t.remove(a);
  auto [b, w] = t.add();
  EXPECT_EQ(&v, &w);
  EXPECT_EQ(w.n, 0);
  EXPECT_TRUE(w.kept.empty());
  EXPECT_GE(w.kept.capacity(), 100u);
}

TEST(PublishTableTest, DeadlinesExpireInTimeOrderInOrderOrNot) {
  PublishTable<Value> t;
  const Clock::time_point t0 = Clock::now();
  std::vector<uint64_t> tok;
  for (int i = 0; i < 5; i++)
    tok.push_back(t.add().first);
  EXPECT_TRUE(t.setDeadline(tok[0], t0 + milliseconds(30)));
  EXPECT_FALSE(t.setDeadline(tok[1], t0 + milliseconds(40)));  // in order: the list
  EXPECT_TRUE(t.setDeadline(tok[2], t0 + milliseconds(10)));   // earlier: the set
  EXPECT_FALSE(t.setDeadline(tok[3], t0 + milliseconds(20)));
  EXPECT_FALSE(t.setDeadline(tok[4], t0 + milliseconds(50)));
  EXPECT_FALSE(t.setDeadline(tok[4], t0));  // it has one already
  EXPECT_EQ(t.deadlines(), 5u);
  EXPECT_EQ(t.earliest(), t0 + milliseconds(10));
  EXPECT_EQ(t.popExpired(t0 + milliseconds(5)), 0u);
  EXPECT_TRUE(t.remove(tok[3]));  // answered: its deadline goes with it
  std::vector<uint64_t> order;
  while (uint64_t k = t.popExpired(t0 + milliseconds(45)))
    order.push_back(k);
  EXPECT_EQ(order, (std::vector<uint64_t>{tok[2], tok[0], tok[1]}));
  EXPECT_EQ(t.deadlines(), 1u);
  EXPECT_EQ(t.earliest(), t0 + milliseconds(50));
  EXPECT_EQ(t.size(), 4u);  // expiring clears a deadline, not the entry
}

TEST(PublishTableTest, MillionsOfAnsweredPublishesLeaveNothingBehind) {
  PublishTable<Value> t;
  const Clock::time_point t0 = Clock::now();
  std::vector<uint64_t> open;
  for (int i = 0; i < 1'000'000; i++) {
    auto [k, v] = t.add();
    t.setDeadline(k, t0 + milliseconds(i));
    open.push_back(k);
    if (open.size() == 64) {  // answered out of order, a window at a time
      for (size_t j = 0; j < open.size(); j += 2)
        t.remove(open[j]);
      for (size_t j = 1; j < open.size(); j += 2)
        t.remove(open[j]);
      open.clear();
    }
  }
  EXPECT_EQ(t.size(), open.size());
  EXPECT_EQ(t.deadlines(), open.size());
  size_t entries = 0;
  t.forEach([&](uint64_t, Value&) { entries++; });
  EXPECT_EQ(entries, open.size());
}

// Against a plain reference (a map by deadline) under random adds, removes
// and expiries with deadlines mostly in order, as message_timeout makes them.
TEST(PublishTableTest, AgreesWithAnOrderedReference) {
  PublishTable<Value> t;
  std::multimap<Clock::time_point, uint64_t> ref;
  std::vector<uint64_t> live;
  std::mt19937 rng(7);
  Clock::time_point now = Clock::now();
  for (int step = 0; step < 50'000; step++) {
    now += std::chrono::microseconds(rng() % 50);
    const unsigned op = rng() % 10;
    if (op < 5) {
      auto [k, v] = t.add();
      const auto at = now + milliseconds(rng() % 4 == 0 ? rng() % 100 : 100);
      t.setDeadline(k, at);
      ref.emplace(at, k);
      live.push_back(k);
    } else if (op < 8 && !live.empty()) {
      const size_t i = rng() % live.size();
      const uint64_t k = live[i];
      live[i] = live.back();
      live.pop_back();
      ASSERT_TRUE(t.remove(k));
      for (auto it = ref.begin(); it != ref.end(); ++it)
        if (it->second == k) {
          ref.erase(it);
          break;
        }
    } else {
      while (uint64_t k = t.popExpired(now)) {
        ASSERT_FALSE(ref.empty());
        ASSERT_LE(ref.begin()->first, now);
        auto range = ref.equal_range(ref.begin()->first);
        bool found = false;
        for (auto it = range.first; it != range.second; ++it)
          if (it->second == k) {
            ref.erase(it);
            found = true;
            break;
          }
        ASSERT_TRUE(found) << "expired out of time order";
      }
      ASSERT_TRUE(ref.empty() || ref.begin()->first > now);
    }
    ASSERT_EQ(t.deadlines(), ref.size());
    ASSERT_EQ(t.earliest().has_value(), !ref.empty());
    if (!ref.empty()) {
      ASSERT_EQ(*t.earliest(), ref.begin()->first);
    }
  }
}

}  // namespace
}  // namespace rdmamsg::pubsub
