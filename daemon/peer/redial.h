// Redial: when a peer dials next. A peer does not dial by itself: its timer
// fires (at once, or after an exponential backoff with full jitter that
// grows with the attempts that failed), it asks the mesh (ask()), and the
// mesh's service step takes the request (takeAsk()) and makes the
// connection. A connection closed on purpose to dial again — another
// address, a mesh secret now required — redials at once, without backoff.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <random>
#include <utility>

#include "daemon/loop/events.h"

namespace rdmamsg::peer {

class Redial {
 public:
  Redial(loop::EventLoop& loop, std::function<void()> onTimer)
      : timer_(loop, std::move(onTimer)), rng_(std::random_device{}()) {}

  // The timer: at once, after `delay`, after the backoff of the attempts so
  // far, or not.
  void now() { timer_.arm(std::chrono::milliseconds(0)); }
  void after(std::chrono::milliseconds delay) { timer_.arm(delay); }
  void afterBackoff(std::chrono::milliseconds min, std::chrono::milliseconds max) {
    long long step = min.count();
    for (int i = 1; i < attempts_ && step < max.count(); i++)
      step *= 2;
    step = std::min<long long>(step, max.count());
    std::uniform_int_distribution<long long> jitter(step / 2, step);
    timer_.arm(std::chrono::milliseconds(jitter(rng_)));
  }
  void cancel() { timer_.cancel(); }
  bool scheduled() const { return timer_.armed(); }

  // Attempts: a dial was made; a connection made it, or the address
  // changed: the backoff starts over.
  void attempted() { ++attempts_; }
  void startOver() { attempts_ = 0; }

  // The peer asked the mesh for a dial; the mesh takes the request once.
  void ask() { asked_ = true; }
  bool takeAsk() { return std::exchange(asked_, false); }

  // The connection is being closed to dial again at once; taken (and
  // forgotten) when the peer sees it down.
  void closingToRedial() { immediate_ = true; }
  bool closingToRedialPending() const { return immediate_; }
  bool takeClosingToRedial() { return std::exchange(immediate_, false); }

 private:
  loop::Timer timer_;
  std::mt19937_64 rng_;
  int attempts_ = 0;
  bool asked_ = false;
  bool immediate_ = false;
};

// Which rail the peer dials (config.h, "rails"), active-standby: the same
// rail while its connections work; after a failure (a dial that did not
// reach the peer, a connection lost) the next rail, at once, until every
// rail has failed once since a connection was last made: then the backoff,
// and the round starts over. With one rail every failure waits for the
// backoff. A dial the peer refused (nobody listening yet, the tie-break)
// reached it: not a failure of the rail (Peer::onDown).
class RailRotation {
 public:
  std::size_t current() const { return rail_; }
  // The connection over the current rail failed; `rails`: how many there
  // are. True: dial the next rail at once.
  bool failed(std::size_t rails) {
    rail_ = rails == 0 ? 0 : (rail_ + 1) % rails;
    if (++failures_ < rails) return true;
    failures_ = 0;
    return false;
  }
  void connected() { failures_ = 0; }
  // The session moves to `rail` (a failback): dialed next, a new round.
  void moveTo(std::size_t rail) {
    rail_ = rail;
    failures_ = 0;
  }
  // The rail dialed first, and again after a reload: `home` (a lane's own
  // rail with spread, else 0) when there is such a rail.
  void setHome(std::size_t home, std::size_t rails) {
    rail_ = home < rails ? home : 0;
    failures_ = 0;
  }

 private:
  std::size_t rail_ = 0;
  std::size_t failures_ = 0;
};

}  // namespace rdmamsg::peer
