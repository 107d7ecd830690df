// daemon/loop: owning handles register and unregister; deferred work runs
// later in the same turn; timers fire; edge-triggered fds.
#include <event2/event.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>

#include "daemon/loop/event_loop.h"
#include "daemon/loop/events.h"
#include "daemon/loop/turn.h"

#include <string>

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

// The turn's phases run in their named order whatever the order of
// scheduling; work marked for an earlier phase sends the turn round again
// within the same iteration; a destroyed task never runs.
TEST(TurnTest, PhasesRunInOrderAndGoRoundForEarlierWork) {
  EventLoop loop;
  std::string trace;
  auto gone = std::make_unique<PhaseTask>(loop, Phase::reap, [&] { trace += "X"; });
  PhaseTask service(loop, Phase::service, [&] { trace += "s"; });
  PhaseTask reap(loop, Phase::reap, [&] { trace += "r"; });
  PhaseTask flush(loop, Phase::flush, [&] { trace += "f"; });
  bool again = true;
  PhaseTask post(loop, Phase::post, [&] {
    trace += "p";
    if (std::exchange(again, false)) service.schedule();  // work for an earlier phase
  });
  PhaseTask report(loop, Phase::report, [&] {
    trace += "R";
    gone.reset();  // destroyed while scheduled
  });
  gone->schedule();
  reap.schedule();
  post.schedule();
  flush.schedule();
  report.schedule();
  service.schedule();
  loop.runOnce();
  EXPECT_EQ(trace, "sRfpsr");
  trace.clear();
  loop.runOnce();
  EXPECT_EQ(trace, "");
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

// libevent's loop failing (here: entered again from one of its own
// callbacks, which it refuses) stops the loop with an io_error, never as a
// clean exit: the daemon then exits 1 instead of 0.
TEST(EventLoopTest, ALibeventFailureStopsTheLoopWithAnError) {
  EventLoop loop;
  Status inner;
  int fired = 0;
  Timer t(loop, [&] {
    ++fired;
    inner = loop.run();
  });
  Timer bound(loop, [&] { loop.exit(); });  // were the failure lost, run() still returns
  t.arm(std::chrono::milliseconds(1));
  bound.arm(std::chrono::seconds(5));
  const Status outer = loop.run();
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(inner.code(), Errc::io_error);
  EXPECT_NE(inner.message().find("event_base_loop failed"), std::string::npos) << inner.message();
  EXPECT_EQ(outer.code(), Errc::io_error) << "the loop went on after libevent failed";
}

// A short timer costs the loop one sleep and fires when it is due. libevent's
// default clock on Linux is CLOCK_MONOTONIC_COARSE, one kernel tick (4 ms at
// Debian's CONFIG_HZ=250): a 1 ms timer (the lazy confirmations' delay) then
// fires about 4 ms late, after three or four 1 ms sleeps. Each sleep is one
// voluntary context switch of this thread.
TEST(EventLoopTest, AOneMillisecondTimerIsOneSleepAndNeverEarly) {
  constexpr int kTimers = 40;
  EventLoop loop;
  using Clock = std::chrono::steady_clock;
  Clock::time_point armedAt;
  std::chrono::microseconds earliest = std::chrono::hours(1);
  int fired = 0;
  Timer t(loop, [&] {
    earliest = std::min(
        earliest, std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - armedAt));
    if (++fired == kTimers) return loop.exit();
    armedAt = Clock::now();
    t.arm(std::chrono::milliseconds(1));
  });
  rusage before{}, after{};
  ASSERT_EQ(getrusage(RUSAGE_THREAD, &before), 0);
  armedAt = Clock::now();
  t.arm(std::chrono::milliseconds(1));
  ASSERT_TRUE(loop.run().ok());
  ASSERT_EQ(getrusage(RUSAGE_THREAD, &after), 0);
  ASSERT_EQ(fired, kTimers);
  EXPECT_GE(earliest, std::chrono::milliseconds(1));
  const long sleeps = after.ru_nvcsw - before.ru_nvcsw;
  EXPECT_LE(sleeps, kTimers + kTimers / 4)
      << "voluntary context switches for " << kTimers << " timers of 1 ms";
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
