// Client::claim(), commit() and abort(): a message written where it is sent
// from. Over shared memory a large claim is a block of the payload area, so
// that neither the library nor the daemon copies its payload (the daemon
// posts it from the block); the SEND frame's head is written in front of the
// payload at commit(), when the message gets its id.
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
  if (im.claimHandle != 0) return claimHeldError();
  if (!im.conn.ok()) return im.conn;
  if (Status st = im.checkSend(node, service, fromService, size); !st.ok()) return st;
  im.claimBlock.reset();
  if (im.shmInUse && im.frameRecords && im.shm->frameRecords() &&
      size >= shm_channel::kMinFrameRecordPayload)
    im.claimBlock = im.shm->allocateBlock(proto::sendFrameSize(node, service, fromService, size));
  if (im.claimBlock) {
    out.payload = im.claimBlock->bytes.last(size);
  } else {
    im.claimCopy.resize(size);
    out.payload = im.claimCopy;
  }
  out.inPlace = im.claimBlock.has_value();
  im.claimNode.assign(node);
  im.claimService.assign(service);
  im.claimFrom.assign(fromService);
  im.claimSize = size;
  out.handle = ++im.lastHandle;
  im.claimHandle = out.handle;
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
  if (claim.handle == 0 || claim.handle != im.claimHandle) return notThisClaim();
  if (im.claimBlock) im.shm->freeBlock(*im.claimBlock);
  im.dropClaim(claim);
  return Status();
}

Result<uint64_t> Client::Impl::commitClaim(SendClaim& c, bool mayWait) {
  if (c.handle == 0 || c.handle != claimHandle) return notThisClaim();
  claimTaken = false;
  Result<uint64_t> sent = [&]() -> Result<uint64_t> {
    try {
      return claimBlock ? queueSend(claimNode, claimService, claimBlock->bytes.last(claimSize),
                                    claimFrom, mayWait, &*claimBlock)
                        : queueSend(claimNode, claimService, claimCopy, claimFrom, mayWait);
    } catch (...) {
      // Once taken the block is the daemon's, or freed: never abort()ed later.
      if (claimTaken) dropClaim(c);
      throw;
    }
  }();
  if (!sent.ok() && !claimTaken) {
    // Not sent: held for another try when it would only have waited.
    if (!mayWait && sent.status().code() == Errc::would_block) return sent;
    if (claimBlock) shm->freeBlock(*claimBlock);
  }
  dropClaim(c);
  return sent;
}

void Client::Impl::dropClaim(SendClaim& c) {
  claimHandle = 0;
  claimBlock.reset();
  c = SendClaim{};
}

}  // namespace rdmamsg
