// Ring<T>: FIFO order across growth and wrap-around, move-only elements,
// what popFront() releases and recycleFront() keeps, insertion and removal
// in the middle.
#include "common/ring.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace rdmamsg {
namespace {

std::vector<int> contents(const Ring<int>& r) {
  std::vector<int> v;
  for (size_t i = 0; i < r.size(); ++i)
    v.push_back(r[i]);
  return v;
}

TEST(RingTest, KeepsFifoOrderAcrossWrapAroundAndGrowth) {
  Ring<int> r;
  int next = 0, expected = 0;
  // Push more than pop, so that the ring wraps and grows several times.
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 3; ++i)
      r.pushBack(next++);
    EXPECT_EQ(r.front(), expected);
    r.popFront();
    ++expected;
  }
  ASSERT_EQ(r.size(), static_cast<size_t>(next - expected));
  EXPECT_EQ(r.back(), next - 1);
  for (size_t i = 0; i < r.size(); ++i)
    EXPECT_EQ(r[i], expected + static_cast<int>(i));
}

TEST(RingTest, HoldsMoveOnlyElementsAndPopFrontReleasesThem) {
  auto owned = std::make_shared<int>(7);
  Ring<std::unique_ptr<std::shared_ptr<int>>> r;
  for (int i = 0; i < 40; ++i)  // past the first growth
    r.pushBack(std::make_unique<std::shared_ptr<int>>(owned));
  EXPECT_EQ(owned.use_count(), 41);
  std::unique_ptr<std::shared_ptr<int>> taken = std::move(r.front());
  r.popFront();
  EXPECT_EQ(owned.use_count(), 41) << "moved out, still alive";
  taken.reset();
  r.popFront();  // not moved out: released by the pop
  EXPECT_EQ(owned.use_count(), 39);
  r.clear();
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(owned.use_count(), 1);
}

TEST(RingTest, RecycleFrontLeavesTheValueForTheNextPushSlot) {
  Ring<std::string> r;
  r.pushSlot() = std::string(1000, 'x');
  const size_t capacity = r.front().capacity();
  r.recycleFront();
  EXPECT_TRUE(r.empty());
  // Sixteen slots: the 16th push reuses the first slot again.
  for (int i = 0; i < 15; ++i) {
    r.pushSlot().clear();
    r.recycleFront();
  }
  std::string& again = r.pushSlot();
  EXPECT_EQ(again.size(), 1000u) << "the recycled value is still there";
  EXPECT_EQ(again.capacity(), capacity);
}

TEST(RingTest, InsertAtAndEraseAtKeepTheOrderOfTheOthers) {
  Ring<int> r;
  for (int i = 0; i < 5; ++i)
    r.pushBack(i);
  r.popFront();  // start away from slot 0, so that positions are not slots
  r.insertAt(2) = 10;
  EXPECT_EQ(contents(r), (std::vector<int>{1, 2, 10, 3, 4}));
  r.insertAt(0) = 20;
  r.insertAt(r.size()) = 30;
  EXPECT_EQ(contents(r), (std::vector<int>{20, 1, 2, 10, 3, 4, 30}));
  r.eraseAt(3);
  EXPECT_EQ(contents(r), (std::vector<int>{20, 1, 2, 3, 4, 30}));
  r.eraseAt(0);
  r.eraseAt(r.size() - 1);
  EXPECT_EQ(contents(r), (std::vector<int>{1, 2, 3, 4}));
}

TEST(RingTest, InsertAtWorksOnMoveOnlyElements) {
  Ring<std::unique_ptr<int>> r;
  r.pushBack(std::make_unique<int>(1));
  r.pushBack(std::make_unique<int>(3));
  r.insertAt(1) = std::make_unique<int>(2);
  r.eraseAt(0);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(*r[0], 2);
  EXPECT_EQ(*r[1], 3);
}

}  // namespace
}  // namespace rdmamsg
