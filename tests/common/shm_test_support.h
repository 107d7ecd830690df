// Test support for the shared-memory ring: a formatted ring in heap memory
// (so that AddressSanitizer sees any access outside it), records whose
// contents and checksum follow from their sequence number, and the producer
// and consumer loops the two-thread and two-process tests run.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/shm_doorbell.h"
#include "common/shm_ring.h"

namespace rdmamsg::test {

struct alignas(64) CacheLine {
  std::byte bytes[64];
};

// A formatted ring of `capacity` bytes in a heap buffer.
class HeapRing {
 public:
  explicit HeapRing(size_t capacity) : lines_(shm_ring::regionSize(capacity) / 64) {
    if (!shm_ring::format(region(), capacity)) std::abort();
  }
  std::span<std::byte> region() { return {lines_.front().bytes, lines_.size() * 64}; }
  std::atomic_ref<uint64_t> word(size_t offset) {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(region().data() + offset));
  }
  // A whole record header (u32 length, u32 type) at `offset` in the data area.
  void setRecordHeader(uint64_t offset, uint32_t type, uint32_t length) {
    word(shm_ring::kHeaderSize + offset).store((uint64_t{type} << 32) | length);
  }
  bool contains(std::span<const std::byte> view) {
    const auto r = region();
    return view.data() >= r.data() && view.data() + view.size() <= r.data() + r.size();
  }

 private:
  std::vector<CacheLine> lines_;
};

inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

// Payload size of record `seq`: 12..12+spread-1 bytes (seq, body, checksum).
inline size_t recordLength(uint64_t seq, size_t spread) {
  return 12 + mix(seq) % spread;
}

inline uint32_t checksum(std::span<const std::byte> bytes) {
  uint32_t h = 2166136261u;
  for (std::byte b : bytes)
    h = (h ^ static_cast<uint32_t>(b)) * 16777619u;
  return h;
}

// Fills a record: its sequence number, bytes derived from it, a checksum.
inline void fillRecord(std::span<std::byte> out, uint64_t seq) {
  std::memcpy(out.data(), &seq, 8);
  for (size_t i = 8; i < out.size() - 4; ++i) {
    out[i] = static_cast<std::byte>(mix(seq + i) & 0xff);
  }
  const uint32_t sum = checksum(out.first(out.size() - 4));
  std::memcpy(out.data() + out.size() - 4, &sum, 4);
}

// "" when the record is record `seq` of the expected length, else what differs.
inline std::string checkRecord(std::span<const std::byte> in, uint64_t seq, size_t spread) {
  if (in.size() != recordLength(seq, spread)) {
    return "record " + std::to_string(seq) + " has " + std::to_string(in.size()) + " bytes";
  }
  uint64_t got = 0;
  std::memcpy(&got, in.data(), 8);
  if (got != seq) return "expected record " + std::to_string(seq) + ", got " + std::to_string(got);
  uint32_t sum = 0;
  std::memcpy(&sum, in.data() + in.size() - 4, 4);
  if (sum != checksum(in.first(in.size() - 4)))
    return "bad checksum in record " + std::to_string(seq);
  return "";
}

// Waits on a doorbell with poll() until it is rung or `timeout` passes.
inline bool sleepOn(ShmDoorbell& bell, std::chrono::milliseconds timeout) {
  pollfd p{bell.fd(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return false;
  return bell.drain().ok();
}

struct PairOptions {
  uint64_t records = 1000000;
  size_t spread = 300;
  bool consumerSleeps = true;  // false: the consumer busy-polls
  std::chrono::milliseconds sleepLimit{10000};
  std::chrono::seconds deadline{120};
};

// Produces opts.records records; rings `consumerBell` when the consumer said
// it sleeps and sleeps on `producerBell` when the ring is full. "" or why not.
inline std::string runProducer(ShmRingProducer& ring, ShmDoorbell& consumerBell,
                               ShmDoorbell& producerBell, const PairOptions& opts) {
  const auto deadline = std::chrono::steady_clock::now() + opts.deadline;
  for (uint64_t seq = 0; seq < opts.records;) {
    if (std::chrono::steady_clock::now() > deadline) return "producer: deadline passed";
    Result<std::span<std::byte>> room = ring.reserve(recordLength(seq, opts.spread));
    if (!room.ok()) {
      if (room.status().code() != Errc::would_block) return "producer: " + room.status().toString();
      if (ring.prepareToSleep()) {
        if (!sleepOn(producerBell, opts.sleepLimit)) return "producer: lost wake-up";
        ring.cancelSleep();
      }
      continue;
    }
    fillRecord(room.value(), seq++);
    if (Status s = ring.commit(); !s) return "producer: " + s.toString();
    if (ring.needsWake() && !consumerBell.ring()) return "producer: cannot ring";
  }
  return "";
}

// Consumes and checks opts.records records, in order.
inline std::string runConsumer(ShmRingConsumer& ring, ShmDoorbell& consumerBell,
                               ShmDoorbell& producerBell, const PairOptions& opts) {
  const auto deadline = std::chrono::steady_clock::now() + opts.deadline;
  for (uint64_t seq = 0; seq < opts.records;) {
    if (std::chrono::steady_clock::now() > deadline) return "consumer: deadline passed";
    Result<ShmRecord> record = ring.peek();
    if (!record.ok()) return "consumer: " + record.status().toString();
    if (!record.value()) {
      if (!opts.consumerSleeps) {
        std::this_thread::yield();
        continue;
      }
      if (ring.prepareToSleep()) {
        if (!sleepOn(consumerBell, opts.sleepLimit)) return "consumer: lost wake-up";
        ring.cancelSleep();
      }
      continue;
    }
    if (std::string bad = checkRecord(*record.value(), seq++, opts.spread); !bad.empty())
      return bad;
    if (Status s = ring.release(); !s) return "consumer: " + s.toString();
    if (ring.needsWake() && !producerBell.ring()) return "consumer: cannot ring";
  }
  return "";
}

}  // namespace rdmamsg::test
