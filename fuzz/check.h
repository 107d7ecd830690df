// FUZZ_CHECK: the fuzz targets' assertion. It stays on in every build type
// (unlike assert) and aborts, so libFuzzer saves the input that broke it.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace rdmamsg::fuzz {

[[noreturn]] inline void checkFailed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, condition);
  std::abort();
}

}  // namespace rdmamsg::fuzz

#define FUZZ_CHECK(condition)         \
  ((condition) ? static_cast<void>(0) \
               : ::rdmamsg::fuzz::checkFailed(#condition, __FILE__, __LINE__))
