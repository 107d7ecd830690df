// shm_ring_bench: the shared-memory ring (common/shm_ring.h) between two
// processes — a producer (this process) and a consumer (a forked child) on
// one sealed memfd with two eventfd doorbells — moving records of one size.
// Prints records/s, bytes/s, and the doorbell rings and sleeps per record
// (each ring is one write(2); each sleep a poll(2) and a read(2)).
//
//   shm_ring_bench --size BYTES --count N [--mode sleep|busy] [--capacity BYTES]
//
// sleep (default): a side with nothing to do sleeps on its doorbell at once,
// by the wake-up rule. busy: neither side ever sleeps (spins). The producer
// copies each payload into the ring from a buffer (the one copy a client
// makes); the consumer reads the record's sequence number in place.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/shm_doorbell.h"
#include "common/shm_region.h"
#include "common/shm_ring.h"

namespace rdmamsg {
namespace {

struct Args {
  size_t size = 64;
  uint64_t count = 1000000;
  bool busy = false;
  size_t capacity = 0;  // 0: at least 1 MiB and four records
};

// What the child reports through a shared page.
struct ChildStats {
  uint64_t ready;   // set (atomically) once the consumer is attached
  uint64_t rings;   // producer doorbell rings made by the consumer
  uint64_t sleeps;  // consumer sleeps
  uint64_t errors;  // records out of order or of the wrong size
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "shm_ring_bench: %s\n", what.c_str());
  std::exit(1);
}

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view s = argv[i];
    if (i + 1 >= argc) die("usage: shm_ring_bench --size B --count N [--mode sleep|busy]");
    const char* v = argv[++i];
    if (s == "--size")
      a.size = std::strtoull(v, nullptr, 10);
    else if (s == "--count")
      a.count = std::strtoull(v, nullptr, 10);
    else if (s == "--capacity")
      a.capacity = std::strtoull(v, nullptr, 10);
    else if (s == "--mode")
      a.busy = std::string_view(v) == "busy";
    else
      die("unknown option " + std::string(s));
  }
  if (a.size < 8) die("--size must be at least 8");
  if (a.capacity == 0) {
    a.capacity = size_t{1} << 20;
    while (shm_ring::maxPayload(a.capacity) < a.size || a.capacity < 4 * (a.size + 8)) {
      a.capacity *= 2;
    }
  }
  return a;
}

void sleepOn(ShmDoorbell& bell) {
  pollfd p{bell.fd(), POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) die("lost wake-up (no doorbell within 10 s)");
  if (!bell.drain().ok()) die("drain");
}

// Consumer: takes args.count records and checks their order.
void consume(ShmRingConsumer& ring, ShmDoorbell& mine, ShmDoorbell& theirs, const Args& args,
             ChildStats& stats) {
  for (uint64_t seq = 0; seq < args.count;) {
    Result<ShmRecord> record = ring.peek();
    if (!record.ok()) die("consumer: " + record.status().toString());
    if (!record.value()) {
      if (!args.busy && ring.prepareToSleep()) {
        sleepOn(mine);
        ++stats.sleeps;
        ring.cancelSleep();
      }
      continue;
    }
    uint64_t got = 0;
    std::memcpy(&got, record.value()->data(), sizeof got);
    if (got != seq++ || record.value()->size() != args.size) ++stats.errors;
    if (!ring.release().ok()) die("release");
    if (ring.needsWake() && !theirs.ring().ok()) die("ring");
  }
  stats.rings = theirs.rings();
}

struct ProducerStats {
  uint64_t sleeps = 0;
};

void produce(ShmRingProducer& ring, ShmDoorbell& mine, ShmDoorbell& theirs, const Args& args,
             ProducerStats& stats) {
  std::vector<std::byte> payload(args.size, std::byte{0x5a});
  for (uint64_t seq = 0; seq < args.count;) {
    Result<std::span<std::byte>> room = ring.reserve(args.size);
    if (!room.ok()) {
      if (room.status().code() != Errc::would_block) die("producer: " + room.status().toString());
      if (!args.busy && ring.prepareToSleep()) {
        sleepOn(mine);
        ++stats.sleeps;
        ring.cancelSleep();
      }
      continue;
    }
    std::memcpy(&payload[0], &seq, sizeof seq);
    std::memcpy(room.value().data(), payload.data(), payload.size());
    ++seq;
    if (!ring.commit().ok()) die("commit");
    if (ring.needsWake() && !theirs.ring().ok()) die("ring");
  }
}

int run(const Args& args) {
  ShmRegion region = ShmRegion::create("bench", shm_ring::regionSize(args.capacity)).value();
  if (!shm_ring::format(region.bytes(), args.capacity)) die("format");
  ShmRegion page = ShmRegion::create("bench-stats", 4096).value();
  auto* child = reinterpret_cast<ChildStats*>(page.bytes().data());  // zero-filled
  std::atomic_ref<uint64_t> ready(child->ready);
  ShmDoorbell consumerBell = ShmDoorbell::create().value();
  ShmDoorbell producerBell = ShmDoorbell::create().value();
  const pid_t pid = ::fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    ShmRingConsumer ring = ShmRingConsumer::attach(region.bytes()).value();
    ready.store(1);
    consume(ring, consumerBell, producerBell, args, *child);
    ::_exit(0);
  }
  ShmRingProducer ring = ShmRingProducer::attach(region.bytes()).value();
  while (ready.load() == 0)
    std::this_thread::yield();
  ProducerStats mine;
  const auto start = std::chrono::steady_clock::now();
  produce(ring, producerBell, consumerBell, args, mine);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || child->errors != 0) die("consumer failed");

  const double n = static_cast<double>(args.count);
  const double rings = static_cast<double>(consumerBell.rings() + child->rings);
  const double sleeps = static_cast<double>(mine.sleeps + child->sleeps);
  std::printf(
      "size=%zu count=%llu mode=%s capacity=%zu: %.3f M records/s, %.1f MB/s, "
      "rings/record %.4f (to consumer %.4f, to producer %.4f), sleeps/record %.4f, "
      "system calls/record %.4f\n",
      args.size, static_cast<unsigned long long>(args.count), args.busy ? "busy" : "sleep",
      args.capacity, n / secs / 1e6, n * static_cast<double>(args.size) / secs / 1e6, rings / n,
      static_cast<double>(consumerBell.rings()) / n, static_cast<double>(child->rings) / n,
      sleeps / n, (rings + 2 * sleeps) / n);
  return 0;
}

}  // namespace
}  // namespace rdmamsg

int main(int argc, char** argv) {
  return rdmamsg::run(rdmamsg::parseArgs(argc, argv));
}
