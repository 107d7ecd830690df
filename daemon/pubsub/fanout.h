// Fan-out slots: one per publish this host delivers to its subscribers —
// from one of its own clients or from a peer — counting what came of it:
// the subscriptions it matched, those that took it, those that dropped it
// (a slow consumer over its pending limit, or a subscriber gone before it
// took it), and those still to take it. Receipts of the MSG frames name
// their slot (local::Receipt::Kind::pub); a slot is done when nobody is
// left to take it.
//
// Slots are numbered in the order they open and kept in a ring; a slot
// still waiting keeps the ones after it (bounded by the subscriptions'
// pending limits).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/ring.h"

namespace rdmamsg::pubsub {

struct Slot {
  // Where the publish came from: this host (the Publish's token), or a
  // peer (its handle, connection, the message's seq and its token).
  bool remote = false;
  uint64_t token = 0;
  uint64_t peer = 0, epoch = 0, seq = 0;
  size_t bytes = 0;  // the message's window cost, confirmed once block subscribers took it
  uint32_t matched = 0, taken = 0, dropped = 0;
  uint32_t waiting = 0;       // delivered, not yet taken
  uint32_t waitingBlock = 0;  // of those, to block subscriptions
  bool windowOwed = false;    // a peer's message, confirmed once waitingBlock is 0
  bool done = false;
};

class Slots {
 public:
  // A new slot and its number.
  std::pair<uint64_t, Slot*> open() {
    ring_.pushBack(Slot{});
    return {base_ + ring_.size() - 1, &ring_.back()};
  }
  // The number the next open() gives.
  uint64_t nextId() const { return base_ + ring_.size(); }
  Slot* find(uint64_t id) {
    if (id < base_ || id >= base_ + ring_.size()) return nullptr;
    Slot& s = ring_[id - base_];
    return s.done ? nullptr : &s;
  }
  // The slot is done: forgotten once every slot before it is.
  void close(Slot& s) {
    s.done = true;
    while (!ring_.empty() && ring_.front().done) {
      ring_.popFront();
      base_++;
    }
  }
  size_t held() const { return ring_.size(); }

 private:
  Ring<Slot> ring_;
  uint64_t base_ = 1;
};

}  // namespace rdmamsg::pubsub
