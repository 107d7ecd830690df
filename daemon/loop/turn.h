// The phases of a loop turn, named in one place.
//
// Event callbacks — sockets, completion channels, rdma_cm events, timers —
// only change state and mark work. The marked work runs once the turn's
// ready events have been handled (Redis's beforeSleep), phase by phase, in
// this order:
//
//   service  peers read their connections and write batches; clients'
//            requests are decoded and routed
//   report   what the local layer learned — deliveries their applications
//            took, listeners that caught up — goes up to the router
//   flush    clients' output (deliveries, acks, HOLDs) is written, once
//   post     the batches written in the service phase are posted to the
//            NIC, after the turn's local output has gone out
//   reap     closed sessions are freed (never inside their own callbacks)
//
// A phase that marks work for an earlier one (a report that confirms to a
// peer marks that peer's service) sends the turn round again; after
// kMaxSteps phases the rest waits for the next iteration of the loop, so
// I/O is never starved.
//
// A PhaseTask is the owning handle of one piece of such work: schedule()
// marks it (idempotent until it runs), destroying it unregisters it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "daemon/loop/events.h"

namespace rdmamsg::loop {

enum class Phase : uint8_t { service, report, flush, post, reap };
inline constexpr size_t kPhases = 5;
const char* toString(Phase p);

class PhaseTask;

// The phases of one EventLoop (EventLoop::turn()).
class Turn {
 public:
  explicit Turn(EventLoop& loop);
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

  static constexpr size_t kMaxSteps = 64;

  // For a loop that spins (spin.h): whether work is marked, and running it
  // now rather than from the loop's deferred callback (which, still
  // scheduled, then finds nothing).
  bool pending() const;
  void runNow() { run(); }

 private:
  friend class PhaseTask;
  void mark(PhaseTask* task);
  void forget(PhaseTask* task);  // the task is being destroyed
  void run();

  std::array<std::vector<PhaseTask*>, kPhases> pending_;
  std::vector<PhaseTask*> running_;  // the phase being run (entries null when destroyed)
  Deferred runner_;
};

class PhaseTask {
 public:
  using Callback = std::function<void()>;
  PhaseTask(EventLoop& loop, Phase phase, Callback cb);
  ~PhaseTask();
  PhaseTask(const PhaseTask&) = delete;
  PhaseTask& operator=(const PhaseTask&) = delete;

  void schedule();
  bool scheduled() const { return scheduled_; }
  Phase phase() const { return phase_; }

 private:
  friend class Turn;
  Turn& turn_;
  const Phase phase_;
  Callback cb_;
  bool scheduled_ = false;
};

}  // namespace rdmamsg::loop
