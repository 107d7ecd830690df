// Unit tests of the per-turn service step (daemon/loop/service_queue.h) on a
// real event loop: event handlers only mark keys; the step then services
// each marked key once, in the order marked, after the turn's events; a key
// marked while the step runs is serviced again in the same loop iteration,
// never from inside the call that marked it.
#include "daemon/loop/service_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "daemon/loop/event_loop.h"

namespace rdmamsg::loop {
namespace {

class ServiceQueueTest : public ::testing::Test {
 protected:
  EventLoop loop_;
  std::vector<uint32_t> serviced_;
};

TEST_F(ServiceQueueTest, EachMarkedKeyIsServicedOnceInTheOrderMarked) {
  ServiceQueue q(loop_, [this](uint32_t key) { serviced_.push_back(key); });
  for (uint32_t key : {5u, 1u, 5u, 3u, 1u, 5u})
    q.mark(key);
  EXPECT_TRUE(serviced_.empty()) << "marking runs nothing: the step does, at the end of the turn";
  loop_.runOnce();
  EXPECT_EQ(serviced_, (std::vector<uint32_t>{5, 1, 3}));
  loop_.runOnce();
  EXPECT_EQ(serviced_.size(), 3u) << "a key is serviced once per mark";
}

TEST_F(ServiceQueueTest, AKeyMarkedDuringTheStepIsServicedAgainNotFromInside) {
  int depth = 0, deepest = 0;
  int again = 1;
  std::unique_ptr<ServiceQueue> q;
  q = std::make_unique<ServiceQueue>(loop_, [&](uint32_t key) {
    depth++;
    deepest = std::max(deepest, depth);
    serviced_.push_back(key);
    if (key == 1 && again-- > 0) {
      q->mark(1);  // the connection marks its peer from inside the peer's step
      q->mark(2);
    }
    depth--;
  });
  q->mark(1);
  loop_.runOnce();
  EXPECT_EQ(serviced_, (std::vector<uint32_t>{1, 1, 2})) << "in the same loop iteration";
  EXPECT_EQ(deepest, 1) << "never serviced from inside the call that marked it";
}

TEST_F(ServiceQueueTest, AWakerMarksItsKeyAndAnEmptyWakerNothing) {
  ServiceQueue q(loop_, [this](uint32_t key) { serviced_.push_back(key); });
  ServiceQueue::Waker wake = q.waker(7);
  wake();
  wake();
  ServiceQueue::Waker none;
  none();
  loop_.runOnce();
  EXPECT_EQ(serviced_, (std::vector<uint32_t>{7}));
}

TEST_F(ServiceQueueTest, AQueueDestroyedBeforeItsStepServicesNothing) {
  auto q =
      std::make_unique<ServiceQueue>(loop_, [this](uint32_t key) { serviced_.push_back(key); });
  q->mark(4);
  q.reset();
  loop_.runOnce();
  EXPECT_TRUE(serviced_.empty());
}

TEST_F(ServiceQueueTest, PhasesRunInTheirOrderWhateverWasMarkedFirst) {
  std::vector<Phase> order;
  ServiceQueue post(
      loop_, [&](uint32_t) { order.push_back(Phase::post); }, Phase::post);
  ServiceQueue service(loop_, [&](uint32_t) { order.push_back(Phase::service); });
  post.mark(0);
  service.mark(0);
  loop_.runOnce();
  EXPECT_EQ(order, (std::vector<Phase>{Phase::service, Phase::post}));
}

}  // namespace
}  // namespace rdmamsg::loop
