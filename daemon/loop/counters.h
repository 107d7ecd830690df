// Counters of the system calls the daemon's event-loop thread makes, kept
// by every call site (the daemon owns them all): wakeups of the loop
// (epoll_wait), client socket reads and writes, and reads of the rdma_cm and
// completion channels. On RDMA hardware posting work requests and arming a
// CQ are not system calls, so they are counted apart (as verbs calls, per
// connection). Single-threaded: plain integers. The bytes it copies are
// counted beside them (CopyCounters).
#pragma once

#include <cstdint>

namespace rdmamsg::loop {

struct SyscallCounters {
  uint64_t loopWakeups = 0;    // epoll_wait
  uint64_t timerSets = 0;      // timerfd_settime of the precise timer (one per wakeup)
  uint64_t socketReads = 0;    // read on client sockets (including the EAGAIN one)
  uint64_t socketWrites = 0;   // sendmsg on client sockets
  uint64_t accepts = 0;        // accept4 on the Unix listener
  uint64_t cqEventReads = 0;   // ibv_get_cq_event (a read on the completion channel)
  uint64_t cmEventReads = 0;   // rdma_get_cm_event
  uint64_t doorbellRings = 0;  // write on a shared-memory client's eventfd (it slept)
  uint64_t doorbellReads = 0;  // read of the daemon's own eventfd of such a client
  uint64_t total() const {
    return loopWakeups + timerSets + socketReads + socketWrites + accepts + cqEventReads +
           cmEventReads + doorbellRings + doorbellReads;
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

// Bytes the daemon copies, by stage of a message's way through it: the
// cost that zero-copy paths remove, counted where each copy is made.
// Divided by the payload bytes carried, each is the copies per message of
// its stage (names and frame headers add a little at small sizes).
struct CopyCounters {
  uint64_t clientIn = 0;     // from a client into its input buffer (socket read or ring read)
  uint64_t flowQueue = 0;    // payload into a flow's queue (a message that could not go at once)
  uint64_t sendBuffers = 0;  // payload into registered send buffers
  uint64_t reassembly = 0;   // payload of fragmented messages into their reassembly buffer
  uint64_t deliver = 0;      // payload into a receiving client's output buffer
  uint64_t clientOut = 0;    // from an output buffer to a client (socket write or ring write)
  // Payload kept whole until confirmed, to be sent again after a failover
  // (a peer with several rails: Outbound::retain).
  uint64_t keptForResume = 0;
  // Not a copy: payload posted to the NIC straight from a client's ring.
  uint64_t sentInPlace = 0;
  // Of `deliver`: payload written into a client's delivery area, which the
  // client reads in place (no copy in the client).
  uint64_t deliveredInArea = 0;
  uint64_t total() const {
    return clientIn + flowQueue + sendBuffers + reassembly + deliver + clientOut + keptForResume;
  }
};

inline CopyCounters& copies() {
  static CopyCounters counters;
  return counters;
}

}  // namespace rdmamsg::loop
