// ReceiveQueue: the messages the library has read and the application has
// not taken yet, in order, and the count of those it has taken — which the
// library reports to rdmamsgd (CONSUMED, cumulative) so that their senders
// are confirmed. With confirmOnReceive (the default) a message counts as
// confirmed once taken; without, only at the next confirmTaken().
//
// Every delivery counts, in the order read: a DELIVER, a subject's MSG, a
// request's REPLY. The reply a requestAndWait() waits for is kept aside
// (awaitReply()) and taken out of turn; since CONSUMED counts deliveries
// from the first, a reply taken out of turn is reported only once
// everything read before it was taken too (a gap, closed by noteTaken()).
//
// Slots are reused: a received stream's names are usually the previous
// message's, so they are compared rather than copied, and payload buffers
// are swapped with the application's, so receiving does not allocate once
// warm.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "common/local_protocol.h"
#include "common/ring.h"
#include "rdmamsg/client.h"

namespace rdmamsg::client {

// Assigns `from` unless `to` already holds it (a stream's names).
inline void assignIfChanged(std::string& to, std::string_view from) {
  if (to != from) to.assign(from);
}

class ReceiveQueue {
 public:
  bool empty() const { return messages_.empty(); }
  size_t size() const { return messages_.size(); }

  // A DELIVER frame, copied into the next slot.
  void push(const proto::Frame& deliver);
  // A MSG frame (a subject's message), copied into the next slot.
  void pushMsg(const proto::Frame& msg);
  // A REPLY frame: kept aside when it answers the request awaited, else
  // copied into the next slot.
  void pushReply(const proto::Frame& reply);

  // requestAndWait() waits for request `requestId`'s reply (one at a time,
  // while no view is held): keep it aside.
  void awaitReply(uint64_t requestId);
  bool replyArrived() const { return kept_.has_value(); }
  // The awaited reply (replyArrived()) into `m`, taken out of turn; the
  // await ends.
  void takeReply(Message& m);
  // Nobody waits for the reply any more (requestAndWait() gave up): should
  // it come, receive() returns it.
  void stopAwaiting() { awaited_ = 0; }
  // Hands the oldest message to `m`: its payload buffer is swapped with
  // m's (whose old one the slot keeps), names copied only when they differ.
  // Counts it taken. Not empty().
  void takeInto(Message& m);
  // Swaps the oldest message with `m` whole, for a view of a queued message
  // (which counts as taken only at its release). Not empty().
  void swapFront(Message& m);

  // A message handed to the application: counted (at take, or at a view's
  // release).
  void noteTaken();
  bool confirmOnReceive() const { return confirmOnReceive_; }
  // Turning it on confirms everything taken so far.
  void setConfirmOnReceive(bool on);
  // confirmReceived(): everything taken so far may be reported.
  void confirmTaken() { takenMark_ = taken_; }
  // The count to report in a CONSUMED frame when it has grown since the
  // last report (then counted as reported); nullopt when nothing is new.
  std::optional<uint64_t> nextReport();

 private:
  Message& nextSlot();  // the next slot, its subject fields cleared

  Ring<Message> messages_;
  uint64_t awaited_ = 0;         // the request requestAndWait() waits for (0: none)
  std::optional<Message> kept_;  // its reply, once it came
  uint64_t keptAfter_ = 0;       // deliveries read before the kept reply
  // Replies taken out of turn and not counted yet: the deliveries read
  // before each (ascending); each counts once taken_ reaches it.
  std::deque<uint64_t> gaps_;
  uint64_t taken_ = 0;      // messages handed to the application
  uint64_t takenMark_ = 0;  // of those, how many may be reported
  uint64_t reported_ = 0;   // how many have been reported with CONSUMED
  bool confirmOnReceive_ = true;
};

}  // namespace rdmamsg::client
