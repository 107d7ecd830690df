// EventLoop: owns the daemon's single libevent event_base (epoll backend).
//
// Everything the daemon waits for — sockets, completion channels, timers,
// signals, deferred work — is registered on this loop through the owning
// handles in events.h; destroying a handle unregisters it. The loop is not
// thread-safe: use it from the thread that runs it.
#pragma once

#include <chrono>
#include <memory>

#include "daemon/loop/turn.h"

struct event;
struct event_base;

namespace rdmamsg::loop {

class EventLoop {
 public:
  EventLoop();  // throws std::runtime_error if libevent cannot create a base
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  event_base* base() const { return base_.get(); }
  // The phases that end every turn (turn.h).
  Turn& turn() { return *turn_; }

  // Runs until exit() is called or nothing is registered any more.
  void run();
  // Runs one iteration: processes the events that are ready (waiting for at
  // most `timeout` for the first one, 0 = do not wait).
  void runOnce(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Makes run() return after the current iteration.
  void exit();

 private:
  struct BaseDeleter {
    void operator()(event_base* base) const;
  };
  struct EventDeleter {
    void operator()(event* ev) const;
  };
  std::unique_ptr<event_base, BaseDeleter> base_;  // declared first: destroyed last
  std::unique_ptr<event, EventDeleter> wakeup_;    // bounds runOnce(timeout)
  std::unique_ptr<Turn> turn_;
  bool exiting_ = false;
};

}  // namespace rdmamsg::loop
