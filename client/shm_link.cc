// ShmLink: the client's rings, areas and doorbells (see shm_link.h).
#include "client/shm_link.h"

#include <sys/epoll.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace rdmamsg::client {
namespace {

constexpr std::string_view kWho = "librdmamsg shared memory";

Status errnoStatus(const std::string& what, int err) {
  return Status(Errc::io_error, what + ": " + std::strerror(err));
}

bool envOn(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::string_view(v) != "0";
}

}  // namespace

std::string_view toString(ShmLink::State s) {
  switch (s) {
    case ShmLink::State::off:
      return "off";
    case ShmLink::State::offered:
      return "offered";
    case ShmLink::State::refused:
      return "refused";
    case ShmLink::State::in_use:
      return "in_use";
  }
  return "?";
}

bool allowedEdge(ShmLink::State from, ShmLink::State to) {
  using S = ShmLink::State;
  return (from == S::off && to == S::offered) ||
         (from == S::offered && (to == S::off || to == S::refused || to == S::in_use));
}

ShmLink::ShmLink()
    : frameRecords_(envOn("RDMAMSG_SHM_FRAME_RECORDS")),
      payloadArea_(frameRecords_ && envOn("RDMAMSG_SHM_PAYLOAD_AREA")),
      deliveryArea_(envOn("RDMAMSG_SHM_DELIVERY_AREA")) {}

// --- Set-up ------------------------------------------------------------------

bool ShmLink::offer(const ConnectOptions& opts, ByteBuffer& out) {
  Result<ShmChannel> channel = ShmChannel::create(opts.sendRingCapacity, opts.receiveRingCapacity,
                                                  payloadArea_ ? opts.payloadAreaCapacity : 0,
                                                  deliveryArea_ ? opts.deliveryAreaCapacity : 0);
  if (!channel) return false;  // no shared memory here (e.g. memfd refused)
  channel_.emplace(std::move(channel.value()));
  proto::encodeShmOffer(out, shm_ring::kVersion, channel_->toDaemonCapacity(),
                        channel_->toClientCapacity());
  state_.set(State::offered, kWho);
  return true;
}

void ShmLink::withdraw() {
  channel_.reset();
  state_.set(State::off, kWho);
}

void ShmLink::refuse() {
  channel_.reset();
  state_.set(State::refused, kWho);
}

Status ShmLink::start(int socketFd) {
  state_.set(State::in_use, kWho);
  epfd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epfd_) return errnoStatus("epoll_create1", errno);
  for (int watched : {channel_->wakeFd(), socketFd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = watched;
    if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, watched, &ev) != 0)
      return errnoStatus("epoll_ctl", errno);
  }
  return Status();
}

// --- Writing -----------------------------------------------------------------

// One record of `size` bytes, filled by `fill`, committed and announced:
// false when the ring has no room for it now.
template <typename Fill>
Result<bool> ShmLink::putRecord(size_t size, uint32_t type, Fill&& fill) {
  Result<std::span<std::byte>> room = channel_->reserveFrameRecord(size, type);
  if (!room) {
    if (room.status().code() == Errc::would_block) return false;
    return room.status();
  }
  fill(*room);
  if (Status st = commitAndAnnounce(); !st) return st;
  return true;
}

Status ShmLink::commitAndAnnounce() {
  Status st = channel_->commitRecord();
  if (st) st = channel_->announce();
  return st;
}

void ShmLink::consumed(ByteBuffer& out, size_t n) {
  out.consume(n);
  outWritten_ += n;
}

void ShmLink::queueRecord(const ByteBuffer& out, size_t size, uint32_t type) {
  queued_.pushBack({outWritten_ + out.size(), size, type});
}

// The frames before the next marked record go as a stream of records (as
// a socket cuts a stream into reads); that record goes whole.
Status ShmLink::write(ByteBuffer& out) {
  while (!out.empty()) {
    const size_t plain =
        queued_.empty() ? out.size() : static_cast<size_t>(queued_.front().at - outWritten_);
    if (plain > 0) {
      Result<size_t> put = channel_->write(out.readable().first(plain));
      if (!put) return put.status();
      consumed(out, *put);
      if (*put < plain) return Status();  // the ring is full
      continue;
    }
    const QueuedRecord r = queued_.front();
    Result<bool> put = putRecord(r.size, r.type, [&](std::span<std::byte> room) {
      std::memcpy(room.data(), out.data(), r.size);
    });
    if (!put) return put.status();
    if (!*put) return Status();  // no room now
    consumed(out, r.size);
    queued_.popFront();
  }
  return Status();
}

// A large SEND goes without a copy in the daemon, which posts its payload
// from where it lies: written into a block of the payload area, named by a
// payload record; or, when the area has no room now, as one frame record
// in the ring. A record goes straight into the ring when nothing is queued
// before it and the ring has room now; else it is queued in `out` like any
// frame, marked, and write() writes it in its turn (the blocking and HOLD
// rules are every frame's).
Result<ShmLink::LargeSend> ShmLink::sendLarge(ByteBuffer& out, const OutgoingSend& s,
                                              const Block* claimed) {
  if (!claimed && (!inUse() || !frameRecords_ || !channel_->frameRecords() ||
                   s.payload.size() < shm_channel::kMinFrameRecordPayload))
    return LargeSend::inStream;
  const size_t size = s.frameSize();
  if (Status st = write(out); !st) {
    if (claimed) channel_->freeBlock(*claimed);
    return st;
  }
  std::optional<Block> block;
  if (claimed) {
    block = *claimed;
    s.encodeHeadAt(block->bytes);
  } else if ((block = channel_->allocateBlock(size))) {
    s.encodeAt(block->bytes);
  }
  if (block) return sendInBlock(out, *block);
  if (size > channel_->maxRecord()) return LargeSend::inStream;
  return sendInRecord(out, s, size);
}

// The block is published: its payload record is written now, or queued.
Result<ShmLink::LargeSend> ShmLink::sendInBlock(ByteBuffer& out, const Block& block) {
  channel_->publishBlock(block);
  const shm_payload::Descriptor d = ShmChannel::describe(block);
  const auto body = std::as_bytes(std::span(&d, 1));
  if (out.empty()) {
    Result<std::span<std::byte>> room =
        channel_->reserveFrameRecord(body.size(), shm_ring::kPayloadRecord);
    if (room) {
      std::memcpy(room->data(), body.data(), body.size());
      if (Status st = commitAndAnnounce(); !st) return st;
      return LargeSend::written;
    }
    if (room.status().code() != Errc::would_block) {
      channel_->freeBlock(block);  // its record was never written
      return room.status();
    }
  }
  queueRecord(out, body.size(), shm_ring::kPayloadRecord);
  out.append(body);
  return LargeSend::queued;
}

// The whole SEND as one frame record: written now, or marked for the
// caller to queue the frame.
Result<ShmLink::LargeSend> ShmLink::sendInRecord(ByteBuffer& out, const OutgoingSend& s,
                                                 size_t size) {
  if (out.empty()) {
    Result<bool> put = putRecord(size, shm_ring::kFrameRecord,
                                 [&](std::span<std::byte> room) { s.encodeAt(room); });
    if (!put) return put.status();
    if (*put) return LargeSend::written;
  }
  queueRecord(out, size, shm_ring::kFrameRecord);
  return LargeSend::inStream;
}

std::optional<ShmLink::Block> ShmLink::claimBlock(size_t frameSize, size_t payloadSize) {
  if (!inUse() || !frameRecords_ || !channel_->frameRecords() ||
      payloadSize < shm_channel::kMinFrameRecordPayload)
    return std::nullopt;
  return channel_->allocateBlock(frameSize);
}

size_t OutgoingSend::frameSize() const {
  return publish() ? proto::pubFrameSize(subject, payload.size())
                   : proto::sendFrameSize(node, service, fromService, payload.size());
}

void OutgoingSend::encodeAt(std::span<std::byte> at) const {
  if (publish())
    proto::encodePubAt(at, id, timeoutMs, subject, payload);
  else
    proto::encodeSendAt(at, id, node, service, fromService, payload);
}

void OutgoingSend::encodeHeadAt(std::span<std::byte> at) const {
  if (publish())
    proto::encodePubHeadAt(at, id, timeoutMs, subject);
  else
    proto::encodeSendHeadAt(at, id, node, service, fromService);
}

// --- Reading -----------------------------------------------------------------

Result<proto::Frame> ShmLink::delivery(std::span<const std::byte> unparsed, uint32_t maxBody) {
  // The daemon places a record only behind whole frames.
  if (!unparsed.empty())
    return Status(Errc::protocol_error, "from rdmamsgd: a payload record inside a frame");
  Result<std::span<const std::byte>> record = channel_->frameRecord();
  if (!record) return record.status();
  const Result<proto::Decoded> res = proto::decodeFrame(*record, maxBody);
  if (!res || res->kind != proto::Decoded::Kind::frame || res->consumed != record->size() ||
      res->frame.kind != proto::FrameKind::deliver)
    return Status(Errc::protocol_error, "from rdmamsgd: a delivery block that is not one DELIVER");
  return res->frame;
}

// --- Doorbells ---------------------------------------------------------------

Status ShmLink::wakeForBatch() {
  if (batchWake_) return Status();
  batchWake_ = true;
  return channel_->wakeSelf();
}

void ShmLink::addCounters(ClientCounters& c) const {
  if (!channel_) return;
  c.doorbellRings = channel_->counters().wakesSent;
  c.doorbellReads = channel_->counters().doorbellReads;
}

}  // namespace rdmamsg::client
