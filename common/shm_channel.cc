// ShmChannel: creating and attaching the two-ring region, moving the frame
// stream through it, and the wake-up rule on both rings (see shm_channel.h).
#include "common/shm_channel.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace rdmamsg {

namespace shm_channel {
bool validCapacity(uint64_t capacity) {
  return capacity >= kMinCapacity && capacity <= kMaxCapacity && (capacity & (capacity - 1)) == 0;
}
}  // namespace shm_channel

const char* toString(ShmArming a) {
  switch (a) {
    case ShmArming::kAwake:
      return "awake";
    case ShmArming::kInput:
      return "armed for input";
    case ShmArming::kRoom:
      return "armed for room";
    case ShmArming::kInputAndRoom:
      return "armed for input and room";
  }
  return "?";
}

namespace {

bool armedForInput(ShmArming a) {
  return a == ShmArming::kInput || a == ShmArming::kInputAndRoom;
}
bool armedForRoom(ShmArming a) {
  return a == ShmArming::kRoom || a == ShmArming::kInputAndRoom;
}
ShmArming armingFor(bool input, bool room) {
  if (input) return room ? ShmArming::kInputAndRoom : ShmArming::kInput;
  return room ? ShmArming::kRoom : ShmArming::kAwake;
}

}  // namespace

bool allowedEdge(ShmArming from, ShmArming to) {
  const bool swap = (from == ShmArming::kInput && to == ShmArming::kRoom) ||
                    (from == ShmArming::kRoom && to == ShmArming::kInput);
  return !swap;
}

namespace {

// The smallest piece write() cuts when the ring has less room than it asks
// for: below this it waits for the other side instead of writing slivers.
constexpr size_t kMinPiece = 4096;
// The largest record write() makes: a reader that reads up to a budget
// passes it by at most this much, and the room freed by one record is
// reused soon.
constexpr size_t kMaxPiece = 256 * 1024;

Status capacityError(const char* which, uint64_t capacity) {
  return Status(Errc::protocol_error, std::string("shared memory: ") + which + " ring capacity " +
                                          std::to_string(capacity) +
                                          " is not a power of two from " +
                                          std::to_string(shm_channel::kMinCapacity) + " to " +
                                          std::to_string(shm_channel::kMaxCapacity));
}

Status areaCapacityError(const char* which, uint64_t capacity) {
  return Status(Errc::protocol_error, std::string("shared memory: ") + which + " area capacity " +
                                          std::to_string(capacity) +
                                          " is neither 0 nor a power of two from " +
                                          std::to_string(shm_payload::kMinCapacity) + " to " +
                                          std::to_string(shm_payload::kMaxCapacity));
}

Status prefixed(const Status& st, const char* what) {
  return Status(st.code(), std::string("shared memory: ") + what + ": " + st.message());
}

}  // namespace

ShmChannel::ShmChannel(Side side, ShmRegion region, ShmRingProducer out, ShmRingConsumer in,
                       ShmDoorbell own, ShmDoorbell peer, const Geometry& g)
    : region_(std::move(region)),
      out_(std::move(out)),
      in_(std::move(in)),
      own_(std::move(own)),
      peer_(std::move(peer)),
      toDaemonCapacity_(g.toDaemon),
      toClientCapacity_(g.toClient),
      payloadCapacity_(g.payload),
      deliveryCapacity_(g.delivery) {
  // [ rings ][ payload area ][ delivery area ], each area a header page and its data.
  const size_t rings = shm_ring::regionSize(g.toDaemon) + shm_ring::regionSize(g.toClient);
  const size_t deliveryAt = rings + shm_payload::regionSize(g.payload);
  Area payload = areaAt(rings, g.payload);
  Area delivery = areaAt(deliveryAt, g.delivery);
  payloadData_ = payload.data;
  // Each side reads the blocks the other places, and places its own.
  const bool client = side == Side::client;
  inArea_ = client ? delivery : payload;
  const Area& outArea = client ? payload : delivery;
  allocator_ = shm_payload::PayloadAllocator(outArea.header, outArea.data);
  slotHeld_.assign(shm_payload::kSlots, false);
}

ShmChannel::Area ShmChannel::areaAt(size_t at, uint64_t capacity) const {
  if (capacity == 0) return {};
  return {region_.bytes().subspan(at, shm_payload::kHeaderSize),
          region_.bytes().subspan(at + shm_payload::kHeaderSize, capacity)};
}

Result<ShmChannel> ShmChannel::create(size_t toDaemonCapacity, size_t toClientCapacity,
                                      size_t payloadCapacity, size_t deliveryCapacity) {
  if (!shm_channel::validCapacity(toDaemonCapacity))
    return capacityError("client-to-daemon", toDaemonCapacity);
  if (!shm_channel::validCapacity(toClientCapacity))
    return capacityError("daemon-to-client", toClientCapacity);
  if (!shm_payload::validCapacity(payloadCapacity))
    return areaCapacityError("payload", payloadCapacity);
  if (!shm_payload::validCapacity(deliveryCapacity))
    return areaCapacityError("delivery", deliveryCapacity);
  const size_t first = shm_ring::regionSize(toDaemonCapacity);
  const size_t second = shm_ring::regionSize(toClientCapacity);
  Result<ShmRegion> region = ShmRegion::create(
      "rdmamsg-client", first + second + shm_payload::regionSize(payloadCapacity) +
                            shm_payload::regionSize(deliveryCapacity));
  if (!region) return region.status();
  const std::span<std::byte> bytes = region->bytes();
  // Each ring names the area of the blocks its payload records point into.
  if (Status st = shm_ring::format(bytes.first(first), toDaemonCapacity, payloadCapacity); !st)
    return st;
  if (Status st =
          shm_ring::format(bytes.subspan(first, second), toClientCapacity, deliveryCapacity);
      !st)
    return st;
  Result<ShmRingProducer> out = ShmRingProducer::attach(bytes.first(first));
  if (!out) return out.status();
  Result<ShmRingConsumer> in = ShmRingConsumer::attach(bytes.subspan(first, second));
  if (!in) return in.status();
  Result<ShmDoorbell> daemonBell = ShmDoorbell::create();
  if (!daemonBell) return daemonBell.status();
  Result<ShmDoorbell> clientBell = ShmDoorbell::create();
  if (!clientBell) return clientBell.status();
  return ShmChannel(Side::client, std::move(region.value()), std::move(out.value()),
                    std::move(in.value()), std::move(clientBell.value()),
                    std::move(daemonBell.value()),
                    {toDaemonCapacity, toClientCapacity, payloadCapacity, deliveryCapacity});
}

namespace {

// The areas past both rings of a region of `size` bytes, from the rings'
// headers (version 4) or, before, from the size (version 3: a payload area
// is all there is).
Result<std::pair<uint64_t, uint64_t>> areasOf(uint64_t size, uint64_t rings,
                                              const ShmRingConsumer& in,
                                              const ShmRingProducer& out) {
  const uint64_t rest = size - rings;
  if (in.version() >= 4) {
    const uint64_t payload = in.areaCapacity(), delivery = out.areaCapacity();
    if (!shm_payload::validCapacity(payload)) return areaCapacityError("payload", payload);
    if (!shm_payload::validCapacity(delivery)) return areaCapacityError("delivery", delivery);
    if (shm_payload::regionSize(payload) + shm_payload::regionSize(delivery) != rest)
      return Status(Errc::protocol_error,
                    "shared memory: the region holds " + std::to_string(rest) +
                        " bytes past both rings, not a payload area of " + std::to_string(payload) +
                        " and a delivery area of " + std::to_string(delivery) + " bytes");
    return std::pair{payload, delivery};
  }
  const uint64_t payload = rest > shm_payload::kHeaderSize ? rest - shm_payload::kHeaderSize : 0;
  if (rest == 0) return std::pair<uint64_t, uint64_t>{0, 0};
  if (in.version() < 3 || payload == 0 || !shm_payload::validCapacity(payload))
    return Status(Errc::protocol_error,
                  "shared memory: the region holds " + std::to_string(rest) +
                      " bytes past both rings: not a payload area (a header page and a power of "
                      "two from " +
                      std::to_string(shm_payload::kMinCapacity) + " to " +
                      std::to_string(shm_payload::kMaxCapacity) + ")");
  return std::pair<uint64_t, uint64_t>{payload, 0};
}

}  // namespace

Result<ShmChannel> ShmChannel::attach(std::array<UniqueFd, shm_channel::kFdCount> fds,
                                      uint64_t toDaemonCapacity, uint64_t toClientCapacity) {
  if (!shm_channel::validCapacity(toDaemonCapacity))
    return capacityError("client-to-daemon", toDaemonCapacity);
  if (!shm_channel::validCapacity(toClientCapacity))
    return capacityError("daemon-to-client", toClientCapacity);
  const size_t first = shm_ring::regionSize(toDaemonCapacity);
  const size_t second = shm_ring::regionSize(toClientCapacity);
  // Both rings, then the areas they name (the size is sealed).
  Result<size_t> size = ShmRegion::fileSize(fds[0].get());
  if (!size) return prefixed(size.status(), "region");
  const uint64_t most = first + second + 2 * shm_payload::regionSize(shm_payload::kMaxCapacity);
  if (*size < first + second || *size > most)
    return Status(Errc::protocol_error, "shared memory: a region of " + std::to_string(*size) +
                                            " bytes does not hold both rings and their areas");
  Result<ShmRegion> region = ShmRegion::attach(std::move(fds[0]), *size);
  if (!region) return prefixed(region.status(), "region");
  const std::span<std::byte> bytes = region->bytes();
  Result<ShmRingConsumer> in = ShmRingConsumer::attach(bytes.first(first));
  if (!in) return prefixed(in.status(), "client-to-daemon ring");
  Result<ShmRingProducer> out = ShmRingProducer::attach(bytes.subspan(first, second));
  if (!out) return prefixed(out.status(), "daemon-to-client ring");
  Result<std::pair<uint64_t, uint64_t>> areas = areasOf(*size, first + second, *in, *out);
  if (!areas) return areas.status();
  Result<ShmDoorbell> daemonBell = ShmDoorbell::adopt(std::move(fds[1]));
  if (!daemonBell) return prefixed(daemonBell.status(), "daemon doorbell");
  Result<ShmDoorbell> clientBell = ShmDoorbell::adopt(std::move(fds[2]));
  if (!clientBell) return prefixed(clientBell.status(), "client doorbell");
  return ShmChannel(Side::daemon, std::move(region.value()), std::move(out.value()),
                    std::move(in.value()), std::move(daemonBell.value()),
                    std::move(clientBell.value()),
                    {toDaemonCapacity, toClientCapacity, areas->first, areas->second});
}

std::array<int, shm_channel::kFdCount> ShmChannel::fdsToPass() const {
  // On the client's side, own_ is the client's doorbell and peer_ the daemon's.
  return {region_.fd(), peer_.fd(), own_.fd()};
}

Status ShmChannel::wakePeer() {
  ++counters_.wakesSent;
  return peer_.ring();
}

Result<size_t> ShmChannel::write(std::span<const std::byte> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    size_t n = std::min({bytes.size() - done, out_.maxPayload(), kMaxPiece});
    Result<std::span<std::byte>> room = out_.reserve(n);
    // Less room than asked for: a smaller piece, down to kMinPiece.
    while (!room && room.status().code() == Errc::would_block && n > kMinPiece) {
      n = std::max(n / 4, kMinPiece);
      room = out_.reserve(n);
    }
    if (!room) {
      if (room.status().code() == Errc::would_block) break;
      return room.status();
    }
    std::memcpy(room->data(), bytes.data() + done, n);
    if (Status st = out_.commit(); !st) return st;
    done += n;
    ++counters_.recordsWritten;
  }
  counters_.bytesWritten += done;
  if (done > 0 || unannounced_) {
    if (Status st = announce(); !st) return st;
  }
  return done;
}

Result<std::span<std::byte>> ShmChannel::reserveRecord(size_t n) {
  Result<std::span<std::byte>> room = out_.reserve(n);
  reserved_ = room ? n : 0;
  return room;
}

Status ShmChannel::commitRecord() {
  if (Status st = out_.commit(); !st) return st;
  ++counters_.recordsWritten;
  counters_.bytesWritten += std::exchange(reserved_, 0);
  unannounced_ = true;
  return {};
}

Status ShmChannel::announce() {
  unannounced_ = false;
  if (out_.needsWake()) return wakePeer();
  return {};
}

Result<size_t> ShmChannel::read(ByteBuffer& in, size_t budget) {
  size_t got = 0;
  while (got < budget) {
    Result<ShmRecord> rec = in_.peek();
    if (!rec) return rec.status();
    if (!rec->has_value() || frameWaiting()) break;
    const std::span<const std::byte> payload = **rec;
    in.append(payload);  // the one read of these bytes: parsed from the copy
    got += payload.size();
    if (Status st = in_.release(); !st) return st;
    ++counters_.recordsRead;
  }
  counters_.bytesRead += got;
  if (got > 0 && in_.needsWake()) {
    if (Status st = wakePeer(); !st) return st;
  }
  return got;
}

Result<std::span<std::byte>> ShmChannel::reserveFrameRecord(size_t n, uint32_t type) {
  Result<std::span<std::byte>> room = out_.reserve(n, type);
  reserved_ = room ? n : 0;
  return room;
}

shm_payload::Descriptor ShmChannel::describe(const shm_payload::PayloadAllocator::Block& b) {
  return {b.slot, 0, b.offset, b.bytes.size()};
}

// The record peek() shows, or the block its payload record names (checked;
// a block that is not one kills the ring: the other side broke the protocol).
Result<std::span<const std::byte>> ShmChannel::frameRecord() {
  if (!frameWaiting()) return Status(Errc::bad_request, "no frame record waiting");
  Result<ShmRecord> rec = in_.peek();
  if (!rec) return rec.status();
  if (!in_.peekedPayload()) return **rec;
  if (!described_) {
    Result<shm_payload::Descriptor> d =
        shm_payload::describe(**rec, inArea_.data.size(), slotHeld_);
    if (!d) return d.status();
    described_ = *d;
  }
  return std::span<const std::byte>(inArea_.data.subspan(described_->offset, described_->length));
}

Result<ShmChannel::FrameHold> ShmChannel::holdFrame() {
  Result<std::span<const std::byte>> frame = frameRecord();
  if (!frame) return frame.status();
  FrameHold hold;
  if (in_.peekedPayload()) {
    hold.slot = described_->slot;
    slotHeld_[hold.slot] = true;  // before consumeFrame(): the block stays the daemon's
    if (Status st = consumeFrame(); !st) return st;
    return hold;
  }
  Result<uint64_t> position = in_.hold();
  if (!position) return position.status();
  hold.position = *position;
  countFrameRead(frame->size());
  return hold;
}

Status ShmChannel::consumeFrame() {
  Result<std::span<const std::byte>> frame = frameRecord();
  if (!frame) return frame.status();
  const bool payload = in_.peekedPayload();
  const std::optional<shm_payload::Descriptor> d = std::exchange(described_, std::nullopt);
  if (Status st = in_.release(); !st) return st;
  countFrameRead(frame->size());
  // A block copied out is the client's again at once.
  if (payload && !slotHeld_[d->slot])
    shm_payload::releaseWord(inArea_.header, d->slot).store(0, std::memory_order_release);
  if (in_.needsWake()) return wakePeer();
  return {};
}

void ShmChannel::countFrameRead(size_t bytes) {
  ++counters_.recordsRead;
  counters_.bytesRead += bytes;
}

Status ShmChannel::releaseHeld(const FrameHold& hold) {
  if (hold.inPayloadArea()) return releaseBlock(hold.slot);
  if (!status().ok()) return {};
  const uint64_t position = hold.position;
  if (!in_.releaseHeld(position))
    return Status(Errc::bad_request, "ring position " + std::to_string(position) + " is not held");
  if (in_.needsWake()) return wakePeer();
  return {};
}

// A held block is the other side's again (whatever became of the ring).
Status ShmChannel::releaseBlock(uint32_t slot) {
  if (slot >= slotHeld_.size() || !slotHeld_[slot])
    return Status(Errc::bad_request, "payload slot " + std::to_string(slot) + " is not held");
  slotHeld_[slot] = false;
  shm_payload::releaseWord(inArea_.header, slot).store(0, std::memory_order_release);
  return {};
}

// Arming again without a disarm() between (a side that armed, worked on
// and arms before it slept) first takes back the word it armed: a word the
// other side took is a ring owed, read by the next disarm().
bool ShmChannel::armInput() {
  const ShmArming was = arming_.get();
  if (armedForInput(was) && !in_.cancelSleep()) ++owedRings_;
  const bool armed = in_.prepareToSleep();
  setArming(armingFor(armed, armedForRoom(was)));
  if (in_.takeOwedWake()) ++owedRings_;
  return armed;
}

bool ShmChannel::armRoom() {
  const ShmArming was = arming_.get();
  if (armedForRoom(was) && !out_.cancelSleep()) ++owedRings_;
  const bool armed = out_.prepareToSleep();
  setArming(armingFor(armedForInput(was), armed));
  if (out_.takeOwedWake()) ++owedRings_;
  return armed;
}

bool ShmChannel::prepareToSleep(bool waitingForRoom) {
  if (!armInput()) return false;
  if (waitingForRoom && !armRoom()) return false;  // disarm() takes the input word back
  ++counters_.sleeps;
  return true;
}

Result<bool> ShmChannel::disarm() {
  // A word the other side took is a ring it made, or is about to make.
  const ShmArming was = arming_.get();
  setArming(ShmArming::kAwake);
  if (armedForInput(was) && !in_.cancelSleep()) ++owedRings_;
  if (armedForRoom(was) && !out_.cancelSleep()) ++owedRings_;
  if (owedRings_ == 0) return false;
  ++counters_.doorbellReads;
  Result<uint64_t> rings = own_.take();
  if (!rings) return rings.status();
  owedRings_ -= std::min(owedRings_, *rings);
  return *rings != 0;
}

Status ShmChannel::resetDoorbell() {
  ++counters_.doorbellReads;
  Result<uint64_t> rings = own_.take();
  if (!rings) return rings.status();
  owedRings_ -= std::min(owedRings_, *rings);
  return {};
}

Status ShmChannel::wakeSelf() {
  ++owedRings_;
  ++counters_.wakesSent;
  return own_.ring();
}

Status ShmChannel::status() const {
  if (!out_.status()) return out_.status();
  return in_.status();
}

}  // namespace rdmamsg
