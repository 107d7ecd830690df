// The receive side of one connection's QP (receiver.h).
#include "daemon/peer/receiver.h"

namespace rdmamsg::peer {

Status Receiver::open(rdma::Device& device, uint32_t maxCredits) {
  Result<std::unique_ptr<ReceiveSupply>> supply = ReceiveSupply::open(device, maxCredits);
  if (!supply) return supply.status();
  supply_ = std::move(supply).value();
  return Status();
}

void Receiver::start(const ibv_qp_cap& granted, Hello& hello) {
  ledger_.grant(supply_->start(granted, repost_), supply_->lender());
  if (supply_->shared()) hello.flags |= kHelloSharedReceive;
  hello.maxCredits = supply_->most();
  hello.bufferCount = ledger_.allowance();
}

Status Receiver::post(ibv_qp* qp, bool initial) {
  if (repost_.empty()) return Status();
  auto n = static_cast<uint32_t>(repost_.size());
  if (Status st = supply_->post(qp, repost_); !st.ok()) return st;
  counters_.recvsPosted += n;
  counters_.postRecvCalls++;
  if (!initial) ledger_.reposted(n);
  repost_.clear();
  return Status();
}

// Seed 004: a successful completion is checked for what it is and how much
// it carries.
Result<Receiver::Arrival> Receiver::onReceived(const ibv_wc& wc, size_t bufferSize, bool closing) {
  supply_->completed();
  const auto index = static_cast<uint32_t>(wc.wr_id & 0xffffffff);
  const bool known = supply_->owns(index);
  if (wc.opcode != IBV_WC_RECV || !known || wc.byte_len > bufferSize) {
    if (known) supply_->discard(index);
    return Status(Errc::protocol_error,
                  "receive completion with an unexpected opcode, id or length");
  }
  if (closing) {
    supply_->discard(index);  // arrived as it closes: nobody reads it
    return Arrival::kNothing;
  }
  const Result<uint32_t> bytes = verified(index, wc.byte_len);
  if (!bytes) return bytes.status();
  // On the passive side the first batches may complete before ESTABLISHED
  // is read from the event channel: they wait here like any other.
  counters_.batchesReceived++;
  counters_.bytesReceived += *bytes;
  received_.push_back({index, *bytes});
  BatchReader reader({supply_->at(index), *bytes});
  if (Status st = reader.open(); !st.ok())
    return Status(Errc::protocol_error, "malformed batch from peer: " + st.message());
  if (Status st = ledger_.onBatch(reader); !st.ok()) return st;
  return Arrival::kBatch;
}

// Without keys, one batch is taken unverified: the handshake's (its proof
// is checked by the Authenticator); any other is refused, as nothing but
// the handshake may come before the keys.
Result<uint32_t> Receiver::verified(uint32_t index, uint32_t bytes) {
  if (auth_ == nullptr) return bytes;
  if (!auth_->active()) {
    if (unverified_++ == 0) return bytes;
    return reject(index, BatchReject::kBadMac, "a batch before the session keys");
  }
  Result<BatchAuth::Verdict> verdict = auth_->verify({supply_->at(index), bytes});  // in place
  if (!verdict) {
    // This node's libcrypto failed, not the batch: no rejection to count.
    supply_->discard(index);
    return verdict.status();
  }
  const BatchAuth::Verdict& v = *verdict;
  if (!v.reject) return static_cast<uint32_t>(v.length);
  std::string detail = "batch " + std::to_string(auth_->expected()) + " expected";
  if (*v.reject == BatchReject::kReplayed || *v.reject == BatchReject::kReordered)
    detail = "it carries batch " + std::to_string(v.seq) + ", " + detail;
  return reject(index, *v.reject, detail);
}

// A batch that failed is never read: its buffer goes back, and the
// connection fails with the reason.
Status Receiver::reject(uint32_t index, BatchReject why, const std::string& detail) {
  supply_->discard(index);
  rejected_ = why;
  return Status(Errc::protocol_error,
                std::string("batch rejected: ") + toString(why) + "; " + detail);
}

std::span<const std::byte> Receiver::batchAt(size_t i) const {
  const Received& r = received_[i];
  return {supply_->at(r.index), r.bytes};
}

void Receiver::consume(size_t i) {
  repost_.push_back(received_[i].index);
  received_.erase(received_.begin() + static_cast<std::ptrdiff_t>(i));
}

void Receiver::giveBack() {
  if (supply_) {
    std::vector<uint32_t> unread;
    for (const Received& r : received_)
      unread.push_back(r.index);
    unread.insert(unread.end(), repost_.begin(), repost_.end());
    supply_->returnAll(unread, ledger_.lent());
    supply_.reset();
  }
  received_.clear();
  repost_.clear();
}

}  // namespace rdmamsg::peer
