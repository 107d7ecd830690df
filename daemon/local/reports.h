// What the local side learns while it serves its sessions and tells the
// router in the turn's report phase (loop/turn.h), after every session was
// served: deliveries taken by their applications (or lost with their
// session), and listeners that drained below their low watermark. Told in
// the order learned; a callback may queue more, told in the next report.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "common/status.h"
#include "daemon/local/local_handler.h"
#include "daemon/loop/turn.h"

namespace rdmamsg::local {

class Reports {
 public:
  using DrainedCallback = std::function<void(SessionId)>;
  // A delivery of `bytes` to session `listener` was taken by its application
  // (ok) or lost with its session (unknown_service).
  using ConsumedCallback =
      std::function<void(SessionId listener, const Receipt&, size_t bytes, Errc)>;

  explicit Reports(loop::EventLoop& loop)
      : task_(loop, loop::Phase::report, [this] { report(); }) {}

  void onDrained(DrainedCallback cb) { drained_ = std::move(cb); }
  void onConsumed(ConsumedCallback cb) { consumed_ = std::move(cb); }

  void consumed(SessionId listener, const Receipt& receipt, size_t bytes, Errc errc) {
    consumedQueue_.push_back({listener, receipt, bytes, errc});
    task_.schedule();
  }
  void drained(SessionId listener) {
    drainedQueue_.push_back(listener);
    task_.schedule();
  }

 private:
  struct Consumed {
    SessionId listener;
    Receipt receipt;
    size_t bytes;
    Errc errc;
  };

  void report() {
    consumedTelling_.swap(consumedQueue_);
    for (const Consumed& c : consumedTelling_)
      if (consumed_) consumed_(c.listener, c.receipt, c.bytes, c.errc);
    consumedTelling_.clear();
    drainedTelling_.swap(drainedQueue_);
    for (SessionId id : drainedTelling_)
      if (drained_) drained_(id);
    drainedTelling_.clear();
  }

  DrainedCallback drained_;
  ConsumedCallback consumed_;
  // Queued for the next report; being told (reused storage).
  std::vector<Consumed> consumedQueue_, consumedTelling_;
  std::vector<SessionId> drainedQueue_, drainedTelling_;
  loop::PhaseTask task_;  // declared last: destroyed first
};

}  // namespace rdmamsg::local
