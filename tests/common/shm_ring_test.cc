// ShmRing: records of any size go round the ring in order and intact, the
// producer is told when the ring is full, and the wake-up rule rings a
// doorbell only for a consumer that said it sleeps.
#include "common/shm_ring.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

#include "tests/common/shm_test_support.h"

namespace rdmamsg {
namespace {

using test::HeapRing;

struct Pair {
  explicit Pair(size_t capacity)
      : ring(capacity),
        producer(ShmRingProducer::attach(ring.region()).value()),
        consumer(ShmRingConsumer::attach(ring.region()).value()) {}
  HeapRing ring;
  ShmRingProducer producer;
  ShmRingConsumer consumer;
};

TEST(ShmRingTest, RandomSizesRoundTripAcrossWrapAround) {
  Pair p(4096);
  std::mt19937 rng(7);
  std::deque<std::vector<std::byte>> sent;
  uint64_t received = 0;
  for (int step = 0; step < 50000; ++step) {
    if (rng() % 2 == 0) {
      std::vector<std::byte> data(rng() % (p.producer.maxPayload() + 1));
      for (auto& b : data)
        b = static_cast<std::byte>(rng());
      Result<std::span<std::byte>> room = p.producer.reserve(data.size());
      if (!room.ok()) {
        ASSERT_EQ(room.status().code(), Errc::would_block);
        continue;
      }
      std::copy(data.begin(), data.end(), room.value().begin());
      ASSERT_TRUE(p.producer.commit().ok());
      sent.push_back(std::move(data));
    } else {
      Result<ShmRecord> record = p.consumer.peek();
      ASSERT_TRUE(record.ok()) << record.status().toString();
      ASSERT_EQ(record.value().has_value(), !sent.empty());
      if (!record.value()) continue;
      const auto view = *record.value();
      ASSERT_TRUE(p.ring.contains(view));
      ASSERT_EQ(std::vector<std::byte>(view.begin(), view.end()), sent.front());
      ASSERT_TRUE(p.consumer.release().ok());
      sent.pop_front();
      ++received;
    }
  }
  EXPECT_GT(p.consumer.position(), 20 * 4096u) << "the ring wrapped many times";
  EXPECT_GT(received, 10000u);
}

TEST(ShmRingTest, FullRingWouldBlockUntilReleased) {
  Pair p(256);
  EXPECT_EQ(p.producer.maxPayload(), 120u);
  EXPECT_EQ(p.producer.reserve(121).status().code(), Errc::too_large);
  int committed = 0;
  while (p.producer.reserve(56).ok()) {
    ASSERT_TRUE(p.producer.commit().ok());
    ++committed;
  }
  EXPECT_EQ(committed, 4) << "four records of 64 bytes fill 256";
  EXPECT_EQ(p.producer.reserve(56).status().code(), Errc::would_block);
  EXPECT_TRUE(p.producer.status().ok()) << "a full ring is not an error";
  ASSERT_TRUE(p.consumer.peek().value().has_value());
  ASSERT_TRUE(p.consumer.release().ok());
  EXPECT_TRUE(p.producer.reserve(56).ok());
}

TEST(ShmRingTest, PeekShowsTheSameRecordUntilReleased) {
  Pair p(256);
  auto room = p.producer.reserve(0);
  ASSERT_TRUE(room.ok());
  ASSERT_TRUE(p.producer.commit().ok());
  EXPECT_EQ(p.producer.commit().code(), Errc::bad_request) << "nothing reserved";
  const ShmRecord first = p.consumer.peek().value();
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->empty()) << "an empty record is a record";
  EXPECT_EQ(p.consumer.peek().value()->data(), first->data());
  ASSERT_TRUE(p.consumer.release().ok());
  EXPECT_EQ(p.consumer.release().code(), Errc::bad_request) << "nothing peeked";
  EXPECT_FALSE(p.consumer.peek().value().has_value());
  EXPECT_TRUE(p.consumer.status().ok());
}

TEST(ShmRingTest, ProducerWakesOnlyASleepingConsumerOncePerSleep) {
  Pair p(256);
  ASSERT_TRUE(p.producer.reserve(8).ok());
  ASSERT_TRUE(p.producer.commit().ok());
  EXPECT_FALSE(p.producer.needsWake()) << "the consumer did not say it sleeps";
  EXPECT_FALSE(p.consumer.prepareToSleep()) << "a record is waiting";
  EXPECT_FALSE(p.producer.needsWake());
  ASSERT_TRUE(p.consumer.peek().value().has_value());
  ASSERT_TRUE(p.consumer.release().ok());

  ASSERT_TRUE(p.consumer.prepareToSleep()) << "the ring is empty";
  ASSERT_TRUE(p.producer.reserve(8).ok());
  ASSERT_TRUE(p.producer.commit().ok());
  EXPECT_TRUE(p.producer.needsWake());
  EXPECT_FALSE(p.producer.needsWake()) << "one ring per sleep";
}

TEST(ShmRingTest, ConsumerWakesOnlyAProducerWaitingForRoom) {
  Pair p(256);
  while (p.producer.reserve(56).ok())
    ASSERT_TRUE(p.producer.commit().ok());
  ASSERT_TRUE(p.consumer.peek().value().has_value());
  ASSERT_TRUE(p.consumer.release().ok());
  EXPECT_FALSE(p.consumer.needsWake()) << "the producer did not say it sleeps";
  EXPECT_FALSE(p.producer.prepareToSleep()) << "room was released since reserve()";
  ASSERT_TRUE(p.producer.reserve(56).ok());
  ASSERT_TRUE(p.producer.commit().ok());
  EXPECT_EQ(p.producer.reserve(56).status().code(), Errc::would_block);
  ASSERT_TRUE(p.producer.prepareToSleep());
  ASSERT_TRUE(p.consumer.peek().value().has_value());
  ASSERT_TRUE(p.consumer.release().ok());
  EXPECT_TRUE(p.consumer.needsWake());
  EXPECT_FALSE(p.consumer.needsWake());
}

TEST(ShmRingTest, FormatRefusesBadCapacities) {
  std::vector<test::CacheLine> lines(shm_ring::regionSize(4096) / 64);
  std::span<std::byte> region(lines.front().bytes, lines.size() * 64);
  EXPECT_EQ(shm_ring::format(region, 3000).code(), Errc::bad_request);
  EXPECT_EQ(shm_ring::format(region, 2048).code(), Errc::bad_request) << "size disagrees";
  EXPECT_EQ(shm_ring::format(region.subspan(8), 4096).code(), Errc::bad_request);
  EXPECT_TRUE(shm_ring::format(region, 4096).ok());
}

// Frame records (version 2): one held stays where it lies while the
// records after it are read; the producer gets its room back only when it
// and everything before it are released.
TEST(ShmRingTest, AHeldFrameRecordKeepsItsRoomUntilReleasedInAnyOrder) {
  Pair p(512);
  auto put = [&](uint32_t type, std::byte fill) {
    Result<std::span<std::byte>> room = p.producer.reserve(56, type);
    if (!room) return false;
    std::fill(room->begin(), room->end(), fill);
    return p.producer.commit().ok();
  };
  ASSERT_TRUE(put(shm_ring::kFrameRecord, std::byte{1}));
  ASSERT_TRUE(put(shm_ring::kDataRecord, std::byte{2}));
  ASSERT_TRUE(put(shm_ring::kFrameRecord, std::byte{3}));
  Result<ShmRecord> first = p.consumer.peek();
  ASSERT_TRUE(first.ok() && first->has_value());
  ASSERT_TRUE(p.consumer.peekedFrame());
  const std::span<const std::byte> firstView = **first;
  Result<uint64_t> a = p.consumer.hold();
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(p.consumer.peek().value().has_value());
  EXPECT_FALSE(p.consumer.peekedFrame());
  ASSERT_TRUE(p.consumer.release().ok());
  ASSERT_TRUE(p.consumer.peek().value().has_value());
  Result<uint64_t> b = p.consumer.hold();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(p.consumer.held(), 2u);
  EXPECT_EQ(p.ring.word(shm_ring::kConsumerOffset).load(), 0u)
      << "nothing is given back while the oldest record is held";
  // Fill the ring: the held records' room is not reused.
  int more = 0;
  while (put(shm_ring::kDataRecord, std::byte{9}))
    ++more;
  EXPECT_EQ(more, 5) << "512 bytes hold eight records of 64";
  EXPECT_EQ(firstView[0], std::byte{1}) << "a held record is not overwritten";
  EXPECT_TRUE(p.consumer.releaseHeld(*b));
  EXPECT_EQ(p.ring.word(shm_ring::kConsumerOffset).load(), 0u) << "the oldest is still held";
  EXPECT_FALSE(p.consumer.releaseHeld(*b)) << "released twice";
  EXPECT_TRUE(p.consumer.releaseHeld(*a));
  EXPECT_EQ(p.ring.word(shm_ring::kConsumerOffset).load(), 3 * 64u)
      << "all three records come back together";
  EXPECT_TRUE(put(shm_ring::kDataRecord, std::byte{4}));
}

TEST(ShmRingTest, AVersionOneRingHasNoFrameRecords) {
  Pair p(512);
  p.ring.word(shm_ring::kMagicOffset).store((uint64_t{1} << 32) | shm_ring::kMagic);
  ShmRingProducer producer = ShmRingProducer::attach(p.ring.region()).value();
  ShmRingConsumer consumer = ShmRingConsumer::attach(p.ring.region()).value();
  EXPECT_EQ(producer.reserve(8, shm_ring::kFrameRecord).status().code(), Errc::bad_request);
  p.ring.setRecordHeader(0, shm_ring::kFrameRecord, 8);
  p.ring.word(shm_ring::kProducerOffset).store(16);
  EXPECT_EQ(consumer.peek().status().code(), Errc::protocol_error)
      << "a frame record in a version 1 ring is corrupt";
}

}  // namespace
}  // namespace rdmamsg
