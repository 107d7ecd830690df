// Private to Outbound (outbound.cc, outbound_outcomes.cc): a flow's queue
// and the clock of the messages' deadlines.
#pragma once

#include "daemon/peer/outbound.h"

#include <chrono>
#include <cstring>
#include <ctime>

namespace rdmamsg::peer {

// Message deadlines are seconds away: the coarse monotonic clock (a few ms
// of resolution, no system call) is precise enough and cheap per message.
inline std::chrono::steady_clock::time_point coarseNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) +
                                               std::chrono::nanoseconds(ts.tv_nsec));
}

// A queued message in Flow::queue: this header, the sender's service name,
// then the payload (the part not yet written).
struct Outbound::Queued {
  uint64_t session;
  uint64_t msgId;
  Clock::time_point deadline;
  uint64_t offset;  // payload bytes already written into batches
  uint32_t length;  // payload bytes stored
  uint32_t cost;    // window cost of the whole message
  uint8_t srcLen;
  bool started;  // its first fragment is out (it has a seq: the newest)
  bool waiting;  // not started: its cost counts in Flow::waitingCost
  // Set when the payload is not stored here but held where it lies (a
  // client's memory: at .. at + length), posted from there when it goes;
  // its handle is the flow's next in `held`.
  bool inPlace;
  const std::byte* at;
};

struct Outbound::Flow {
  std::string service;
  uint64_t number = 0;       // FlowKey::flow
  Ring<PayloadHandle> held;  // the in-place payloads of the queue, in its order
  uint64_t unconfirmed = 0;
  uint64_t waitingCost = 0;  // window cost of the queued messages not started
  ByteBuffer queue;
  size_t queuedBytes = 0;
  size_t queuedMessages = 0;
  bool paused = false;
  bool ready = false;

  Queued front() const {
    Queued q;
    std::memcpy(&q, queue.data(), sizeof q);
    return q;
  }
};

}  // namespace rdmamsg::peer
