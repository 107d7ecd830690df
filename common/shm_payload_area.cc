// The payload area: the daemon's check of a payload record and the client's
// allocator of blocks (see shm_payload_area.h).
#include "common/shm_payload_area.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace rdmamsg::shm_payload {

bool validCapacity(uint64_t capacity) {
  return capacity == 0 ||
         (capacity >= kMinCapacity && capacity <= kMaxCapacity && (capacity & (capacity - 1)) == 0);
}

Result<Descriptor> describe(std::span<const std::byte> record, uint64_t capacity,
                            const std::vector<bool>& held) {
  auto bad = [](std::string why) {
    return Status(Errc::protocol_error, "payload record: " + std::move(why));
  };
  if (capacity == 0) return bad("the channel has no payload area");
  if (record.size() != sizeof(Descriptor))
    return bad(std::to_string(record.size()) + " bytes instead of " +
               std::to_string(sizeof(Descriptor)));
  Descriptor d;
  std::memcpy(&d, record.data(), sizeof d);  // read once: the client may change it
  if (d.slot >= kSlots)
    return bad("slot " + std::to_string(d.slot) + " is not below " + std::to_string(kSlots));
  if (held.size() > d.slot && held[d.slot])
    return bad("slot " + std::to_string(d.slot) + " is still in use");
  if (d.reserved != 0) return bad("reserved field is not 0");
  if (d.offset >= capacity || d.length == 0 || d.length > capacity - d.offset)
    return bad("block of " + std::to_string(d.length) + " bytes at " + std::to_string(d.offset) +
               " is not inside the area of " + std::to_string(capacity) + " bytes");
  return d;
}

PayloadAllocator::PayloadAllocator(std::span<std::byte> header, std::span<std::byte> data)
    : header_(header), data_(data), slots_(kSlots) {
  if (!data_.empty()) free_.emplace(0, data_.size());
  freeSlots_.reserve(kSlots);
  for (size_t i = kSlots; i-- > 0;)
    freeSlots_.push_back(static_cast<uint32_t>(i));
}

std::optional<PayloadAllocator::Block> PayloadAllocator::allocate(size_t n) {
  if (data_.empty() || n == 0 || n > data_.size()) return std::nullopt;
  reclaim();
  if (freeSlots_.empty()) return std::nullopt;
  const uint64_t size = (n + kBlockAlignment - 1) & ~uint64_t{kBlockAlignment - 1};
  auto it =
      std::find_if(free_.begin(), free_.end(), [&](const auto& f) { return f.second >= size; });
  if (it == free_.end()) return std::nullopt;
  const uint64_t offset = it->first;
  const uint64_t left = it->second - size;
  free_.erase(it);
  if (left != 0) free_.emplace(offset + size, left);
  const uint32_t slot = freeSlots_.back();
  freeSlots_.pop_back();
  slots_[slot] = {offset, size, Slot::allocated};
  return Block{slot, offset, data_.subspan(offset, n)};
}

void PayloadAllocator::publish(const Block& b) {
  if (b.slot >= slots_.size() || slots_[b.slot].state != Slot::allocated) return;
  slots_[b.slot].state = Slot::published;
  used_.push_back(b.slot);
  releaseWord(header_, b.slot).store(1, std::memory_order_relaxed);  // published with the record
}

void PayloadAllocator::free(const Block& b) {
  if (b.slot >= slots_.size() || slots_[b.slot].state == Slot::free ||
      slots_[b.slot].offset != b.offset)
    return;
  if (slots_[b.slot].state == Slot::published) {
    std::erase(used_, b.slot);
    releaseWord(header_, b.slot).store(0, std::memory_order_relaxed);
  }
  giveBack(b.slot);
}

void PayloadAllocator::reclaim() {
  std::erase_if(used_, [&](uint32_t slot) {
    if (releaseWord(header_, slot).load(std::memory_order_acquire) != 0) return false;
    giveBack(slot);
    return true;
  });
}

// The slot and its block are free again; the block joins its free neighbours.
void PayloadAllocator::giveBack(uint32_t slot) {
  uint64_t offset = slots_[slot].offset;
  uint64_t size = slots_[slot].size;
  slots_[slot].state = Slot::free;
  freeSlots_.push_back(slot);
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_.emplace(offset, size);
}

}  // namespace rdmamsg::shm_payload
