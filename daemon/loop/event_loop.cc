// EventLoop: event_base ownership and the run variants.
#include "daemon/loop/event_loop.h"

#include "daemon/loop/counters.h"

#include <event2/event.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace rdmamsg::loop {

void EventLoop::BaseDeleter::operator()(event_base* base) const {
  event_base_free(base);
}

void EventLoop::EventDeleter::operator()(event* ev) const {
  event_free(ev);
}

namespace {

// A precise base: libevent's default clock on Linux is CLOCK_MONOTONIC_COARSE,
// which advances once per kernel tick (4 ms at the CONFIG_HZ=250 of Debian's
// kernels). A 1 ms timer then fires 4 ms late and wakes the loop three or
// four times on the way, each wakeup finding the coarse clock not yet past
// its deadline. The precise clock and a timerfd make it one wakeup, on time,
// for one timerfd_settime per iteration (counted as timerSets).
event_base* newPreciseBase() {
  std::unique_ptr<event_config, void (*)(event_config*)> cfg(event_config_new(), event_config_free);
  if (!cfg) return nullptr;
  event_config_set_flag(cfg.get(), EVENT_BASE_FLAG_PRECISE_TIMER);
  return event_base_new_with_config(cfg.get());
}

}  // namespace

EventLoop::EventLoop() : base_(newPreciseBase()) {
  if (!base_) throw std::runtime_error("event_base_new failed");
  wakeup_.reset(event_new(
      base_.get(), -1, 0, [](int, short, void*) {}, nullptr));
  if (!wakeup_) throw std::runtime_error("event_new failed");
  turn_ = std::make_unique<Turn>(*this);
}

EventLoop::~EventLoop() = default;

Status EventLoop::run() {
  exiting_ = false;
  failure_ = Status();
  if (strategy_ != IdleStrategy::sleep) {
    runSpinning();
    return failure_;
  }
  // One iteration at a time, so that every wakeup (one epoll_wait) is counted.
  while (!exiting_) {
    int rc = dispatch(EVLOOP_ONCE);
    idleCounters().sleeps++;
    if (rc != 0) break;  // an error (failure_), or nothing registered any more
  }
  return failure_;
}

void EventLoop::runOnce(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) {
    dispatch(EVLOOP_NONBLOCK | EVLOOP_ONCE);
    return;
  }
  // Wake up after `timeout` at the latest, even when nothing is ready.
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  event_add(wakeup_.get(), &tv);
  dispatch(EVLOOP_ONCE);
  event_del(wakeup_.get());
}

int EventLoop::dispatch(int flags) {
  syscalls().loopWakeups++;
  syscalls().timerSets++;
  errno = 0;
  const int rc = event_base_loop(base_.get(), flags);
  if (rc < 0 && failure_.ok()) {
    failure_ = Status(Errc::io_error, std::string("event_base_loop failed") +
                                          (errno != 0 ? ": " + std::string(strerror(errno)) : ""));
    exiting_ = true;  // the spinning loop stops too
  }
  return rc;
}

void EventLoop::exit() {
  exiting_ = true;
  event_base_loopbreak(base_.get());
}

}  // namespace rdmamsg::loop
