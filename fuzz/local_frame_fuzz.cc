// libFuzzer target: the local client protocol decoder (common/local_protocol.h).
//
// The input is a byte stream as read from a Unix socket, by the daemon from a
// client (daemon/local/session.cc) or by librdmamsg from the daemon
// (client/client.cc). Both hand their input to decodeFrame() and use only the
// fields of the decoded Frame: every body is parsed inside decodeFrame, so
// this target covers all the parsing either side does. It drains the stream
// frame by frame as they do and checks each outcome against the protocol:
// views inside the frame's body, names and values as docs/protocol.md
// requires, a prefix of a frame is incomplete, the limit is applied from the
// header alone, and a frame encoded again decodes to the same fields (the same
// bytes, unless the encoder shortens a text). The whole input is also read as
// one shared-memory frame record (decodeRecordHead), which must agree.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "common/local_protocol.h"
#include "fuzz/check.h"

namespace rdmamsg::proto {
namespace {

using Bytes = std::span<const std::byte>;

bool sameBytes(Bytes a, Bytes b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

bool isFrame(const Result<Decoded>& r) {
  return r.ok() && r->kind == Decoded::Kind::frame;
}

bool sameFrame(const Frame& a, const Frame& b) {
  return a.kind == b.kind && a.msgId == b.msgId && a.errc == b.errc && a.inReplyTo == b.inReplyTo &&
         a.maxMessageSize == b.maxMessageSize && a.ringVersion == b.ringVersion &&
         a.toDaemonCapacity == b.toDaemonCapacity && a.toClientCapacity == b.toClientCapacity &&
         a.node == b.node && a.service == b.service && a.otherService == b.otherService &&
         a.text == b.text && sameBytes(a.payload, b.payload) && sameBytes(a.acks, b.acks) &&
         a.subject == b.subject && a.group == b.group && a.replyTo == b.replyTo &&
         a.policy == b.policy && a.limit == b.limit && a.matched == b.matched &&
         a.taken == b.taken && a.dropped == b.dropped;
}

// A non-empty view lies inside `body`.
bool inside(Bytes body, const void* p, size_t n) {
  if (n == 0) return true;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto bodyBegin = reinterpret_cast<uintptr_t>(body.data());
  return begin >= bodyBegin && n <= body.size() && begin - bodyBegin <= body.size() - n;
}
bool inside(Bytes body, std::string_view s) {
  return inside(body, s.data(), s.size());
}
bool inside(Bytes body, Bytes b) {
  return inside(body, b.data(), b.size());
}

bool validOrEmpty(std::string_view name) {
  return name.empty() || isValidName(name);
}

// What docs/protocol.md requires of each kind's fields.
void checkFields(const Frame& f, Bytes body) {
  FUZZ_CHECK(inside(body, f.node) && inside(body, f.service) && inside(body, f.otherService));
  FUZZ_CHECK(inside(body, f.text) && inside(body, f.payload) && inside(body, f.acks));
  FUZZ_CHECK(inside(body, f.subject) && inside(body, f.group) && inside(body, f.replyTo));
  FUZZ_CHECK(toString(f.kind) != "UNKNOWN");
  switch (f.kind) {
    case FrameKind::hello:
      FUZZ_CHECK(f.text.size() + 1 == body.size());
      return;
    case FrameKind::welcome:
      FUZZ_CHECK(isValidName(f.node));
      return;
    case FrameKind::reg:
    case FrameKind::registered:
    case FrameKind::unreg:
      FUZZ_CHECK(isValidName(f.service));
      return;
    case FrameKind::send:
      FUZZ_CHECK(isValidName(f.node) && isValidName(f.service) && validOrEmpty(f.otherService));
      return;
    case FrameKind::deliver:
      FUZZ_CHECK(isValidName(f.node) && validOrEmpty(f.service) && isValidName(f.otherService));
      return;
    case FrameKind::ack:
      FUZZ_CHECK(f.ackRangeCount() >= 1 && f.acks.size() == f.ackRangeCount() * kAckRangeSize);
      for (size_t i = 0; i < f.ackRangeCount(); ++i) {
        const AckRange a = f.ackRange(i);
        FUZZ_CHECK(a.first >= 1 && a.count >= 1 && a.first - 1 <= UINT64_MAX - a.count);
      }
      return;
    case FrameKind::error:
      FUZZ_CHECK(f.errc != Errc::ok && f.errc != Errc::would_block &&
                 static_cast<uint16_t>(f.errc) <= kMaxErrc);
      FUZZ_CHECK(f.inReplyTo <= kMaxFrameKind);
      FUZZ_CHECK(f.text.size() + 13 == body.size());
      return;
    case FrameKind::status_reply:
      FUZZ_CHECK(f.text.size() == body.size());
      return;
    case FrameKind::status_request:
    case FrameKind::bye:
      FUZZ_CHECK(body.empty());
      return;
    case FrameKind::consumed:
      FUZZ_CHECK(body.size() == 8);
      return;
    case FrameKind::hold:
    case FrameKind::resume:
      FUZZ_CHECK(isValidName(f.node) && isValidName(f.service));
      FUZZ_CHECK(f.node.size() + f.service.size() + 2 == body.size());
      return;
    case FrameKind::shm_offer:
      FUZZ_CHECK(body.size() == 20);
      return;
    case FrameKind::shm_accept:
      FUZZ_CHECK(body.empty());
      return;
    case FrameKind::sub:
      FUZZ_CHECK(validOrEmpty(f.group));
      FUZZ_CHECK(static_cast<uint8_t>(f.policy) <= kMaxSlowConsumer);
      FUZZ_CHECK(body.size() == 16 + f.group.size() + f.subject.size());
      return;
    case FrameKind::subscribed:
    case FrameKind::unsub:
      FUZZ_CHECK(body.size() == 8);
      return;
    case FrameKind::pub:
      FUZZ_CHECK(body.size() == 13 + f.subject.size() + f.payload.size());
      return;
    case FrameKind::pub_ack:
      FUZZ_CHECK(f.errc != Errc::would_block && static_cast<uint16_t>(f.errc) <= kMaxErrc);
      FUZZ_CHECK(body.size() == 24 + f.text.size());
      return;
    case FrameKind::msg:
      FUZZ_CHECK(isValidName(f.node));
      FUZZ_CHECK(body.size() ==
                 11 + f.node.size() + f.subject.size() + f.replyTo.size() + f.payload.size());
      return;
    case FrameKind::respond:
      FUZZ_CHECK(body.size() == 9 + f.replyTo.size() + f.payload.size());
      return;
    case FrameKind::reply:
      FUZZ_CHECK(isValidName(f.node));
      FUZZ_CHECK(body.size() == 9 + f.node.size() + f.payload.size());
      return;
  }
  FUZZ_CHECK(!"decoded an unknown frame kind");
}

// Encodes `f` again into `out`; false when the encoder shortens a text (a
// HELLO name over 63 bytes, an ERROR text over 1024), so that only the
// shortened text can come back.
bool encodeAgain(const Frame& f, ByteBuffer& out) {
  switch (f.kind) {
    case FrameKind::hello:
      encodeHello(out, f.text);
      return f.text.size() <= kMaxNameLength;
    case FrameKind::welcome:
      encodeWelcome(out, f.maxMessageSize, f.node);
      return true;
    case FrameKind::reg:
      encodeRegister(out, f.service);
      return true;
    case FrameKind::registered:
      encodeRegistered(out, f.service);
      return true;
    case FrameKind::unreg:
      encodeUnregister(out, f.service);
      return true;
    case FrameKind::send:
      encodeSend(out, f.msgId, f.node, f.service, f.otherService, f.payload);
      return true;
    case FrameKind::deliver:
      encodeDeliver(out, f.node, f.service, f.otherService, f.payload);
      return true;
    case FrameKind::ack: {
      std::vector<AckRange> ranges;
      for (size_t i = 0; i < f.ackRangeCount(); ++i)
        ranges.push_back(f.ackRange(i));
      encodeAck(out, ranges);
      return true;
    }
    case FrameKind::error:
      encodeError(out, f.msgId, f.errc, f.inReplyTo, f.text);
      return f.text.size() <= kMaxErrorText;
    case FrameKind::status_request:
      encodeStatusRequest(out);
      return true;
    case FrameKind::status_reply:
      encodeStatusReply(out, f.text);
      return true;
    case FrameKind::bye:
      encodeBye(out);
      return true;
    case FrameKind::consumed:
      encodeConsumed(out, f.msgId);
      return true;
    case FrameKind::hold:
      encodeHold(out, f.node, f.service);
      return true;
    case FrameKind::resume:
      encodeResume(out, f.node, f.service);
      return true;
    case FrameKind::shm_offer:
      encodeShmOffer(out, f.ringVersion, f.toDaemonCapacity, f.toClientCapacity);
      return true;
    case FrameKind::shm_accept:
      encodeShmAccept(out);
      return true;
    case FrameKind::sub:
      encodeSub(out, f.msgId, f.subject, f.group, f.policy, f.limit);
      return true;
    case FrameKind::subscribed:
      encodeSubscribed(out, f.msgId);
      return true;
    case FrameKind::unsub:
      encodeUnsub(out, f.msgId);
      return true;
    case FrameKind::pub:
      encodePub(out, f.msgId, f.limit, f.subject, f.payload);
      return true;
    case FrameKind::pub_ack:
      encodePubAck(out, f.msgId, {f.errc, f.matched, f.taken, f.dropped}, f.text);
      return f.text.size() <= kMaxErrorText;
    case FrameKind::msg:
      encodeMsg(out, f.msgId, f.node, f.subject, f.replyTo, f.payload);
      return true;
    case FrameKind::respond:
      encodeRespond(out, f.msgId, f.replyTo, f.payload);
      return true;
    case FrameKind::reply:
      encodeReply(out, f.msgId, f.node, f.payload);
      return true;
  }
  return false;
}

void checkRoundTrip(const Frame& f, Bytes frameBytes) {
  ByteBuffer out;
  const bool exact = encodeAgain(f, out);
  const Result<Decoded> again = decodeFrame(out.readable(), kDefaultMaxBody);
  FUZZ_CHECK(isFrame(again) && again->consumed == out.size());
  if (exact) {
    FUZZ_CHECK(sameBytes(out.readable(), frameBytes));
    FUZZ_CHECK(sameFrame(again->frame, f));
  } else {
    Frame clipped = f;
    clipped.text = f.text.substr(0, f.kind == FrameKind::hello ? kMaxNameLength : kMaxErrorText);
    FUZZ_CHECK(sameFrame(again->frame, clipped));
  }
}

// The receiver's limit is applied from the header, and a frame that fits
// decodes the same under any larger limit.
void checkLimits(Bytes in, const Decoded& res) {
  const uint32_t bodyLength = static_cast<uint32_t>(res.consumed - kHeaderSize);
  const Result<Decoded> unlimited = decodeFrame(in, UINT32_MAX);
  FUZZ_CHECK(isFrame(unlimited) && unlimited->consumed == res.consumed);
  FUZZ_CHECK(sameFrame(unlimited->frame, res.frame));
  if (bodyLength > 0) {
    const Result<Decoded> tooLong = decodeFrame(in.first(kHeaderSize), bodyLength - 1);
    FUZZ_CHECK(!tooLong.ok() && tooLong.status().code() == Errc::protocol_error);
  }
}

// Any prefix of a well-formed frame is incomplete, not an error.
void checkPrefixes(Bytes frameBytes) {
  for (size_t n : {size_t{0}, kHeaderSize - 1, kHeaderSize, frameBytes.size() - 1}) {
    if (n >= frameBytes.size()) continue;
    const Result<Decoded> part = decodeFrame(frameBytes.first(n), kDefaultMaxBody);
    FUZZ_CHECK(part.ok() && part->kind == Decoded::Kind::need_more && part->consumed == 0);
  }
}

}  // namespace
}  // namespace rdmamsg::proto

namespace rdmamsg::proto {
namespace {

// The input as one shared-memory frame record (decodeRecordHead, as the
// daemon reads one from a private copy of its first kMaxRecordHead bytes):
// it decodes exactly when decodeFrame finds one SEND or PUB that fills the
// record, to the same fields, its payload at the offset it names.
void checkRecordHead(Bytes record) {
  const Bytes head = record.first(std::min(record.size(), kMaxRecordHead));
  size_t payloadAt = 0;
  const Result<Decoded> rec = decodeRecordHead(head, record.size(), kDefaultMaxBody, payloadAt);
  const Result<Decoded> wholeRes = decodeFrame(record, kDefaultMaxBody);
  const bool one =
      isFrame(wholeRes) && wholeRes->consumed == record.size() &&
      (wholeRes->frame.kind == FrameKind::send || wholeRes->frame.kind == FrameKind::pub);
  // A record is a frame or a failure, never need_more or other_version.
  FUZZ_CHECK(!rec.ok() || rec->kind == Decoded::Kind::frame);
  FUZZ_CHECK(rec.ok() == one);
  if (!one) {
    FUZZ_CHECK(rec.status().code() == Errc::protocol_error && !rec.status().message().empty());
    return;
  }
  FUZZ_CHECK(payloadAt <= head.size() && payloadAt <= record.size());
  FUZZ_CHECK(rec->consumed == record.size());
  const Frame& whole = wholeRes->frame;
  Frame f = rec->frame;
  FUZZ_CHECK(f.payload.empty());
  f.payload = record.subspan(payloadAt);
  // Views into the private head: compared by value.
  FUZZ_CHECK(f.kind == whole.kind && f.msgId == whole.msgId && f.node == whole.node &&
             f.service == whole.service && f.otherService == whole.otherService &&
             f.subject == whole.subject && f.limit == whole.limit &&
             sameBytes(f.payload, whole.payload));
}

}  // namespace
}  // namespace rdmamsg::proto

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rdmamsg::proto;
  Bytes in(reinterpret_cast<const std::byte*>(data), size);
  checkRecordHead(in);
  // kDefaultMaxBody: the client's limit before WELCOME, above every limit
  // the inputs can reach; checkLimits covers smaller ones.
  for (;;) {
    const rdmamsg::Result<Decoded> decoded = decodeFrame(in, kDefaultMaxBody);
    if (!decoded) {
      // The receiver reports the reason and closes the connection.
      FUZZ_CHECK(decoded.status().code() == rdmamsg::Errc::protocol_error);
      FUZZ_CHECK(!decoded.status().message().empty());
      return 0;
    }
    const Decoded& res = *decoded;
    if (res.kind == Decoded::Kind::need_more) {
      FUZZ_CHECK(res.consumed == 0);
      return 0;
    }
    if (res.kind == Decoded::Kind::other_version) {
      // The receiver names both versions and closes the connection; the
      // header alone says it.
      FUZZ_CHECK(in.size() >= kHeaderSize && res.consumed == 0);
      FUZZ_CHECK(res.version != 0 && res.version != kProtocolVersion &&
                 res.version == static_cast<uint8_t>(in[4]));
      return 0;
    }
    FUZZ_CHECK(res.consumed >= kHeaderSize && res.consumed <= in.size());
    const Bytes frameBytes = in.first(res.consumed);
    checkFields(res.frame, frameBytes.subspan(kHeaderSize));
    checkRoundTrip(res.frame, frameBytes);
    checkLimits(in, res);
    checkPrefixes(frameBytes);
    in = in.subspan(res.consumed);
  }
}
