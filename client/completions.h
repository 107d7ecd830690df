// Completions: the outcomes of sent messages that the application has not
// taken yet, in the order they arrived, and how many messages are still in
// flight (sent, no outcome yet). An ACK names ranges of ids: each range is
// one entry, split only when the application takes an id from its middle
// (sendAndWait()).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/ring.h"
#include "rdmamsg/client.h"

namespace rdmamsg::client {

class Completions {
 public:
  bool empty() const { return pending_.empty(); }
  // Messages sent whose outcome has not arrived.
  size_t inFlight() const { return inFlight_; }
  void sent() { ++inFlight_; }

  // An ACK's range: the messages first .. first + count - 1 were taken.
  void acked(uint64_t first, uint64_t count);
  // An ERROR naming one message.
  void failed(uint64_t msgId, Status why);
  // A PUB_ACK: a publish's outcome with its counts, or why a request got
  // no reply.
  void published(uint64_t msgId, Status outcome, uint32_t matched, uint32_t taken,
                 uint32_t dropped);
  // A request's REPLY came: that is its outcome, no completion follows.
  void settled() {
    if (inFlight_ > 0) --inFlight_;
  }

  // The oldest outcome (the first id of the oldest range); not empty().
  void takeFront(Completion& c);
  // The outcome of `msgId` if it arrived (taken out of the order); false if not.
  bool take(uint64_t msgId, Completion& c);

 private:
  struct Pending {
    uint64_t first = 0;
    uint64_t count = 0;  // ids first .. first + count - 1 (1 for an error)
    Status status;
    uint32_t matched = 0, taken = 0, dropped = 0;  // a publish's (count 1)
  };
  Pending& single(uint64_t msgId, Status st);  // a new entry of one id, no longer in flight
  void takeFromRange(size_t i, uint64_t msgId);

  Ring<Pending> pending_;  // slots are recycled: no allocation once warm
  size_t inFlight_ = 0;
};

}  // namespace rdmamsg::client
