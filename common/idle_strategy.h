// How a side that runs out of work waits for more, as Aeron names its idle
// strategies: the daemon's loop (`idle_strategy`) and the client library
// (`ConnectOptions::idleStrategy`, whose public enum has the same values)
// share the names and the spin loop's pause.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rdmamsg::idle {

enum class Strategy : uint8_t {
  sleep,     // sleep at once: no CPU while idle (the default)
  adaptive,  // spin for a bounded time, then sleep
  busy,      // spin, never sleep (a dedicated core)
};

inline const char* toString(Strategy s) {
  switch (s) {
    case Strategy::sleep:
      return "sleep";
    case Strategy::adaptive:
      return "adaptive";
    case Strategy::busy:
      return "busy";
  }
  return "?";
}

// "sleep", "adaptive" or "busy"; nullopt for anything else.
inline std::optional<Strategy> parse(std::string_view text) {
  for (Strategy s : {Strategy::sleep, Strategy::adaptive, Strategy::busy})
    if (text == toString(s)) return s;
  return std::nullopt;
}

// One pause of a spin loop: tells the core this is a spin (less power, and
// the other hyperthread gets the pipeline).
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace rdmamsg::idle
