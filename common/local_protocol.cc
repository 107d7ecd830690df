// Encoding and decoding of local client protocol frames (see local_protocol.h).
#include "common/local_protocol.h"

#include "common/local_protocol_codec.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

namespace rdmamsg::proto {
namespace {

using codec::clip;
using codec::frame;
using codec::frameAt;
using codec::getLe;
using codec::Reader;
using codec::Writer;

// ACK: a count, then that many ranges, none empty or overflowing.
void parseAck(Reader& r, Frame& f) {
  const uint32_t count = r.get<uint32_t>("ack: count");
  const auto runs = r.rest();
  if (r.ok() &&
      (count == 0 || runs.size() % kAckRangeSize != 0 || runs.size() / kAckRangeSize != count)) {
    r.fail("ack: count does not match the body length");
  }
  f.acks = runs;
  for (size_t i = 0; r.ok() && i < f.ackRangeCount(); ++i) {
    const AckRange a = f.ackRange(i);
    if (a.first == 0 || a.count == 0 || a.first - 1 > UINT64_MAX - a.count)
      r.fail("ack: empty or overflowing range of message ids");
  }
}

// ERROR: a known code (never would_block, which is the library's own) in
// reply to a known request kind.
void parseError(Reader& r, Frame& f) {
  f.msgId = r.get<uint64_t>("error: message id");
  const uint16_t code = r.get<uint16_t>("error: code");
  f.inReplyTo = r.get<uint8_t>("error: request kind");
  f.text = r.str16("error: text");
  r.expectEnd();
  if (r.ok() && (code == 0 || code > kMaxErrc || code == static_cast<uint16_t>(Errc::would_block)))
    r.fail("error: unknown error code");
  if (r.ok() && f.inReplyTo > kMaxFrameKind) r.fail("error: unknown request kind");
  f.errc = static_cast<Errc>(code);
}

void parseBody(FrameKind kind, Reader& r, Frame& f) {
  switch (kind) {
    case FrameKind::hello:
      f.text = r.str8("hello: client name");
      r.expectEnd();
      return;
    case FrameKind::welcome:
      f.maxMessageSize = r.get<uint32_t>("welcome: max message size");
      f.node = r.name("welcome: invalid node name");
      r.expectEnd();
      return;
    case FrameKind::reg:
    case FrameKind::registered:
    case FrameKind::unreg:
      f.service = r.name("register: invalid service name");
      r.expectEnd();
      return;
    case FrameKind::send:
      f.msgId = r.get<uint64_t>("send: message id");
      f.node = r.name("send: invalid node name");
      f.service = r.name("send: invalid service name");
      f.otherService = r.name("send: invalid from-service name", true);
      f.payload = r.rest();
      return;
    case FrameKind::deliver:
      f.node = r.name("deliver: invalid source node name");
      f.service = r.name("deliver: invalid source service name", true);
      f.otherService = r.name("deliver: invalid destination service name");
      f.payload = r.rest();
      return;
    case FrameKind::ack:
      return parseAck(r, f);
    case FrameKind::error:
      return parseError(r, f);
    case FrameKind::status_reply:
      f.text = r.bytes(r.remaining(), "status reply");
      return;
    case FrameKind::status_request:
    case FrameKind::bye:
      r.expectEnd();
      return;
    case FrameKind::consumed:
      f.msgId = r.get<uint64_t>("consumed: count");
      r.expectEnd();
      return;
    case FrameKind::hold:
    case FrameKind::resume:
      f.node = r.name("hold/resume: invalid node name");
      f.service = r.name("hold/resume: invalid service name");
      r.expectEnd();
      return;
    case FrameKind::shm_offer:
      f.ringVersion = r.get<uint32_t>("shm offer: ring version");
      f.toDaemonCapacity = r.get<uint64_t>("shm offer: client-to-daemon capacity");
      f.toClientCapacity = r.get<uint64_t>("shm offer: daemon-to-client capacity");
      r.expectEnd();
      return;
    case FrameKind::shm_accept:
      r.expectEnd();
      return;
    case FrameKind::sub:
    case FrameKind::subscribed:
    case FrameKind::unsub:
    case FrameKind::pub:
    case FrameKind::pub_ack:
    case FrameKind::msg:
    case FrameKind::respond:
    case FrameKind::reply:
      return codec::parsePubSub(kind, r, f);
  }
}

}  // namespace

std::string_view toString(FrameKind kind) {
  switch (kind) {
    case FrameKind::hello:
      return "HELLO";
    case FrameKind::welcome:
      return "WELCOME";
    case FrameKind::reg:
      return "REGISTER";
    case FrameKind::registered:
      return "REGISTERED";
    case FrameKind::unreg:
      return "UNREGISTER";
    case FrameKind::send:
      return "SEND";
    case FrameKind::deliver:
      return "DELIVER";
    case FrameKind::ack:
      return "ACK";
    case FrameKind::error:
      return "ERROR";
    case FrameKind::status_request:
      return "STATUS_REQUEST";
    case FrameKind::status_reply:
      return "STATUS_REPLY";
    case FrameKind::bye:
      return "BYE";
    case FrameKind::consumed:
      return "CONSUMED";
    case FrameKind::hold:
      return "HOLD";
    case FrameKind::resume:
      return "RESUME";
    case FrameKind::shm_offer:
      return "SHM_OFFER";
    case FrameKind::shm_accept:
      return "SHM_ACCEPT";
    case FrameKind::sub:
      return "SUB";
    case FrameKind::subscribed:
      return "SUBSCRIBED";
    case FrameKind::unsub:
      return "UNSUB";
    case FrameKind::pub:
      return "PUB";
    case FrameKind::pub_ack:
      return "PUB_ACK";
    case FrameKind::msg:
      return "MSG";
    case FrameKind::respond:
      return "RESPOND";
    case FrameKind::reply:
      return "REPLY";
  }
  return "UNKNOWN";
}

namespace {
// [A-Za-z0-9._-], as a table: names are checked on every frame.
constexpr std::array<bool, 256> kNameChars = [] {
  std::array<bool, 256> t{};
  for (int c = 'a'; c <= 'z'; c++)
    t[c] = true;
  for (int c = 'A'; c <= 'Z'; c++)
    t[c] = true;
  for (int c = '0'; c <= '9'; c++)
    t[c] = true;
  t['.'] = t['_'] = t['-'] = true;
  return t;
}();
}  // namespace

bool isValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name)
    if (!kNameChars[static_cast<unsigned char>(c)]) return false;
  return true;
}

AckRange Frame::ackRange(size_t i) const {
  const std::byte* p = acks.data() + kAckRangeSize * i;
  return {getLe<uint64_t>(p), getLe<uint32_t>(p + 8)};
}

namespace {

constexpr const char* kUnsupportedVersion = "unsupported protocol version";

struct Header {
  uint32_t bodyLength = 0;
  uint8_t version = 0;
  uint8_t kind = 0;
  uint16_t reserved = 0;
};

Header readHeader(std::span<const std::byte> in) {
  return {getLe<uint32_t>(in.data()), getLe<uint8_t>(in.data() + 4), getLe<uint8_t>(in.data() + 5),
          getLe<uint16_t>(in.data() + 6)};
}

// A header of another protocol version (version 0 is none).
bool otherVersion(const Header& h) {
  return h.version != kProtocolVersion && h.version != 0;
}

// The header's problem, or nullptr.
const char* checkHeader(const Header& h, uint32_t maxBody) {
  if (h.version != kProtocolVersion) return kUnsupportedVersion;
  if (h.reserved != 0) return "reserved header bits set";
  if (h.kind == 0 || h.kind > kMaxFrameKind) return "unknown frame kind";
  if (h.bodyLength > maxBody) return "frame longer than the maximum message size";
  return nullptr;
}

// Fills `d` from the frame at the front of `in`; the problem, or nullptr.
const char* parseFrame(std::span<const std::byte> in, uint32_t maxBody, Decoded& d) {
  if (in.size() < kHeaderSize) return nullptr;
  const Header h = readHeader(in);
  if (otherVersion(h)) {
    d.kind = Decoded::Kind::other_version;
    d.version = h.version;
    return nullptr;
  }
  if (const char* problem = checkHeader(h, maxBody)) return problem;
  if (in.size() - kHeaderSize < h.bodyLength) return nullptr;
  d.frame.kind = static_cast<FrameKind>(h.kind);
  Reader reader(in.subspan(kHeaderSize, h.bodyLength));
  parseBody(d.frame.kind, reader, d.frame);
  if (const char* problem = reader.reason()) return problem;
  d.kind = Decoded::Kind::frame;
  d.consumed = kHeaderSize + h.bodyLength;
  return nullptr;
}

const char* parseRecordHead(std::span<const std::byte> head, size_t frameSize, uint32_t maxBody,
                            Decoded& d, size_t& payloadOffset) {
  if (head.size() < kHeaderSize) return "frame record shorter than a frame header";
  const Header h = readHeader(head);
  if (const char* problem = checkHeader(h, maxBody)) return problem;
  const auto k = static_cast<FrameKind>(h.kind);
  if (k != FrameKind::send && k != FrameKind::pub)
    return "a frame record holds a frame other than SEND or PUB";
  if (kHeaderSize + uint64_t{h.bodyLength} != frameSize)
    return "frame record length differs from its frame's";
  d.frame.kind = k;
  Reader reader(
      head.subspan(kHeaderSize, std::min<size_t>(h.bodyLength, head.size() - kHeaderSize)));
  parseBody(k, reader, d.frame);
  if (const char* problem = reader.reason()) return problem;
  payloadOffset = static_cast<size_t>(d.frame.payload.data() - head.data());
  d.frame.payload = {};
  d.kind = Decoded::Kind::frame;
  d.consumed = frameSize;
  return nullptr;
}

}  // namespace

Status unsupportedVersion() {
  return Status(Errc::protocol_error, kUnsupportedVersion);
}

// One Result, returned from every path (no copy on return): frames are
// decoded once per message on the fast path. A success allocates nothing;
// only a failure builds a message.
Result<Decoded> decodeFrame(std::span<const std::byte> in, uint32_t maxBody) {
  Result<Decoded> res = Decoded{};
  if (const char* problem = parseFrame(in, maxBody, *res))
    res = Status(Errc::protocol_error, problem);
  return res;
}

Result<Decoded> decodeRecordHead(std::span<const std::byte> head, size_t frameSize,
                                 uint32_t maxBody, size_t& payloadOffset) {
  Result<Decoded> res = Decoded{};
  if (const char* problem = parseRecordHead(head, frameSize, maxBody, *res, payloadOffset))
    res = Status(Errc::protocol_error, problem);
  return res;
}

// --- encoders ----------------------------------------------------------------

void encodeHello(ByteBuffer& out, std::string_view clientName) {
  clientName = clip(clientName, kMaxNameLength);
  frame(out, FrameKind::hello, 1 + clientName.size()).str8(clientName);
}

void encodeWelcome(ByteBuffer& out, uint32_t maxMessageSize, std::string_view nodeName) {
  nodeName = clip(nodeName, kMaxNameLength);
  Writer w = frame(out, FrameKind::welcome, 4 + 1 + nodeName.size());
  w.le<uint32_t>(maxMessageSize);
  w.str8(nodeName);
}

static void encodeServiceFrame(ByteBuffer& out, FrameKind kind, std::string_view service) {
  service = clip(service, kMaxNameLength);
  frame(out, kind, 1 + service.size()).str8(service);
}

void encodeRegister(ByteBuffer& out, std::string_view service) {
  encodeServiceFrame(out, FrameKind::reg, service);
}
void encodeRegistered(ByteBuffer& out, std::string_view service) {
  encodeServiceFrame(out, FrameKind::registered, service);
}
void encodeUnregister(ByteBuffer& out, std::string_view service) {
  encodeServiceFrame(out, FrameKind::unreg, service);
}

void encodeSend(ByteBuffer& out, uint64_t msgId, std::string_view node, std::string_view service,
                std::string_view fromService, std::span<const std::byte> payload) {
  node = clip(node, kMaxNameLength);
  service = clip(service, kMaxNameLength);
  fromService = clip(fromService, kMaxNameLength);
  Writer w = frame(out, FrameKind::send,
                   8 + 3 + node.size() + service.size() + fromService.size() + payload.size());
  w.le<uint64_t>(msgId);
  w.str8(node);
  w.str8(service);
  w.str8(fromService);
  w.bytes(payload.data(), payload.size());
}

size_t sendFrameSize(std::string_view node, std::string_view service, std::string_view fromService,
                     size_t payloadSize) {
  return kHeaderSize + 8 + 3 + clip(node, kMaxNameLength).size() +
         clip(service, kMaxNameLength).size() + clip(fromService, kMaxNameLength).size() +
         payloadSize;
}

void encodeSendHeadAt(std::span<std::byte> at, uint64_t msgId, std::string_view node,
                      std::string_view service, std::string_view fromService) {
  Writer w = frameAt(at.data(), FrameKind::send, at.size() - kHeaderSize);
  w.le<uint64_t>(msgId);
  w.str8(clip(node, kMaxNameLength));
  w.str8(clip(service, kMaxNameLength));
  w.str8(clip(fromService, kMaxNameLength));
}

void encodeSendAt(std::span<std::byte> at, uint64_t msgId, std::string_view node,
                  std::string_view service, std::string_view fromService,
                  std::span<const std::byte> payload) {
  encodeSendHeadAt(at, msgId, node, service, fromService);
  if (!payload.empty())
    std::memcpy(at.data() + at.size() - payload.size(), payload.data(), payload.size());
}

size_t deliverFrameSize(std::string_view srcNode, std::string_view srcService,
                        std::string_view toService, size_t payloadSize) {
  return kHeaderSize + 3 + clip(srcNode, kMaxNameLength).size() +
         clip(srcService, kMaxNameLength).size() + clip(toService, kMaxNameLength).size() +
         payloadSize;
}

void encodeDeliverHeadAt(std::span<std::byte> at, std::string_view srcNode,
                         std::string_view srcService, std::string_view toService) {
  srcNode = clip(srcNode, kMaxNameLength);
  srcService = clip(srcService, kMaxNameLength);
  toService = clip(toService, kMaxNameLength);
  Writer w = frameAt(at.data(), FrameKind::deliver, at.size() - kHeaderSize);
  w.str8(srcNode);
  w.str8(srcService);
  w.str8(toService);
}

void encodeDeliverAt(std::span<std::byte> at, std::string_view srcNode, std::string_view srcService,
                     std::string_view toService, std::span<const std::byte> payload) {
  encodeDeliverHeadAt(at, srcNode, srcService, toService);
  if (!payload.empty())
    std::memcpy(at.data() + at.size() - payload.size(), payload.data(), payload.size());
}

void encodeDeliver(ByteBuffer& out, std::string_view srcNode, std::string_view srcService,
                   std::string_view toService, std::span<const std::byte> payload) {
  const size_t size = deliverFrameSize(srcNode, srcService, toService, payload.size());
  std::span<std::byte> at = out.prepare(size).first(size);
  out.commit(size);
  encodeDeliverAt(at, srcNode, srcService, toService, payload);
}

void encodeAck(ByteBuffer& out, std::span<const AckRange> ranges) {
  Writer w = frame(out, FrameKind::ack, 4 + kAckRangeSize * ranges.size());
  w.le<uint32_t>(static_cast<uint32_t>(ranges.size()));
  for (const AckRange& a : ranges) {
    w.le<uint64_t>(a.first);
    w.le<uint32_t>(a.count);
  }
}

static void encodeErrorFrame(ByteBuffer& out, uint8_t version, uint64_t msgId, Errc errc,
                             uint8_t inReplyTo, std::string_view text) {
  text = clip(text, kMaxErrorText);
  Writer w = frame(out, FrameKind::error, 8 + 2 + 1 + 2 + text.size(), version);
  w.le<uint64_t>(msgId);
  w.le<uint16_t>(static_cast<uint16_t>(errc));
  w.le<uint8_t>(inReplyTo);
  w.str16(text);
}

void encodeError(ByteBuffer& out, uint64_t msgId, Errc errc, uint8_t inReplyTo,
                 std::string_view text) {
  encodeErrorFrame(out, kProtocolVersion, msgId, errc, inReplyTo, text);
}

void encodeStatusRequest(ByteBuffer& out) {
  frame(out, FrameKind::status_request, 0);
}

void encodeStatusReply(ByteBuffer& out, std::string_view json) {
  frame(out, FrameKind::status_reply, json.size()).bytes(json.data(), json.size());
}

void encodeBye(ByteBuffer& out) {
  frame(out, FrameKind::bye, 0);
}

void encodeConsumed(ByteBuffer& out, uint64_t taken) {
  frame(out, FrameKind::consumed, 8).le<uint64_t>(taken);
}

static void encodeDestinationFrame(ByteBuffer& out, FrameKind kind, std::string_view node,
                                   std::string_view service) {
  node = clip(node, kMaxNameLength);
  service = clip(service, kMaxNameLength);
  Writer w = frame(out, kind, 2 + node.size() + service.size());
  w.str8(node);
  w.str8(service);
}

void encodeHold(ByteBuffer& out, std::string_view node, std::string_view service) {
  encodeDestinationFrame(out, FrameKind::hold, node, service);
}

void encodeResume(ByteBuffer& out, std::string_view node, std::string_view service) {
  encodeDestinationFrame(out, FrameKind::resume, node, service);
}

void encodeShmOffer(ByteBuffer& out, uint32_t ringVersion, uint64_t toDaemonCapacity,
                    uint64_t toClientCapacity) {
  Writer w = frame(out, FrameKind::shm_offer, 4 + 8 + 8);
  w.le<uint32_t>(ringVersion);
  w.le<uint64_t>(toDaemonCapacity);
  w.le<uint64_t>(toClientCapacity);
}

void encodeShmAccept(ByteBuffer& out) {
  frame(out, FrameKind::shm_accept, 0);
}

void encodeErrorInVersion(ByteBuffer& out, uint8_t version, Errc errc, std::string_view text) {
  encodeErrorFrame(out, version, 0, errc, 0, text);
}

}  // namespace rdmamsg::proto
