// The receive side of one connection's QP: its receive buffers (a
// ReceiveSupply, receive_supply.h), the batches that arrived and are not
// yet read — in arrival order, their headers checked and their credits
// taken by the ledger (credit_ledger.h) at once — and those read and not
// yet reposted. Read buffers are reposted in one list per service step,
// and each one is a credit owed to the peer again. With a mesh secret,
// every batch after the handshake's is verified (batch_auth.h) before
// anything of it is taken, its credits included: one that fails is never
// read, and the connection fails with the reason.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "daemon/peer/batch_auth.h"
#include "daemon/peer/credit_ledger.h"
#include "daemon/peer/protocol.h"
#include "daemon/peer/receive_supply.h"
#include "daemon/rdma/device.h"

namespace rdmamsg::peer {

class Receiver {
 public:
  struct Counters {
    uint64_t recvsPosted = 0;
    uint64_t postRecvCalls = 0;
    uint64_t batchesReceived = 0;
    uint64_t bytesReceived = 0;
  };

  explicit Receiver(CreditLedger& ledger) : ledger_(ledger) {}

  // Batches are verified with `auth` once it is active; before that only
  // one (the handshake's) is taken.
  void authenticate(BatchAuth* auth) { auth_ = auth; }
  // Takes receive buffers from the device (ReceiveSupply::open's errors).
  Status open(rdma::Device& device, uint32_t maxCredits);
  // The QP's receive side, for rdma_create_qp.
  void describe(ibv_qp_init_attr& attr) const { supply_->describe(attr); }
  // The QP was created with `granted`: the peer's initial grant goes to
  // the ledger and into this end's Hello, with the buffers it may fill.
  void start(const ibv_qp_cap& granted, Hello& hello);
  // Posts the buffers read since the last call (at start: all of them in
  // a receive set); io_error when the post failed.
  Status post(ibv_qp* qp, bool initial);

  // Completions: whether a wr_id tag is this side's; a flushed one.
  bool isReceive(uint64_t tag) const { return supply_ && tag == supply_->tag(); }
  void onFlushed() { supply_->completed(); }
  enum class Arrival : uint8_t {
    kNothing,  // nothing to read (it arrived as the connection closes)
    kBatch,    // a batch to read arrived
  };
  // A successful receive completion. `closing`: nobody reads it. An error
  // fails the connection: protocol_error for the peer's (a completion not
  // of its own or too long, a malformed batch, its credits, a batch that
  // did not verify: then rejected() says why), io_error for this node's (a
  // libcrypto call failed verifying it).
  Result<Arrival> onReceived(const ibv_wc& wc, size_t bufferSize, bool closing);

  bool hasBatch() const { return !received_.empty(); }
  size_t pending() const { return received_.size(); }
  std::span<const std::byte> batchAt(size_t i) const;
  // Batch i is read: its buffer is reposted at the next post().
  void consume(size_t i);

  // Teardown: every receive of the QP is back (or none will come).
  bool drained() const { return !supply_ || supply_->drained(); }
  void onLastWqe() {
    if (supply_) supply_->onLastWqe();
  }
  void forgetPosted() {
    if (supply_) supply_->forgetPosted();
  }
  // The QP is gone: every buffer, and those lent, back to the device.
  // detach(): the device goes too; nothing is given back.
  void giveBack();
  void detach() { supply_.reset(); }

  const Counters& counters() const { return counters_; }
  // Why a batch was rejected, if one was (the connection then failed).
  std::optional<BatchReject> rejected() const { return rejected_; }

 private:
  Status reject(uint32_t index, BatchReject why, const std::string& detail);
  // The batch's bytes, its trailer checked and cut off; an error: rejected
  // (its buffer is back), or this node could not verify it.
  Result<uint32_t> verified(uint32_t index, uint32_t bytes);

  CreditLedger& ledger_;
  BatchAuth* auth_ = nullptr;
  uint64_t unverified_ = 0;  // batches taken before the keys (the handshake's)
  std::optional<BatchReject> rejected_;
  std::unique_ptr<ReceiveSupply> supply_;
  struct Received {
    uint32_t index, bytes;
  };
  std::deque<Received> received_;  // completed, not yet read
  std::vector<uint32_t> repost_;   // read, not yet reposted
  Counters counters_;
};

}  // namespace rdmamsg::peer
