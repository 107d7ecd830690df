// EventLoop: owns the daemon's single libevent event_base (epoll backend).
//
// Everything the daemon waits for — sockets, completion channels, timers,
// signals, deferred work — is registered on this loop through the owning
// handles in events.h; destroying a handle unregisters it. The loop is not
// thread-safe: use it from the thread that runs it.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "common/status.h"
#include "daemon/loop/spin.h"
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

  // Runs until exit() is called or nothing is registered any more; an
  // io_error when libevent's loop fails (it then stops: the daemon exits 1).
  [[nodiscard]] Status run();
  // Runs one iteration: processes the events that are ready (waiting for at
  // most `timeout` for the first one, 0 = do not wait).
  void runOnce(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Makes run() return after the current iteration.
  void exit();

  // How run() spends idle time (spin.h); set before run().
  void setIdleStrategy(IdleStrategy s, std::chrono::microseconds adaptiveSpin);
  IdleStrategy idleStrategy() const { return strategy_; }

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
  Status failure_;  // why the loop stopped, when libevent failed
  IdleStrategy strategy_ = IdleStrategy::sleep;
  std::chrono::microseconds adaptiveSpin_{50};
  std::vector<Spinner*> spinners_;

  friend class Spinner;
  void runSpinning();
  // One event_base_loop call with `flags`, counted: an epoll_wait and the
  // precise timer's timerfd_settime.
  int dispatch(int flags);
  bool spinOnce();  // polls every spinner, runs the turn: true when any worked
  void passLibevent();
  void sleepArmed();  // adaptive: arm every spinner, sleep, disarm
};

}  // namespace rdmamsg::loop
