// Idle strategies of the event loop, as Aeron names them, and the Spinner
// handles through which the parts of the daemon that can find work without
// a system call take part in them.
//
//   sleep     the loop sleeps in epoll_wait at once when nothing is ready
//             (the default: no CPU while idle)
//   adaptive  it spins first — polling the spinners, running the turn's
//             phases — and sleeps after `adaptiveSpin` without work
//   busy      it spins for ever (a core of its own)
//
// While spinning, the loop runs libevent nonblocking (sockets, timers,
// rdma_cm and completion-channel events) once every kLibeventPass: those
// events, and timers, wait for that long at most.
//
// The wake-up rule with shared-memory clients holds: while the loop spins
// nobody is asked to ring it (a session reads its ring and leaves its
// sleeping word unset); before it really sleeps every spinner's arm() asks
// to be woken, and one that finds work meanwhile cancels the sleep; after
// waking every spinner's disarm() takes its words back.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "common/idle_strategy.h"

namespace rdmamsg::loop {

class EventLoop;

using IdleStrategy = idle::Strategy;

// How often a spinning loop runs libevent nonblocking.
inline constexpr std::chrono::microseconds kLibeventPass{100};

// What a spinning loop asks of one part of the daemon.
struct SpinHooks {
  // Finds and does work without a system call where it can (reads the
  // rings, polls the completion queue); true when it did any.
  std::function<bool()> poll;
  // Before the loop sleeps: ask to be woken for new work; false when work
  // arrived meanwhile (the loop then does not sleep). May be empty.
  std::function<bool()> arm;
  // After the loop woke, or when it did not sleep after all. May be empty.
  std::function<void()> disarm;
};

// The owning handle of a part's hooks: registered while it lives.
class Spinner {
 public:
  Spinner(EventLoop& loop, SpinHooks hooks);
  ~Spinner();
  Spinner(const Spinner&) = delete;
  Spinner& operator=(const Spinner&) = delete;

 private:
  friend class EventLoop;
  EventLoop& loop_;
  SpinHooks hooks_;
};

}  // namespace rdmamsg::loop
