// ShmLink: a local client's shared-memory channel in the daemon's loop
// (see shm_link.h).
#include "daemon/local/shm_link.h"

#include <event2/event.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "daemon/local/log.h"
#include "daemon/loop/counters.h"

namespace rdmamsg::local {
namespace {

// The hold on one large SEND: a ring record's room, or a payload area's
// block. Keeps the channel (its mapping) and the area (its registrations)
// alive past the session; its end gives the room back to the client.
class HeldFrame final : public PayloadHold {
 public:
  HeldFrame(std::shared_ptr<ShmChannel> channel, std::shared_ptr<ExternalArea> area,
            ShmChannel::FrameHold hold)
      : channel_(std::move(channel)), area_(std::move(area)), hold_(hold) {}
  ~HeldFrame() override {
    if (Status st = channel_->releaseHeld(hold_); !st)
      localLog().warn("shared memory: {}", st.toString());
  }
  HeldFrame(const HeldFrame&) = delete;
  HeldFrame& operator=(const HeldFrame&) = delete;
  ExternalArea& area() override { return *area_; }

 private:
  // Declared in teardown order: the registrations go before the mapping.
  std::shared_ptr<ShmChannel> channel_;
  std::shared_ptr<ExternalArea> area_;
  const ShmChannel::FrameHold hold_;
};

// Frames smaller than this are copied out of their record, not held.
constexpr size_t kMinHeldFrame = shm_channel::kMinFrameRecordPayload;

}  // namespace

std::string_view toString(ShmLink::State s) {
  switch (s) {
    case ShmLink::State::open:
      return "open";
    case ShmLink::State::broken:
      return "broken";
    case ShmLink::State::closed:
      return "closed";
  }
  return "?";
}

bool allowedEdge(ShmLink::State from, ShmLink::State to) {
  using S = ShmLink::State;
  return (from == S::open && (to == S::broken || to == S::closed)) ||
         (from == S::broken && to == S::closed);
}

ShmLink::ShmLink(loop::EventLoop& loop, std::unique_ptr<ShmChannel> channel, std::string name,
                 std::function<void()> onDoorbell)
    : loop_(loop),
      name_(std::move(name)),
      channel_(std::move(channel)),
      ring_(std::make_shared<ExternalArea>(channel_->inputArea(), ExternalArea::Order::inOrder)),
      payloadArea_(channel_->payloadCapacity() == 0
                       ? nullptr
                       : std::make_shared<ExternalArea>(channel_->payloadArea(),
                                                        ExternalArea::Order::anyOrder)),
      doorbell_(loop, channel_->wakeFd(), EV_READ | EV_PERSIST | EV_ET,
                [cb = std::move(onDoorbell)](short) { cb(); }) {}

ShmLink::~ShmLink() = default;

void ShmLink::setState(State next) {
  state_.set(next, name_ + " shared memory");
}

bool ShmLink::failed(std::string_view what, const Status& why) {
  if (open()) {
    localLog().warn("{}: shared memory: {}{}", name_, what, why.toString());
    setState(State::broken);
  }
  return false;
}

void ShmLink::close() {
  doorbell_.disable();
  setState(State::closed);
}

bool ShmLink::spinning() const {
  return loop_.idleStrategy() != loop::IdleStrategy::sleep;
}

void ShmLink::countSyscalls() {
  const ShmChannelCounters& c = channel_->counters();
  loop::syscalls().doorbellRings += c.wakesSent - std::exchange(wakesCounted_, c.wakesSent);
  loop::syscalls().doorbellReads += c.doorbellReads - std::exchange(readsCounted_, c.doorbellReads);
}

// --- the doorbell -------------------------------------------------------------

bool ShmLink::disarm() {
  if (state_.is(State::closed)) return true;
  Result<bool> rung = channel_->disarm();
  countSyscalls();
  if (!rung) return failed("reading the doorbell: ", rung.status());
  return true;
}

void ShmLink::kick() {
  if (!state_.is(State::closed)) doorbell_.activate(EV_READ);
}

bool ShmLink::news(bool reading) const {
  if (!open()) return false;
  return (reading && channel_->inputWaiting()) || (waitingForRoom_ && channel_->roomReleased());
}

bool ShmLink::armForSleep(bool reading) {
  if (!open()) return true;
  if (reading && !channel_->armInput()) return false;
  return !waitingForRoom_ || channel_->armRoom();
}

// --- input ----------------------------------------------------------------------

Result<size_t> ShmLink::takeRecords(ByteBuffer& in, size_t budget) {
  Result<size_t> got = channel_->read(in, budget);
  if (!got) {
    failed("", got.status());
    return got;
  }
  loop::copies().clientIn += *got;
  return got;
}

bool ShmLink::read(ByteBuffer& in, size_t budget) {
  if (!open()) return false;
  const bool ok = readRecords(in, budget);
  countSyscalls();
  return ok;
}

bool ShmLink::readRecords(ByteBuffer& in, size_t budget) {
  for (int round = 0; round < 2; ++round) {
    Result<size_t> got = takeRecords(in, budget);
    if (!got) return false;
    if (channel_->framesHeld() != 0) relieve();
    if (channel_->frameWaiting()) return true;  // the session's service phase takes it
    if (*got >= budget) {
      kick();  // the rest on the next iteration
      return true;
    }
    if (spinning()) return true;            // the loop polls the ring: nobody rings
    if (channel_->armInput()) return true;  // the client rings for its next record
  }
  kick();
  return true;
}

void ShmLink::drain(ByteBuffer& in) {
  if (open()) static_cast<void>(takeRecords(in, SIZE_MAX));
}

// Past half of the client's ring held, what waits where it lies (for a
// window, for the link) is copied out by its holders: the client keeps
// room for its other flows whatever one of them waits for.
void ShmLink::relieve() {
  if (channel_->heldBytes() > channel_->toDaemonCapacity() / 2) ring_->requestSpill();
}

ShmLink::FrameRecord ShmLink::takeFrameRecord(uint32_t maxBody) {
  FrameRecord out;
  const bool inPayloadArea = channel_->frameInPayloadArea();
  Result<std::span<const std::byte>> found = channel_->frameRecord();
  if (!found) {
    out.error = Status(Errc::protocol_error, found.status().message());
    return out;
  }
  const std::span<const std::byte> record = *found;
  const bool hold = record.size() >= kMinHeldFrame &&
                    (inPayloadArea || channel_->framesHeld() < ShmRingConsumer::kMaxHeld);
  const size_t copied = hold ? std::min(record.size(), proto::kMaxRecordHead) : record.size();
  // Read once, into private memory: the client may change its ring at any time.
  frameCopy_.assign(record.begin(), record.begin() + static_cast<std::ptrdiff_t>(copied));
  loop::copies().clientIn += copied;
  size_t payloadAt = 0;
  const Result<proto::Decoded> d =
      proto::decodeRecordHead(frameCopy_, record.size(), maxBody, payloadAt);
  if (!d) {
    out.error = d.status();
    return out;
  }
  out.frame = d->frame;
  const Status corrupt(Errc::protocol_error, "the client's shared-memory ring is corrupt");
  if (!hold) {
    out.frame.payload = std::span<const std::byte>(frameCopy_).subspan(payloadAt);
    if (Status st = channel_->consumeFrame(); !st) out.error = corrupt;
    return out;
  }
  Result<ShmChannel::FrameHold> held = channel_->holdFrame();
  if (!held) {
    out.error = corrupt;
    return out;
  }
  out.frame.payload = record.subspan(payloadAt);
  out.payload = PayloadHandle(
      std::make_shared<HeldFrame>(channel_, inPayloadArea ? payloadArea_ : ring_, *held));
  relieve();
  return out;
}

// --- output -----------------------------------------------------------------------

// Moves the output into the client's ring; when the ring is full, asks to be
// rung once the client released room (the doorbell's callback then flushes).
FlushResult ShmLink::flush(ByteBuffer& out) {
  if (!intact()) {
    failed("", status());
    return FlushResult::failed;
  }
  if (Status st = channel_->announce(); !st) {  // records written in place
    failed("", st);
    return FlushResult::failed;
  }
  for (int round = 0; round < 64 && !out.empty(); ++round) {
    Result<size_t> put = channel_->write(out.readable());
    if (!put) {
      failed("", put.status());
      return FlushResult::failed;
    }
    out.consume(*put);
    loop::copies().clientOut += *put;
    waitingForRoom_ = *put == 0;
    if (*put == 0 && (spinning() || channel_->armRoom())) {
      countSyscalls();
      return FlushResult::blocked;
    }
  }
  countSyscalls();
  if (out.empty()) return FlushResult::drained;
  kick();  // room keeps appearing: go on next iteration
  return FlushResult::blocked;
}

std::unique_ptr<DeliveryBlock> ShmLink::reserveBlock(SessionId session, size_t size,
                                                     size_t payload) {
  if (!intact() || !channel_->placesBlocks() || payload < shm_channel::kMinFrameRecordPayload)
    return nullptr;
  std::optional<shm_payload::PayloadAllocator::Block> block = channel_->allocateBlock(size);
  if (!block) return nullptr;
  return std::make_unique<DeliveryBlock>(session, channel_, *block, payload);
}

bool ShmLink::publishBlock(DeliveryBlock& block) {
  if (block.channel() != channel_.get() || !intact()) return false;
  Result<std::span<std::byte>> room =
      channel_->reserveFrameRecord(sizeof(shm_payload::Descriptor), shm_ring::kPayloadRecord);
  if (!room) return false;
  channel_->publishBlock(block.block());
  const shm_payload::Descriptor d = ShmChannel::describe(block.block());
  std::memcpy(room->data(), &d, sizeof d);
  block.published();  // the client's now, whatever the commit says
  // A commit that fails broke the ring: the flush sees it and ends the session.
  return channel_->commitRecord().ok();
}

size_t ShmLink::holdSlack() const {
  return channel_->toDaemonCapacity() + channel_->payloadCapacity();
}

}  // namespace rdmamsg::local
