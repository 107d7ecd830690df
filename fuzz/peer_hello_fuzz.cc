// libFuzzer target: the handshake's Hello in rdma_cm private data
// (decodeHello, daemon/peer/protocol.h).
//
// The input is the private data of a connect request, accept or reject, as
// any host that reaches the daemon's rdma_cm port can send it. decodeHello
// must accept exactly what docs/protocol.md says is a Hello (the magic, and
// for this version the whole 56 bytes; another version only needs the
// 8-byte prefix, so that it can be rejected with its version), give the
// fields as they are on the wire, and never read past the data.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "daemon/peer/protocol.h"
#include "fuzz/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rdmamsg::peer;
  FUZZ_CHECK(!decodeHello(nullptr, size).ok());

  uint32_t magic = 0;
  uint8_t version = 0;
  if (size >= 5) {
    std::memcpy(&magic, data, sizeof magic);
    version = data[4];
  }
  const bool isHello =
      size >= 8 && magic == kHelloMagic && (version != kProtocolVersion || size >= kHelloSize);

  const rdmamsg::Result<Hello> hello = decodeHello(data, size);
  FUZZ_CHECK(hello.ok() == isHello);
  if (!hello) return 0;

  // The fields are the wire bytes; what the data does not cover is zero.
  unsigned char expected[kHelloSize] = {};
  std::memcpy(expected, data, std::min(size, kHelloSize));
  FUZZ_CHECK(std::memcmp(&*hello, expected, kHelloSize) == 0);
  FUZZ_CHECK(hello->magic == kHelloMagic && hello->version == version);

  // Every reason, known or not, has a text and a key for the logs and metrics.
  const char* text = toString(hello->reason);
  const char* key = keyOf(hello->reason);
  FUZZ_CHECK(text != nullptr && key != nullptr && *text != '\0' && *key != '\0');
  const bool known = static_cast<size_t>(hello->reason) < kRejectReasons;
  FUZZ_CHECK(known == (std::string_view(key) != "other"));
  return 0;
}
