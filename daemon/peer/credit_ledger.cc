// The link credits of one connection (credit_ledger.h).
#include "daemon/peer/credit_ledger.h"

#include <algorithm>

namespace rdmamsg::peer {

CreditLedger::CreditLedger(uint32_t maxCredits, std::chrono::milliseconds releaseAfter,
                           Clock::time_point now)
    : maxCredits_(maxCredits), releaseAfter_(releaseAfter), lastForMessages_(now) {}

void CreditLedger::grant(uint32_t initial, Lender* lender) {
  allowance_ = granted_ = initial;
  lender_ = lender;
}

uint32_t CreditLedger::owed() const {
  uint64_t out = uint64_t{granted_} + held_;
  return allowance_ > out ? static_cast<uint32_t>(allowance_ - out) : 0;
}

// A batch of nothing but credits spends one of the peer's: it must return
// more than that (at least 2), or two ends would answer each other's
// returns forever. With 3 or more buffers this never strands a peer below
// the 2 credits a message needs.
bool CreditLedger::wantsCreditReturn() const {
  const uint32_t least = allowance_ <= 2 ? 1 : std::max<uint32_t>(2, allowance_ / 4);
  return owed() >= least;
}

Status CreditLedger::onBatch(const BatchReader& batch) {
  held_++;
  if (granted_ == 0) return Status(Errc::protocol_error, "peer sent a batch without a credit");
  granted_--;
  const uint32_t released = batch.released();
  if (released > granted_)
    return Status(Errc::protocol_error, "peer released more credits than it holds");
  if (released > 0) {
    granted_ -= released;
    releasedTotal_ += released;
    // Back to the lender, down to the initial grant.
    const uint32_t back = std::min(released, lent_);
    if (back > 0) lender_->giveBack(back);
    lent_ -= back;
    allowance_ -= back;
  }
  // A peer never has more buffers for us than it announced: more credits
  // would make this end overrun its receive buffers.
  if (peerKnown_ && uint64_t{credits_} + batch.credits() > peerMost_)
    return Status(Errc::protocol_error, "peer returned more credits than it has receive buffers");
  credits_ += batch.credits();  // the peer's buffers: usable at once
  maybeLend(batch);
  return Status();
}

// A peer that spends its credits on messages faster than they come back
// is lent more (a batch that releases credits says the peer is idle).
void CreditLedger::maybeLend(const BatchReader& batch) {
  if (lender_ == nullptr || granted_ * 2 > allowance_ || allowance_ >= maxCredits_ ||
      batch.released() != 0 || !carriesMessages(batch))
    return;
  const uint32_t more = lender_->lend(allowance_, maxCredits_);
  allowance_ += more;
  lent_ += more;
  lentTotal_ += more;
}

// Whether a batch has a message among its first records (confirmations and
// heartbeats come first, when a batch has them).
bool CreditLedger::carriesMessages(BatchReader batch) {
  Record rec;
  for (int i = 0; i < 4 && batch.next(rec); i++)
    if (rec.type == RecordType::kMessage) return true;
  return false;
}

void CreditLedger::knowPeer(const Hello& remote) {
  peerKnown_ = true;
  peerShares_ = (remote.flags & kHelloSharedReceive) != 0;
  peerInitial_ = remote.bufferCount;
  peerMost_ = remote.maxCredits != 0 ? remote.maxCredits : remote.bufferCount;
}

Status CreditLedger::takeInitialCredits() {
  credits_ += peerInitial_;  // plus any returned by batches already here
  if (credits_ > peerMost_)
    return Status(Errc::protocol_error, "peer returned more credits than it has receive buffers");
  return Status();
}

void CreditLedger::open(bool forMessages) {
  credits_--;
  openOnReserve_ = credits_ == 0;
  openForMessages_ = forMessages;
  open_ = true;
}

bool CreditLedger::join(bool forMessages) {
  if (forMessages && openOnReserve_) return false;
  openForMessages_ = openForMessages_ || forMessages;
  return true;
}

CreditLedger::Seal CreditLedger::seal(Clock::time_point now) {
  Seal s;
  if (openForMessages_) {
    lastForMessages_ = now;
  } else if (peerKnown_ && peerShares_ && now - lastForMessages_ >= releaseAfter_) {
    // No messages for a while: keep what the peer grants an idle
    // connection, its initial grant, of which this batch spends one (back
    // when it is read).
    const uint32_t keep = peerInitial_ > 0 ? peerInitial_ - 1 : 0;
    if (credits_ > keep) {
      s.released = static_cast<uint16_t>(std::min<uint32_t>(credits_ - keep, 0xffff));
      credits_ -= s.released;
    }
  }
  s.returned = owed();
  granted_ += s.returned;
  open_ = false;
  return s;
}

}  // namespace rdmamsg::peer
