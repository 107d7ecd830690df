// Ring<T>: a FIFO in one growable circular array, shared by the daemon and
// librdmamsg. Push at the back, pop at the front, index from the front; no
// allocation once it has reached its working size (unlike std::deque,
// which allocates and frees blocks as it goes). T may be move-only.
//
// Two ways to remove the front element:
//  - popFront() destroys it: its slot is reset to T{}, so whatever it owns
//    (a payload handle, a buffer) is released at once;
//  - recycleFront() leaves its value in the slot for a later pushSlot() to
//    reuse, so objects that own buffers (a received Message) keep their
//    capacity between uses.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace rdmamsg {

template <typename T>
class Ring {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }
  T& operator[](size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }

  void pushBack(T v) { pushSlot() = std::move(v); }

  // The slot after the last element, holding whatever it held before
  // (T{} if it was never used, or what recycleFront() left there); it
  // becomes the last element.
  T& pushSlot() {
    if (size_ == slots_.size()) grow();
    ++size_;
    return back();
  }

  // Removes the front element; its slot is reset to T{}.
  void popFront() {
    slots_[head_] = T{};
    recycleFront();
  }

  // Removes the front element, leaving its value in the slot for pushSlot().
  void recycleFront() {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }

  void clear() {
    while (!empty())
      popFront();
  }

  // A slot inserted at position i (0 = the front, size() = the back);
  // later elements move back by one. It holds a recycled value, as
  // pushSlot()'s does.
  T& insertAt(size_t i) {
    pushSlot();
    for (size_t j = size_ - 1; j > i; --j)
      std::swap((*this)[j], (*this)[j - 1]);
    return (*this)[i];
  }

  // Removes the element at position i (reset, as popFront()); the elements
  // before it move back by one.
  void eraseAt(size_t i) {
    for (size_t j = i; j > 0; --j)
      std::swap((*this)[j], (*this)[j - 1]);
    popFront();
  }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (size_t i = 0; i < size_; ++i)
      bigger[i] = std::move((*this)[i]);
    slots_.swap(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;  // its size is a power of two (or 0)
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace rdmamsg
