// ShmRing against hostile memory: whatever the other side writes into the
// region, a ring reads nothing outside it and reports a protocol_error with
// its reason, after which it stays dead.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "common/shm_ring.h"
#include "tests/common/shm_test_support.h"

namespace rdmamsg {
namespace {

using shm_ring::kConsumerOffset;
using shm_ring::kDataRecord;
using shm_ring::kPaddingRecord;
using shm_ring::kProducerOffset;
using test::HeapRing;

constexpr size_t kCapacity = 1024;

// The reason names the violation.
#define EXPECT_MENTIONS(text, part)                        \
  do {                                                     \
    const std::string said = (text);                       \
    EXPECT_NE(said.find(part), std::string::npos) << said; \
  } while (0)

// The consumer's error; the ring must then be dead: every call repeats it.
std::string consumerError(ShmRingConsumer& consumer) {
  Result<ShmRecord> record = consumer.peek();
  if (record.ok()) return "no error";
  const Status error = record.status();
  EXPECT_EQ(error.code(), Errc::protocol_error);
  EXPECT_EQ(consumer.peek().status(), error);
  EXPECT_EQ(consumer.release(), error);
  EXPECT_EQ(consumer.status(), error);
  EXPECT_FALSE(consumer.prepareToSleep());
  EXPECT_FALSE(consumer.needsWake());
  return error.message();
}

// A ring whose indexes start at `start` (as if that much had gone through).
struct Hostile {
  explicit Hostile(uint64_t start = 0) : ring(kCapacity) {
    ring.word(kProducerOffset).store(start);
    ring.word(kConsumerOffset).store(start);
    consumer = std::make_unique<ShmRingConsumer>(ShmRingConsumer::attach(ring.region()).value());
  }
  void publish(uint64_t producer) { ring.word(kProducerOffset).store(producer); }
  HeapRing ring;
  std::unique_ptr<ShmRingConsumer> consumer;
};

TEST(ShmRingHostileTest, ProducerIndexBeyondCapacity) {
  Hostile h;
  h.publish(kCapacity + 8);
  EXPECT_MENTIONS(consumerError(*h.consumer), "more than the capacity ahead");
}

TEST(ShmRingHostileTest, ProducerIndexBehindConsumer) {
  Hostile h(4096);
  h.publish(4096 - 8);
  EXPECT_MENTIONS(consumerError(*h.consumer), "behind the consumer index");
}

TEST(ShmRingHostileTest, ProducerIndexMisaligned) {
  Hostile h;
  h.ring.setRecordHeader(0, kDataRecord, 0);
  h.publish(3);
  EXPECT_MENTIONS(consumerError(*h.consumer), "not 8-byte aligned");
}

TEST(ShmRingHostileTest, ProducerIndexGoingBack) {
  Hostile h;
  h.ring.setRecordHeader(0, kDataRecord, 0);
  h.ring.setRecordHeader(8, kDataRecord, 0);
  h.publish(16);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(h.consumer->peek().value().has_value());
    ASSERT_TRUE(h.consumer->release().ok());
  }
  h.publish(8);
  EXPECT_MENTIONS(consumerError(*h.consumer), "index 8 is behind the consumer index 16");
}

TEST(ShmRingHostileTest, RecordLengthBeyondReadableSpan) {
  Hostile h;
  h.ring.setRecordHeader(0, kDataRecord, 100);
  h.publish(64);
  EXPECT_MENTIONS(consumerError(*h.consumer), "beyond the readable span of 64 bytes");
}

TEST(ShmRingHostileTest, RecordLengthPastTheEndOfTheDataArea) {
  Hostile h(kCapacity - 16);
  h.ring.setRecordHeader(kCapacity - 16, kDataRecord, 0xffffffff);
  h.publish(2 * kCapacity - 16);
  EXPECT_MENTIONS(consumerError(*h.consumer), "length 4294967295 at offset 1008");
}

TEST(ShmRingHostileTest, PaddingThatDoesNotReachTheEnd) {
  Hostile h(kCapacity - 32);
  h.ring.setRecordHeader(kCapacity - 32, kPaddingRecord, 8);
  h.publish(kCapacity + 8);
  EXPECT_MENTIONS(consumerError(*h.consumer), "does not reach the end");
}

TEST(ShmRingHostileTest, PaddingBeyondTheReadableSpan) {
  Hostile h(kCapacity - 32);
  h.ring.setRecordHeader(kCapacity - 32, kPaddingRecord, 24);
  h.publish(kCapacity - 16);
  EXPECT_MENTIONS(consumerError(*h.consumer), "padding record at offset 992 is beyond");
}

TEST(ShmRingHostileTest, PaddingAtTheStart) {
  Hostile h;
  h.ring.setRecordHeader(0, kPaddingRecord, kCapacity - 8);
  h.publish(kCapacity);
  EXPECT_MENTIONS(consumerError(*h.consumer), "padding record at offset 0");
}

TEST(ShmRingHostileTest, UnknownRecordType) {
  Hostile h;
  h.ring.setRecordHeader(0, 7, 0);
  h.publish(8);
  EXPECT_MENTIONS(consumerError(*h.consumer), "unknown type 7");
}

TEST(ShmRingHostileTest, AHonestPaddingIsSkipped) {
  Hostile h(kCapacity - 32);
  h.ring.setRecordHeader(kCapacity - 32, kPaddingRecord, 24);
  h.ring.setRecordHeader(0, kDataRecord, 5);
  h.publish(kCapacity + 16);
  Result<ShmRecord> record = h.consumer->peek();
  ASSERT_TRUE(record.ok()) << record.status().toString();
  ASSERT_TRUE(record.value().has_value());
  EXPECT_EQ(record.value()->size(), 5u);
  EXPECT_EQ(record.value()->data(), h.ring.region().data() + shm_ring::kHeaderSize + 8);
}

TEST(ShmRingHostileTest, AttachRefusesALyingHeader) {
  HeapRing ring(kCapacity);
  ring.word(shm_ring::kCapacityOffset).store(2 * kCapacity);
  EXPECT_MENTIONS(ShmRingConsumer::attach(ring.region()).status().message(),
                  "does not fit a region");
  ring.word(shm_ring::kCapacityOffset).store(kCapacity + 8);
  EXPECT_EQ(ShmRingProducer::attach(ring.region()).status().code(), Errc::protocol_error);
  ring.word(shm_ring::kCapacityOffset).store(kCapacity);
  ring.word(kProducerOffset).store(kCapacity + 8);
  EXPECT_MENTIONS(ShmRingConsumer::attach(ring.region()).status().message(),
                  "does not lie within the capacity");
  ring.word(kProducerOffset).store(0);
  ring.word(shm_ring::kMagicOffset).store(0);
  EXPECT_MENTIONS(ShmRingConsumer::attach(ring.region()).status().message(),
                  "not a version 1..4 ring");
}

TEST(ShmRingHostileTest, ProducerRefusesALyingConsumerIndex) {
  const auto fill = [](HeapRing& ring) {
    ShmRingProducer p = ShmRingProducer::attach(ring.region()).value();
    while (p.reserve(56).ok())
      EXPECT_TRUE(p.commit().ok());
    return p;
  };
  for (const auto& [consumer, reason] : std::vector<std::pair<uint64_t, std::string>>{
           {2 * kCapacity, "ahead of the producer"}, {12, "not 8-byte aligned"}}) {
    HeapRing ring(kCapacity);
    ShmRingProducer p = fill(ring);
    ring.word(kConsumerOffset).store(consumer);
    EXPECT_MENTIONS(p.reserve(56).status().message(), reason);
    EXPECT_EQ(p.commit().code(), Errc::protocol_error) << "the ring is dead";
    EXPECT_FALSE(p.needsWake());
  }
  HeapRing ring(kCapacity);
  ShmRingProducer p = fill(ring);
  ring.word(kConsumerOffset).store(64);
  ASSERT_TRUE(p.reserve(56).ok());
  ASSERT_TRUE(p.commit().ok());
  ASSERT_FALSE(p.reserve(56).ok());
  ring.word(kConsumerOffset).store(0);
  EXPECT_MENTIONS(p.reserve(56).status().message(), "went back from 64 to 0");
}

// One thread writes random bytes anywhere into the region (the indexes and
// record headers most of the time) while this one produces and consumes:
// every view stays inside the region, and an error leaves the ring dead.
TEST(ShmRingHostileTest, ScribblerNeverMakesTheConsumerReadOutside) {
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<HeapRing>> rings;
  for (int i = 0; i < 64; ++i)
    rings.push_back(std::make_unique<HeapRing>(kCapacity));
  std::atomic<HeapRing*> target{nullptr};
  std::atomic<uint64_t> scribbles{0};
  std::thread scribbler([&] {
    std::mt19937_64 rng(11);
    while (!stop.load()) {
      HeapRing* r = target.load();
      if (r == nullptr) {
        std::this_thread::yield();
        continue;
      }
      for (int burst = 0; burst < 32; ++burst) {
        const uint64_t v = rng();
        if (v % 64 == 0) {
          r->region()[(v >> 8) % 1024] = static_cast<std::byte>(v >> 40);  // the header
        } else if (v % 64 == 1) {
          r->word(kProducerOffset).fetch_add(8 * ((v >> 20) % 4));
        } else {
          r->region()[shm_ring::kHeaderSize + (v >> 8) % kCapacity] =
              static_cast<std::byte>(v >> 40);
        }
      }
      scribbles.fetch_add(32);
      std::this_thread::yield();
    }
  });
  // Stops the scribbler however the test ends (an ASSERT returns early).
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joiner() {
      stop.store(true);
      if (thread.joinable()) thread.join();
    }
  } joiner{stop, scribbler};
  int died = 0, scribbledWhileRead = 0;
  uint64_t read = 0, readBeforeScribbling = 0;
  constexpr uint64_t kCleanRecords = 64;
  for (auto& ring : rings) {
    ShmRingProducer producer = ShmRingProducer::attach(ring->region()).value();
    ShmRingConsumer consumer = ShmRingConsumer::attach(ring->region()).value();
    // The ring carries records before the scribbler is let at it, so a
    // scribbler that breaks every ring at once still finds them in use
    // (on a loaded machine it can run many bursts before this thread reads).
    for (uint64_t i = 0; i < kCleanRecords; ++i) {
      ASSERT_TRUE(producer.reserve(i % 200).ok());
      ASSERT_TRUE(producer.commit().ok());
      Result<ShmRecord> record = consumer.peek();
      ASSERT_TRUE(record.ok() && record.value()) << "a clean ring gives back what was put in";
      ASSERT_TRUE(consumer.release().ok());
      ++readBeforeScribbling;
    }
    target.store(ring.get());
    // Each ring is read until the scribbler has written into it a few
    // hundred times as well, however the two threads are scheduled (on one
    // core too), bounded in steps and time.
    const uint64_t before = scribbles.load();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (int step = 0; consumer.status().ok() && step < 2000000 &&
                       (step < 20000 || scribbles.load() - before < 256) &&
                       std::chrono::steady_clock::now() < deadline;
         ++step) {
      // Past the first steps, give the scribbler the core until it has had its turn.
      if (step >= 20000) std::this_thread::yield();
      if (producer.status().ok() && producer.reserve(step % 200).ok()) (void)producer.commit();
      Result<ShmRecord> record = consumer.peek();
      if (!record.ok()) break;
      if (record.value()) {
        ASSERT_TRUE(ring->contains(*record.value()));
        const Status released = consumer.release();
        ASSERT_TRUE(released.ok()) << released.toString();
        ++read;
      }
    }
    target.store(nullptr);
    if (scribbles.load() - before >= 256 || !consumer.status().ok()) ++scribbledWhileRead;
    if (!consumer.status().ok()) {
      ++died;
      EXPECT_EQ(consumer.status().code(), Errc::protocol_error);
      EXPECT_EQ(consumer.peek().status(), consumer.status());
    }
  }
  stop.store(true);
  scribbler.join();
  std::printf("scribbled: %d of %zu rings died, %llu records read while scribbled on\n", died,
              rings.size(), static_cast<unsigned long long>(read));
  // Whether a scribble breaks a ring depends on where it lands and when, and
  // how many records are read meanwhile on how the two threads are
  // scheduled; what the test needs is that every ring was in use and was
  // scribbled on while it was read.
  EXPECT_EQ(readBeforeScribbling, kCleanRecords * rings.size());
  EXPECT_EQ(scribbledWhileRead, static_cast<int>(rings.size()))
      << "the scribbler should have written into every ring while it was read";
}

}  // namespace
}  // namespace rdmamsg
