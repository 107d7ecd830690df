// Session: one connected application, as seen by LocalServer.
//
// It owns the client's socket, its input buffer (filled by big reads until
// EAGAIN — the socket is edge-triggered), its output buffer (frames
// appended by LocalServer, written by flush() once per loop turn) and the
// list of services the client registered. Protocol semantics live in
// LocalServer; Session does the I/O.
//
// Calls go one way: Session never calls its owner. Its events — bytes read,
// the end of its input, the socket writable again, no HELLO in time — only
// change what it exposes (input(), inputEnded(), takeWritable(),
// helloExpired()) and mark it with its waker; LocalServer's service phase
// reads that state and acts. Its state changes in one place, setState(),
// which refuses an edge the state machine does not have:
//
//   awaiting_hello → ready → closing
//          └─────────────────────┘
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/byte_buffer.h"
#include "common/local_protocol.h"
#include "common/shm_channel.h"
#include "common/unique_fd.h"
#include "daemon/external_payload.h"
#include "daemon/local/delivery_block.h"
#include "daemon/local/local_handler.h"
#include "daemon/loop/event_loop.h"
#include "daemon/loop/events.h"
#include "daemon/ring.h"

namespace rdmamsg::local {

class Session {
 public:
  enum class State : uint8_t { awaiting_hello, ready, closing };
  enum class FlushResult : uint8_t { drained, blocked, failed };
  // Why reading is paused; reading resumes when no reason is left.
  static constexpr uint8_t kPausedByRouter = 1;
  static constexpr uint8_t kPausedByOutput = 2;

  // `wake` marks the session for its owner's service phase.
  Session(loop::EventLoop& loop, SessionId id, UniqueFd fd, PeerCred cred, uint32_t maxBody,
          size_t maxAcksPerFrame, std::chrono::milliseconds helloTimeout,
          std::function<void()> wake);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  SessionId id() const { return id_; }
  const PeerCred& cred() const { return cred_; }
  const std::string& name() const { return name_; }  // for log lines
  State state() const { return state_; }
  void setState(State next);  // a transition the machine does not have is a bug: aborts

  // What the reads left for the owner: bytes not yet parsed, and whether
  // the input ended (the client closed, or a read failed: `endReason()`).
  std::span<const std::byte> input() const { return in_.readable(); }
  void consumeInput(size_t n) { in_.consume(n); }
  uint32_t maxBody() const { return maxBody_; }
  bool inputEnded() const { return endReason_ != nullptr; }
  const char* endReason() const { return endReason_; }
  // Why the input ended, for the client: ok for an orderly end, an error
  // (protocol_error) when the client broke the protocol.
  Status endStatus() const;
  bool helloExpired() const { return helloExpired_; }
  // The socket became writable again (once per edge).
  bool takeWritable() { return std::exchange(writable_, false); }

  // Services this client registered (few: a linear search is fastest).
  bool ownsService(std::string_view service) const;
  void addService(std::string_view service) { services_.emplace_back(service); }
  bool removeService(std::string_view service);
  const std::vector<std::string>& services() const { return services_; }
  std::string_view defaultService() const;

  // Input flow control.
  void pause(uint8_t reason) { pauseMask_ |= reason; }
  void resume(uint8_t reason);
  bool pausedBy(uint8_t reason) const { return (pauseMask_ & reason) != 0; }
  bool paused() const { return pauseMask_ != 0; }
  // Runs the read callback on this loop turn (bytes may predate registration).
  void kickRead();

  // Shared memory (common/shm_channel.h). Until the offer window closes —
  // the first frame after HELLO that is not SHM_OFFER — the socket is read
  // with the descriptors passed along (at most shm_channel::kFdCount).
  // takePassedFds() hands them to the SHM_OFFER; closeOfferWindow() closes
  // the rest and reads the socket without descriptors from then on.
  std::vector<UniqueFd> takePassedFds() { return std::exchange(passedFds_, {}); }
  void closeOfferWindow();
  bool offerWindowOpen() const { return offerWindow_; }
  // From now on frames come from and go to the channel's rings; the socket
  // is only watched for its end. The output buffer must be empty (what was
  // queued before, the SHM_ACCEPT, went through the socket).
  void useSharedMemory(std::unique_ptr<ShmChannel> channel);
  const ShmChannel* sharedMemory() const { return shm_.get(); }
  // The channel failed (a ring the client corrupted).
  bool ringBroken() const;
  // A frame record or a payload record (common/shm_channel.h) is next in
  // the client's ring:
  // the input buffer's frames come first, then takeFrameRecord() takes it.
  bool frameRecordWaiting() const { return shm_ && shm_->frameWaiting(); }
  // The SEND a frame record holds, its head (ids, names) decoded from a
  // private copy. A large payload stays where it lies: `held` holds its
  // ring space (the caller drops it when done; a send posted from it holds
  // it longer). A small one, or one past the records a ring may hold, is
  // copied and its record released (`held` null). `error`: a protocol
  // error (valid until the next call); nothing was taken.
  struct FrameRecord {
    proto::Frame frame;
    ExternalPayload* held = nullptr;
    const char* error = nullptr;
  };
  FrameRecord takeFrameRecord();
  // After a frame record: the records behind it are read on the next turn
  // (all of them now when the input has ended: the client wrote them
  // before it closed).
  void readAfterFrameRecord();
  // A loop that spins (loop/spin.h) polls the ring instead of sleeping on
  // the doorbell, and the session then never arms its words on its own:
  // pollRing() does what a ring of the doorbell does when records or room
  // came (true), armForSleep() asks to be rung before the loop sleeps
  // (false: work came meanwhile), disarmAfterSleep() takes that back.
  bool pollRing();
  bool armForSleep();
  void disarmAfterSleep();
  // Closing a shared-memory session: an ERROR with `why` straight onto the
  // socket (best effort, never waiting).
  void sayOnSocket(const Status& why);

  // Output: the caller appends one frame and calls LocalServer::markDirty.
  // Acks are collected and encoded at flush time — one ACK frame carries all
  // acks of a loop turn, so they may overtake other frames of that turn.
  ByteBuffer& outputBuffer() { return out_; }
  // A frame of `size` bytes written by `fill` straight into the client's
  // ring as one record — the one copy of its bytes — when the session is
  // on shared memory, nothing waits before it in the output buffer and the
  // ring has room for it now. False: the caller appends it to the output
  // buffer instead. Either way the caller then calls markDirty (the flush
  // rings the client if it sleeps).
  template <typename Fill>
  bool writeInPlace(size_t size, Fill&& fill);
  // The same for a large DELIVER (`payload` bytes of shm_channel::
  // kMinFrameRecordPayload or more) when the client has a delivery area: the
  // frame written into a block of it, which the client reads in place and
  // gives back in any order, and a payload record naming the block into the
  // ring. False when the area or the ring has no room now.
  template <typename Fill>
  bool writeInArea(size_t size, size_t payload, Fill&& fill);
  // The two halves of that, for a frame written later (a message put
  // together from a peer's fragments): a block for a DELIVER of `size`
  // bytes, `payload` of them its payload (null: no area, or no room), and
  // its payload record into the ring once the frame is written — false,
  // the block left to the caller, when something waits before it in the
  // output buffer or the ring has no room now.
  std::unique_ptr<DeliveryBlock> reserveBlock(size_t size, size_t payload);
  bool publishBlock(DeliveryBlock& block);
  // Acks ids msgId .. msgId + count - 1; consecutive ids (the usual case)
  // extend one range.
  void queueAcks(uint64_t msgId, uint64_t count);
  void encodePendingAcks();
  size_t outputBytes() const { return out_.size() + pendingAcks_.size() * proto::kAckRangeSize; }
  FlushResult flush();  // writes until drained or EAGAIN

  // Deliveries and their receipts. Every DELIVER appended is numbered (1,
  // 2, 3, … on this connection) and tracked with its receipt until the
  // client's CONSUMED count covers it. A delivery that continues the last
  // receipt (same owner and epoch, next seq) extends it, up to kReceiptSpan
  // bytes, so a stream is handed back in runs.
  static constexpr size_t kReceiptSpan = 64 * 1024;
  // Bytes read from the socket or ring per wakeup before other clients' turn.
  static constexpr size_t kReadBudget = 1024 * 1024;
  void track(const Receipt& r, size_t frameBytes);
  // The client's CONSUMED: false when `taken` goes back or past the
  // deliveries sent (a protocol error). Then consumed() hands back the
  // receipts it covers.
  bool consume(uint64_t taken);
  template <typename F>
  void consumed(F&& f) {
    while (!tracked_.empty()) {
      Tracked& t = tracked_.front();
      if (t.end <= taken_) {
        unconsumedBytes_ -= t.bytes;
        f(t.receipt, t.bytes);
        tracked_.pop_front();
        continue;
      }
      // A run taken in part: its first messages go back now, exactly those.
      const uint64_t first = t.end - t.receipt.count + 1;
      if (first > taken_) return;
      Receipt part = t.receipt;
      part.count = taken_ - first + 1;
      const size_t partBytes = t.bytes / t.receipt.count * part.count;
      t.receipt.seq += part.count;
      t.receipt.count -= part.count;
      t.bytes -= partBytes;
      unconsumedBytes_ -= partBytes;
      f(part, partBytes);
      return;
    }
  }
  // Every delivery not consumed (the session is closing).
  template <typename F>
  void unconsumed(F&& f) {
    while (!tracked_.empty()) {
      unconsumedBytes_ -= tracked_.front().bytes;
      f(tracked_.front().receipt, tracked_.front().bytes);
      tracked_.pop_front();
    }
  }
  // Bytes of DELIVER frames the application has not taken yet.
  size_t unconsumedBytes() const { return unconsumedBytes_; }
  bool hasPendingAcks() const { return !pendingAcks_.empty(); }
  int lastErrno() const { return lastErrno_; }

  // Set by LocalServer: output above the high watermark / queued for flush /
  // marked for the service phase / the handler has been told about this session.
  bool congested = false;
  bool dirty = false;
  bool marked = false;
  bool knownToHandler = false;
  // Set when the local policy refuses this client: the answer to its next
  // frame (HELLO), after which the session closes.
  Status refusal;
  // The last destination the local policy allowed this client, under policy
  // generation policyGeneration (LocalServer::maySend).
  uint64_t policyGeneration = 0;
  std::string policyNode, policyService;

  void stopEvents();  // closing: no more callbacks

 private:
  void onReadable();
  void readSocket(size_t budget);
  void onDoorbell();
  void readRing();
  // Copies up to `budget` bytes of records into the input buffer; an error
  // (logged) when the client's ring is corrupt.
  Result<size_t> takeFromRing(size_t budget);
  FlushResult flushToRing();
  void relieveRing();       // spills what waits in place past half of the ring held
  void countShmSyscalls();  // the channel's doorbell calls into loop::syscalls()
  void endInput(const char* why, int err, Errc code = Errc::ok);

  loop::EventLoop& loop_;
  const SessionId id_;
  std::function<void()> wake_;
  UniqueFd fd_;
  const PeerCred cred_;
  const uint32_t maxBody_;
  const size_t maxAcksPerFrame_;
  std::string name_;
  State state_ = State::awaiting_hello;
  uint8_t pauseMask_ = 0;
  int lastErrno_ = 0;
  const char* endReason_ = nullptr;
  Errc endCode_ = Errc::ok;
  bool writable_ = false;
  bool helloExpired_ = false;
  ByteBuffer in_;
  ByteBuffer out_;
  uint64_t delivered_ = 0;  // DELIVER frames appended
  uint64_t taken_ = 0;      // the client's last CONSUMED count
  size_t unconsumedBytes_ = 0;
  struct Tracked {
    uint64_t end;  // the delivery number of the run's last frame
    Receipt receipt;
    size_t bytes;
  };
  Ring<Tracked> tracked_;
  std::vector<proto::AckRange> pendingAcks_;
  std::vector<std::string> services_;
  loop::IoEvent readEvent_;   // EV_READ|EV_PERSIST|EV_ET, always registered
  loop::IoEvent writeEvent_;  // EV_WRITE|EV_PERSIST|EV_ET, registered while output is blocked
  loop::Timer helloTimer_;    // closes a client that never says HELLO
  bool offerWindow_ = true;   // descriptors are read with the socket's bytes
  std::vector<UniqueFd> passedFds_;
  std::shared_ptr<ShmChannel> shm_;               // kept by frame records held past the session
  std::shared_ptr<ExternalArea> area_;            // the ring to the daemon, as devices register it
  std::shared_ptr<ExternalArea> payloadArea_;     // the channel's payload area, if it has one
  std::string frameError_;                        // FrameRecord::error's text when not static
  std::vector<std::byte> frameCopy_;              // a frame record's head, or all of a small one
  std::unique_ptr<loop::IoEvent> doorbellEvent_;  // the channel's wakeFd, EV_ET
  uint64_t wakesCounted_ = 0, readsCounted_ = 0;
  bool waitingForRoom_ = false;  // the ring to the client was full at the last flush
  bool spinning() const { return loop_.idleStrategy() != loop::IdleStrategy::sleep; }
};

template <typename Fill>
bool Session::writeInPlace(size_t size, Fill&& fill) {
  if (!shm_ || !out_.empty() || size > shm_->maxRecord() || ringBroken()) return false;
  Result<std::span<std::byte>> room = shm_->reserveRecord(size);
  if (!room) return false;
  fill(room->first(size));
  // A commit that fails broke the ring: the flush sees it and ends the session.
  return shm_->commitRecord().ok();
}

template <typename Fill>
bool Session::writeInArea(size_t size, size_t payload, Fill&& fill) {
  if (payload < shm_channel::kMinFrameRecordPayload || !out_.empty()) return false;
  std::unique_ptr<DeliveryBlock> block = reserveBlock(size, payload);
  if (!block) return false;
  fill(block->frame());
  return publishBlock(*block);
}

}  // namespace rdmamsg::local
