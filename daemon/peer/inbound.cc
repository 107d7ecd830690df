// Reassembly of a peer's messages (inbound.h).
#include "daemon/peer/inbound.h"

#include "daemon/loop/counters.h"

namespace rdmamsg::peer {

void Inbound::reset() {
  expectedSeq_ = 1;
  active_ = discard_ = false;
  bytes_.clear();
}

Inbound::Result Inbound::onRecord(const Record& r) {
  const bool last = (r.flags & kLastFragment) != 0;
  return (r.flags & kFirstFragment) != 0 ? first(r, last) : next(r, last);
}

Inbound::Result Inbound::first(const Record& r, bool last) {
  if (r.seq != expectedSeq_ || active_) return violation("message out of sequence from peer");
  const uint64_t total = last ? r.payload.size() : r.totalLength;
  if (!last && r.payload.size() > r.totalLength)
    return violation("fragment longer than its announced message");
  expectedSeq_ = r.seq + 1;
  if (total > cfg_.maxMessageSize) {
    // Over our limit: nothing is kept, the sender is told, the connection stays.
    if (last) return tooLarge(r.seq);
    active_ = discard_ = true;
    seq_ = r.seq;
    return {};
  }
  if (last) return {Result::Kind::kMessage, r.seq, r.srcService, r.dstService, r.payload, ""};
  active_ = true;
  discard_ = false;
  seq_ = r.seq;
  total_ = r.totalLength;
  src_.assign(r.srcService);
  dst_.assign(r.dstService);
  bytes_.assign(r.payload.begin(), r.payload.end());
  loop::copies().reassembly += r.payload.size();
  return {};
}

Inbound::Result Inbound::next(const Record& r, bool last) {
  if (!active_ || r.seq != seq_) return violation("fragment out of sequence from peer");
  if (discard_) {
    if (!last) return {};
    active_ = discard_ = false;
    return tooLarge(r.seq);
  }
  if (bytes_.size() + r.payload.size() > total_)
    return violation("fragments exceed the announced message length");
  bytes_.insert(bytes_.end(), r.payload.begin(), r.payload.end());
  loop::copies().reassembly += r.payload.size();
  if (!last) return {};
  if (bytes_.size() != total_)
    return violation("fragments do not add up to the announced message length");
  active_ = false;
  return {Result::Kind::kMessage, seq_, src_, dst_, bytes_, ""};
}

}  // namespace rdmamsg::peer
