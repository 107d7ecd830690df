// Replaces the global operator new/delete with versions that count
// allocations (alloc_counter.h). They allocate with malloc/aligned_alloc and
// free with free, as the library's own do.
#include "daemon/alloc_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace rdmamsg {
namespace {
std::atomic<uint64_t> gAllocations{0};

void* allocate(std::size_t n) {
  gAllocations.fetch_add(1, std::memory_order_relaxed);
  void* p = std::malloc(n != 0 ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* allocateAligned(std::size_t n, std::align_val_t al) {
  gAllocations.fetch_add(1, std::memory_order_relaxed);
  auto a = static_cast<std::size_t>(al);
  std::size_t size = (n + a - 1) / a * a;
  void* p = std::aligned_alloc(a, size != 0 ? size : a);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

uint64_t heapAllocations() {
  return gAllocations.load(std::memory_order_relaxed);
}
}  // namespace rdmamsg

void* operator new(std::size_t n) {
  return rdmamsg::allocate(n);
}
void* operator new[](std::size_t n) {
  return rdmamsg::allocate(n);
}
void* operator new(std::size_t n, std::align_val_t al) {
  return rdmamsg::allocateAligned(n, al);
}
void* operator new[](std::size_t n, std::align_val_t al) {
  return rdmamsg::allocateAligned(n, al);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return rdmamsg::allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return rdmamsg::allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
