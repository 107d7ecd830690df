// EventLoop: event_base ownership and the run variants.
#include "daemon/loop/event_loop.h"

#include "daemon/loop/counters.h"

#include <event2/event.h>

#include <stdexcept>

namespace rdmamsg::loop {

void EventLoop::BaseDeleter::operator()(event_base* base) const {
  event_base_free(base);
}

void EventLoop::EventDeleter::operator()(event* ev) const {
  event_free(ev);
}

EventLoop::EventLoop() : base_(event_base_new()) {
  if (!base_) throw std::runtime_error("event_base_new failed");
  wakeup_.reset(event_new(
      base_.get(), -1, 0, [](int, short, void*) {}, nullptr));
  if (!wakeup_) throw std::runtime_error("event_new failed");
  turn_ = std::make_unique<Turn>(*this);
}

EventLoop::~EventLoop() = default;

void EventLoop::run() {
  if (strategy_ != IdleStrategy::sleep) return runSpinning();
  // One iteration at a time, so that every wakeup (one epoll_wait) is counted.
  exiting_ = false;
  while (!exiting_) {
    int rc = event_base_loop(base_.get(), EVLOOP_ONCE);
    syscalls().loopWakeups++;
    idleCounters().sleeps++;
    if (rc != 0) break;  // error, or nothing registered any more
  }
}

void EventLoop::runOnce(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) {
    event_base_loop(base_.get(), EVLOOP_NONBLOCK | EVLOOP_ONCE);
    syscalls().loopWakeups++;
    return;
  }
  // Wake up after `timeout` at the latest, even when nothing is ready.
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  event_add(wakeup_.get(), &tv);
  event_base_loop(base_.get(), EVLOOP_ONCE);
  syscalls().loopWakeups++;
  event_del(wakeup_.get());
}

void EventLoop::exit() {
  exiting_ = true;
  event_base_loopbreak(base_.get());
}

}  // namespace rdmamsg::loop
