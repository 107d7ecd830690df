// Rate limit for a repeated log line: at most `burst` lines per `window`;
// the rest are counted and the next line written says how many were left
// out. One LogLimit per kind of line (and per peer where that matters), so
// that a noisy cause cannot hide the others.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace rdmamsg {

// Lines left out by every LogLimit of the process (status and metrics).
inline uint64_t& logLinesSuppressed() {
  static uint64_t n = 0;
  return n;
}

class LogLimit {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogLimit(uint32_t burst = 5, Clock::duration window = std::chrono::seconds(60))
      : burst_(burst), window_(window) {}

  // True when the line may be written now. Then `suffix()` tells how many
  // were left out since the last one written ("" when none).
  bool admit(Clock::time_point now = Clock::now()) {
    if (now - windowStart_ >= window_ || !started_) {
      started_ = true;
      windowStart_ = now;
      inWindow_ = 0;
    }
    if (inWindow_ >= burst_) {
      ++suppressed_;
      ++suppressedTotal_;
      ++logLinesSuppressed();
      return false;
    }
    ++inWindow_;
    reported_ = suppressed_;
    suppressed_ = 0;
    return true;
  }
  // " (N similar lines suppressed)" for the line just admitted, or "".
  std::string suffix() const {
    return reported_ == 0 ? std::string()
                          : " (" + std::to_string(reported_) + " similar lines suppressed)";
  }
  uint64_t suppressedTotal() const { return suppressedTotal_; }

 private:
  uint32_t burst_;
  Clock::duration window_;
  bool started_ = false;
  Clock::time_point windowStart_{};
  uint32_t inWindow_ = 0;
  uint64_t suppressed_ = 0;  // since the last line written
  uint64_t reported_ = 0;    // what suffix() reports
  uint64_t suppressedTotal_ = 0;
};

}  // namespace rdmamsg
