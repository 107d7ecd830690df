// A fixed table of objects addressed by 24-bit index plus 8-bit generation,
// the way a NIC's key tables work: MR keys, CQ and SRQ handles. Lookups are
// lock-free (they run on every posted scatter/gather element); a stale key
// (object destroyed, slot reused) misses because its generation differs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace softrdma {

template <typename T>
class Registry {
 public:
  static constexpr uint32_t kSlots = 1 << 16;

  Registry() : slots_(new Slot[kSlots]) {
    for (uint32_t i = kSlots - 1; i >= 1; i--)
      free_.push_back(i);  // slot 0: never a key
  }

  // Returns the new key ((index << 8) | generation, never 0), or 0 when full.
  uint32_t insert(T* obj) {
    std::lock_guard lk(mu_);
    if (free_.empty()) return 0;
    uint32_t idx = free_.back();
    free_.pop_back();
    Slot& s = slots_[idx];
    uint32_t gen = (s.gen + 1) & 0xff;
    if (gen == 0) gen = 1;
    s.gen = gen;
    uint32_t key = idx << 8 | gen;
    s.obj.store(obj, std::memory_order_relaxed);
    s.key.store(key, std::memory_order_release);
    return key;
  }

  T* find(uint32_t idx, uint32_t key) const {
    if (idx == 0 || idx >= kSlots) return nullptr;
    const Slot& s = slots_[idx];
    if (s.key.load(std::memory_order_acquire) != key) return nullptr;
    return s.obj.load(std::memory_order_relaxed);
  }

  // fork (fork.cc): held across it, so the child inherits a consistent table.
  void lockForFork() { mu_.lock(); }
  void unlockAfterFork() { mu_.unlock(); }

  void erase(uint32_t idx, T* obj) {
    std::lock_guard lk(mu_);
    if (idx == 0 || idx >= kSlots) return;
    Slot& s = slots_[idx];
    if (s.obj.load() != obj) return;
    s.key.store(0, std::memory_order_release);
    s.obj.store(nullptr);
    free_.push_back(idx);
  }

 private:
  struct Slot {
    std::atomic<uint32_t> key{0};
    std::atomic<T*> obj{nullptr};
    uint32_t gen = 0;
  };
  std::unique_ptr<Slot[]> slots_;
  std::vector<uint32_t> free_;
  std::mutex mu_;
};

}  // namespace softrdma
