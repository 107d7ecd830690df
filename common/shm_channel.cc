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

Status prefixed(const Status& st, const char* what) {
  return Status(st.code(), std::string("shared memory: ") + what + ": " + st.message());
}

}  // namespace

ShmChannel::ShmChannel(ShmRegion region, ShmRingProducer out, ShmRingConsumer in, ShmDoorbell own,
                       ShmDoorbell peer, uint64_t toDaemon, uint64_t toClient)
    : region_(std::move(region)),
      out_(std::move(out)),
      in_(std::move(in)),
      own_(std::move(own)),
      peer_(std::move(peer)),
      toDaemonCapacity_(toDaemon),
      toClientCapacity_(toClient) {}

Result<ShmChannel> ShmChannel::create(size_t toDaemonCapacity, size_t toClientCapacity) {
  if (!shm_channel::validCapacity(toDaemonCapacity))
    return capacityError("client-to-daemon", toDaemonCapacity);
  if (!shm_channel::validCapacity(toClientCapacity))
    return capacityError("daemon-to-client", toClientCapacity);
  const size_t first = shm_ring::regionSize(toDaemonCapacity);
  const size_t second = shm_ring::regionSize(toClientCapacity);
  Result<ShmRegion> region = ShmRegion::create("rdmamsg-client", first + second);
  if (!region) return region.status();
  const std::span<std::byte> bytes = region->bytes();
  if (Status st = shm_ring::format(bytes.first(first), toDaemonCapacity); !st) return st;
  if (Status st = shm_ring::format(bytes.subspan(first, second), toClientCapacity); !st) return st;
  Result<ShmRingProducer> out = ShmRingProducer::attach(bytes.first(first));
  if (!out) return out.status();
  Result<ShmRingConsumer> in = ShmRingConsumer::attach(bytes.subspan(first, second));
  if (!in) return in.status();
  Result<ShmDoorbell> daemonBell = ShmDoorbell::create();
  if (!daemonBell) return daemonBell.status();
  Result<ShmDoorbell> clientBell = ShmDoorbell::create();
  if (!clientBell) return clientBell.status();
  return ShmChannel(std::move(region.value()), std::move(out.value()), std::move(in.value()),
                    std::move(clientBell.value()), std::move(daemonBell.value()), toDaemonCapacity,
                    toClientCapacity);
}

Result<ShmChannel> ShmChannel::attach(std::array<UniqueFd, shm_channel::kFdCount> fds,
                                      uint64_t toDaemonCapacity, uint64_t toClientCapacity) {
  if (!shm_channel::validCapacity(toDaemonCapacity))
    return capacityError("client-to-daemon", toDaemonCapacity);
  if (!shm_channel::validCapacity(toClientCapacity))
    return capacityError("daemon-to-client", toClientCapacity);
  const size_t first = shm_ring::regionSize(toDaemonCapacity);
  const size_t second = shm_ring::regionSize(toClientCapacity);
  Result<ShmRegion> region = ShmRegion::attach(std::move(fds[0]), first + second);
  if (!region) return prefixed(region.status(), "region");
  const std::span<std::byte> bytes = region->bytes();
  Result<ShmRingConsumer> in = ShmRingConsumer::attach(bytes.first(first));
  if (!in) return prefixed(in.status(), "client-to-daemon ring");
  Result<ShmRingProducer> out = ShmRingProducer::attach(bytes.subspan(first, second));
  if (!out) return prefixed(out.status(), "daemon-to-client ring");
  Result<ShmDoorbell> daemonBell = ShmDoorbell::adopt(std::move(fds[1]));
  if (!daemonBell) return prefixed(daemonBell.status(), "daemon doorbell");
  Result<ShmDoorbell> clientBell = ShmDoorbell::adopt(std::move(fds[2]));
  if (!clientBell) return prefixed(clientBell.status(), "client doorbell");
  return ShmChannel(std::move(region.value()), std::move(out.value()), std::move(in.value()),
                    std::move(daemonBell.value()), std::move(clientBell.value()), toDaemonCapacity,
                    toClientCapacity);
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
    if (!rec->has_value() || in_.peekedFrame()) break;
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

Result<std::span<std::byte>> ShmChannel::reserveFrameRecord(size_t n) {
  Result<std::span<std::byte>> room = out_.reserve(n, shm_ring::kFrameRecord);
  reserved_ = room ? n : 0;
  return room;
}

std::span<const std::byte> ShmChannel::frameRecord() {
  if (!in_.peekedFrame()) return {};
  Result<ShmRecord> rec = in_.peek();
  return rec && rec->has_value() ? **rec : std::span<const std::byte>();
}

Result<uint64_t> ShmChannel::holdFrame() {
  if (!in_.peekedFrame()) return Status(Errc::bad_request, "no frame record to hold");
  const size_t bytes = frameRecord().size();
  Result<uint64_t> position = in_.hold();
  if (!position) return position;
  countFrameRead(bytes);
  return position;
}

Status ShmChannel::consumeFrame() {
  if (!in_.peekedFrame()) return Status(Errc::bad_request, "no frame record to consume");
  const size_t bytes = frameRecord().size();
  if (Status st = in_.release(); !st) return st;
  countFrameRead(bytes);
  if (in_.needsWake()) return wakePeer();
  return {};
}

void ShmChannel::countFrameRead(size_t bytes) {
  ++counters_.recordsRead;
  counters_.bytesRead += bytes;
}

Status ShmChannel::releaseHeld(uint64_t position) {
  if (!status().ok()) return {};
  if (!in_.releaseHeld(position))
    return Status(Errc::bad_request, "ring position " + std::to_string(position) + " is not held");
  if (in_.needsWake()) return wakePeer();
  return {};
}

// Arming again without a disarm() between (a side that armed, worked on
// and arms before it slept) first takes back the word it armed: a word the
// other side took is a ring owed, read by the next disarm().
bool ShmChannel::armInput() {
  if (std::exchange(armedInput_, false) && !in_.cancelSleep()) ++owedRings_;
  armedInput_ = in_.prepareToSleep();
  if (in_.takeOwedWake()) ++owedRings_;
  return armedInput_;
}

bool ShmChannel::armRoom() {
  if (std::exchange(armedRoom_, false) && !out_.cancelSleep()) ++owedRings_;
  armedRoom_ = out_.prepareToSleep();
  if (out_.takeOwedWake()) ++owedRings_;
  return armedRoom_;
}

bool ShmChannel::prepareToSleep(bool waitingForRoom) {
  if (!armInput()) return false;
  if (waitingForRoom && !armRoom()) return false;  // disarm() takes the input word back
  ++counters_.sleeps;
  return true;
}

Result<bool> ShmChannel::disarm() {
  // A word the other side took is a ring it made, or is about to make.
  if (std::exchange(armedInput_, false) && !in_.cancelSleep()) ++owedRings_;
  if (std::exchange(armedRoom_, false) && !out_.cancelSleep()) ++owedRings_;
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
