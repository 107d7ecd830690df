// The device's statistics (counters.h).
#include "counters.h"

#include <array>
#include <atomic>
#include <cstring>

#include "base.h"
#include "fork_hooks.h"
#include "softrdma/testing.h"

namespace softrdma {

namespace {

constexpr auto kCounters = static_cast<size_t>(Counter::kCount);

constexpr std::array<const char*, kCounters> kNames = {
    "send_rnr_err", "retry_rnr_exceeded_err", "retry_exceeded_err", "link_downed", "rdma_sends",
    "rdma_recvs",   "connect_without_recv",   "ud_accepted",        "rx_inline",   "rx_progress",
};

std::array<std::atomic<uint64_t>, kCounters> g_counters{};

}  // namespace

void count(Counter c) {
  g_counters[static_cast<size_t>(c)].fetch_add(1, std::memory_order_relaxed);
}

void forkCounters(ForkStep s) {
  if (s != ForkStep::Child) return;
  for (auto& c : g_counters)  // a new process: counted from its start
    c.store(0, std::memory_order_relaxed);
}

uint64_t counterValue(Counter c) {
  return g_counters[static_cast<size_t>(c)].load(std::memory_order_relaxed);
}

int64_t counterByName(const char* name) {
  for (size_t i = 0; name != nullptr && i < kCounters; i++)
    if (std::strcmp(name, kNames[i]) == 0)
      return static_cast<int64_t>(counterValue(static_cast<Counter>(i)));
  return -1;
}

std::string formatCounters() {
  std::string out;
  for (size_t i = 0; i < kCounters; i++)
    out +=
        std::string(kNames[i]) + " " + std::to_string(counterValue(static_cast<Counter>(i))) + "\n";
  return out;
}

}  // namespace softrdma

SOFTRDMA_API int64_t softrdma_counter(const char* name) {
  return softrdma::counterByName(name);
}
