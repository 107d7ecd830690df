// ShmRing: the header's checks at attach, the producer's reserve/commit, the
// consumer's peek/release, and the sleeping words of the wake-up rule. Every
// value read from the region is read once into a local and checked here.
#include "common/shm_ring.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace rdmamsg {
namespace shm_ring {
namespace {

std::string num(uint64_t v) {
  return std::to_string(v);
}

bool isPowerOfTwo(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

uint64_t makeHeader(uint32_t type, uint32_t length) {
  return (uint64_t{type} << 32) | length;
}

// The indexes as found in the header: aligned, consumer <= producer, and
// no more than the capacity apart.
Status checkIndexes(uint64_t producer, uint64_t consumer, uint64_t capacity) {
  if (producer % kAlignment != 0 || consumer % kAlignment != 0) {
    return Status(Errc::protocol_error, "ring indexes " + num(producer) + "/" + num(consumer) +
                                            " are not 8-byte aligned");
  }
  if (producer < consumer || producer - consumer > capacity) {
    return Status(Errc::protocol_error, "ring producer index " + num(producer) +
                                            " does not lie within the capacity after consumer "
                                            "index " +
                                            num(consumer));
  }
  return Status();
}

}  // namespace

Status format(std::span<std::byte> region, size_t capacity, uint64_t areaCapacity) {
  if (!isPowerOfTwo(capacity) || capacity < kMinCapacity || capacity > kMaxCapacity) {
    return Status(Errc::bad_request, "ring capacity " + num(capacity) +
                                         " is not a power of two in " + num(kMinCapacity) + ".." +
                                         num(kMaxCapacity));
  }
  if (region.size() != regionSize(capacity) ||
      reinterpret_cast<uintptr_t>(region.data()) % 64 != 0) {
    return Status(Errc::bad_request, "a ring of capacity " + num(capacity) + " needs " +
                                         num(regionSize(capacity)) + " aligned bytes");
  }
  std::memset(region.data(), 0, kHeaderSize);
  std::memcpy(region.data() + kMagicOffset, &kMagic, sizeof kMagic);
  std::memcpy(region.data() + kVersionOffset, &kVersion, sizeof kVersion);
  const uint64_t cap = capacity;
  std::memcpy(region.data() + kCapacityOffset, &cap, sizeof cap);
  std::memcpy(region.data() + kAreaCapacityOffset, &areaCapacity, sizeof areaCapacity);
  return Status();
}

Result<Mapping> Mapping::read(std::span<std::byte> region) {
  if (reinterpret_cast<uintptr_t>(region.data()) % 64 != 0 || region.size() < kHeaderSize) {
    return Status(Errc::bad_request, "a ring region needs a 64-byte aligned header");
  }
  Mapping m;
  m.base_ = region.data();
  const uint64_t magicVersion = m.word(kMagicOffset).load(std::memory_order_acquire);
  const uint64_t capacity = m.word(kCapacityOffset).load(std::memory_order_acquire);
  const auto version = static_cast<uint32_t>(magicVersion >> 32);
  if (static_cast<uint32_t>(magicVersion) != kMagic || version < kMinVersion ||
      version > kVersion) {
    return Status(Errc::protocol_error, "not a version " + num(kMinVersion) + ".." + num(kVersion) +
                                            " ring (magic/version " + num(magicVersion) + ")");
  }
  m.version_ = version;
  if (!isPowerOfTwo(capacity) || capacity < kMinCapacity || capacity > kMaxCapacity ||
      regionSize(capacity) != region.size()) {
    return Status(Errc::protocol_error, "ring capacity " + num(capacity) +
                                            " does not fit a region of " + num(region.size()) +
                                            " bytes");
  }
  m.capacity_ = capacity;
  if (version >= 4) m.areaCapacity_ = m.word(kAreaCapacityOffset).load(std::memory_order_acquire);
  m.producer_ = m.word(kProducerOffset).load(std::memory_order_acquire);
  m.consumer_ = m.word(kConsumerOffset).load(std::memory_order_acquire);
  if (Status s = checkIndexes(m.producer_, m.consumer_, capacity); !s) return s;
  return m;
}

}  // namespace shm_ring

using namespace shm_ring;

// --- producer ----------------------------------------------------------------

ShmRingProducer::ShmRingProducer(Mapping map)
    : map_(map), producer_(map.initialProducer()), consumerSeen_(map.initialConsumer()) {}

Result<ShmRingProducer> ShmRingProducer::attach(std::span<std::byte> region) {
  Result<Mapping> map = Mapping::read(region);
  if (!map) return map.status();
  return ShmRingProducer(map.value());
}

Status ShmRingProducer::fail(std::string reason) {
  status_ = Status(Errc::protocol_error, std::move(reason));
  reservedSize_ = 0;
  return status_;
}

// Reads the consumer index once: aligned, never back, never past the
// producer index, never more than the capacity behind it.
Status ShmRingProducer::refreshConsumer() {
  const uint64_t c = map_.word(kConsumerOffset).load(std::memory_order_acquire);
  if (c % kAlignment != 0) return fail("ring consumer index " + num(c) + " is not 8-byte aligned");
  if (c < consumerSeen_) {
    return fail("ring consumer index went back from " + num(consumerSeen_) + " to " + num(c));
  }
  if (c > producer_) {
    return fail("ring consumer index " + num(c) + " is ahead of the producer index " +
                num(producer_));
  }
  consumerSeen_ = c;
  return Status();
}

Result<std::span<std::byte>> ShmRingProducer::reserve(size_t n, uint32_t type) {
  if (!status_) return status_;
  if (!knownType(type, map_.version()))
    return Status(Errc::bad_request,
                  "a version " + num(map_.version()) + " ring has no records of type " + num(type));
  if (n > maxPayload()) {
    return Status(Errc::too_large, "a ring record holds at most " + num(maxPayload()) + " bytes");
  }
  const uint64_t capacity = map_.capacity();
  const uint64_t offset = producer_ & (capacity - 1);
  const uint64_t toEnd = capacity - offset;
  const uint64_t size = recordSize(n);
  const uint64_t pad = size <= toEnd ? 0 : toEnd;
  if (pad + size > capacity - (producer_ - consumerSeen_)) {
    if (Status s = refreshConsumer(); !s) return s;
    if (pad + size > capacity - (producer_ - consumerSeen_)) {
      reservedSize_ = 0;
      return Status(Errc::would_block, "the ring is full");
    }
  }
  reservedPad_ = pad;
  reservedSize_ = size;
  reservedLength_ = static_cast<uint32_t>(n);
  reservedType_ = type;
  const uint64_t at = pad != 0 ? 0 : offset;
  return std::span<std::byte>(map_.data() + at + kRecordHeaderSize, n);
}

Status ShmRingProducer::commit() {
  if (!status_) return status_;
  if (reservedSize_ == 0) return Status(Errc::bad_request, "commit() without reserve()");
  const uint64_t offset = producer_ & (map_.capacity() - 1);
  if (reservedPad_ != 0) {
    const auto padLength = static_cast<uint32_t>(reservedPad_ - kRecordHeaderSize);
    map_.word(kHeaderSize + offset)
        .store(makeHeader(kPaddingRecord, padLength), std::memory_order_relaxed);
  }
  const uint64_t at = reservedPad_ != 0 ? 0 : offset;
  map_.word(kHeaderSize + at)
      .store(makeHeader(reservedType_, reservedLength_), std::memory_order_relaxed);
  producer_ += reservedPad_ + reservedSize_;
  reservedSize_ = 0;
  map_.word(kProducerOffset).store(producer_, std::memory_order_release);
  return Status();
}

bool ShmRingProducer::needsWake() {
  if (!status_) return false;
  // Dekker: the producer index was stored (commit); fence; load the flag.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  auto sleeping = map_.word(kConsumerSleepingOffset);
  if (sleeping.load(std::memory_order_relaxed) == 0) return false;
  return sleeping.exchange(0, std::memory_order_relaxed) != 0;
}

bool ShmRingProducer::prepareToSleep() {
  if (!status_) return false;
  auto sleeping = map_.word(kProducerSleepingOffset);
  sleeping.store(1, std::memory_order_relaxed);
  // Dekker: the flag is stored; fence; load the consumer index.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (map_.word(kConsumerOffset).load(std::memory_order_relaxed) != consumerSeen_) {
    // The consumer may have taken the word meanwhile: then it rings.
    if (sleeping.exchange(0, std::memory_order_relaxed) == 0) owedWake_ = true;
    return false;
  }
  return true;
}

bool ShmRingProducer::cancelSleep() {
  return map_.word(kProducerSleepingOffset).exchange(0, std::memory_order_relaxed) != 0;
}

// --- consumer ----------------------------------------------------------------

ShmRingConsumer::ShmRingConsumer(Mapping map)
    : map_(map),
      consumer_(map.initialConsumer()),
      producerSeen_(map.initialProducer()),
      published_(map.initialConsumer()) {}

Result<ShmRingConsumer> ShmRingConsumer::attach(std::span<std::byte> region) {
  Result<Mapping> map = Mapping::read(region);
  if (!map) return map.status();
  return ShmRingConsumer(map.value());
}

Status ShmRingConsumer::fail(std::string reason) {
  status_ = Status(Errc::protocol_error, std::move(reason));
  pending_ = 0;
  peeked_ = {};
  return status_;
}

// Reads the producer index once: aligned, never behind the consumer index
// (which is where the producer index was last seen: never back), never more
// than the capacity ahead of it.
Status ShmRingConsumer::refreshProducer(uint64_t& readable) {
  const uint64_t p = map_.word(kProducerOffset).load(std::memory_order_acquire);
  if (p % kAlignment != 0) return fail("ring producer index " + num(p) + " is not 8-byte aligned");
  if (p < consumer_) {
    return fail("ring producer index " + num(p) + " is behind the consumer index " +
                num(consumer_));
  }
  if (p - published_ > map_.capacity()) {
    return fail("ring producer index " + num(p) + " is more than the capacity ahead of the " +
                "consumer index " + num(published_));
  }
  producerSeen_ = p;
  readable = p - consumer_;
  return Status();
}

// A padding record at the consumer index: it must reach exactly the end of
// the data area, lie within the readable span, and not start at offset 0.
// It is consumed at once.
Status ShmRingConsumer::skipPadding(uint64_t header, uint64_t& readable) {
  const uint64_t offset = consumer_ & (map_.capacity() - 1);
  const uint64_t toEnd = map_.capacity() - offset;
  const uint64_t length = header & 0xffffffffu;
  if (offset == 0) return fail("ring padding record at offset 0");
  if (recordSize(length) != toEnd) {
    return fail("ring padding record of length " + num(length) + " at offset " + num(offset) +
                " does not reach the end of the data area");
  }
  if (toEnd > readable) {
    return fail("ring padding record at offset " + num(offset) +
                " is beyond the readable span of " + num(readable) + " bytes");
  }
  readable -= toEnd;
  advance(toEnd);
  return Status();
}

Result<ShmRecord> ShmRingConsumer::peek() {
  if (!status_) return status_;
  if (pending_ != 0) return ShmRecord(peeked_);
  // What the producer index last showed is still published; the shared word
  // is read again (and checked) only when that is used up.
  uint64_t readable = producerSeen_ - consumer_;
  if (readable == 0) {
    if (Status s = refreshProducer(readable); !s) return s;
  }
  // At most a padding record, then a data record: two rounds.
  for (int round = 0; round < 2 && readable != 0; ++round) {
    const uint64_t offset = consumer_ & (map_.capacity() - 1);
    const uint64_t header = map_.word(kHeaderSize + offset).load(std::memory_order_relaxed);
    const auto type = static_cast<uint32_t>(header >> 32);
    const uint64_t length = header & 0xffffffffu;
    if (type == kPaddingRecord) {
      if (Status s = skipPadding(header, readable); !s) return s;
      continue;
    }
    if (!knownType(type, map_.version())) {
      return fail("ring record of unknown type " + num(type) + " at offset " + num(offset));
    }
    const uint64_t size = recordSize(length);
    if (size > map_.capacity() - offset || size > readable) {
      return fail("ring record of length " + num(length) + " at offset " + num(offset) +
                  " is beyond the readable span of " + num(readable) + " bytes");
    }
    pending_ = size;
    peekedType_ = type;
    peeked_ = {map_.data() + offset + kRecordHeaderSize, static_cast<size_t>(length)};
    return ShmRecord(peeked_);
  }
  return ShmRecord();  // empty, or only a padding record was published
}

Status ShmRingConsumer::release() {
  if (!status_) return status_;
  if (pending_ == 0) return Status(Errc::bad_request, "release() without a peeked record");
  advance(std::exchange(pending_, 0));
  peeked_ = {};
  return Status();
}

Result<uint64_t> ShmRingConsumer::hold() {
  if (!status_) return status_;
  if (pending_ == 0) return Status(Errc::bad_request, "hold() without a peeked record");
  if (held_.size() >= kMaxHeld) return Status(Errc::would_block, "too many ring records held");
  const uint64_t position = consumer_;
  held_.push_back({position, false});
  consumer_ += std::exchange(pending_, 0);
  peeked_ = {};
  return position;
}

bool ShmRingConsumer::releaseHeld(uint64_t position) {
  auto it = std::find_if(held_.begin(), held_.end(),
                         [position](const Held& h) { return h.position == position; });
  if (it == held_.end() || it->released) return false;
  it->released = true;
  while (!held_.empty() && held_.front().released)
    held_.pop_front();
  publish();
  return true;
}

void ShmRingConsumer::advance(uint64_t bytes) {
  consumer_ += bytes;
  if (held_.empty()) publish();
}

// The consumer index: the read position, or the oldest record still held.
void ShmRingConsumer::publish() {
  const uint64_t index = held_.empty() ? consumer_ : held_.front().position;
  if (index == published_ || !status_) return;
  published_ = index;
  map_.word(kConsumerOffset).store(index, std::memory_order_release);
}

bool ShmRingConsumer::prepareToSleep() {
  if (!status_) return false;
  auto sleeping = map_.word(kConsumerSleepingOffset);
  sleeping.store(1, std::memory_order_relaxed);
  // Dekker: the flag is stored; fence; load the producer index.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (map_.word(kProducerOffset).load(std::memory_order_relaxed) != consumer_ || pending_ != 0) {
    // The producer may have taken the word meanwhile: then it rings.
    if (sleeping.exchange(0, std::memory_order_relaxed) == 0) owedWake_ = true;
    return false;
  }
  return true;
}

bool ShmRingConsumer::cancelSleep() {
  return map_.word(kConsumerSleepingOffset).exchange(0, std::memory_order_relaxed) != 0;
}

bool ShmRingConsumer::needsWake() {
  if (!status_) return false;
  // Dekker: the consumer index was stored (release); fence; load the flag.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  auto sleeping = map_.word(kProducerSleepingOffset);
  if (sleeping.load(std::memory_order_relaxed) == 0) return false;
  return sleeping.exchange(0, std::memory_order_relaxed) != 0;
}

}  // namespace rdmamsg
