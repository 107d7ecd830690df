// A bounded random-input run of the local protocol decoder: random bytes and
// mutated valid frames must decode to a frame, need-more or a clean error,
// never crash or read out of bounds (run under the asan preset to check).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/local_protocol.h"

namespace rdmamsg::proto {
namespace {

constexpr int kIterations = 20000;

// Decodes everything in `in` like a receiver does; returns frames decoded.
size_t drain(std::span<const std::byte> in, uint32_t maxBody) {
  size_t frames = 0;
  while (!in.empty()) {
    Result<Decoded> r = decodeFrame(in, maxBody);
    if (!r) {
      EXPECT_EQ(r.status().code(), Errc::protocol_error);
      EXPECT_FALSE(r.status().message().empty());
      break;
    }
    if (r->kind != Decoded::Kind::frame) break;
    EXPECT_GE(r->consumed, kHeaderSize);
    EXPECT_LE(r->consumed, in.size());
    if (r->frame.kind == FrameKind::ack) {
      for (size_t i = 0; i < r->frame.ackRangeCount(); ++i) {
        const AckRange a = r->frame.ackRange(i);
        EXPECT_NE(a.first, 0u);
        EXPECT_NE(a.count, 0u);
      }
    }
    in = in.subspan(r->consumed);
    ++frames;
  }
  return frames;
}

ByteBuffer validFrames() {
  ByteBuffer b;
  const std::string_view p = "payload bytes";
  encodeHello(b, "fuzz");
  encodeWelcome(b, 4096, "node");
  encodeRegister(b, "svc");
  encodeSend(b, 5, "node", "svc", "me", std::as_bytes(std::span(p.data(), p.size())));
  encodeDeliver(b, "node", "me", "svc", std::as_bytes(std::span(p.data(), p.size())));
  const AckRange acks[] = {{1, 3}, {7, 1}};
  encodeAck(b, acks);
  encodeError(b, 5, Errc::unknown_service, 6, "no such service");
  encodeStatusReply(b, "{}");
  encodeBye(b);
  return b;
}

TEST(LocalProtocolFuzzTest, RandomBytes) {
  std::mt19937 rng(12345);
  std::vector<std::byte> buf;
  for (int i = 0; i < kIterations; ++i) {
    buf.resize(rng() % 300);
    for (auto& b : buf)
      b = static_cast<std::byte>(rng());
    if (buf.size() >= 6 && rng() % 2) {  // make the header plausible half the time
      buf[4] = std::byte{kProtocolVersion};
      buf[5] = static_cast<std::byte>(1 + rng() % kMaxFrameKind);
      buf[6] = buf[7] = std::byte{0};
      buf[0] = static_cast<std::byte>(rng() % 300);
      buf[1] = buf[2] = buf[3] = std::byte{0};
    }
    drain(buf, 4096);
  }
}

TEST(LocalProtocolFuzzTest, MutatedValidFrames) {
  std::mt19937 rng(777);
  const ByteBuffer valid = validFrames();
  ASSERT_EQ(drain(valid.readable(), 4096), 9u);
  std::vector<std::byte> buf;
  for (int i = 0; i < kIterations; ++i) {
    buf.assign(valid.readable().begin(), valid.readable().end());
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k)
      buf[rng() % buf.size()] = static_cast<std::byte>(rng());
    buf.resize(buf.size() - rng() % 16);
    drain(buf, 4096);
  }
}

}  // namespace
}  // namespace rdmamsg::proto
