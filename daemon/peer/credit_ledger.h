// The link credits of one connection, both ways, and the credit terms of
// the batch it has open (docs/protocol.md). No verbs: the connection
// (connection.h) applies what the ledger decides.
//
// Every batch fills one of the receiving end's buffers, so every batch
// spends one credit.
//
// The peer's receive buffers, which this end fills (credits()):
// - credits come with the peer's Hello (its initial grant) and in the
//   header of its batches; never more than the buffers it announced;
// - a batch for messages opens only with two credits: one is always kept
//   for batches without messages (confirmations, credit returns,
//   heartbeats), so liveness and credit returns never wait for consumers;
//   a batch opened on that last credit takes no message;
// - to a peer with a shared receive queue, the first batch after
//   releaseAfter without one for messages gives back ("releases") every
//   credit beyond the peer's initial grant, less the one it spends.
//
// This end's receive buffers, which the peer fills: its allowance is the
// credits it holds (granted), those in flight, and its batches not yet
// reposted (held). What it is owed, allowance - granted - held, goes back
// in the next batch's header; a batch of nothing but credits goes once
// enough are owed (wantsCreditReturn). A peer that spends its credits on
// messages faster than they come back is lent more by the Lender (the
// device's shared receive queue), up to maxCredits; what it releases goes
// back to the Lender. A batch without a credit, a release of more than the
// peer holds, or a return of more credits than its buffers is a broken
// rule, and the connection fails.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {

// Lends receive buffers beyond the initial grant to busy peers.
class Lender {
 public:
  virtual ~Lender() = default;
  // Up to `allowance` more for a peer that may fill `allowance`, within
  // `max` in all; 0 when there are none.
  virtual uint32_t lend(uint32_t allowance, uint32_t max) = 0;
  virtual void giveBack(uint32_t n) = 0;
};

class CreditLedger {
 public:
  using Clock = std::chrono::steady_clock;

  // `maxCredits`: the most buffers this end lets the peer fill.
  CreditLedger(uint32_t maxCredits, std::chrono::milliseconds releaseAfter, Clock::time_point now);

  // --- this end's receive buffers, which the peer fills
  // The buffers the peer may fill at once (its initial grant); `lender`
  // lends more (nullptr: nobody does).
  void grant(uint32_t initial, Lender* lender);
  uint32_t allowance() const { return allowance_; }
  uint32_t lent() const { return lent_; }
  uint32_t owed() const;
  // Enough is owed to send a batch of nothing but credits.
  bool wantsCreditReturn() const;
  // A batch from the peer (its header checked): its credit, the credits it
  // returns and releases; a protocol_error naming the rule it broke.
  Status onBatch(const BatchReader& batch);
  // `n` of the peer's batches were read and their buffers reposted.
  void reposted(uint32_t n) { held_ -= n < held_ ? n : held_; }

  // --- the peer's receive buffers, which this end fills
  // The peer's Hello: its buffers and whether it takes back idle credits.
  void knowPeer(const Hello& remote);
  // The handshake is done: the peer's initial grant is ours to spend;
  // protocol_error when that is more than its buffers.
  Status takeInitialCredits();
  uint32_t credits() const { return credits_; }
  // Whether a batch may open for a record of this kind.
  bool mayOpen(bool forMessages) const { return credits_ >= (forMessages ? 2u : 1u); }
  void open(bool forMessages);  // spends the batch's credit
  bool isOpen() const { return open_; }
  // Whether the open batch may take a record of this kind (it may then).
  bool join(bool forMessages);
  struct Seal {
    uint32_t returned = 0;  // the header's credits
    uint16_t released = 0;  // and released
  };
  // The open batch goes: what its header says.
  Seal seal(Clock::time_point now);
  // The open batch goes with nothing in its header (the handshake's
  // authentication batch): what is owed waits for the next one.
  void sealBare() { open_ = false; }

  uint64_t lentTotal() const { return lentTotal_; }
  uint64_t releasedTotal() const { return releasedTotal_; }

 private:
  void maybeLend(const BatchReader& batch);
  static bool carriesMessages(BatchReader batch);

  uint32_t maxCredits_;
  std::chrono::milliseconds releaseAfter_;
  Lender* lender_ = nullptr;
  // The peer's side: buffers it may fill (lent_ of them lent), the credits
  // it holds, its batches not yet reposted.
  uint32_t allowance_ = 0, lent_ = 0, granted_ = 0, held_ = 0;
  // This end's: credits to spend, and what the peer said it has.
  uint32_t credits_ = 0;
  bool peerKnown_ = false, peerShares_ = false;
  uint32_t peerInitial_ = 0, peerMost_ = 0;
  // The open batch: whether it may carry messages, whether it spent the
  // last credit (then it may not).
  bool open_ = false, openForMessages_ = false, openOnReserve_ = false;
  Clock::time_point lastForMessages_;
  uint64_t lentTotal_ = 0, releasedTotal_ = 0;
};

}  // namespace rdmamsg::peer
