// Client::send(), trySend(), sendAndWait() and flush(): a message checked,
// queued in the output buffer (or written into the ring at once, over
// shared memory, when it is large: ShmLink::sendLarge()) and written in
// batches, under the blocking and HOLD rules of include/rdmamsg/client.h.
#include <string>

#include "client/client_wait.h"

namespace rdmamsg {
namespace {

constexpr size_t kWriteThreshold = 64 * 1024;  // send() writes once this much is queued
constexpr size_t kWriteBlockLimit = 4u << 20;  // send() waits for the socket above this

}  // namespace

Result<uint64_t> Client::trySend(std::string_view node, std::string_view service,
                                 std::span<const std::byte> payload, std::string_view fromService) {
  return impl_->queueSend(node, service, payload, fromService, false);
}

Result<uint64_t> Client::send(std::string_view node, std::string_view service,
                              std::span<const std::byte> payload, std::string_view fromService) {
  return impl_->queueSend(node, service, payload, fromService, true);
}

Result<uint64_t> Client::send(std::string_view node, std::string_view service,
                              std::string_view text, std::string_view fromService) {
  return send(node, service, std::as_bytes(std::span(text.data(), text.size())), fromService);
}

Status Client::sendAndWait(std::string_view node, std::string_view service,
                           std::span<const std::byte> payload, std::chrono::milliseconds timeout) {
  Result<uint64_t> id = send(node, service, payload);
  if (!id.ok()) return id.status();
  Impl& im = *impl_;
  Completion c;
  const uint64_t want = *id;
  Status st = im.waitFor([&] { return im.completions.take(want, c); }, timeout);
  return st.ok() ? c.status : st;
}

Status Client::flush(std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  if (!im.conn.ok()) return im.conn;
  return im.waitFor([&im] { return im.allWritten(); }, timeout);
}

Result<uint64_t> Client::Impl::queueSend(std::string_view node, std::string_view service,
                                         std::span<const std::byte> payload,
                                         std::string_view fromService, bool mayWait,
                                         const Block* claimed) {
  if (!conn.ok()) return conn;
  if (Status st = sendCheck.check(node, service, fromService, payload.size(), maxMessage); !st.ok())
    return st;
  if (Status st = checkRoom(mayWait); !st.ok()) return st;
  if (Status st = checkHeld(node, service, mayWait); !st.ok()) return st;
  const uint64_t id = nextId++;
  if (claimed) claim.giveBlock();  // the message's block now, whatever happens
  Result<client::ShmLink::LargeSend> large =
      link.sendLarge(out, {id, node, service, fromService, payload}, claimed);
  if (!large) lose(large.status());  // the connection's error answers
  if (!large || *large == client::ShmLink::LargeSend::written) return sent(id);
  if (*large == client::ShmLink::LargeSend::inStream)
    proto::encodeSend(out, id, node, service, fromService, payload);
  return queued(id, mayWait);
}

// Blocked by a full buffer: would_block until it drained below the write
// threshold (by then any HOLD the daemon sent meanwhile has been read), so
// that trySend does not flap between accepted and would_block.
Status Client::Impl::checkRoom(bool mayWait) {
  if (mayWait || (!outBlocked && out.size() < kWriteBlockLimit)) return Status();
  writeSome();
  readSome();
  if (!conn.ok()) return conn;
  outBlocked = out.size() >= kWriteThreshold;
  if (!outBlocked) return Status();
  if (link.inUse()) settleIfSleeping();  // fd() wakes when room appears
  return Status(Errc::would_block,
                std::to_string(out.size()) + " bytes are waiting for rdmamsgd to read them");
}

// A held destination: send() waits for its RESUME, trySend() says would_block.
Status Client::Impl::checkHeld(std::string_view node, std::string_view service, bool mayWait) {
  if (!held.isHeld(node, service)) return Status();
  if (!mayWait) {
    if (link.inUse()) settleIfSleeping();  // fd() wakes for the RESUME
    return Status(Errc::would_block, "rdmamsgd holds " + std::string(node) + "/" +
                                         std::string(service) +
                                         ": its queue is full (the listener does not keep up)");
  }
  const std::string n(node), sv(service);
  return waitFor([&] { return !held.isHeld(n, sv); }, std::chrono::hours(24));
}

// Its record is in the ring already (or the connection was lost).
Result<uint64_t> Client::Impl::sent(uint64_t id) {
  completions.sent();
  readSome();  // a HOLD is seen soon, as when the frames go through `out`
  if (!conn.ok()) return conn;
  return id;
}

// It waits in `out`, written in a batch.
Result<uint64_t> Client::Impl::queued(uint64_t id, bool mayWait) {
  completions.sent();
  if (link.inUse() && !mayWait && out.size() < kWriteThreshold) {
    // Batched as over the socket (a daemon that finds more in one turn
    // sends more per RDMA post), but trySend's caller polls fd() next and
    // calls back: fd() is made readable once per batch, and the next
    // processIo()/tryReceive()/pollCompletion() writes the batch.
    if (idle == IdleStrategy::sleep) {
      if (Status st = link.wakeForBatch(); !st) lose(std::move(st));
    }
  } else if (out.size() >= kWriteThreshold) {
    writeSome();
    readSome();  // a HOLD is seen within 64 KiB, not once the socket is full
    if (link.inUse() && !mayWait) settleIfSleeping();
  }
  if (mayWait && out.size() >= kWriteBlockLimit) {
    Status st = waitFor([this] { return out.size() < kWriteThreshold; }, std::chrono::hours(24));
    if (!st.ok()) return st;
  }
  return id;
}

}  // namespace rdmamsg
