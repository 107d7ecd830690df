// Session I/O: edge-triggered reads until EAGAIN, frame parsing, batched
// output (see session.h).
#include "daemon/local/session.h"

#include "daemon/loop/counters.h"

#include <event2/event.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "common/fd_passing.h"
#include "common/local_protocol.h"
#include "daemon/local/log.h"

namespace rdmamsg::local {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

std::string_view toString(Session::State s) {
  switch (s) {
    case Session::State::awaiting_hello:
      return "awaiting_hello";
    case Session::State::ready:
      return "ready";
    case Session::State::closing:
      return "closing";
  }
  return "?";
}

}  // namespace

Session::Session(loop::EventLoop& loop, SessionId id, UniqueFd fd, PeerCred cred, uint32_t maxBody,
                 size_t maxAcksPerFrame, std::chrono::milliseconds helloTimeout,
                 std::function<void()> wake)
    : loop_(loop),
      id_(id),
      wake_(std::move(wake)),
      fd_(std::move(fd)),
      cred_(cred),
      maxBody_(maxBody),
      maxAcksPerFrame_(std::max<size_t>(1, maxAcksPerFrame)),
      name_("client#" + std::to_string(id) + " (pid " + std::to_string(cred.pid) + ", uid " +
            std::to_string(cred.uid) + ")"),
      in_(kReadChunk),
      out_(kReadChunk),
      readEvent_(loop, fd_.get(), EV_READ | EV_PERSIST | EV_ET, [this](short) { onReadable(); }),
      writeEvent_(
          loop, fd_.get(), EV_WRITE | EV_PERSIST | EV_ET,
          [this](short) {
            writable_ = true;
            wake_();
          },
          false),
      helloTimer_(loop, [this] {
        if (state_ != State::awaiting_hello) return;
        helloExpired_ = true;
        wake_();
      }) {
  pendingAcks_.reserve(256);
  helloTimer_.arm(helloTimeout);
}

namespace {
bool edgeAllowed(Session::State from, Session::State to) {
  using S = Session::State;
  return (from == S::awaiting_hello && (to == S::ready || to == S::closing)) ||
         (from == S::ready && to == S::closing);
}
}  // namespace

void Session::setState(State next) {
  if (next == state_) return;
  if (!edgeAllowed(state_, next)) {
    // A bug: said where it cannot be lost (the logger may be asynchronous), then stop.
    const std::string line = name_ + ": invalid session state change " +
                             std::string(toString(state_)) + " -> " + std::string(toString(next));
    localLog().critical("{}", line);
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    std::abort();
  }
  localLog().debug("{}: {} -> {}", name_, toString(state_), toString(next));
  state_ = next;
}

bool Session::ownsService(std::string_view service) const {
  return std::find(services_.begin(), services_.end(), service) != services_.end();
}

bool Session::removeService(std::string_view service) {
  auto it = std::find(services_.begin(), services_.end(), service);
  if (it == services_.end()) return false;
  services_.erase(it);
  return true;
}

std::string_view Session::defaultService() const {
  return services_.empty() ? std::string_view() : std::string_view(services_.front());
}

void Session::resume(uint8_t reason) {
  const bool wasPaused = pauseMask_ != 0;
  pauseMask_ &= static_cast<uint8_t>(~reason);
  // Continue with the frames already buffered and read on: no edge will come
  // for bytes that arrived while paused.
  if (wasPaused && pauseMask_ == 0 && state_ != State::closing) kickRead();
}

void Session::kickRead() {
  if (doorbellEvent_) return doorbellEvent_->activate(EV_READ);
  readEvent_.activate(EV_READ);
}

// Reads until EAGAIN (edge-triggered) or the budget, then marks the
// session: its owner parses what came in its service phase. Nothing is read
// while the session is paused, so a paused client's writes block. With
// shared memory the socket carries no frames: only its end is read.
void Session::onReadable() {
  if (state_ == State::closing || endReason_ != nullptr) return;
  if (shm_) {
    std::byte probe[64];
    const ssize_t n = ::read(fd_.get(), probe, sizeof probe);
    loop::syscalls().socketReads++;
    if (n == 0) {
      // What the client wrote before it closed (its last CONSUMED, its BYE)
      // is in the ring: all of it is read before the end.
      static_cast<void>(takeFromRing(SIZE_MAX));
      endInput("client closed the connection", 0);
    }
    if (n > 0) endInput("bytes on the control socket after SHM_ACCEPT", 0, Errc::protocol_error);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      endInput("read failed", errno);
    if (endReason_ != nullptr) wake_();
    return;
  }
  if (pauseMask_ != 0) return;
  readSocket(kReadBudget);
  wake_();
}

void Session::readSocket(size_t budget) {
  for (;;) {
    if (budget == 0) {
      readEvent_.activate(EV_READ);  // the rest on the next iteration
      return;
    }
    auto room = in_.prepare(kReadChunk);
    ssize_t n;
    if (offerWindow_) {  // a SHM_OFFER's descriptors may come with these bytes
      Result<ReceivedFds> got = receiveFds(fd_.get(), room, kMaxPassedFds);
      loop::syscalls().socketReads++;
      if (!got) {
        if (got.status().code() == Errc::would_block) return;
        return endInput("receiving descriptors failed", 0, got.status().code());
      }
      n = static_cast<ssize_t>(got->bytes);
      for (UniqueFd& fd : got->fds)
        passedFds_.push_back(std::move(fd));
      if (passedFds_.size() > shm_channel::kFdCount)
        return endInput("too many descriptors passed", 0, Errc::protocol_error);
    } else {
      n = ::read(fd_.get(), room.data(), room.size());
      loop::syscalls().socketReads++;
    }
    if (n > 0) {
      in_.commit(static_cast<size_t>(n));
      loop::copies().clientIn += static_cast<size_t>(n);
      budget -= std::min(budget, static_cast<size_t>(n));
    } else if (n == 0) {
      return endInput("client closed the connection", 0);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return;
    } else if (errno != EINTR) {
      return endInput("read failed", errno);
    }
  }
}

void Session::closeOfferWindow() {
  passedFds_.clear();
  offerWindow_ = false;
}

void Session::useSharedMemory(std::unique_ptr<ShmChannel> channel) {
  shm_ = std::move(channel);
  area_ = std::make_shared<ExternalArea>(shm_->inputArea(), ExternalArea::Order::inOrder);
  if (shm_->payloadCapacity() != 0)
    payloadArea_ =
        std::make_shared<ExternalArea>(shm_->payloadArea(), ExternalArea::Order::anyOrder);
  offerWindow_ = false;
  passedFds_.clear();
  doorbellEvent_ = std::make_unique<loop::IoEvent>(
      loop_, shm_->wakeFd(), EV_READ | EV_PERSIST | EV_ET, [this](short) { onDoorbell(); });
  doorbellEvent_->activate(EV_READ);  // records may be there already
}

// The client rang: records arrived, or it released room this side waits for.
void Session::onDoorbell() {
  if (state_ == State::closing || endReason_ != nullptr) return;
  if (Result<bool> rung = shm_->disarm(); !rung) {
    endInput("reading the doorbell failed", 0);
    return wake_();
  }
  if (!out_.empty()) writable_ = true;
  if (pauseMask_ == 0) readRing();
  countShmSyscalls();
  wake_();
}

void Session::countShmSyscalls() {
  const ShmChannelCounters& c = shm_->counters();
  loop::syscalls().doorbellRings += c.wakesSent - std::exchange(wakesCounted_, c.wakesSent);
  loop::syscalls().doorbellReads += c.doorbellReads - std::exchange(readsCounted_, c.doorbellReads);
}

// Copies records into the input buffer (the one read of their bytes) up to
// the read budget; when the ring is empty, asks to be rung for the next.
void Session::readRing() {
  for (int round = 0; round < 2; ++round) {
    Result<size_t> got = takeFromRing(kReadBudget);
    if (!got) {
      return endInput("the client's shared-memory ring is corrupt", 0, Errc::protocol_error);
    }
    if (shm_->framesHeld() != 0) relieveRing();
    if (shm_->frameWaiting()) return;  // the service phase takes it (LocalServer)
    if (*got >= kReadBudget) {
      doorbellEvent_->activate(EV_READ);  // the rest on the next iteration
      return;
    }
    if (spinning()) return;        // the loop polls the ring: nobody rings
    if (shm_->armInput()) return;  // the client rings for its next record
  }
  doorbellEvent_->activate(EV_READ);
}

Result<size_t> Session::takeFromRing(size_t budget) {
  Result<size_t> got = shm_->read(in_, budget);
  if (got)
    loop::copies().clientIn += *got;
  else
    localLog().warn("{}: shared memory: {}", name_, got.status().toString());
  return got;
}

namespace {

// A frame record's ring space, or a payload area's block, held while its
// payload is posted from it. Keeps the channel (its mapping) and the area
// (its registrations) alive past the session; the last drop() gives the
// space back to the client.
class HeldFrame final : public ExternalPayload {
 public:
  HeldFrame(std::shared_ptr<ShmChannel> channel, std::shared_ptr<ExternalArea> area,
            ShmChannel::FrameHold hold)
      : channel_(std::move(channel)), area_(std::move(area)), hold_(hold) {}
  ExternalArea& area() override { return *area_; }
  void hold() override { ++refs_; }
  void drop() override {
    if (--refs_ != 0) return;
    if (Status st = channel_->releaseHeld(hold_); !st)
      localLog().warn("shared memory: {}", st.toString());
    delete this;
  }

 private:
  // Declared in teardown order: the registrations go before the mapping.
  std::shared_ptr<ShmChannel> channel_;
  std::shared_ptr<ExternalArea> area_;
  const ShmChannel::FrameHold hold_;
  uint32_t refs_ = 1;
};

// Frames smaller than this are copied out of their record, not held.
constexpr size_t kMinHeldFrame = shm_channel::kMinFrameRecordPayload;

}  // namespace

Session::FrameRecord Session::takeFrameRecord() {
  FrameRecord out;
  const bool inPayloadArea = shm_->frameInPayloadArea();
  Result<std::span<const std::byte>> found = shm_->frameRecord();
  if (!found) {
    frameError_ = found.status().message();
    out.error = frameError_.c_str();
    return out;
  }
  const std::span<const std::byte> record = *found;
  const bool hold = record.size() >= kMinHeldFrame &&
                    (inPayloadArea || shm_->framesHeld() < ShmRingConsumer::kMaxHeld);
  const size_t copied =
      hold ? std::min(record.size(), proto::kHeaderSize + proto::kMaxFrameOverhead) : record.size();
  // Read once, into private memory: the client may change its ring at any time.
  frameCopy_.assign(record.begin(), record.begin() + static_cast<std::ptrdiff_t>(copied));
  loop::copies().clientIn += copied;
  size_t payloadAt = 0;
  proto::DecodeResult d = proto::decodeSendHead(frameCopy_, record.size(), maxBody_, payloadAt);
  if (d.outcome != proto::DecodeOutcome::frame) {
    out.error = d.reason;
    return out;
  }
  out.frame = d.frame;
  if (!hold) {
    out.frame.payload = std::span<const std::byte>(frameCopy_).subspan(payloadAt);
    if (Status st = shm_->consumeFrame(); !st)
      out.error = "the client's shared-memory ring is corrupt";
    return out;
  }
  Result<ShmChannel::FrameHold> held = shm_->holdFrame();
  if (!held) {
    out.error = "the client's shared-memory ring is corrupt";
    return out;
  }
  out.frame.payload = record.subspan(payloadAt);
  out.held = new HeldFrame(shm_, inPayloadArea ? payloadArea_ : area_, *held);
  relieveRing();
  return out;
}

// Past half of the client's ring held, what waits where it lies (for a
// window, for the link) is copied out: the client keeps room for its other
// flows whatever one of them waits for.
void Session::relieveRing() {
  if (shm_->heldBytes() > shm_->toDaemonCapacity() / 2) area_->spillAll();
}

// The records after a frame record are read on the loop's next turn, as
// those past a read budget are: the turn's other phases (the flush that
// carries a HOLD, other clients) go first. When the input has ended they
// are read now: the session closes after this service phase.
void Session::readAfterFrameRecord() {
  if (!shm_ || state_ == State::closing) return;
  if (endReason_ != nullptr) {
    static_cast<void>(takeFromRing(SIZE_MAX));
    return;
  }
  if (pauseMask_ == 0) kickRead();
}

bool Session::pollRing() {
  if (!shm_ || state_ == State::closing || endReason_ != nullptr) return false;
  const bool input = pauseMask_ == 0 && shm_->inputWaiting();
  const bool room = waitingForRoom_ && shm_->roomReleased();
  if (!input && !room) return false;
  onDoorbell();
  return true;
}

bool Session::armForSleep() {
  if (!shm_ || state_ == State::closing || endReason_ != nullptr) return true;
  if (pauseMask_ == 0 && !shm_->armInput()) return false;
  return !waitingForRoom_ || shm_->armRoom();
}

void Session::disarmAfterSleep() {
  if (!shm_ || !shm_->armed() || state_ == State::closing) return;
  if (Result<bool> rung = shm_->disarm(); !rung) {
    endInput("reading the doorbell failed", 0);
    wake_();
  }
  countShmSyscalls();
}

void Session::endInput(const char* why, int err, Errc code) {
  endReason_ = why;
  lastErrno_ = err;
  endCode_ = code;
}

Status Session::endStatus() const {
  if (endCode_ == Errc::ok || endReason_ == nullptr) return {};
  return Status(endCode_, endReason_);
}

bool Session::ringBroken() const {
  return shm_ != nullptr && !shm_->status().ok();
}

std::unique_ptr<DeliveryBlock> Session::reserveBlock(size_t size, size_t payload) {
  if (!shm_ || !shm_->placesBlocks() || payload < shm_channel::kMinFrameRecordPayload ||
      ringBroken())
    return nullptr;
  std::optional<shm_payload::PayloadAllocator::Block> block = shm_->allocateBlock(size);
  if (!block) return nullptr;
  return std::make_unique<DeliveryBlock>(id_, shm_, *block, payload);
}

bool Session::publishBlock(DeliveryBlock& block) {
  if (block.channel() != shm_.get() || !out_.empty() || ringBroken()) return false;
  Result<std::span<std::byte>> room =
      shm_->reserveFrameRecord(sizeof(shm_payload::Descriptor), shm_ring::kPayloadRecord);
  if (!room) return false;
  shm_->publishBlock(block.block());
  const shm_payload::Descriptor d = ShmChannel::describe(block.block());
  std::memcpy(room->data(), &d, sizeof d);
  block.published();  // the client's now, whatever the commit says
  // A commit that fails broke the ring: the flush sees it and ends the session.
  return shm_->commitRecord().ok();
}

void Session::queueAcks(uint64_t msgId, uint64_t count) {
  while (count > 0) {
    if (pendingAcks_.empty() || pendingAcks_.back().first + pendingAcks_.back().count != msgId ||
        pendingAcks_.back().count == UINT32_MAX)
      pendingAcks_.push_back({msgId, 0});
    proto::AckRange& last = pendingAcks_.back();
    const uint64_t n = std::min<uint64_t>(count, UINT32_MAX - last.count);
    last.count += static_cast<uint32_t>(n);
    msgId += n;
    count -= n;
  }
}

void Session::encodePendingAcks() {
  std::span<const proto::AckRange> runs(pendingAcks_);
  while (!runs.empty()) {
    const size_t n = std::min(runs.size(), maxAcksPerFrame_);
    proto::encodeAck(out_, runs.first(n));
    runs = runs.subspan(n);
  }
  pendingAcks_.clear();
}

void Session::track(const Receipt& r, size_t frameBytes) {
  const uint64_t end = ++delivered_;
  unconsumedBytes_ += frameBytes;
  if (!tracked_.empty()) {
    Tracked& last = tracked_.back();
    if (last.receipt.continuedBy(r) && last.bytes < kReceiptSpan) {
      last.end = end;
      last.receipt.count += r.count;
      last.bytes += frameBytes;
      return;
    }
  }
  tracked_.push_back({end, r, frameBytes});
}

bool Session::consume(uint64_t taken) {
  if (taken < taken_ || taken > delivered_) return false;
  taken_ = taken;
  return true;
}

Session::FlushResult Session::flush() {
  encodePendingAcks();
  if (shm_) return ringBroken() ? FlushResult::failed : flushToRing();
  while (!out_.empty()) {
    iovec iov{const_cast<std::byte*>(out_.data()), out_.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    const ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    loop::syscalls().socketWrites++;
    if (n >= 0) {
      out_.consume(static_cast<size_t>(n));
      loop::copies().clientOut += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (state_ != State::closing) writeEvent_.enable();
      return FlushResult::blocked;
    } else if (errno != EINTR) {
      lastErrno_ = errno;
      return FlushResult::failed;
    }
  }
  writeEvent_.disable();
  return FlushResult::drained;
}

// Moves the output into the client's ring; when the ring is full, asks to be
// rung once the client released room (the doorbell then sets writable_).
Session::FlushResult Session::flushToRing() {
  if (Status st = shm_->announce(); !st) {  // records written in place
    localLog().warn("{}: shared memory: {}", name_, st.toString());
    return FlushResult::failed;
  }
  for (int round = 0; round < 64 && !out_.empty(); ++round) {
    Result<size_t> put = shm_->write(out_.readable());
    if (!put) {
      localLog().warn("{}: shared memory: {}", name_, put.status().toString());
      return FlushResult::failed;
    }
    out_.consume(*put);
    loop::copies().clientOut += *put;
    waitingForRoom_ = *put == 0;
    if (*put == 0 && (spinning() || shm_->armRoom())) {
      countShmSyscalls();
      return FlushResult::blocked;
    }
  }
  countShmSyscalls();
  if (out_.empty()) return FlushResult::drained;
  doorbellEvent_->activate(EV_READ);  // room keeps appearing: go on next iteration
  return FlushResult::blocked;
}

void Session::sayOnSocket(const Status& why) {
  ByteBuffer frame;
  proto::encodeError(frame, 0, why.code(), 0, why.message());
  const ssize_t n = ::send(fd_.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  loop::syscalls().socketWrites++;
  if (n < 0) lastErrno_ = errno;
}

void Session::stopEvents() {
  readEvent_.disable();
  writeEvent_.disable();
  if (doorbellEvent_) doorbellEvent_->disable();
}

}  // namespace rdmamsg::local
