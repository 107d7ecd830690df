// The sending side of a peer (outbound.h): the messages kept for a resume
// and sent again on the session's next connection.
#include "daemon/peer/outbound.h"
#include "daemon/peer/outbound_flow.h"

#include <cstring>

#include "daemon/loop/counters.h"

namespace rdmamsg::peer {

void Outbound::keep(uint64_t seq, std::string_view src, std::span<const std::byte> payload) {
  if (kept_.empty()) keptFrom_ = seq;
  const Kept k{seq, static_cast<uint32_t>(payload.size()), static_cast<uint8_t>(src.size())};
  kept_.append(&k, sizeof k);
  kept_.append(src);
  kept_.append(payload);
  loop::copies().keptForResume += payload.size();
}

// Message `seq` is settled: its copy goes (the oldest kept, if kept at all).
void Outbound::dropKept(uint64_t seq) {
  if (kept_.empty() || keptFrom_ != seq) return;
  Kept k;
  std::memcpy(&k, kept_.data(), sizeof k);
  const size_t bytes = sizeof k + k.srcLen + k.length;
  kept_.consume(bytes);
  keptFrom_++;
  if (resending()) resend_.at -= bytes;  // one before it (settle() refuses the others)
}

Status Outbound::resume(uint64_t next) {
  if (next < baseSeq_ || next > nextSeq_)
    return Status(Errc::protocol_error, "resume from message " + std::to_string(next) +
                                            ", not one in flight (" + std::to_string(baseSeq_) +
                                            " to " + std::to_string(nextSeq_ - 1) + ")");
  if (next < nextSeq_ && (kept_.empty() || keptFrom_ > next))
    return Status(Errc::protocol_error, "resume from message " + std::to_string(next) +
                                            ", which was not kept for a resume");
  repeatsSettle_ = true;
  // The message on the wire when the connection was lost goes again whole:
  // its rest leaves the queue (it is kept whole).
  if (current_ != nullptr) {
    Flow& f = *current_;
    current_ = nullptr;
    popFront(f);
    makeReady(f);
  }
  size_t at = 0;
  for (uint64_t seq = keptFrom_; seq < next; seq++) {
    Kept k;
    std::memcpy(&k, kept_.data() + at, sizeof k);
    at += sizeof k + k.srcLen + k.length;
  }
  resend_ = {next, nextSeq_, 0, at, false};
  resent_ += nextSeq_ - next;
  return Status();
}

// Writes the messages to send again, in order, before anything new; true
// when all of them are in batches.
bool Outbound::writeResent(SendRoom& room) {
  while (resending()) {
    Kept k;
    std::memcpy(&k, kept_.data() + resend_.at, sizeof k);
    const auto* p = kept_.data() + resend_.at + sizeof k;
    const std::string_view src(reinterpret_cast<const char*>(p), k.srcLen);
    const std::span<const std::byte> payload(p + k.srcLen, k.length);
    const InFlight& m = inflight_[k.seq - baseSeq_];
    if (!write(room, k.seq, src, m.flow->service, payload, resend_.offset, resend_.started))
      return false;
    resend_.at += sizeof k + k.srcLen + k.length;
    resend_.next++;
    resend_.offset = 0;
    resend_.started = false;
  }
  return true;
}

}  // namespace rdmamsg::peer
