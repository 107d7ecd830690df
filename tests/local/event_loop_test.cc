// daemon/loop: owning handles register and unregister; deferred work runs
// later in the same turn; timers fire; edge-triggered fds.
#include <event2/event.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <memory>

#include "daemon/loop/event_loop.h"
#include "daemon/loop/events.h"

namespace rdmamsg::loop {
namespace {

TEST(EventLoopTest, DeferredRunsOnceAfterSchedule) {
  EventLoop loop;
  int runs = 0;
  Deferred d(loop, [&] { ++runs; });
  d.schedule();
  d.schedule();  // idempotent until it runs
  EXPECT_TRUE(d.scheduled());
  loop.runOnce();
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(d.scheduled());
  loop.runOnce();
  EXPECT_EQ(runs, 1);
}

TEST(EventLoopTest, TimerFiresAndCanBeCancelled) {
  EventLoop loop;
  int fired = 0;
  Timer t(loop, [&] { ++fired; });
  t.arm(std::chrono::milliseconds(1));
  EXPECT_TRUE(t.armed());
  for (int i = 0; i < 1000 && fired == 0; ++i)
    loop.runOnce(std::chrono::milliseconds(5));
  EXPECT_EQ(fired, 1);
  t.arm(std::chrono::milliseconds(1));
  t.cancel();
  EXPECT_FALSE(t.armed());
  loop.runOnce(std::chrono::milliseconds(10));
  EXPECT_EQ(fired, 1);
}

TEST(EventLoopTest, DestroyingAnIoEventUnregistersIt) {
  EventLoop loop;
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  int reads = 0;
  auto ev =
      std::make_unique<IoEvent>(loop, sv[0], EV_READ | EV_PERSIST | EV_ET, [&](short) { ++reads; });
  ASSERT_EQ(::write(sv[1], "x", 1), 1);
  for (int i = 0; i < 100 && reads == 0; ++i)
    loop.runOnce(std::chrono::milliseconds(5));
  EXPECT_EQ(reads, 1);
  ev.reset();
  ASSERT_EQ(::write(sv[1], "y", 1), 1);
  loop.runOnce(std::chrono::milliseconds(10));
  EXPECT_EQ(reads, 1);
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(EventLoopTest, ActivateRunsTheCallbackWithoutANewEdge) {
  EventLoop loop;
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  int reads = 0;
  IoEvent ev(loop, sv[0], EV_READ | EV_PERSIST | EV_ET, [&](short what) {
    EXPECT_TRUE(what & EV_READ);
    ++reads;
  });
  ev.activate(EV_READ);
  loop.runOnce();
  EXPECT_EQ(reads, 1);
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(EventLoopTest, SignalsArriveThroughTheLoop) {
  EventLoop loop;
  int got = 0;
  SignalEvent s(loop, SIGUSR1, [&](int signo) { got = signo; });
  ::raise(SIGUSR1);
  for (int i = 0; i < 100 && got == 0; ++i)
    loop.runOnce(std::chrono::milliseconds(5));
  EXPECT_EQ(got, SIGUSR1);
}

}  // namespace
}  // namespace rdmamsg::loop
