// Owning libevent handles (see events.h).
#include "daemon/loop/events.h"

#include <event2/event.h>

#include <cstdio>
#include <cstdlib>

#include "daemon/loop/event_loop.h"

namespace rdmamsg::loop {
namespace detail {
void EventDeleter::operator()(event* ev) const {
  event_free(ev);
}
}  // namespace detail

namespace {

// Creating or adding an event fails only on memory exhaustion or misuse.
[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "rdmamsg: libevent: %s failed\n", what);
  std::abort();
}

detail::EventPtr makeEvent(EventLoop& loop, int fd, short what, event_callback_fn fn, void* arg) {
  detail::EventPtr ev(event_new(loop.base(), fd, what, fn, arg));
  if (!ev) die("event_new");
  return ev;
}

timeval toTimeval(std::chrono::microseconds us) {
  timeval tv{};
  if (us.count() < 0) us = std::chrono::microseconds(0);
  tv.tv_sec = static_cast<time_t>(us.count() / 1000000);
  tv.tv_usec = static_cast<suseconds_t>(us.count() % 1000000);
  return tv;
}

}  // namespace

IoEvent::IoEvent(EventLoop& loop, int fd, short what, Callback cb, bool enabled)
    : fd_(fd), cb_(std::move(cb)), ev_(makeEvent(loop, fd, what, &IoEvent::thunk, this)) {
  if (enabled) enable();
}

void IoEvent::enable() {
  if (enabled_) return;
  if (event_add(ev_.get(), nullptr) != 0) die("event_add (fd)");
  enabled_ = true;
}

void IoEvent::disable() {
  if (!enabled_) return;
  event_del(ev_.get());
  enabled_ = false;
}

void IoEvent::activate(short ready) {
  event_active(ev_.get(), ready, 0);
}

void IoEvent::thunk(int, short what, void* self) {
  static_cast<IoEvent*>(self)->cb_(what);
}

Timer::Timer(EventLoop& loop, Callback cb)
    : cb_(std::move(cb)), ev_(makeEvent(loop, -1, 0, &Timer::thunk, this)) {}

void Timer::arm(std::chrono::microseconds after) {
  const timeval tv = toTimeval(after);
  if (event_add(ev_.get(), &tv) != 0) die("event_add (timer)");
}

void Timer::cancel() {
  event_del(ev_.get());
}

bool Timer::armed() const {
  return event_pending(ev_.get(), EV_TIMEOUT, nullptr) != 0;
}

void Timer::thunk(int, short, void* self) {
  static_cast<Timer*>(self)->cb_();
}

SignalEvent::SignalEvent(EventLoop& loop, int signo, Callback cb)
    : signo_(signo),
      cb_(std::move(cb)),
      ev_(makeEvent(loop, signo, EV_SIGNAL | EV_PERSIST, &SignalEvent::thunk, this)) {
  if (event_add(ev_.get(), nullptr) != 0) die("event_add (signal)");
}

void SignalEvent::thunk(int, short, void* self) {
  auto* me = static_cast<SignalEvent*>(self);
  me->cb_(me->signo_);
}

Deferred::Deferred(EventLoop& loop, Callback cb)
    : cb_(std::move(cb)), ev_(makeEvent(loop, -1, 0, &Deferred::thunk, this)) {}

void Deferred::schedule() {
  if (scheduled_) return;
  scheduled_ = true;
  event_active(ev_.get(), EV_TIMEOUT, 0);
}

bool Deferred::scheduled() const {
  return scheduled_;
}

void Deferred::thunk(int, short, void* self) {
  auto* me = static_cast<Deferred*>(self);
  me->scheduled_ = false;  // the callback may schedule the next run
  me->cb_();
}

}  // namespace rdmamsg::loop
