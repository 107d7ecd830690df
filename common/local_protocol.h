// The local client wire protocol: frames exchanged between an application
// (librdmamsg) and its host's rdmamsgd over the Unix stream socket.
//
// Every frame is an 8-byte header followed by a body (all integers
// little-endian):
//
//   u32 bodyLength | u8 version (=kProtocolVersion) | u8 kind | u16 reserved (=0)
//
// Strings are length-prefixed: `str8` = u8 length + bytes, `str16` = u16
// length + bytes. A payload is "the rest of the body". Bodies per kind are in
// docs/protocol.md ("Local client protocol") and beside FrameKind below.
//
// decodeFrame() parses at most one frame from the front of a byte span that
// may hold a partial frame or many frames; it checks the length against the
// receiver's limit before anything else and allocates nothing unless it
// fails (the failure's message). The encode*() functions append one frame to
// a caller-owned ByteBuffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/byte_buffer.h"
#include "common/status.h"

namespace rdmamsg::proto {

inline constexpr uint8_t kProtocolVersion = 2;
inline constexpr size_t kHeaderSize = 8;
inline constexpr size_t kMaxNameLength = 63;
// Body bytes a frame may take beside its payload: a MSG (ids, a node name,
// a subject and a reply token) takes up to 584, a SEND or DELIVER 200.
inline constexpr size_t kMaxFrameOverhead = 1024;
// A SEND frame's header and fields beside its payload, at most: what a
// reader copies of a SEND whose payload stays where it lies.
inline constexpr size_t kMaxSendHead = kHeaderSize + 8 + 3 * (1 + kMaxNameLength);
// The same for a PUB (ids, a request timeout, a subject of up to 255 bytes),
// and the most a reader copies of any frame record (SEND or PUB).
inline constexpr size_t kMaxPubHead = kHeaderSize + 8 + 4 + 1 + 255;
inline constexpr size_t kMaxRecordHead = kMaxPubHead > kMaxSendHead ? kMaxPubHead : kMaxSendHead;
// Largest ERROR text; longer texts are truncated by the encoder.
inline constexpr size_t kMaxErrorText = 1024;
// Limit a client applies before WELCOME told it the daemon's maximum.
inline constexpr uint32_t kDefaultMaxBody = 1u << 20;

enum class FrameKind : uint8_t {
  hello = 1,            // c→d  str8 clientName (0..63, informational)
  welcome = 2,          // d→c  u32 maxMessageSize, str8 nodeName
  reg = 3,              // c→d  str8 service                       (REGISTER)
  registered = 4,       // d→c  str8 service
  unreg = 5,            // c→d  str8 service                       (UNREGISTER, no reply)
  send = 6,             // c→d  u64 msgId, str8 node, str8 service, str8 fromService, payload
  deliver = 7,          // d→c  str8 srcNode, str8 srcService, str8 toService, payload
  ack = 8,              // d→c  u32 count, count × (u64 firstMsgId, u32 n): ids first..first+n-1
  error = 9,            // d→c  u64 msgId, u16 errc, u8 inReplyTo (FrameKind or 0), str16 text
  status_request = 10,  // c→d  (empty)
  status_reply = 11,    // d→c  JSON text (rest of body)
  bye = 12,             // both (empty): orderly close
  consumed = 13,        // c→d  u64 taken: DELIVERs the application has taken (cumulative)
  hold = 14,            // d→c  str8 node, str8 service: send nothing more there until RESUME
  resume = 15,          // d→c  str8 node, str8 service
  shm_offer = 16,       // c→d  u32 ringVersion, u64 toDaemonCapacity, u64 toClientCapacity;
                        //      3 fds ride with it (common/shm_channel.h); only right after HELLO
  shm_accept = 17,      // d→c  (empty): every later frame of both sides goes through the rings
  // Subjects (common/subject.h; docs/protocol.md, "Subjects"):
  sub = 18,         // c→d  u64 subId, u8 policy, u8 0, u32 pendingLimit, str8 group, str8 pattern
  subscribed = 19,  // d→c  u64 subId
  unsub = 20,       // c→d  u64 subId
  pub = 21,         // c→d  u64 msgId, u32 timeoutMs (0: a publish; else a request), str8
                    //      subject, payload
  pub_ack = 22,     // d→c  u64 msgId, u16 errc, u32 matched, u32 taken, u32 dropped, str16 text
  msg = 23,         // d→c  u64 subId, str8 srcNode, str8 subject, str8 replyTo, payload
  respond = 24,     // c→d  u64 msgId, str8 replyTo, payload
  reply = 25,       // d→c  u64 requestId, str8 srcNode, payload
};
inline constexpr uint8_t kMaxFrameKind = static_cast<uint8_t>(FrameKind::reply);

// A subscription's slow-consumer policy (SUB): what its daemon does when it
// has pendingLimit messages its application has not taken.
enum class SlowConsumer : uint8_t {
  drop = 0,   // drops what comes for it (counted, said in the publishers' PUB_ACK)
  block = 1,  // holds the publishers (their flows' windows) until it takes
};
inline constexpr uint8_t kMaxSlowConsumer = static_cast<uint8_t>(SlowConsumer::block);

std::string_view toString(FrameKind kind);

// Node and service names: 1..63 characters of [A-Za-z0-9._-].
bool isValidName(std::string_view name);

// A run of consecutive acknowledged message ids: first, first + 1, …,
// first + count - 1 (an ACK frame carries one or more runs; a client that
// numbers its messages 1, 2, 3… usually gets one run per frame).
struct AckRange {
  uint64_t first = 0;
  uint32_t count = 0;
};
inline constexpr size_t kAckRangeSize = 12;

// Largest body a receiver accepts when the maximum message size is `maxMessage`.
constexpr uint32_t maxBodyFor(uint32_t maxMessage) {
  return maxMessage + static_cast<uint32_t>(kMaxFrameOverhead);
}

// A decoded frame. Views point into the decoded input span: they are valid
// until the caller consumes or overwrites those bytes. Fields not carried by
// `kind` are left empty/zero.
struct Frame {
  FrameKind kind = FrameKind::bye;
  uint64_t msgId = 0;                  // send, error; consumed: the count taken
  Errc errc = Errc::ok;                // error
  uint8_t inReplyTo = 0;               // error: FrameKind of the request, 0 = connection
  uint32_t maxMessageSize = 0;         // welcome
  uint32_t ringVersion = 0;            // shm_offer
  uint64_t toDaemonCapacity = 0;       // shm_offer
  uint64_t toClientCapacity = 0;       // shm_offer
  std::string_view node;               // welcome (own), send/hold/resume (destination),
                                       // deliver (source)
  std::string_view service;            // reg/registered/unreg; send/hold/resume (destination);
                                       // deliver (source)
  std::string_view otherService;       // send: fromService; deliver: toService
  std::string_view text;               // hello client name, error text, status JSON
  std::span<const std::byte> payload;  // send, deliver, pub, msg, respond, reply
  std::span<const std::byte> acks;     // ack: count × 12 bytes; read with ackRange()
  // Subjects. msgId carries sub/subscribed/unsub's subId, pub/pub_ack/
  // respond's msgId, msg's subId and reply's requestId; node carries msg's
  // and reply's source node; errc and text pub_ack's outcome.
  std::string_view subject;                  // sub: the pattern; pub, msg: the subject
  std::string_view group;                    // sub: the queue group ("": none)
  std::string_view replyTo;                  // msg: the request's reply token ("": none); respond
  SlowConsumer policy = SlowConsumer::drop;  // sub
  uint32_t limit = 0;  // sub: pending limit (0: the daemon's); pub: request timeout in ms
  uint32_t matched = 0, taken = 0, dropped = 0;  // pub_ack

  size_t ackRangeCount() const { return acks.size() / kAckRangeSize; }
  AckRange ackRange(size_t i) const;
};

// What a decoder found that is not a failure. A failure (a malformed frame,
// a body longer than the limit) is the Result's Status: protocol_error and
// a static text naming the problem.
struct Decoded {
  enum class Kind : uint8_t {
    need_more,      // the input holds part of a frame
    frame,          // a whole frame: `frame`, `consumed`
    other_version,  // a frame header of another protocol version (1..255, not ours): `version`
  };
  Kind kind = Kind::need_more;
  size_t consumed = 0;  // frame: its bytes
  Frame frame;          // frame
  uint8_t version = 0;  // other_version: the header's version
};

// The failure of a reader that does not answer another protocol version
// (Decoded::Kind::other_version): protocol_error, "unsupported protocol
// version". A header of version 0 is this failure too.
Status unsupportedVersion();

// Parses the frame at the front of `in`. A body longer than `maxBody` is a
// failure as soon as its header is complete, before the body arrives;
// another version's header is other_version as soon as it is complete.
Result<Decoded> decodeFrame(std::span<const std::byte> in, uint32_t maxBody);
// The head of a SEND or PUB frame of `frameSize` bytes whose payload stays
// where it lies (a shared-memory frame record): `head` is a private copy of
// the frame's first bytes (at least its fixed fields and names, or all of
// it: kMaxRecordHead). A failure unless it is a SEND or PUB of our protocol
// version of exactly frameSize bytes (a record is never need_more or
// other_version); else the frame with an empty payload, and the payload's
// offset in the frame.
Result<Decoded> decodeRecordHead(std::span<const std::byte> head, size_t frameSize,
                                 uint32_t maxBody, size_t& payloadOffset);

// Encoders: append one complete frame to `out`. They do not validate names
// (callers do, with isValidName) but never write a field that overflows its
// length prefix: strings are truncated to the prefix's range.
void encodeHello(ByteBuffer& out, std::string_view clientName);
void encodeWelcome(ByteBuffer& out, uint32_t maxMessageSize, std::string_view nodeName);
void encodeRegister(ByteBuffer& out, std::string_view service);
void encodeRegistered(ByteBuffer& out, std::string_view service);
void encodeUnregister(ByteBuffer& out, std::string_view service);
void encodeSend(ByteBuffer& out, uint64_t msgId, std::string_view node, std::string_view service,
                std::string_view fromService, std::span<const std::byte> payload);
void encodeDeliver(ByteBuffer& out, std::string_view srcNode, std::string_view srcService,
                   std::string_view toService, std::span<const std::byte> payload);
// The SEND frame's size, and the frame written into `at` of exactly that
// size (a shared-memory frame record).
size_t sendFrameSize(std::string_view node, std::string_view service, std::string_view fromService,
                     size_t payloadSize);
void encodeSendAt(std::span<std::byte> at, uint64_t msgId, std::string_view node,
                  std::string_view service, std::string_view fromService,
                  std::span<const std::byte> payload);
// All of that frame but its payload, whose bytes already lie at the end of
// `at` (a block the application wrote its message into: Client::claim()).
void encodeSendHeadAt(std::span<std::byte> at, uint64_t msgId, std::string_view node,
                      std::string_view service, std::string_view fromService);
// The DELIVER frame's size, and the frame written into `at` of exactly
// that size (memory the caller reserved: a shared-memory ring's record).
size_t deliverFrameSize(std::string_view srcNode, std::string_view srcService,
                        std::string_view toService, size_t payloadSize);
void encodeDeliverAt(std::span<std::byte> at, std::string_view srcNode, std::string_view srcService,
                     std::string_view toService, std::span<const std::byte> payload);
// All of that frame but its payload, whose bytes already lie at the end of
// `at` (a delivery block the message was put together in).
void encodeDeliverHeadAt(std::span<std::byte> at, std::string_view srcNode,
                         std::string_view srcService, std::string_view toService);
void encodeAck(ByteBuffer& out, std::span<const AckRange> ranges);
void encodeError(ByteBuffer& out, uint64_t msgId, Errc errc, uint8_t inReplyTo,
                 std::string_view text);
void encodeStatusRequest(ByteBuffer& out);
void encodeStatusReply(ByteBuffer& out, std::string_view json);
void encodeBye(ByteBuffer& out);
void encodeConsumed(ByteBuffer& out, uint64_t taken);
void encodeHold(ByteBuffer& out, std::string_view node, std::string_view service);
void encodeResume(ByteBuffer& out, std::string_view node, std::string_view service);
void encodeShmOffer(ByteBuffer& out, uint32_t ringVersion, uint64_t toDaemonCapacity,
                    uint64_t toClientCapacity);
void encodeShmAccept(ByteBuffer& out);
// Subjects (local_protocol_pubsub.cc).
void encodeSub(ByteBuffer& out, uint64_t subId, std::string_view pattern, std::string_view group,
               SlowConsumer policy, uint32_t pendingLimit);
void encodeSubscribed(ByteBuffer& out, uint64_t subId);
void encodeUnsub(ByteBuffer& out, uint64_t subId);
void encodePub(ByteBuffer& out, uint64_t msgId, uint32_t timeoutMs, std::string_view subject,
               std::span<const std::byte> payload);
// The PUB frame's size, the frame written into `at` of exactly that size,
// and all of it but its payload (already at the end of `at`), as for SEND.
size_t pubFrameSize(std::string_view subject, size_t payloadSize);
void encodePubAt(std::span<std::byte> at, uint64_t msgId, uint32_t timeoutMs,
                 std::string_view subject, std::span<const std::byte> payload);
void encodePubHeadAt(std::span<std::byte> at, uint64_t msgId, uint32_t timeoutMs,
                     std::string_view subject);
struct PubOutcome {
  Errc errc = Errc::ok;
  uint32_t matched = 0, taken = 0, dropped = 0;
};
void encodePubAck(ByteBuffer& out, uint64_t msgId, const PubOutcome& outcome,
                  std::string_view text);
size_t msgFrameSize(std::string_view srcNode, std::string_view subject, std::string_view replyTo,
                    size_t payloadSize);
void encodeMsgAt(std::span<std::byte> at, uint64_t subId, std::string_view srcNode,
                 std::string_view subject, std::string_view replyTo,
                 std::span<const std::byte> payload);
void encodeMsg(ByteBuffer& out, uint64_t subId, std::string_view srcNode, std::string_view subject,
               std::string_view replyTo, std::span<const std::byte> payload);
void encodeRespond(ByteBuffer& out, uint64_t msgId, std::string_view replyTo,
                   std::span<const std::byte> payload);
size_t replyFrameSize(std::string_view srcNode, size_t payloadSize);
void encodeReplyAt(std::span<std::byte> at, uint64_t requestId, std::string_view srcNode,
                   std::span<const std::byte> payload);
void encodeReply(ByteBuffer& out, uint64_t requestId, std::string_view srcNode,
                 std::span<const std::byte> payload);
// An ERROR framed in protocol version `version` (the header and the ERROR
// body are the same in every version): the answer to a peer of another version.
void encodeErrorInVersion(ByteBuffer& out, uint8_t version, Errc errc, std::string_view text);

}  // namespace rdmamsg::proto
