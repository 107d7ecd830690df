// Reassembly of a peer's messages (inbound.h).
#include "daemon/peer/inbound.h"

#include <cstring>

#include "daemon/loop/counters.h"

namespace rdmamsg::peer {

void Inbound::reset() {
  expectedSeq_ = 1;
  active_ = discard_ = false;
  bytes_.clear();
  room_.reset();
}

void Inbound::dropPartial() {
  if (!active_) return;
  expectedSeq_ = seq_;
  active_ = discard_ = false;
  bytes_.clear();
  room_.reset();
}

Result<Inbound::Part> Inbound::onRecord(const Record& r) {
  const bool last = (r.flags & kLastFragment) != 0;
  return (r.flags & kFirstFragment) != 0 ? first(r, last) : next(r, last);
}

Result<Inbound::Part> Inbound::first(const Record& r, bool last) {
  if (r.seq != expectedSeq_ || active_) return violation("message out of sequence from peer");
  const uint64_t total = last ? r.payload.size() : r.totalLength;
  if (!last && r.payload.size() > r.totalLength)
    return violation("fragment longer than its announced message");
  expectedSeq_ = r.seq + 1;
  room_.reset();
  if (total > cfg_.buffers.maxMessageSize) {
    // Over our limit: nothing is kept, the sender is told, the connection stays.
    if (last) return tooLarge(r.seq);
    active_ = discard_ = true;
    seq_ = r.seq;
    return Part{};
  }
  if (last)
    return Part{Part::Kind::kMessage, r.seq, r.srcService, r.dstService, r.payload, nullptr};
  active_ = true;
  discard_ = false;
  seq_ = r.seq;
  total_ = r.totalLength;
  src_.assign(r.srcService);
  dst_.assign(r.dstService);
  bytes_.clear();
  filled_ = 0;
  if (rooms_) room_ = rooms_(src_, dst_, total_);
  if (room_ && room_->payload().size() != total_) room_.reset();  // not what was asked for
  keep(r.payload);
  return Part{};
}

// The room's bytes are the listener's: the one copy of the message, which
// the deliverer counts. The own buffer's are a reassembly copy.
void Inbound::keep(std::span<const std::byte> fragment) {
  if (room_) {
    std::memcpy(room_->payload().data() + filled_, fragment.data(), fragment.size());
  } else {
    bytes_.insert(bytes_.end(), fragment.begin(), fragment.end());
    loop::copies().reassembly += fragment.size();
  }
  filled_ += fragment.size();
}

Result<Inbound::Part> Inbound::next(const Record& r, bool last) {
  if (!active_ || r.seq != seq_) return violation("fragment out of sequence from peer");
  if (discard_) {
    if (!last) return Part{};
    active_ = discard_ = false;
    return tooLarge(r.seq);
  }
  if (filled_ + r.payload.size() > total_)
    return violation("fragments exceed the announced message length");
  keep(r.payload);
  if (!last) return Part{};
  if (filled_ != total_)
    return violation("fragments do not add up to the announced message length");
  active_ = false;
  if (room_) return Part{Part::Kind::kMessage, seq_, src_, dst_, room_->payload(), room_.get()};
  return Part{Part::Kind::kMessage, seq_, src_, dst_, bytes_, nullptr};
}

}  // namespace rdmamsg::peer
