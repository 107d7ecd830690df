// libFuzzer target: the shared-memory ring's consumer (ShmRingConsumer,
// common/shm_ring.h) on a region image a hostile producer wrote.
//
// The input is the whole region, header page and data area, as the other
// side of a local client's ring can leave it. It is copied into a buffer of
// exactly its size (so AddressSanitizer sees any access outside it), the
// consumer attaches and reads until the ring is empty or an error stops it.
// Every view must lie inside the data area; an error must be a
// protocol_error after which every call repeats it (the ring is dead); a
// consumer that attached must have checked the header as shm_ring.h says.
// Frame records (version 2) are held, released later in reverse order: the
// consumer index must never pass a record held, and must reach the read
// position once all are released. Payload records (version 3) are checked
// as the daemon checks them (shm_payload::describe) against an area of
// kArea bytes: a block accepted lies inside it and its slot is then held
// (named again, refused) until the end.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "common/shm_payload_area.h"
#include "common/shm_ring.h"
#include "fuzz/check.h"

namespace {

using namespace rdmamsg;

volatile std::byte g_sink;

struct AlignedDelete {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
};

void checkDead(ShmRingConsumer& consumer, const Status& error) {
  FUZZ_CHECK(error.code() == Errc::protocol_error && !error.message().empty());
  FUZZ_CHECK(consumer.status() == error);
  FUZZ_CHECK(consumer.peek().status() == error);
  FUZZ_CHECK(consumer.release() == error);
  FUZZ_CHECK(!consumer.prepareToSleep() && !consumer.needsWake());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::unique_ptr<std::byte[], AlignedDelete> buffer(
      static_cast<std::byte*>(::operator new[](size, std::align_val_t{64})));
  std::memcpy(buffer.get(), data, size);
  const std::span<std::byte> region(buffer.get(), size);

  Result<ShmRingConsumer> attached = ShmRingConsumer::attach(region);
  if (!attached.ok()) {
    FUZZ_CHECK(attached.status().code() == Errc::protocol_error ||
               (attached.status().code() == Errc::bad_request && size < shm_ring::kHeaderSize));
    return 0;
  }
  FUZZ_CHECK(size >= shm_ring::regionSize(shm_ring::kMinCapacity));
  ShmRingConsumer& consumer = attached.value();
  const std::byte* dataBegin = buffer.get() + shm_ring::kHeaderSize;
  const std::byte* dataEnd = buffer.get() + size;
  const uint64_t start = consumer.position();
  std::vector<uint64_t> held;  // positions of the frame records held
  std::vector<bool> slotsHeld(shm_payload::kSlots, false);
  auto consumerIndex = [&] {
    uint64_t v;
    std::memcpy(&v, buffer.get() + shm_ring::kConsumerOffset, sizeof v);
    return v;
  };
  // Each round consumes at least 8 bytes of at most a capacity: bounded.
  for (size_t round = 0; round <= size / 8 + 1; ++round) {
    Result<ShmRecord> record = consumer.peek();
    if (!record.ok()) {
      checkDead(consumer, record.status());
      return 0;
    }
    if (!record.value()) break;
    const std::span<const std::byte> view = *record.value();
    FUZZ_CHECK(view.data() >= dataBegin && view.data() + view.size() <= dataEnd);
    FUZZ_CHECK(view.size() <= size - shm_ring::kHeaderSize - shm_ring::kRecordHeaderSize);
    std::byte all{};
    for (std::byte b : view)
      all ^= b;  // every byte of the view is readable
    g_sink = all;
    if (consumer.peekedPayload()) {
      constexpr uint64_t kArea = shm_payload::kMinCapacity;
      Result<shm_payload::Descriptor> d = shm_payload::describe(view, kArea, slotsHeld);
      if (d.ok()) {
        FUZZ_CHECK(d->slot < shm_payload::kSlots && !slotsHeld[d->slot]);
        FUZZ_CHECK(d->length != 0 && d->offset < kArea && d->length <= kArea - d->offset);
        slotsHeld[d->slot] = true;
        FUZZ_CHECK(!shm_payload::describe(view, kArea, slotsHeld).ok());
      } else {
        FUZZ_CHECK(d.status().code() == Errc::protocol_error);
      }
    }
    if (consumer.peekedFrame() && consumer.held() < ShmRingConsumer::kMaxHeld) {
      Result<uint64_t> at = consumer.hold();
      FUZZ_CHECK(at.ok());
      held.push_back(*at);
      FUZZ_CHECK(consumerIndex() <= held.front());
    } else {
      FUZZ_CHECK(consumer.release().ok());
    }
  }
  FUZZ_CHECK(consumer.status().ok());
  FUZZ_CHECK(consumer.position() - start <= size - shm_ring::kHeaderSize);
  FUZZ_CHECK(!consumer.peek().value().has_value());
  for (auto it = held.rbegin(); it != held.rend(); ++it) {
    FUZZ_CHECK(consumerIndex() <= held.front());
    FUZZ_CHECK(consumer.releaseHeld(*it));
    FUZZ_CHECK(!consumer.releaseHeld(*it));
  }
  FUZZ_CHECK(consumer.held() == 0 && consumer.heldSpan() == 0);
  return 0;
}
