// How librdmamsg's blocking calls wait (Client::Impl::waitFor()): until a
// condition holds, the connection is lost or the deadline passes, moving
// frames meanwhile. Over the socket it sleeps in poll(2); over shared
// memory as the idle strategy says: on the doorbell at once (sleep), after
// spinning on the rings for kAdaptiveSpin (adaptive), or spinning until the
// deadline (busy). Included by the files whose calls wait.
#pragma once

#include <algorithm>
#include <chrono>

#include "client/client_impl.h"
#include "common/idle_strategy.h"

namespace rdmamsg {

template <typename Done>
Status Client::Impl::waitFor(Done done, std::chrono::milliseconds timeout) {
  // Already there (e.g. a completion from an ACK frame read earlier): no I/O.
  if (done()) return {};
  Status st = waitUntil(done, timeout);
  // It worked the rings: the application may poll fd() next, so the daemon
  // must ring for what comes — when it sleeps; a spinning client asks only
  // before it sleeps (prepareToPoll()).
  if (link.inUse() && conn.ok() && !link.armed()) settleIfSleeping();
  return st;
}

template <typename Done>
Status Client::Impl::waitUntil(Done done, std::chrono::milliseconds timeout) {
  parseInput(in);  // frames left behind an in-place view
  if (done()) return {};
  const auto deadline = Clock::now() + timeout;
  reportConsumed();  // before waiting: the daemon may be waiting for it
  for (;;) {
    if (conn.ok()) writeSome();
    if (conn.ok()) readSome();
    if (done()) return {};
    if (!conn.ok()) return conn;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Status(Errc::timeout, "no answer from rdmamsgd in time");
    const int ms = static_cast<int>(std::min<long long>(left, 1000));
    if (link.inUse()) {
      if (idle != IdleStrategy::sleep && spinOnRings(done, deadline)) continue;
      sleepOnRing(ms);
    } else if (Status st = socket.poll(!out.empty(), ms); !st) {
      lose(std::move(st));
    }
  }
}

// Adaptive and busy: moves frames without sleeping until done(), until
// something moved, or the spin ends (adaptive: kAdaptiveSpin; busy: the
// deadline). false when the spin ended with nothing to show: sleep.
template <typename Done>
bool Client::Impl::spinOnRings(Done& done, Clock::time_point deadline) {
  // Spinning, this client does not ask to be rung: a word armed earlier
  // (processIo(), prepareToPoll()) is taken back first.
  if (link.armed()) {
    if (Result<bool> rung = link.disarm(); !rung) lose(rung.status());
  }
  const bool busy = idle == IdleStrategy::busy;
  const Clock::time_point until =
      busy ? deadline : std::min<Clock::time_point>(deadline, Clock::now() + kAdaptiveSpin);
  for (;;) {
    const ShmChannelCounters& c = link.counters();
    const uint64_t moved = c.recordsRead + c.recordsWritten;
    writeRing();
    readRing();
    if (!conn.ok() || done() || c.recordsRead + c.recordsWritten != moved) return true;
    const Clock::time_point now = Clock::now();
    if (now >= until) return busy;  // busy: the caller sees the deadline
    lookAtSocketNowAndThen(now);
    idle::cpuRelax();
  }
}

}  // namespace rdmamsg
