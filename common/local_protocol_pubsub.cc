// The local protocol's subject frames: SUB, SUBSCRIBED, UNSUB, PUB,
// PUB_ACK, MSG, RESPOND and REPLY (local_protocol.h; docs/protocol.md,
// "Subjects"). Subjects and patterns are checked by their users
// (common/subject.h): a bad one is a request the daemon refuses with its
// reason, not a broken frame.
#include <cstdint>
#include <cstring>

#include "common/local_protocol.h"
#include "common/local_protocol_codec.h"

namespace rdmamsg::proto {

using codec::clip;
using codec::frame;
using codec::frameAt;
using codec::Reader;
using codec::Writer;

namespace codec {

void parsePubSub(FrameKind kind, Reader& r, Frame& f) {
  switch (kind) {
    case FrameKind::sub: {
      f.msgId = r.get<uint64_t>("sub: subscription id");
      const uint8_t policy = r.get<uint8_t>("sub: policy");
      if (r.get<uint8_t>("sub: reserved") != 0) r.fail("sub: reserved byte set");
      f.limit = r.get<uint32_t>("sub: pending limit");
      f.group = r.name("sub: invalid queue group name", true);
      f.subject = r.str8("sub: pattern");
      r.expectEnd();
      if (r.ok() && policy > kMaxSlowConsumer) r.fail("sub: unknown slow-consumer policy");
      f.policy = static_cast<SlowConsumer>(policy);
      return;
    }
    case FrameKind::subscribed:
    case FrameKind::unsub:
      f.msgId = r.get<uint64_t>("unsub: subscription id");
      r.expectEnd();
      return;
    case FrameKind::pub:
      f.msgId = r.get<uint64_t>("pub: message id");
      f.limit = r.get<uint32_t>("pub: request timeout");
      f.subject = r.str8("pub: subject");
      f.payload = r.rest();
      return;
    case FrameKind::pub_ack: {
      f.msgId = r.get<uint64_t>("pub ack: message id");
      const uint16_t code = r.get<uint16_t>("pub ack: code");
      f.matched = r.get<uint32_t>("pub ack: matched");
      f.taken = r.get<uint32_t>("pub ack: taken");
      f.dropped = r.get<uint32_t>("pub ack: dropped");
      f.text = r.str16("pub ack: text");
      r.expectEnd();
      if (r.ok() && (code > kMaxErrc || code == static_cast<uint16_t>(Errc::would_block)))
        r.fail("pub ack: unknown error code");
      f.errc = static_cast<Errc>(code);
      return;
    }
    case FrameKind::msg:
      f.msgId = r.get<uint64_t>("msg: subscription id");
      f.node = r.name("msg: invalid source node name");
      f.subject = r.str8("msg: subject");
      f.replyTo = r.str8("msg: reply token");
      f.payload = r.rest();
      return;
    case FrameKind::respond:
      f.msgId = r.get<uint64_t>("respond: message id");
      f.replyTo = r.str8("respond: reply token");
      f.payload = r.rest();
      return;
    case FrameKind::reply:
      f.msgId = r.get<uint64_t>("reply: request id");
      f.node = r.name("reply: invalid source node name");
      f.payload = r.rest();
      return;
    default:
      r.fail("not a subject frame");
      return;
  }
}

}  // namespace codec

namespace {
constexpr size_t kMaxSubjectBytes = 255;
}

void encodeSub(ByteBuffer& out, uint64_t subId, std::string_view pattern, std::string_view group,
               SlowConsumer policy, uint32_t pendingLimit) {
  pattern = clip(pattern, kMaxSubjectBytes);
  group = clip(group, kMaxNameLength);
  Writer w = frame(out, FrameKind::sub, 8 + 1 + 1 + 4 + 2 + group.size() + pattern.size());
  w.le<uint64_t>(subId);
  w.le<uint8_t>(static_cast<uint8_t>(policy));
  w.le<uint8_t>(0);
  w.le<uint32_t>(pendingLimit);
  w.str8(group);
  w.str8(pattern);
}

void encodeSubscribed(ByteBuffer& out, uint64_t subId) {
  frame(out, FrameKind::subscribed, 8).le<uint64_t>(subId);
}

void encodeUnsub(ByteBuffer& out, uint64_t subId) {
  frame(out, FrameKind::unsub, 8).le<uint64_t>(subId);
}

void encodePub(ByteBuffer& out, uint64_t msgId, uint32_t timeoutMs, std::string_view subject,
               std::span<const std::byte> payload) {
  subject = clip(subject, kMaxSubjectBytes);
  Writer w = frame(out, FrameKind::pub, 8 + 4 + 1 + subject.size() + payload.size());
  w.le<uint64_t>(msgId);
  w.le<uint32_t>(timeoutMs);
  w.str8(subject);
  w.bytes(payload.data(), payload.size());
}

size_t pubFrameSize(std::string_view subject, size_t payloadSize) {
  return kHeaderSize + 8 + 4 + 1 + clip(subject, kMaxSubjectBytes).size() + payloadSize;
}

void encodePubHeadAt(std::span<std::byte> at, uint64_t msgId, uint32_t timeoutMs,
                     std::string_view subject) {
  Writer w = frameAt(at.data(), FrameKind::pub, at.size() - kHeaderSize);
  w.le<uint64_t>(msgId);
  w.le<uint32_t>(timeoutMs);
  w.str8(clip(subject, kMaxSubjectBytes));
}

void encodePubAt(std::span<std::byte> at, uint64_t msgId, uint32_t timeoutMs,
                 std::string_view subject, std::span<const std::byte> payload) {
  encodePubHeadAt(at, msgId, timeoutMs, subject);
  if (!payload.empty())
    std::memcpy(at.data() + at.size() - payload.size(), payload.data(), payload.size());
}

void encodePubAck(ByteBuffer& out, uint64_t msgId, const PubOutcome& o, std::string_view text) {
  text = clip(text, kMaxErrorText);
  Writer w = frame(out, FrameKind::pub_ack, 8 + 2 + 12 + 2 + text.size());
  w.le<uint64_t>(msgId);
  w.le<uint16_t>(static_cast<uint16_t>(o.errc));
  w.le<uint32_t>(o.matched);
  w.le<uint32_t>(o.taken);
  w.le<uint32_t>(o.dropped);
  w.str16(text);
}

size_t msgFrameSize(std::string_view srcNode, std::string_view subject, std::string_view replyTo,
                    size_t payloadSize) {
  return kHeaderSize + 8 + 3 + clip(srcNode, kMaxNameLength).size() +
         clip(subject, kMaxSubjectBytes).size() + clip(replyTo, kMaxSubjectBytes).size() +
         payloadSize;
}

void encodeMsgAt(std::span<std::byte> at, uint64_t subId, std::string_view srcNode,
                 std::string_view subject, std::string_view replyTo,
                 std::span<const std::byte> payload) {
  Writer w = frameAt(at.data(), FrameKind::msg, at.size() - kHeaderSize);
  w.le<uint64_t>(subId);
  w.str8(clip(srcNode, kMaxNameLength));
  w.str8(clip(subject, kMaxSubjectBytes));
  w.str8(clip(replyTo, kMaxSubjectBytes));
  w.bytes(payload.data(), payload.size());
}

void encodeMsg(ByteBuffer& out, uint64_t subId, std::string_view srcNode, std::string_view subject,
               std::string_view replyTo, std::span<const std::byte> payload) {
  const size_t size = msgFrameSize(srcNode, subject, replyTo, payload.size());
  std::span<std::byte> at = out.prepare(size).first(size);
  out.commit(size);
  encodeMsgAt(at, subId, srcNode, subject, replyTo, payload);
}

void encodeRespond(ByteBuffer& out, uint64_t msgId, std::string_view replyTo,
                   std::span<const std::byte> payload) {
  replyTo = clip(replyTo, kMaxSubjectBytes);
  Writer w = frame(out, FrameKind::respond, 8 + 1 + replyTo.size() + payload.size());
  w.le<uint64_t>(msgId);
  w.str8(replyTo);
  w.bytes(payload.data(), payload.size());
}

size_t replyFrameSize(std::string_view srcNode, size_t payloadSize) {
  return kHeaderSize + 8 + 1 + clip(srcNode, kMaxNameLength).size() + payloadSize;
}

void encodeReplyAt(std::span<std::byte> at, uint64_t requestId, std::string_view srcNode,
                   std::span<const std::byte> payload) {
  Writer w = frameAt(at.data(), FrameKind::reply, at.size() - kHeaderSize);
  w.le<uint64_t>(requestId);
  w.str8(clip(srcNode, kMaxNameLength));
  w.bytes(payload.data(), payload.size());
}

void encodeReply(ByteBuffer& out, uint64_t requestId, std::string_view srcNode,
                 std::span<const std::byte> payload) {
  const size_t size = replyFrameSize(srcNode, payload.size());
  std::span<std::byte> at = out.prepare(size).first(size);
  out.commit(size);
  encodeReplyAt(at, requestId, srcNode, payload);
}

}  // namespace rdmamsg::proto
