// Test support: wait for a condition with a deadline instead of sleeping.
#pragma once

#include <chrono>
#include <thread>

namespace rdmamsg::test {

// Polls `cond` until it returns true or `timeout` passes; returns the last value.
// The short pause between polls only yields the CPU: correctness never depends on it.
template <typename Cond>
bool waitFor(Cond&& cond, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace rdmamsg::test
