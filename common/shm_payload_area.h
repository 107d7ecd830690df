// The payload area of a shared-memory channel (ring version 3): memory the
// client writes large SEND frames into, each a block the daemon posts to the
// NIC from where it lies and gives back when it is done with it — in any
// order. A block held for a while (a message waiting for its flow window,
// for a listener that may never read) pins only itself: the ring to the
// daemon carries only a payload record naming the block, and is released at
// once (shm_ring.h), so the client's other flows go on.
//
// Layout (after the two rings of the region, shm_channel.h):
//
//   offset  size          field
//   0       4 * kSlots    release words, one per slot: the client stores 1
//                         before it publishes a payload record naming the
//                         slot; the daemon stores 0 (a release store) when
//                         it is done with the slot's block
//   4096    capacity      data: the blocks
//
// A payload record (ring record type 4) holds a Descriptor: the slot, and
// the offset and length of the block in the data area, which holds exactly
// one whole SEND frame. The daemon reads the descriptor once into private
// memory and checks it (describe()): the slot in range and not held by it
// already, the block inside the data area. Then the block is a frame record
// held in place: its bytes are the client's, which it can change at any time
// (only its own message suffers), and the daemon reads the frame's head
// once into private memory, as for a frame record.
//
// Which blocks are free is the client's private knowledge
// (PayloadAllocator); the daemon writes nothing but release words. A client
// that finds no room for a block sends the frame through the ring instead.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "common/status.h"

namespace rdmamsg::shm_payload {

inline constexpr size_t kSlots = 256;  // blocks in use at once, at most
inline constexpr size_t kHeaderSize = 4096;
inline constexpr size_t kBlockAlignment = 64;
inline constexpr size_t kMinCapacity = size_t{64} << 10;
inline constexpr size_t kMaxCapacity = size_t{256} << 20;
static_assert(kSlots * sizeof(uint32_t) <= kHeaderSize);

// 0 (no payload area) or a power of two from kMinCapacity to kMaxCapacity.
bool validCapacity(uint64_t capacity);
// The bytes a payload area of `capacity` takes in the region (0 for none).
inline constexpr size_t regionSize(size_t capacity) {
  return capacity == 0 ? 0 : kHeaderSize + capacity;
}

// A payload record's body (native byte order: both sides are on one host).
struct Descriptor {
  uint32_t slot = 0;
  uint32_t reserved = 0;  // 0
  uint64_t offset = 0;    // in the data area
  uint64_t length = 0;    // the frame's size
};
static_assert(sizeof(Descriptor) == 24);

// The daemon's side: reads a payload record's body once and checks it
// against the area's `capacity` and the slots it holds; a protocol_error
// names what is wrong.
[[nodiscard]] Result<Descriptor> describe(std::span<const std::byte> record, uint64_t capacity,
                                          const std::vector<bool>& held);

// The release word of `slot` in the area's header.
inline std::atomic<uint32_t>& releaseWord(std::span<std::byte> header, size_t slot) {
  static_assert(std::atomic<uint32_t>::is_always_lock_free);
  return *reinterpret_cast<std::atomic<uint32_t>*>(header.data() + slot * sizeof(uint32_t));
}

// The placing side (the client in its payload area, the daemon in the
// client's delivery area): which blocks of the data area are free, in
// private memory. allocate() first takes back every published block whose
// release word the other side cleared, then places the new one first-fit.
// Only a published block is the other side's to give back: a word cleared
// before its block was published (a hostile client's) changes nothing.
class PayloadAllocator {
 public:
  struct Block {
    uint32_t slot;
    uint64_t offset;
    std::span<std::byte> bytes;
  };

  PayloadAllocator() = default;
  PayloadAllocator(std::span<std::byte> header, std::span<std::byte> data);

  // A block of `n` bytes (nullopt when the area has no room or no slot now).
  std::optional<Block> allocate(size_t n);
  // The block's release word set: the other side may be told of it now
  // (its payload record comes next) and gives it back by clearing it.
  void publish(const Block& b);
  // Gives a block back that the other side never had (its record was not
  // written); a block given back already is left alone.
  void free(const Block& b);
  // Published blocks the other side has not given back.
  size_t inUse() const { return used_.size(); }
  size_t capacity() const { return data_.size(); }

 private:
  enum class Slot : uint8_t { free, allocated, published };
  void reclaim();
  void giveBack(uint32_t slot);

  std::span<std::byte> header_, data_;
  std::map<uint64_t, uint64_t> free_;  // offset → size, coalesced
  struct Use {
    uint64_t offset = 0, size = 0;
    Slot state = Slot::free;
  };
  std::vector<Use> slots_;
  std::vector<uint32_t> freeSlots_;
  std::vector<uint32_t> used_;  // published slots, to look at their words
};

}  // namespace rdmamsg::shm_payload
