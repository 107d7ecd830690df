// A histogram of durations with fixed bucket bounds from 25 µs to 10 s (the
// range of a delivery over a link, from an idle RDMA fabric to a listener
// that keeps its flow waiting), for status and Prometheus. Observing is a
// short search over 16 bounds: cheap enough for a sampled data path.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace rdmamsg {

class LatencyHistogram {
 public:
  // Upper bounds of the buckets, in seconds (the last bucket, +Inf, is implicit).
  static constexpr std::array<double, 16> kBounds = {25e-6,  50e-6, 100e-6, 250e-6, 500e-6, 1e-3,
                                                     2.5e-3, 5e-3,  10e-3,  25e-3,  50e-3,  100e-3,
                                                     250e-3, 1.0,   2.5,    10.0};

  void observe(std::chrono::nanoseconds d) {
    const double s = std::chrono::duration<double>(d).count();
    size_t i = 0;
    while (i < kBounds.size() && s > kBounds[i])
      ++i;
    ++counts_[i];
    ++count_;
    sum_ += s;
  }
  // Observations in bucket i alone (i == kBounds.size(): above the last bound).
  uint64_t bucket(size_t i) const { return counts_[i]; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }  // seconds

 private:
  std::array<uint64_t, kBounds.size() + 1> counts_{};
  uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace rdmamsg
