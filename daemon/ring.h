// A FIFO in one growable circular array: push at the back, pop at the
// front, no allocation once it has reached its working size (unlike
// std::deque, which allocates and frees blocks as it goes).
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
  T& back() { return slots_[(head_ + size_ - 1) & (slots_.size() - 1)]; }
  T& operator[](size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }

  void push_back(T v) {
    if (size_ == slots_.size()) grow();
    slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(v);
    size_++;
  }
  void pop_front() {
    slots_[head_] = T{};
    head_ = (head_ + 1) & (slots_.size() - 1);
    size_--;
  }
  void clear() {
    while (!empty())
      pop_front();
  }

  template <typename F>
  void forEach(F&& f) {
    for (size_t i = 0; i < size_; i++)
      f((*this)[i]);
  }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (size_t i = 0; i < size_; i++)
      bigger[i] = std::move((*this)[i]);
    slots_.swap(bigger);
    head_ = 0;
  }
  std::vector<T> slots_;  // size is a power of two
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace rdmamsg
