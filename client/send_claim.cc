// Client::claim(), commit() and abort(): a message written where it is sent
// from (claimPublish(), client_subjects.cc, opens a publish's claim). Over shared memory a large
// claim is a block of the payload area, so that neither the library nor the daemon copies its
// payload (the daemon posts it from the block); the SEND frame's head is written in front of the
// payload at commit(), when the message gets its id. The claim itself is a
// ClaimSlot (claim_slot.h), which says who frees its block.
#include <string>

#include "client/client_impl.h"

namespace rdmamsg {

static_assert(Client::kMinClaimInPlace == shm_channel::kMinFrameRecordPayload);

namespace {

Status claimHeldError() {
  return Status(Errc::bad_request, "a SendClaim is held: commit() or abort() it first");
}

Status notThisClaim() {
  return Status(Errc::bad_request, "this SendClaim is not held (committed or aborted already)");
}

}  // namespace

Status Client::claim(SendClaim& out, std::string_view node, std::string_view service, size_t size,
                     std::string_view fromService) {
  Impl& im = *impl_;
  if (im.claim.held()) return claimHeldError();
  if (!im.conn.ok()) return im.conn;
  if (Status st = im.sendCheck.check(node, service, fromService, size, im.maxMessage); !st.ok())
    return st;
  std::optional<Client::Impl::Block> block =
      im.link.claimBlock(proto::sendFrameSize(node, service, fromService, size), size);
  im.claim.open(out, ++im.lastHandle, node, service, fromService, size, block);
  return Status();
}

Status Client::claimPublish(SendClaim& out, std::string_view subject, size_t size) {
  Impl& im = *impl_;
  if (im.claim.held()) return claimHeldError();
  if (!im.conn.ok()) return im.conn;
  if (Status st = im.checkPublish(subject, size); !st.ok()) return st;
  std::optional<Client::Impl::Block> block =
      im.link.claimBlock(proto::pubFrameSize(subject, size), size);
  im.claim.openPublish(out, ++im.lastHandle, subject, size, block);
  return Status();
}

Result<uint64_t> Client::commit(SendClaim& claim) {
  return impl_->commitClaim(claim, true);
}

Result<uint64_t> Client::tryCommit(SendClaim& claim) {
  return impl_->commitClaim(claim, false);
}

Status Client::abort(SendClaim& claim) {
  Impl& im = *impl_;
  if (!im.claim.holds(claim)) return notThisClaim();
  if (std::optional<Impl::Block> block = im.claim.close(claim)) im.link.freeBlock(*block);
  return Status();
}

Result<uint64_t> Client::Impl::commitClaim(SendClaim& c, bool mayWait) {
  if (!claim.holds(c)) return notThisClaim();
  Result<uint64_t> sent = [&]() -> Result<uint64_t> {
    try {
      if (!claim.subject().empty())
        return queuePub(claim.subject(), 0, claim.payload(), false, mayWait, claim.block());
      return queueSend(claim.node(), claim.service(), claim.payload(), claim.fromService(), mayWait,
                       claim.block());
    } catch (...) {
      // Once given the block is the daemon's, or freed: never abort()ed later.
      if (claim.blockGiven()) (void)claim.close(c);
      throw;
    }
  }();
  // Not sent: held for another try when it would only have waited.
  if (!sent.ok() && !claim.blockGiven() && !mayWait && sent.status().code() == Errc::would_block)
    return sent;
  if (std::optional<Block> block = claim.close(c)) link.freeBlock(*block);
  return sent;
}

}  // namespace rdmamsg
