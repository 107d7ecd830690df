// ShmRing between a producer and a consumer running at once, in two threads
// and in two processes (fork, sharing the memfd): a million records arrive
// intact and in order, no wake-up is lost, and the doorbell is rung only
// for a consumer that sleeps.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

#include "common/shm_region.h"
#include "tests/common/shm_test_support.h"
#include "tests/support/wait.h"

namespace rdmamsg {
namespace {

using test::PairOptions;

struct Bells {
  ShmDoorbell consumer = ShmDoorbell::create().value();
  ShmDoorbell producer = ShmDoorbell::create().value();
};

// Runs the pair in two threads over `region`; returns the two outcomes.
std::pair<std::string, std::string> runThreads(std::span<std::byte> region, Bells& bells,
                                               const PairOptions& opts) {
  ShmRingProducer producer = ShmRingProducer::attach(region).value();
  ShmRingConsumer consumer = ShmRingConsumer::attach(region).value();
  std::string consumed;
  std::thread reader(
      [&] { consumed = test::runConsumer(consumer, bells.consumer, bells.producer, opts); });
  std::string produced = test::runProducer(producer, bells.consumer, bells.producer, opts);
  reader.join();
  return {produced, consumed};
}

TEST(ShmRingPairTest, TwoThreadsMoveAMillionRecords) {
  test::HeapRing ring(1 << 16);
  Bells bells;
  const PairOptions opts;
  const auto [produced, consumed] = runThreads(ring.region(), bells, opts);
  EXPECT_EQ(produced, "");
  EXPECT_EQ(consumed, "");
  std::printf("1000000 records: %llu consumer rings, %llu producer rings\n",
              static_cast<unsigned long long>(bells.consumer.rings()),
              static_cast<unsigned long long>(bells.producer.rings()));
  EXPECT_LT(bells.consumer.rings() + bells.producer.rings(), opts.records);
}

TEST(ShmRingPairTest, ABusyConsumerIsNeverRung) {
  test::HeapRing ring(1 << 14);
  Bells bells;
  PairOptions opts;
  opts.records = 200000;
  opts.consumerSleeps = false;
  const auto [produced, consumed] = runThreads(ring.region(), bells, opts);
  EXPECT_EQ(produced, "");
  EXPECT_EQ(consumed, "");
  EXPECT_EQ(bells.consumer.rings(), 0u) << "the consumer never said it sleeps";
}

// The producer waits until the consumer has gone to sleep before each of
// many records: every one of them must wake it (poll has a deadline).
TEST(ShmRingPairTest, ASleepingConsumerIsAlwaysWoken) {
  test::HeapRing ring(1 << 12);
  Bells bells;
  PairOptions opts;
  opts.records = 300;
  opts.sleepLimit = std::chrono::milliseconds(5000);
  ShmRingProducer producer = ShmRingProducer::attach(ring.region()).value();
  ShmRingConsumer consumer = ShmRingConsumer::attach(ring.region()).value();
  std::string consumed;
  std::thread reader(
      [&] { consumed = test::runConsumer(consumer, bells.consumer, bells.producer, opts); });
  for (uint64_t seq = 0; seq < opts.records; ++seq) {
    ASSERT_TRUE(test::waitFor([&] {
      return ring.word(shm_ring::kConsumerSleepingOffset).load() != 0;
    })) << "the consumer did not go to sleep before record "
        << seq;
    auto room = producer.reserve(test::recordLength(seq, opts.spread));
    ASSERT_TRUE(room.ok());
    test::fillRecord(room.value(), seq);
    ASSERT_TRUE(producer.commit().ok());
    ASSERT_TRUE(producer.needsWake()) << "record " << seq;
    ASSERT_TRUE(bells.consumer.ring().ok());
  }
  reader.join();
  EXPECT_EQ(consumed, "");
  EXPECT_EQ(bells.consumer.rings(), opts.records);
}

// The consumer runs in a child process that maps the same memfd; it reports
// its outcome in its exit status and its rings in a second region.
TEST(ShmRingPairTest, TwoProcessesMoveAMillionRecords) {
  const size_t capacity = 1 << 16;
  ShmRegion region = ShmRegion::create("ring", shm_ring::regionSize(capacity)).value();
  ASSERT_TRUE(shm_ring::format(region.bytes(), capacity).ok());
  ShmRegion stats = ShmRegion::create("stats", 4096).value();
  Bells bells;
  const PairOptions opts;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ShmRingConsumer consumer = ShmRingConsumer::attach(region.bytes()).value();
    const std::string outcome = test::runConsumer(consumer, bells.consumer, bells.producer, opts);
    const uint64_t rings = bells.producer.rings();
    std::memcpy(stats.bytes().data(), &rings, sizeof rings);
    if (!outcome.empty()) std::fprintf(stderr, "child: %s\n", outcome.c_str());
    ::_exit(outcome.empty() ? 0 : 1);
  }
  ShmRingProducer producer = ShmRingProducer::attach(region.bytes()).value();
  const std::string produced = test::runProducer(producer, bells.consumer, bells.producer, opts);
  int status = -1;
  const bool exited = test::waitFor([&] { return ::waitpid(child, &status, WNOHANG) == child; },
                                    std::chrono::seconds(produced.empty() ? 120 : 5));
  if (!exited) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  EXPECT_EQ(produced, "");
  EXPECT_TRUE(exited && WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  uint64_t producerRings = 0;
  std::memcpy(&producerRings, stats.bytes().data(), sizeof producerRings);
  std::printf("1000000 records across processes: %llu consumer rings, %llu producer rings\n",
              static_cast<unsigned long long>(bells.consumer.rings()),
              static_cast<unsigned long long>(producerRings));
}

}  // namespace
}  // namespace rdmamsg
