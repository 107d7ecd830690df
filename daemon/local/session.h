// Session: one connected application, as seen by LocalServer.
//
// It owns the client's socket, its input buffer (filled by big reads until
// EAGAIN — the socket is edge-triggered), its output buffer (frames
// appended by LocalServer, written by flush() once per loop turn), the
// services the client registered, the acks it is owed (AckQueue) and the
// deliveries it has not taken yet (DeliveryLedger). When the client moves
// its frames to shared memory the session owns its ShmLink (shm_link.h),
// and the link carries what the socket carried. Protocol semantics live in
// LocalServer; Session does the I/O.
//
// Calls go one way: Session never calls its owner. Its events — bytes read,
// the end of its input, the socket writable again, the client's doorbell,
// no HELLO in time — only change what it exposes (input(), inputEnded(),
// takeWritable(), helloExpired()) and mark it with its waker; LocalServer's
// service phase reads that state and acts. Its state changes in one place
// (StateMachine); which transport carries the frames is part of it:
//
//   awaiting_hello → offering → socket ──────────→ closing
//          │             └────→ shared_memory ──→ ┘
//          └──────────────────────────────────────→ ┘
//
// Until the offer window closes (awaiting_hello, offering: up to the first
// frame after HELLO that is not SHM_OFFER) the socket is read with the
// descriptors passed along (at most shm_channel::kFdCount).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/byte_buffer.h"
#include "common/local_protocol.h"
#include "common/shm_channel.h"
#include "common/state_machine.h"
#include "common/unique_fd.h"
#include "daemon/local/ack_queue.h"
#include "daemon/local/delivery_block.h"
#include "daemon/local/delivery_ledger.h"
#include "daemon/local/local_handler.h"
#include "daemon/local/shm_link.h"
#include "daemon/loop/event_loop.h"
#include "daemon/loop/events.h"

namespace rdmamsg::local {

class Session {
 public:
  enum class State : uint8_t { awaiting_hello, offering, socket, shared_memory, closing };
  // Why reading is paused; reading resumes when no reason is left.
  static constexpr uint8_t kPausedByRouter = 1;
  static constexpr uint8_t kPausedByOutput = 2;
  // Bytes read from the socket or ring per wakeup before other clients' turn.
  static constexpr size_t kReadBudget = 1024 * 1024;
  static constexpr size_t kReceiptSpan = DeliveryLedger::kReceiptSpan;

  // `wake` marks the session for its owner's service phase.
  Session(loop::EventLoop& loop, SessionId id, UniqueFd fd, PeerCred cred, uint32_t maxBody,
          size_t maxAcksPerFrame, std::chrono::milliseconds helloTimeout,
          std::function<void()> wake);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  SessionId id() const { return id_; }
  const PeerCred& cred() const { return cred_; }
  const std::string& name() const { return name_; }  // for log lines
  State state() const { return state_.get(); }
  bool closing() const { return state_.is(State::closing); }
  bool helloed() const { return !state_.is(State::awaiting_hello) && !closing(); }

  // The client said HELLO: the offer window stays open for one SHM_OFFER.
  void helloReceived() { setState(State::offering); }
  // The first frame after HELLO that is not SHM_OFFER, or an offer
  // refused: the socket carries the frames, read without descriptors.
  void stayOnSocket();
  // From now on frames come from and go to the link's rings; the socket is
  // only watched for its end. The output buffer must be empty (what was
  // queued before, the SHM_ACCEPT, went through the socket).
  void useSharedMemory(std::unique_ptr<ShmChannel> channel);
  // Sends what is queued (best effort, never waiting), says why on the
  // socket, and stops every event: no more callbacks.
  void close(const Status& why);

  // What the reads left for the owner: bytes not yet parsed, and whether
  // the input ended (the client closed, or a read failed: inputEnd()).
  std::span<const std::byte> input() const { return in_.readable(); }
  void consumeInput(size_t n) { in_.consume(n); }
  uint32_t maxBody() const { return maxBody_; }
  bool inputEnded() const { return end_.has_value(); }
  // Why the input ended (inputEnded() only): ok for an orderly end, its
  // message saying which; an error for a failed read or a broken protocol,
  // with the call and strerror or what the client did.
  const Status& inputEnd() const { return *end_; }
  // Why the input ended, for the client: ok for an orderly end, an error
  // (protocol_error) when the client broke the protocol.
  Status endStatus() const;
  bool helloExpired() const { return helloExpired_; }
  // The socket (or the ring) has room again (once per edge).
  bool takeWritable() { return std::exchange(writable_, false); }
  // The last write to the client that failed (sendmsg/send and strerror);
  // ok when none did.
  const Status& writeError() const { return writeError_; }

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

  // The descriptors that came with the SHM_OFFER (the offer window).
  std::vector<UniqueFd> takePassedFds() { return std::exchange(passedFds_, {}); }
  // The shared-memory link, once the client has one.
  ShmLink* link() { return link_.get(); }
  const ShmLink* link() const { return link_.get(); }
  // A frame record is next in the client's ring: the input buffer's frames
  // come first, then link()->takeFrameRecord() takes it.
  bool frameRecordWaiting() const { return link_ && link_->frameWaiting(); }
  // After a frame record: the records behind it are read on the next turn
  // (all of them now when the input has ended: the client wrote them
  // before it closed).
  void readAfterFrameRecord();
  // A spinning loop's hooks (loop/spin.h): pollRing() does what a ring of
  // the doorbell does when records or room came (true); armForSleep() asks
  // to be rung before the loop sleeps (false: work came meanwhile);
  // disarmAfterSleep() takes that back.
  bool pollRing();
  bool armForSleep();
  void disarmAfterSleep();

  // Output: the caller appends one frame and calls LocalServer::markDirty.
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
  AckQueue& acks() { return acks_; }
  size_t outputBytes() const { return out_.size() + acks_.bytes(); }
  FlushResult flush();  // the acks, then writes until drained or EAGAIN

  // Deliveries and their receipts (delivery_ledger.h).
  DeliveryLedger& deliveries() { return deliveries_; }
  size_t unconsumedBytes() const { return deliveries_.unconsumedBytes(); }

 private:
  void setState(State next);
  void onReadable();
  void readSocket(size_t budget);
  void onDoorbell();
  FlushResult flushToSocket();
  void endInput(Status why);

  loop::EventLoop& loop_;
  const SessionId id_;
  std::function<void()> wake_;
  UniqueFd fd_;
  const PeerCred cred_;
  const uint32_t maxBody_;
  const std::string name_;
  StateMachine<State> state_{State::awaiting_hello};
  uint8_t pauseMask_ = 0;
  bool writable_ = false;
  bool helloExpired_ = false;
  std::optional<Status> end_;  // inputEnd()
  Status writeError_;
  ByteBuffer in_;
  ByteBuffer out_;
  AckQueue acks_;
  DeliveryLedger deliveries_;
  std::vector<std::string> services_;
  std::vector<UniqueFd> passedFds_;  // come with the SHM_OFFER, in the offer window
  loop::IoEvent readEvent_;          // EV_READ|EV_PERSIST|EV_ET, always registered
  loop::IoEvent writeEvent_;       // EV_WRITE|EV_PERSIST|EV_ET, registered while output is blocked
  loop::Timer helloTimer_;         // closes a client that never says HELLO
  std::unique_ptr<ShmLink> link_;  // the shared-memory link, once accepted
};

std::string_view toString(Session::State s);
bool allowedEdge(Session::State from, Session::State to);

template <typename Fill>
bool Session::writeInPlace(size_t size, Fill&& fill) {
  return link_ && out_.empty() && link_->writeInPlace(size, std::forward<Fill>(fill));
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
