// ShmRing: a single-producer single-consumer ring of variable-length records
// in a shared-memory region (ShmRegion), the data path between a local client
// and rdmamsgd. It follows the one-to-one ring buffer of Aeron's media driver
// (monotonic byte positions, 8-byte aligned length-prefixed records, a
// padding record to wrap, each index on its own cache lines) and the wake-up
// rule of io_uring's SQPOLL flag and virtio's notification suppression.
//
// Layout (little-endian; the region is kHeaderSize + capacity bytes):
//
//   offset  size  field               written by
//   0       4     magic "RMRG"        the side that formats the region
//   4       4     version (1..4)
//   8       8     capacity            power of two, kMinCapacity..kMaxCapacity
//   16      8     area capacity       version 4: the capacity of the channel's
//                                     area whose blocks this ring's payload
//                                     records name (0: none; shm_channel.h)
//   128     8     producer index      producer: bytes ever published
//   256     8     consumer index      consumer: bytes ever released
//   384     8     consumer sleeping   consumer sets it before it sleeps; the
//                                     producer clears it when it rings
//   512     8     producer sleeping   the same, for a producer waiting for room
//   4096    capacity  data area
//
// Each index lies on its own pair of cache lines (128 bytes, so that the
// adjacent-line prefetcher does not couple them). An index is a byte
// position that only grows; its offset in the data area is
// index & (capacity - 1). Between the consumer index and the producer index
// lie the published records, each:
//
//   u32 length   payload bytes
//   u32 type     1: data, 2: padding (fills the data area up to its end),
//                3: frame (version 2: exactly one whole frame, which the
//                consumer may keep in place after it read past it),
//                4: payload (version 3: where a whole frame lies in the
//                channel's area of blocks, shm_payload_area.h; version 4
//                in the ring from the daemon too)
//   payload, then zero to 7 bytes up to the next multiple of 8
//
// Version 2 adds frame records: the consumer may hold one (hold()) — keep
// its bytes where they lie while it reads the records after it — and
// release it later (releaseHeld()). The consumer index then stops at the
// oldest record held, so the producer never overwrites a held record;
// records read after it are released with it. A version 1 ring has no
// frame records (one is a protocol error); version 3 adds payload records,
// which the ring carries like data records (their meaning is the channel's).
//
// A record never wraps: when one does not fit before the end of the data
// area, the producer writes a padding record whose 8-byte aligned size
// (8 + length) reaches exactly the end, and the record at offset 0. A
// payload is at most maxPayload(capacity) = capacity / 2 - 8 bytes, so it
// always fits into an empty ring.
//
// Memory order: the producer writes a record, then publishes the producer
// index with a release store; the consumer reads the index with an acquire
// load, then the records before it. The consumer releases a record with a
// release store of the consumer index (its reads of the record happen
// before the producer may overwrite it) and the producer reads it with an
// acquire load. The consumer index is also the consumption acknowledgement:
// a record is released once the application has taken it.
//
// Wake-up rule (io_uring's IORING_SQ_NEED_WAKEUP, virtio's
// VRING_USED_F_NO_NOTIFY): a side that finds nothing to do and is about to
// sleep calls prepareToSleep(), which sets its "sleeping" word, issues a
// full fence, and re-checks the ring; only when the ring still gives it
// nothing to do may it sleep on its doorbell (ShmDoorbell), else it goes on
// (and the word is cleared). The other side, after publishing (commit() or
// release()), calls needsWake(), which issues a full fence and reads that
// word; only when it is set does it ring the doorbell. This is the Dekker
// pattern: each side stores (its word / its index), fences, then loads the
// other's, so at least one of them sees the other's store — either the
// sleeper sees the new record and does not sleep, or the publisher sees the
// flag and rings. No wake-up is lost, and a busy pair makes no system call.
//
// Hostile memory: the other side may write anything into the region at any
// time. Each side keeps its own index in private memory (the shared word is
// only its publication) and reads every index, length and offset from the
// region once into a local variable, checks it, and uses only the local
// copy: the capacity against the region, an index for alignment, for never
// going back, and for lying between the consumer index and the consumer
// index plus the capacity; a record's length against the end of the data
// area and the readable span; a padding record for reaching exactly the end.
// A violation is a protocol_error naming it, and the ring is dead: every
// later call returns the same error. Nothing reads or writes outside the
// region and no loop depends on a value read from it. A payload view points
// into shared memory: the other side can change it while it is read, so a
// caller parses what it reads once (or copies it) as it would a socket's.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "common/status.h"

namespace rdmamsg {

namespace shm_ring {

inline constexpr uint32_t kMagic = 0x47524d52;  // "RMRG" in memory
inline constexpr uint32_t kVersion = 4;         // what this side formats and offers
inline constexpr uint32_t kMinVersion = 1;      // the oldest it attaches to (no frame records)
inline constexpr size_t kHeaderSize = 4096;
inline constexpr size_t kMagicOffset = 0;
inline constexpr size_t kVersionOffset = 4;
inline constexpr size_t kCapacityOffset = 8;
inline constexpr size_t kAreaCapacityOffset = 16;
inline constexpr size_t kProducerOffset = 128;
inline constexpr size_t kConsumerOffset = 256;
inline constexpr size_t kConsumerSleepingOffset = 384;
inline constexpr size_t kProducerSleepingOffset = 512;
inline constexpr size_t kRecordHeaderSize = 8;
inline constexpr size_t kAlignment = 8;
inline constexpr size_t kMinCapacity = 64;
inline constexpr size_t kMaxCapacity = size_t{1} << 30;
inline constexpr uint32_t kDataRecord = 1;
inline constexpr uint32_t kPaddingRecord = 2;
inline constexpr uint32_t kFrameRecord = 3;
inline constexpr uint32_t kPayloadRecord = 4;
// Whether a ring of `version` has records of `type` (padding aside).
inline constexpr bool knownType(uint32_t type, uint32_t version) {
  return type == kDataRecord || (type == kFrameRecord && version >= 2) ||
         (type == kPayloadRecord && version >= 3);
}

inline constexpr size_t regionSize(size_t capacity) {
  return kHeaderSize + capacity;
}
inline constexpr size_t maxPayload(size_t capacity) {
  return capacity / 2 - kRecordHeaderSize;
}
// Bytes a record of `payload` bytes occupies (header, payload, alignment).
inline constexpr uint64_t recordSize(uint64_t payload) {
  return (kRecordHeaderSize + payload + kAlignment - 1) & ~uint64_t{kAlignment - 1};
}

// Writes an empty ring's header into `region` (kHeaderSize + capacity bytes,
// 64-byte aligned), naming `areaCapacity` as its area's. Done once, by the
// side that creates the region, before the other side has it.
[[nodiscard]] Status format(std::span<std::byte> region, size_t capacity,
                            uint64_t areaCapacity = 0);

// What both sides read from the header once, at attach, and the shared words.
class Mapping {
 public:
  [[nodiscard]] static Result<Mapping> read(std::span<std::byte> region);

  uint64_t capacity() const { return capacity_; }
  uint32_t version() const { return version_; }
  // The header's area capacity (0 before version 4), read once: unchecked.
  uint64_t areaCapacity() const { return areaCapacity_; }
  std::byte* data() const { return base_ + kHeaderSize; }
  std::atomic_ref<uint64_t> word(size_t offset) const {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base_ + offset));
  }
  // Where the region lies, for checks of the views handed out.
  std::span<std::byte> region() const { return {base_, kHeaderSize + capacity_}; }
  uint64_t initialProducer() const { return producer_; }
  uint64_t initialConsumer() const { return consumer_; }

 private:
  std::byte* base_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t producer_ = 0;
  uint64_t consumer_ = 0;
  uint64_t areaCapacity_ = 0;
  uint32_t version_ = 0;
};

}  // namespace shm_ring

// The writing side. reserve(n) gives n bytes of room, commit() publishes them.
class ShmRingProducer {
 public:
  // Attaches to a formatted region (kept mapped by the caller).
  [[nodiscard]] static Result<ShmRingProducer> attach(std::span<std::byte> region);

  // Room for a record of n payload bytes, valid until commit() (a second
  // reserve() replaces it). too_large beyond maxPayload(); would_block when
  // the ring is full (not an error: retry once the consumer released,
  // prepareToSleep() first if the producer waits on its doorbell).
  // `type`: kDataRecord, kFrameRecord (one whole frame; version 2) or
  // kPayloadRecord (version 3).
  [[nodiscard]] Result<std::span<std::byte>> reserve(size_t n,
                                                     uint32_t type = shm_ring::kDataRecord);
  // Publishes the reserved record (and the padding before it, if it wraps).
  [[nodiscard]] Status commit();

  // After commit() (once per batch): whether the consumer said it sleeps;
  // true at most once per sleep (it clears the word): ring its doorbell.
  [[nodiscard]] bool needsWake();
  // The ring is full and the producer is about to sleep: true when it may
  // (its word is set; the consumer's needsWake() will say so), false when
  // the consumer released room meanwhile (reserve() again).
  [[nodiscard]] bool prepareToSleep();
  // Clears the producer's sleeping word (after it woke up, or when it did
  // not sleep after all). True when this side cleared it; false when the
  // consumer had taken it (its needsWake() said true: the doorbell is rung).
  bool cancelSleep();
  // Whether a prepareToSleep() that said false found its word taken by the
  // consumer (which then rings the doorbell although this side goes on);
  // clears the answer.
  bool takeOwedWake() { return std::exchange(owedWake_, false); }

  // Whether the consumer released room since reserve() last found the ring
  // full (one load of its index, no check: a hint for a side that polls
  // instead of sleeping; reserve() checks).
  bool roomReleased() const {
    return status_ &&
           map_.word(shm_ring::kConsumerOffset).load(std::memory_order_acquire) != consumerSeen_;
  }

  size_t maxPayload() const { return shm_ring::maxPayload(map_.capacity()); }
  uint32_t version() const { return map_.version(); }
  uint64_t areaCapacity() const { return map_.areaCapacity(); }
  // ok, or the protocol_error that killed the ring.
  const Status& status() const { return status_; }

 private:
  explicit ShmRingProducer(shm_ring::Mapping map);
  [[nodiscard]] Status refreshConsumer();
  Status fail(std::string reason);

  shm_ring::Mapping map_;
  Status status_;
  uint64_t producer_ = 0;      // authoritative; the shared word is its copy
  uint64_t consumerSeen_ = 0;  // the consumer index last read and checked
  uint64_t reservedPad_ = 0;   // padding before the reserved record, or 0
  uint64_t reservedSize_ = 0;  // recordSize() of the reservation, 0: none
  uint32_t reservedLength_ = 0;
  uint32_t reservedType_ = shm_ring::kDataRecord;
  bool owedWake_ = false;
};

// A record as peek() shows it: the payload, or nothing when the ring is empty.
using ShmRecord = std::optional<std::span<const std::byte>>;

// The reading side. peek() shows the next record, release() consumes it.
class ShmRingConsumer {
 public:
  [[nodiscard]] static Result<ShmRingConsumer> attach(std::span<std::byte> region);

  // The next record (the same one until release()), or nullopt when the ring
  // is empty. The view stays valid until release().
  [[nodiscard]] Result<ShmRecord> peek();
  // Whether the record peek() shows is a frame record (version 2), or a
  // payload record (version 3).
  bool peekedFrame() const { return pending_ != 0 && peekedType_ == shm_ring::kFrameRecord; }
  bool peekedPayload() const { return pending_ != 0 && peekedType_ == shm_ring::kPayloadRecord; }
  // Consumes the record peek() showed: the producer may reuse its room
  // (once every record held before it is released).
  [[nodiscard]] Status release();
  // Reads past the record peek() showed but keeps it: its view stays valid
  // and the producer does not reuse its room until releaseHeld() with the
  // returned position. At most kMaxHeld at once (would_block beyond).
  static constexpr size_t kMaxHeld = 1024;
  [[nodiscard]] Result<uint64_t> hold();
  // Releases a held record (in any order); the consumer index advances
  // over every record up to the oldest one still held. False: `position`
  // is not held.
  bool releaseHeld(uint64_t position);
  size_t held() const { return held_.size(); }
  // Bytes read and not given back (the oldest record held onwards).
  uint64_t heldSpan() const { return consumer_ - published_; }

  // The ring is empty and the consumer is about to sleep: true when it may
  // (the producer's needsWake() will say so), false when a record arrived
  // meanwhile (peek() again).
  [[nodiscard]] bool prepareToSleep();
  // Clears the consumer's sleeping word (after it woke up, or when it did
  // not sleep after all). True when this side cleared it; false when the
  // producer had taken it (its needsWake() said true: the doorbell is rung).
  bool cancelSleep();
  // Whether a prepareToSleep() that said false found its word taken by the
  // producer (which then rings the doorbell although this side goes on);
  // clears the answer.
  bool takeOwedWake() { return std::exchange(owedWake_, false); }
  // After release() (once per batch): whether the producer waits for room;
  // true at most once per sleep: ring its doorbell.
  [[nodiscard]] bool needsWake();

  // Whether a record may be waiting (one load of the producer index, no
  // check: a hint for a side that polls instead of sleeping; peek() checks).
  bool hasNews() const {
    return status_ &&
           (pending_ != 0 ||
            map_.word(shm_ring::kProducerOffset).load(std::memory_order_acquire) != consumer_);
  }

  // The data area (for registering it with a device: records held are
  // posted from where they lie).
  std::span<const std::byte> area() const {
    return {map_.data(), static_cast<size_t>(map_.capacity())};
  }
  // Bytes read so far (the read position; the consumer index, the bytes
  // released, lags behind it while records are held).
  uint64_t position() const { return consumer_; }
  uint32_t version() const { return map_.version(); }
  uint64_t areaCapacity() const { return map_.areaCapacity(); }
  const Status& status() const { return status_; }

 private:
  explicit ShmRingConsumer(shm_ring::Mapping map);
  [[nodiscard]] Status refreshProducer(uint64_t& readable);
  [[nodiscard]] Status skipPadding(uint64_t header, uint64_t& readable);
  Status fail(std::string reason);

  shm_ring::Mapping map_;
  Status status_;
  uint64_t consumer_ = 0;      // authoritative; the shared word is its copy
  uint64_t producerSeen_ = 0;  // the producer index last read and checked
  uint64_t pending_ = 0;       // size of the peeked record, 0: none
  std::span<const std::byte> peeked_;
  uint32_t peekedType_ = shm_ring::kDataRecord;
  bool owedWake_ = false;
  // Records held, oldest first: their positions, and whether released since.
  struct Held {
    uint64_t position;
    bool released;
  };
  std::deque<Held> held_;
  uint64_t published_ = 0;       // the consumer index as last stored
  void advance(uint64_t bytes);  // reads past `bytes` and publishes what may be reused
  void publish();
};

}  // namespace rdmamsg
