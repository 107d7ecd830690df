// Owning handles for what an EventLoop waits on: file descriptors, timers,
// signals and deferred callbacks. Destroying a handle unregisters its event,
// so a callback can never run for an object that is gone.
//
// Handles are neither copyable nor movable (libevent holds their address);
// keep them as members or in a std::unique_ptr. A callback may destroy other
// handles but must not destroy its own handle: defer that with a Deferred.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

struct event;

namespace rdmamsg::loop {

class EventLoop;

namespace detail {
struct EventDeleter {
  void operator()(event* ev) const;
};
using EventPtr = std::unique_ptr<event, EventDeleter>;
}  // namespace detail

// A file descriptor event. `what` is a mask of EV_READ/EV_WRITE/EV_ET/EV_PERSIST
// (libevent's flags); the callback receives the ready mask. Registered on
// construction unless `enabled` is false. libevent refuses to mix
// edge-triggered and level-triggered events on one fd: give every event of
// an fd the same EV_ET.
class IoEvent {
 public:
  using Callback = std::function<void(short ready)>;
  IoEvent(EventLoop& loop, int fd, short what, Callback cb, bool enabled = true);
  IoEvent(const IoEvent&) = delete;
  IoEvent& operator=(const IoEvent&) = delete;

  void enable();   // (re-)register; no-op when registered
  void disable();  // unregister (safe inside the callback); no-op when not registered
  bool enabled() const { return enabled_; }

  // Runs the callback on this loop iteration as if `ready` had fired — the
  // continuation for edge-triggered fds whose work was cut short.
  void activate(short ready);
  int fd() const { return fd_; }

 private:
  static void thunk(int fd, short what, void* self);
  int fd_;
  bool enabled_ = false;
  Callback cb_;
  detail::EventPtr ev_;
};

// A one-shot timer, re-armable.
class Timer {
 public:
  using Callback = std::function<void()>;
  Timer(EventLoop& loop, Callback cb);
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  void arm(std::chrono::microseconds after);  // replaces a pending deadline
  void cancel();
  bool armed() const;

 private:
  static void thunk(int fd, short what, void* self);
  Callback cb_;
  detail::EventPtr ev_;
};

// A signal delivered through the loop (persistent while the handle lives).
class SignalEvent {
 public:
  using Callback = std::function<void(int signo)>;
  SignalEvent(EventLoop& loop, int signo, Callback cb);
  SignalEvent(const SignalEvent&) = delete;
  SignalEvent& operator=(const SignalEvent&) = delete;

 private:
  static void thunk(int fd, short what, void* self);
  int signo_;
  Callback cb_;
  detail::EventPtr ev_;
};

// Work to run later in the current loop iteration, after the callbacks that
// are already ready: batched flushes, deferred deletion. schedule() is
// idempotent until the callback runs.
class Deferred {
 public:
  using Callback = std::function<void()>;
  Deferred(EventLoop& loop, Callback cb);
  Deferred(const Deferred&) = delete;
  Deferred& operator=(const Deferred&) = delete;

  void schedule();
  bool scheduled() const;

 private:
  static void thunk(int fd, short what, void* self);
  Callback cb_;
  detail::EventPtr ev_;
  bool scheduled_ = false;  // asked per message on the fast path: no libevent call
};

}  // namespace rdmamsg::loop
