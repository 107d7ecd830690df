// Counters of the system calls the daemon's event-loop thread makes, kept
// by every call site (the daemon owns them all): wakeups of the loop
// (epoll_wait), client socket reads and writes, and reads of the rdma_cm and
// completion channels. On RDMA hardware posting work requests and arming a
// CQ are not system calls, so they are counted apart (as verbs calls, per
// connection). Single-threaded: plain integers.
#pragma once

#include <cstdint>

namespace rdmamsg::loop {

struct SyscallCounters {
  uint64_t loopWakeups = 0;    // epoll_wait
  uint64_t socketReads = 0;    // read on client sockets (including the EAGAIN one)
  uint64_t socketWrites = 0;   // sendmsg on client sockets
  uint64_t accepts = 0;        // accept4 on the Unix listener
  uint64_t cqEventReads = 0;   // ibv_get_cq_event (a read on the completion channel)
  uint64_t cmEventReads = 0;   // rdma_get_cm_event
  uint64_t doorbellRings = 0;  // write on a shared-memory client's eventfd (it slept)
  uint64_t doorbellReads = 0;  // read of the daemon's own eventfd of such a client
  uint64_t total() const {
    return loopWakeups + socketReads + socketWrites + accepts + cqEventReads + cmEventReads +
           doorbellRings + doorbellReads;
  }
};

// What the loop did with its idle time (spin.h): passes of a spinning loop,
// the blocking waits it made (every wait of the sleep strategy is one), and
// its nonblocking libevent passes. Single-threaded: plain integers.
struct IdleCounters {
  uint64_t spins = 0;           // passes of the spinning loop over its spinners
  uint64_t sleeps = 0;          // blocking waits in epoll_wait
  uint64_t libeventPasses = 0;  // nonblocking runs of libevent while spinning
};

inline IdleCounters& idleCounters() {
  static IdleCounters counters;
  return counters;
}

inline SyscallCounters& syscalls() {
  static SyscallCounters counters;
  return counters;
}

}  // namespace rdmamsg::loop
