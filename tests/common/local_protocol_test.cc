// Local protocol codec: round trips of every frame kind, streaming decode,
// and every malformed-input path ending in a clean error.
#include "common/local_protocol.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace rdmamsg::proto {
namespace {

std::span<const std::byte> bytesOf(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string_view textOf(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

Frame decodeOne(const ByteBuffer& buf, uint32_t maxBody = kDefaultMaxBody) {
  Result<Decoded> r = decodeFrame(buf.readable(), maxBody);
  EXPECT_TRUE(r.ok()) << r.status().toString();
  if (!r) return {};
  EXPECT_EQ(r->kind, Decoded::Kind::frame);
  EXPECT_EQ(r->consumed, buf.size());
  return r->frame;
}

Result<Decoded> decodeRaw(const std::vector<uint8_t>& raw, uint32_t maxBody = kDefaultMaxBody) {
  return decodeFrame(std::as_bytes(std::span(raw.data(), raw.size())), maxBody);
}

// What a decode that did not fail found; nullopt for a failure.
std::optional<Decoded::Kind> kindOf(const Result<Decoded>& r) {
  if (!r) return std::nullopt;
  return r->kind;
}

// A failure, as every malformed input is: protocol_error and a text naming
// the problem.
::testing::AssertionResult fails(const Result<Decoded>& r) {
  if (r.ok()) return ::testing::AssertionFailure() << "decoded, kind " << static_cast<int>(r->kind);
  if (r.status().code() != Errc::protocol_error || r.status().message().empty())
    return ::testing::AssertionFailure() << "failed with " << r.status().toString();
  return ::testing::AssertionSuccess() << r.status().toString();
}

TEST(LocalProtocolTest, NamesFollowTheRules) {
  EXPECT_TRUE(isValidName("node-1.example_x"));
  EXPECT_TRUE(isValidName(std::string(63, 'a')));
  EXPECT_FALSE(isValidName(""));
  EXPECT_FALSE(isValidName(std::string(64, 'a')));
  EXPECT_FALSE(isValidName("a/b"));
  EXPECT_FALSE(isValidName("sp ace"));
  EXPECT_FALSE(isValidName(std::string("nul\0", 4)));
}

TEST(LocalProtocolTest, HelloWelcomeRoundTrip) {
  ByteBuffer b;
  encodeHello(b, "app");
  Frame f = decodeOne(b);
  EXPECT_EQ(f.kind, FrameKind::hello);
  EXPECT_EQ(f.text, "app");
  b.clear();
  encodeWelcome(b, 65536, "nodeA");
  f = decodeOne(b);
  EXPECT_EQ(f.kind, FrameKind::welcome);
  EXPECT_EQ(f.maxMessageSize, 65536u);
  EXPECT_EQ(f.node, "nodeA");
}

TEST(LocalProtocolTest, ServiceFramesRoundTrip) {
  for (auto [encode, kind] : {std::pair{&encodeRegister, FrameKind::reg},
                              std::pair{&encodeRegistered, FrameKind::registered},
                              std::pair{&encodeUnregister, FrameKind::unreg}}) {
    ByteBuffer b;
    encode(b, "svc.1");
    Frame f = decodeOne(b);
    EXPECT_EQ(f.kind, kind);
    EXPECT_EQ(f.service, "svc.1");
  }
}

TEST(LocalProtocolTest, SendRoundTrip) {
  ByteBuffer b;
  encodeSend(b, 0x1122334455667788ull, "nodeB", "billing", "orders", bytesOf("payload"));
  Frame f = decodeOne(b);
  EXPECT_EQ(f.kind, FrameKind::send);
  EXPECT_EQ(f.msgId, 0x1122334455667788ull);
  EXPECT_EQ(f.node, "nodeB");
  EXPECT_EQ(f.service, "billing");
  EXPECT_EQ(f.otherService, "orders");
  EXPECT_EQ(textOf(f.payload), "payload");
}

TEST(LocalProtocolTest, SendWithEmptyPayloadAndNoSender) {
  ByteBuffer b;
  encodeSend(b, 7, "n", "s", "", {});
  Frame f = decodeOne(b);
  EXPECT_EQ(f.otherService, "");
  EXPECT_TRUE(f.payload.empty());
}

TEST(LocalProtocolTest, DeliverRoundTrip) {
  ByteBuffer b;
  encodeDeliver(b, "nodeA", "orders", "billing", bytesOf("hi"));
  Frame f = decodeOne(b);
  EXPECT_EQ(f.kind, FrameKind::deliver);
  EXPECT_EQ(f.node, "nodeA");
  EXPECT_EQ(f.service, "orders");
  EXPECT_EQ(f.otherService, "billing");
  EXPECT_EQ(textOf(f.payload), "hi");
}

TEST(LocalProtocolTest, AckCarriesRangesOfIds) {
  ByteBuffer b;
  const std::vector<AckRange> runs{{1, 4096}, {5000, 1}, {0xffffffffffffffffull, 1}};
  encodeAck(b, runs);
  EXPECT_EQ(b.size(), kHeaderSize + 4 + 3 * kAckRangeSize);
  Frame f = decodeOne(b);
  ASSERT_EQ(f.kind, FrameKind::ack);
  ASSERT_EQ(f.ackRangeCount(), 3u);
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(f.ackRange(i).first, runs[i].first);
    EXPECT_EQ(f.ackRange(i).count, runs[i].count);
  }
}

TEST(LocalProtocolTest, AckRangesThatNameNoValidIdAreRejected) {
  const std::vector<AckRange> bad[] = {
      {{0, 1}},                              // id 0 is reserved
      {{5, 0}},                              // empty range
      {{1, 2}, {0xfffffffffffffffeull, 3}},  // runs past the largest id
  };
  for (const auto& runs : bad) {
    ByteBuffer b;
    encodeAck(b, runs);
    Result<Decoded> r = decodeFrame(b.readable(), 1 << 20);
    ASSERT_TRUE(fails(r)) << runs.back().first << "+" << runs.back().count;
    EXPECT_EQ(r.status().message(), "ack: empty or overflowing range of message ids");
  }
}

TEST(LocalProtocolTest, ErrorRoundTrip) {
  ByteBuffer b;
  encodeError(b, 9, Errc::unknown_node, static_cast<uint8_t>(FrameKind::send), "node 'x'");
  Frame f = decodeOne(b);
  EXPECT_EQ(f.kind, FrameKind::error);
  EXPECT_EQ(f.msgId, 9u);
  EXPECT_EQ(f.errc, Errc::unknown_node);
  EXPECT_EQ(f.inReplyTo, static_cast<uint8_t>(FrameKind::send));
  EXPECT_EQ(f.text, "node 'x'");
}

TEST(LocalProtocolTest, ErrorTextIsTruncatedNotOverflowed) {
  ByteBuffer b;
  encodeError(b, 0, Errc::bad_request, 0, std::string(100000, 'e'));
  Frame f = decodeOne(b);
  EXPECT_EQ(f.text.size(), kMaxErrorText);
}

TEST(LocalProtocolTest, StatusAndByeRoundTrip) {
  ByteBuffer b;
  encodeStatusRequest(b);
  EXPECT_EQ(decodeOne(b).kind, FrameKind::status_request);
  b.clear();
  encodeStatusReply(b, R"({"node":"a"})");
  Frame f = decodeOne(b);
  EXPECT_EQ(f.kind, FrameKind::status_reply);
  EXPECT_EQ(f.text, R"({"node":"a"})");
  b.clear();
  encodeBye(b);
  EXPECT_EQ(decodeOne(b).kind, FrameKind::bye);
}

TEST(LocalProtocolTest, DecodesByteByByteAndManyFramesInOneSpan) {
  ByteBuffer b;
  for (uint64_t i = 1; i <= 50; ++i)
    encodeSend(b, i, "n", "s", "", bytesOf("x"));
  auto all = b.readable();
  // Every strict prefix of the first frame needs more.
  Result<Decoded> first = decodeFrame(all, kDefaultMaxBody);
  ASSERT_EQ(kindOf(first), Decoded::Kind::frame);
  for (size_t n = 0; n < first->consumed; ++n) {
    EXPECT_EQ(kindOf(decodeFrame(all.first(n), kDefaultMaxBody)), Decoded::Kind::need_more) << n;
  }
  uint64_t expect = 1;
  while (!all.empty()) {
    Result<Decoded> r = decodeFrame(all, kDefaultMaxBody);
    ASSERT_EQ(kindOf(r), Decoded::Kind::frame);
    EXPECT_EQ(r->frame.msgId, expect++);
    all = all.subspan(r->consumed);
  }
  EXPECT_EQ(expect, 51u);
}

// --- malformed input -----------------------------------------------------------------

TEST(LocalProtocolMalformedTest, OversizedLengthRejectedFromTheHeaderAlone) {
  // Claims 4 GiB; only the 8 header bytes are present. Must fail now (not
  // wait for, or allocate, the claimed body).
  auto r = decodeRaw({0xff, 0xff, 0xff, 0xff, kProtocolVersion, 6, 0, 0});
  ASSERT_TRUE(fails(r));
  EXPECT_EQ(r.status().code(), Errc::protocol_error);
  EXPECT_EQ(r.status().message(), "frame longer than the maximum message size");
  // Just over a small limit.
  ByteBuffer b;
  encodeSend(b, 1, "n", "s", "", bytesOf(std::string(101, 'x')));
  EXPECT_TRUE(fails(decodeFrame(b.readable().first(kHeaderSize), 100)));
  EXPECT_EQ(kindOf(decodeFrame(b.readable(), maxBodyFor(101))), Decoded::Kind::frame);
}

TEST(LocalProtocolMalformedTest, BadVersionUnknownKindReservedBits) {
  // Another version's header (1..255): its version, from the header alone.
  auto older = decodeRaw({0xff, 0, 0, 0, 1, 12, 0, 0});
  ASSERT_EQ(kindOf(older), Decoded::Kind::other_version);
  EXPECT_EQ(older->version, 1);
  EXPECT_EQ(older->consumed, 0u);
  auto newer = decodeRaw({0, 0, 0, 0, 3, 12, 0, 0});
  ASSERT_EQ(kindOf(newer), Decoded::Kind::other_version);
  EXPECT_EQ(newer->version, 3);
  // Version 0 is none: a failure, the one a reader reports for another version.
  auto none = decodeRaw({0, 0, 0, 0, 0, 12, 0, 0});
  ASSERT_TRUE(fails(none));
  EXPECT_EQ(none.status().message(), "unsupported protocol version");
  EXPECT_EQ(none.status(), unsupportedVersion());
  EXPECT_TRUE(fails(decodeRaw({0, 0, 0, 0, kProtocolVersion, 0, 0, 0})));
  EXPECT_TRUE(fails(decodeRaw({0, 0, 0, 0, kProtocolVersion, 16, 0, 0})));
  EXPECT_TRUE(fails(decodeRaw({0, 0, 0, 0, kProtocolVersion, 12, 1, 0})));
  EXPECT_EQ(kindOf(decodeRaw({0, 0, 0, 0, kProtocolVersion, 12, 0, 0})), Decoded::Kind::frame);
}

TEST(LocalProtocolMalformedTest, AFrameRecordOfAnotherVersionIsAFailure) {
  ByteBuffer b;
  encodeSend(b, 1, "node", "svc", "", bytesOf("payload"));
  std::vector<std::byte> record(b.readable().begin(), b.readable().end());
  size_t payloadAt = 0;
  Result<Decoded> ours = decodeRecordHead(record, record.size(), kDefaultMaxBody, payloadAt);
  ASSERT_EQ(kindOf(ours), Decoded::Kind::frame);
  EXPECT_EQ(ours->consumed, record.size());
  EXPECT_EQ(textOf(std::span<const std::byte>(record).subspan(payloadAt)), "payload");
  for (int version : {0, 1, 3}) {
    record[4] = static_cast<std::byte>(version);
    Result<Decoded> other = decodeRecordHead(record, record.size(), kDefaultMaxBody, payloadAt);
    ASSERT_TRUE(fails(other)) << version;
    EXPECT_EQ(other.status().message(), "unsupported protocol version");
  }
}

TEST(LocalProtocolMalformedTest, TruncatedBodiesAreErrorsNotReadsPastTheEnd) {
  // A frame whose declared body is shorter than its fields need.
  ByteBuffer b;
  encodeSend(b, 1, "node", "svc", "", {});
  std::vector<uint8_t> raw(reinterpret_cast<const uint8_t*>(b.data()),
                           reinterpret_cast<const uint8_t*>(b.data()) + b.size());
  for (uint32_t body = 0; body + kHeaderSize < raw.size(); ++body) {
    std::vector<uint8_t> cut(raw.begin(), raw.begin() + kHeaderSize + body);
    cut[0] = static_cast<uint8_t>(body);
    EXPECT_TRUE(fails(decodeRaw(cut))) << body;
  }
}

TEST(LocalProtocolMalformedTest, BadNames) {
  ByteBuffer b;
  encodeSend(b, 1, "bad node", "svc", "", {});
  EXPECT_TRUE(fails(decodeFrame(b.readable(), kDefaultMaxBody)));
  b.clear();
  encodeSend(b, 1, "node", "", "", {});
  EXPECT_TRUE(fails(decodeFrame(b.readable(), kDefaultMaxBody)));
  b.clear();
  encodeRegister(b, "s/x");
  EXPECT_TRUE(fails(decodeFrame(b.readable(), kDefaultMaxBody)));
  b.clear();
  encodeSend(b, 1, "node", "svc", "from!", {});
  EXPECT_TRUE(fails(decodeFrame(b.readable(), kDefaultMaxBody)));
}

TEST(LocalProtocolMalformedTest, AckCountMismatchAndEmptyAck) {
  // count 2 but one id.
  auto r = decodeRaw({12, 0, 0, 0, kProtocolVersion, 8, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_TRUE(fails(r));
  EXPECT_TRUE(fails(decodeRaw({4, 0, 0, 0, kProtocolVersion, 8, 0, 0, 0, 0, 0, 0})));
  // A huge count in a tiny frame must not be trusted.
  EXPECT_TRUE(fails(decodeRaw({4, 0, 0, 0, kProtocolVersion, 8, 0, 0, 0xff, 0xff, 0xff, 0xff})));
}

TEST(LocalProtocolMalformedTest, ErrorWithUnknownCodeOrKind) {
  ByteBuffer b;
  encodeError(b, 0, static_cast<Errc>(999), 0, "x");
  EXPECT_TRUE(fails(decodeFrame(b.readable(), kDefaultMaxBody)));
  b.clear();
  encodeError(b, 0, Errc::busy, 200, "x");
  EXPECT_TRUE(fails(decodeFrame(b.readable(), kDefaultMaxBody)));
}

TEST(LocalProtocolMalformedTest, TrailingBytesAfterFixedFields) {
  auto r = decodeRaw({1, 0, 0, 0, kProtocolVersion, 12, 0, 0, 0});  // BYE with a body byte
  ASSERT_TRUE(fails(r));
  EXPECT_NE(r.status().message(), "");
}

}  // namespace
}  // namespace rdmamsg::proto
