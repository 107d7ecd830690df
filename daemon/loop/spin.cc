// The spinning idle strategies of the event loop and Spinner (spin.h).
#include "daemon/loop/spin.h"

#include <event2/event.h>

#include <algorithm>

#include "daemon/loop/counters.h"
#include "daemon/loop/event_loop.h"

namespace rdmamsg::loop {

namespace {

using Clock = std::chrono::steady_clock;

using idle::cpuRelax;

}  // namespace

Spinner::Spinner(EventLoop& loop, SpinHooks hooks) : loop_(loop), hooks_(std::move(hooks)) {
  loop_.spinners_.push_back(this);
}

Spinner::~Spinner() {
  // Never destroyed inside a hook (hooks do not free their own parts).
  std::erase(loop_.spinners_, this);
}

void EventLoop::setIdleStrategy(IdleStrategy s, std::chrono::microseconds adaptiveSpin) {
  strategy_ = s;
  adaptiveSpin_ = adaptiveSpin;
}

// One thread still: the spinners' work, the turn's phases and libevent's
// callbacks all run here, one after the other.
void EventLoop::runSpinning() {
  exiting_ = false;
  Clock::time_point lastWork = Clock::now();
  Clock::time_point nextPass = lastWork;
  while (!exiting_) {
    Clock::time_point now = Clock::now();
    if (spinOnce()) lastWork = now;
    if (now >= nextPass) {
      passLibevent();
      nextPass = now + kLibeventPass;
    } else if (strategy_ == IdleStrategy::adaptive && now - lastWork >= adaptiveSpin_) {
      sleepArmed();
      lastWork = now = Clock::now();
      nextPass = now + kLibeventPass;
    } else {
      cpuRelax();
    }
  }
}

bool EventLoop::spinOnce() {
  idleCounters().spins++;
  bool worked = false;
  // A hook may register or drop spinners (a session's first ring): by index.
  for (size_t i = 0; i < spinners_.size(); ++i)
    worked = spinners_[i]->hooks_.poll() || worked;
  if (turn_->pending()) {
    turn_->runNow();
    worked = true;
  }
  return worked;
}

void EventLoop::passLibevent() {
  idleCounters().libeventPasses++;
  dispatch(EVLOOP_NONBLOCK | EVLOOP_ONCE);
}

void EventLoop::sleepArmed() {
  bool armed = true;
  for (size_t i = 0; i < spinners_.size() && armed; ++i)
    if (spinners_[i]->hooks_.arm) armed = spinners_[i]->hooks_.arm();
  if (armed && !turn_->pending()) {
    idleCounters().sleeps++;
    dispatch(EVLOOP_ONCE);
  }
  for (size_t i = 0; i < spinners_.size(); ++i)
    if (spinners_[i]->hooks_.disarm) spinners_[i]->hooks_.disarm();
}

}  // namespace rdmamsg::loop
