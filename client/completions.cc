// Completions: ACK ranges and ERRORs kept until the application takes them.
#include "client/completions.h"

#include <algorithm>
#include <utility>

namespace rdmamsg::client {

void Completions::acked(uint64_t first, uint64_t count) {
  Pending& p = pending_.pushSlot();
  p.first = first;
  p.count = count;
  p.status = Status();
  p.matched = p.taken = p.dropped = 0;
  inFlight_ -= std::min<size_t>(inFlight_, count);
}

Completions::Pending& Completions::single(uint64_t msgId, Status st) {
  Pending& p = pending_.pushSlot();
  p.first = msgId;
  p.count = 1;
  p.status = std::move(st);
  p.matched = p.taken = p.dropped = 0;
  if (inFlight_ > 0) --inFlight_;
  return p;
}

void Completions::failed(uint64_t msgId, Status why) {
  single(msgId, std::move(why));
}

void Completions::published(uint64_t msgId, Status outcome, uint32_t matched, uint32_t taken,
                            uint32_t dropped) {
  Pending& p = single(msgId, std::move(outcome));
  p.matched = matched;
  p.taken = taken;
  p.dropped = dropped;
}

namespace {

void countsInto(Completion& c, uint32_t matched, uint32_t taken, uint32_t dropped) {
  c.matched = matched;
  c.taken = taken;
  c.dropped = dropped;
}

}  // namespace

void Completions::takeFront(Completion& c) {
  Pending& p = pending_.front();
  c.msgId = p.first;
  countsInto(c, p.matched, p.taken, p.dropped);
  if (p.count > 1) {
    c.status = p.status;
    ++p.first;
    --p.count;
    return;
  }
  std::swap(c.status, p.status);
  pending_.recycleFront();
}

bool Completions::take(uint64_t msgId, Completion& c) {
  for (size_t i = 0; i < pending_.size(); ++i) {
    const Pending& p = pending_[i];
    if (msgId < p.first || msgId - p.first >= p.count) continue;
    c.msgId = msgId;
    c.status = p.status;
    countsInto(c, p.matched, p.taken, p.dropped);
    takeFromRange(i, msgId);
    return true;
  }
  return false;
}

// Removes msgId from the range at i: the entry goes, shrinks, or is split
// in two around it.
void Completions::takeFromRange(size_t i, uint64_t msgId) {
  Pending& p = pending_[i];
  const uint64_t last = p.first + p.count - 1;
  if (p.count == 1) {
    pending_.eraseAt(i);
  } else if (msgId == p.first) {
    ++p.first;
    --p.count;
  } else if (msgId == last) {
    --p.count;
  } else {
    p.count = msgId - p.first;
    Status st = p.status;
    Pending& after = pending_.insertAt(i + 1);
    after.first = msgId + 1;
    after.count = last - msgId;
    after.status = std::move(st);
    after.matched = after.taken = after.dropped = 0;  // a range is acks
  }
}

}  // namespace rdmamsg::client
