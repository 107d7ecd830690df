// Ring<T>: a FIFO over a growable circular array whose slots are reused, so
// objects that own buffers (Message) keep their capacity between uses.
// Private to librdmamsg.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace rdmamsg::detail {

template <typename T>
class Ring {
 public:
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }

  // The slot after the last element (holding whatever it held before);
  // it becomes the last element.
  T& pushSlot() {
    if (count_ == slots_.size()) grow();
    T& slot = at(count_);
    ++count_;
    return slot;
  }

  T& front() { return at(0); }
  void popFront() {
    head_ = (head_ + 1) % slots_.size();
    --count_;
  }

  T& operator[](size_t i) { return at(i); }

  // A slot inserted at position i (0 = the front); later elements move back.
  T& insertAt(size_t i) {
    pushSlot();
    for (size_t j = count_ - 1; j > i; --j)
      std::swap(at(j), at(j - 1));
    return at(i);
  }

  // Removes the element at position i; later elements move forward.
  void eraseAt(size_t i) {
    for (size_t j = i; j > 0; --j)
      std::swap(at(j), at(j - 1));
    popFront();
  }

 private:
  T& at(size_t i) { return slots_[(head_ + i) % slots_.size()]; }

  void grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (size_t i = 0; i < count_; ++i)
      bigger[i] = std::move(at(i));
    slots_.swap(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t count_ = 0;
};

}  // namespace rdmamsg::detail
