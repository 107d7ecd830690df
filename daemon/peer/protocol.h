// The peer protocol: what two rdmamsgd daemons say to each other.
//
// Handshake: a Hello in rdma_cm private data (REQ, REP, REJ). Private data
// arrives zero-padded (to 56 bytes for a REQ, 196 for a REP, 148 for a REJ),
// so the Hello carries its own magic and version.
//
// Authentication (a mesh secret configured on both ends; daemon/peer/auth.h):
// both Hellos carry kHelloAuthenticates, the REP carries the acceptor's
// nonce after its Hello, and the first batch each way carries one kAuth
// record: the dialer's nonce and proofs, then the acceptor's proof. Until
// both proofs are checked the connection carries nothing else; after them,
// every batch ends in a trailer (kHelloBatchMac; batch_auth.h).
//
// Data: every RDMA send fills exactly one of the receiver's buffers with a
// Batch: a BatchHeader, then records, each 8-byte aligned. Records carry
// messages (whole or fragments), delivery confirmations and heartbeats.
//
// Two levels of flow control: link credits (one per receive buffer) and
// per-flow windows. A message costs its flow windowCost() bytes from when
// it is sent until its CONFIRM arrives; the receiver confirms a message
// when it hands it to a listener (or fails it), so the window returns as
// the listener consumes.
// docs/protocol.md describes every field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "common/status.h"

namespace rdmamsg::peer {

inline constexpr uint32_t kHelloMagic = 0x47534d52;  // "RMSG"
// Version 2: per-flow windows (a flow is a source node and a destination
// service). Version 1 peers are rejected with RejectReason::kVersion.
inline constexpr uint8_t kProtocolVersion = 2;

enum class RejectReason : uint8_t {
  kNone = 0,
  kUnknownPeer = 1,   // the connecting node is not in the acceptor's peers
  kVersion = 2,       // protocol version not supported
  kDuplicate = 3,     // a connection between the two nodes already exists / wins
  kWrongTarget = 4,   // the REQ was meant for another node
  kShuttingDown = 5,  // the acceptor is stopping
  kBadHandshake = 6,  // private data is not a Hello
  kWrongAddress = 7,  // the connection does not come from the named node's configured address
  // One end authenticates and the other does not (in a REJ); also the
  // counter of connections whose proof failed (those end in a disconnect).
  kAuthentication = 8,
  // The answer to a probe (kHelloProbe): the rail reached this node. Not a
  // refusal; counted apart from them.
  kProbed = 9,
  // The REQ is for a lane (rail_policy: spread) the acceptor does not keep
  // with the dialer: the two nodes' rail_policy or rails differ.
  kNoLane = 10,
};
inline constexpr size_t kRejectReasons = 11;
static_assert(kRejectReasons == static_cast<size_t>(RejectReason::kNoLane) + 1,
              "every reason has its counter");
const char* toString(RejectReason r);
// The reason as a status and metrics key: "unknown_peer", "wrong_address", ...
const char* keyOf(RejectReason r);

struct Hello {
  uint32_t magic = kHelloMagic;
  uint8_t version = kProtocolVersion;
  RejectReason reason = RejectReason::kNone;
  uint16_t flags = 0;        // HelloFlags
  uint64_t nodeId = 0;       // nodeId() of the sender's name
  uint64_t targetId = 0;     // nodeId() of the node the sender means to reach
  uint64_t incarnation = 0;  // changes at every daemon start
  uint32_t bufferSize = 0;   // the sender's receive buffer size, bytes
  uint32_t bufferCount = 0;  // credits the sender grants at once (receive buffers for the peer)
  uint64_t maxMessage = 0;   // the sender's max_message_size, bytes
  uint32_t flowWindow = 0;   // bytes the sender holds for each flow towards it
  // The most credits the sender may grant (buffer_count); 0 (older
  // versions): bufferCount, all granted at once.
  uint32_t maxCredits = 0;
};
inline constexpr size_t kHelloSize = 56;
static_assert(sizeof(Hello) == kHelloSize);
static_assert(kHelloSize <= 56, "must fit a REQ's private data");

enum HelloFlags : uint16_t {
  kHelloAuthenticates = 1,  // the sender has a mesh secret and proves it
  kHelloIdleClose = 2,      // the sender understands kIdleClose records
  // The sender's receive buffers are shared (an SRQ): it lends credits beyond
  // bufferCount to a busy peer, and takes back, in a batch's `released`,
  // what an idle peer no longer needs.
  kHelloSharedReceive = 4,
  // The sender routes subjects (docs/protocol.md, "Subjects"): it reads
  // kInterest and kPubResult records and messages for "$pub" and "$reply".
  kHelloSubjects = 8,
  // With kHelloAuthenticates: the sender binds its proofs to the connection
  // and MACs every batch (batch_auth.h). An authenticating peer without it
  // (an older rdmamsgd) is refused: batches are never taken unauthenticated.
  kHelloBatchMac = 16,
  // With kHelloBatchMac: the sender encrypts every batch (encryption: on).
  // Both ends must agree; a mismatch is refused (reason 8).
  kHelloEncrypts = 32,
  // The sender keeps its session with the target across connections
  // (several rails): both Hellos carrying it, each end's first record is a
  // kResume, and what was unconfirmed when a connection was lost is sent
  // again on the next, from where the receiver stopped.
  kHelloResume = 64,
  // In a REQ: the dialer lost its connection to the target and holds the
  // session for a resume. An established connection of the same
  // incarnation at the target is then stale (its loss not yet seen there):
  // the new one replaces it instead of being refused as a duplicate.
  kHelloResuming = 128,
  // In a REQ: a probe of a rail (rail_probe.h), not a connection. A target
  // that keeps sessions (kHelloResume) answers it with a REJ of reason
  // kProbed once the REQ passed its checks (magic, version, target, the
  // dialer's configured address), before any tie-break.
  kHelloProbe = 256,
  // With kHelloResume: the sender counts the kPubResult records it reads in
  // a session and says so in kResume records of kind kResults; it keeps
  // the ones it writes until the peer's count covers them, and on the
  // session's next connection writes again the ones the peer had not read
  // (control_outbox.h). Both Hellos must carry it.
  kHelloResultAcks = 512,
};
// rail_policy: spread keeps a connection per shared rail with a peer, each
// a lane with its own session; a REQ names its lane in the flags' top
// four bits (0 with active-standby, and for lane 0).
inline constexpr unsigned kHelloLaneShift = 12;
inline constexpr uint16_t kHelloLaneMask = 0xf000;
inline constexpr std::size_t helloLane(uint16_t flags) {
  return (flags & kHelloLaneMask) >> kHelloLaneShift;
}
inline constexpr uint16_t laneFlags(std::size_t lane) {
  return static_cast<uint16_t>((lane << kHelloLaneShift) & kHelloLaneMask);
}

inline constexpr size_t kNonceSize = 32;
inline constexpr size_t kProofSize = 32;  // HMAC-SHA256
// A REP's private data when the acceptor authenticates: its Hello, then its nonce.
struct AcceptData {
  Hello hello;
  uint8_t nonce[kNonceSize];
};
static_assert(sizeof(AcceptData) <= 196, "must fit a REP's private data");

// 64-bit FNV-1a of a node name: node names do not fit in a REQ.
uint64_t nodeId(std::string_view name);

// Decodes private data; protocol_error, naming what is wrong, when it is
// not a Hello (too short for the magic and version, or wrong magic). A
// Hello of another version decodes with its version set, so that it can be
// rejected with that reason; its other fields are not meaningful.
Result<Hello> decodeHello(const void* data, size_t len);

// ------------------------------------------------------------------ data

struct BatchHeader {
  uint32_t magic;     // kBatchMagic
  uint16_t records;   // number of records that follow
  uint16_t released;  // credits the sender gives back unused (beyond the one this batch spends)
  uint32_t credits;   // credits the sender grants: its receive buffers reposted (or lent)
  uint32_t length;    // bytes used, header included
};
inline constexpr uint32_t kBatchMagic = 0x48544142;  // "BATH"
static_assert(sizeof(BatchHeader) == 16);

enum class RecordType : uint8_t {
  kMessage = 1,    // a whole message, or a fragment of one
  kConfirm = 2,    // delivery outcomes for a range of message sequence numbers
  kHeartbeat = 3,  // nothing else to say
  kAuth = 4,       // the handshake's proof: the first record each way, alone in its batch
  kIdleClose = 5,  // closing an idle connection by agreement (IdleCloseBody)
  kInterest = 6,   // a subscription pattern the sender's clients hold, added or removed
  kPubResult = 7,  // how a publish fared on the sender's host (PubResultBody)
  kResume = 8,     // where the session goes on (ResumeBody), with a kHelloResume peer
};

// A kResume record: flags is the ResumeKind, seq the next message the
// sender expects from the receiver (every one before it was received
// whole), the body the sender's lowest message not yet settled (every
// outcome before it is in). kContinue or kFresh is the first record each
// way on a connection between kHelloResume peers, and neither end starts a
// message or writes an outcome before it has the other's. kProgress comes
// later, as the sender's lowest unsettled moves: outcomes before it need
// not be kept for a resume any more. kMove asks the receiver to move.
enum class ResumeKind : uint8_t {
  kContinue = 1,  // the sender goes on with the session it had with the receiver's incarnation
  kFresh = 2,     // the sender starts a new session: messages from 1, nothing kept
  kProgress = 3,
  // The sender moves the session to another rail (its health came back,
  // rails.h): seq is that rail's index. The receiver closes the
  // connection; both hold the session and the lower name dials that rail
  // at once (the other waits for that connection, then dials itself);
  // neither counts it as a failure of the rail it leaves.
  kMove = 4,
  // With kHelloResultAcks: seq is how many kPubResult records the sender
  // has read in this session (0 too); the second record each way on a
  // connection, then whenever it grows. On a connection that resumes the
  // session the receiver writes no result before it has the first.
  kResults = 5,
};
// `session` names the sender's side of the session the record is about
// and `peerSession` the receiver's side as the sender knows it (0: not
// known yet). A side is named anew whenever that end starts a session
// itself; an end that starts one because the peer's kFresh said so keeps
// its name. A kContinue whose names are not the receiver's own pair is for
// another session: the receiver goes on as after a kFresh, and so does the
// sender (it sees the same mismatch in the receiver's kContinue). A name
// of 0 matches any (an end that does not know the other's side yet has
// sent and received nothing in the session; an older daemon writes 0).
struct ResumeBody {
  uint64_t lowestUnsettled;
  uint32_t session;
  uint32_t peerSession;
};
static_assert(sizeof(ResumeBody) == 16);

// A kInterest record: flags is the InterestOp, srcLen the queue group's
// length ("": none), dstLen the pattern's; the body is the group, then the
// pattern. Sent only to a peer whose Hello carries kHelloSubjects: the
// sender's whole interest after every new connection, then its changes.
enum class InterestOp : uint8_t { kAdd = 1, kRemove = 2 };

// A kPubResult record: seq is the publishing daemon's token (from the
// "$pub" message's envelope), the body what came of it on the sender's host.
struct PubResultBody {
  uint32_t matched;  // subscriptions it matched there (a queue group counts once)
  uint32_t taken;    // of those, the ones whose application took it
  uint32_t dropped;  // the ones that dropped it (slow consumer, gone)
  uint32_t reserved;
};
static_assert(sizeof(PubResultBody) == 16);

enum RecordFlags : uint8_t {
  kFirstFragment = 1,  // a message starts
  kLastFragment = 2,   // a message ends; a whole message has both flags
};
// A first fragment that is not also the last carries the message's total
// length (8 bytes) after the names.
inline constexpr bool hasTotalLength(uint8_t flags) {
  return (flags & kFirstFragment) && !(flags & kLastFragment);
}

struct RecordHeader {
  RecordType type;
  uint8_t flags;
  uint8_t srcLen;   // kMessage: sender's service name length
  uint8_t dstLen;   // kMessage: destination service name length
  uint32_t length;  // bytes after this header (names, totalLength, payload)
  uint64_t seq;     // kMessage: sequence number; kConfirm: first sequence
};
static_assert(sizeof(RecordHeader) == 16);

struct ConfirmBody {
  uint64_t lastSeq;  // confirms [seq, lastSeq]
  uint16_t errc;     // rdmamsg::Errc of the outcome (0: handed to a listener)
  uint16_t reserved[3];
};
static_assert(sizeof(ConfirmBody) == 16);
// The outcomes a CONFIRM may carry (docs/protocol.md): ok, unknown_service,
// too_large, busy.
bool isConfirmOutcome(uint16_t errc);

// A kAuth record's body. The dialer sends its nonce and one proof per
// secret it holds (current, then previous); the acceptor answers with one
// proof, under the secret that matched, and a zero nonce.
struct AuthBody {
  uint8_t nonce[kNonceSize];
  uint8_t proofCount;  // 1 or 2
  uint8_t reserved[7];
  uint8_t proofs[2][kProofSize];
};
static_assert(sizeof(AuthBody) == 104);

// A kIdleClose record's body. Sent only to a peer whose Hello carries
// kHelloIdleClose. A request asks to close the connection, neither side
// having anything queued, in flight or unconfirmed; the sender starts no
// message until it has the answer. The peer accepts (and then starts no
// message on the connection either) or refuses; on accept the requester
// disconnects. Crossing requests are each accepted.
enum class IdleClose : uint8_t {
  kRequest = 1,
  kAccept = 2,
  kRefuse = 3,
};
struct IdleCloseBody {
  IdleClose action;
  uint8_t reserved[7];
};
static_assert(sizeof(IdleCloseBody) == 8);

inline constexpr size_t align8(size_t n) {
  return (n + 7) & ~size_t{7};
}

// A record decoded from a received batch; views point into the buffer.
struct Record {
  RecordType type;
  uint8_t flags = 0;
  uint64_t seq = 0;
  std::string_view srcService, dstService;
  uint64_t totalLength = 0;  // hasTotalLength(flags) only
  std::span<const std::byte> payload;
  ConfirmBody confirm{};
  AuthBody auth{};                            // kAuth
  IdleClose idleClose = IdleClose::kRequest;  // kIdleClose
  // kInterest: flags (InterestOp), srcService (the group), dstService (the
  // pattern). kPubResult: seq (the token) and this.
  PubResultBody pubResult{};
  // kResume: flags (ResumeKind), seq (the next message expected) and this.
  ResumeBody resume{};
};

// Walks the records of one received batch, checking every length against
// the buffer before using it.
class BatchReader {
 public:
  // `bytes` is what the completion reported (byte_len).
  explicit BatchReader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  // Validates the header: protocol_error naming what is wrong when the
  // batch is malformed.
  Status open();
  uint32_t credits() const { return header_.credits; }
  uint16_t released() const { return header_.released; }
  uint16_t records() const { return header_.records; }
  // Reads the next record: false at the end of the batch or at a malformed
  // record, and status() says which (ok at the end; protocol_error naming
  // the record and its fault). Once false, it stays false.
  bool next(Record& out);
  const Status& status() const { return status_; }

 private:
  Status stop(std::string why);
  bool malformed(std::string what);

  std::span<const std::byte> bytes_;
  BatchHeader header_{};
  size_t offset_ = 0;
  uint16_t read_ = 0;
  bool done_ = false;
  Status status_;
};

// Fills one send buffer. The caller checks room() before adding.
class BatchWriter {
 public:
  BatchWriter() = default;
  void reset(std::byte* buffer, size_t capacity);
  bool empty() const { return records_ == 0; }
  size_t used() const { return offset_; }
  size_t room() const { return capacity_ - offset_; }
  // Room needed for a message record with these names and payload bytes.
  static size_t messageSize(size_t srcLen, size_t dstLen, size_t payload, bool withTotal);
  void addMessage(uint64_t seq, uint8_t flags, std::string_view src, std::string_view dst,
                  uint64_t totalLength, std::span<const std::byte> payload);
  // A message record whose `payloadLength` bytes are not written here: they
  // follow the batch as a second scatter-gather entry (memory the daemon
  // posts from in place), so this is the batch's last record, unpadded,
  // and the batch must be sealed next. external() says how many.
  void addMessageHead(uint64_t seq, uint8_t flags, std::string_view src, std::string_view dst,
                      uint64_t totalLength, size_t payloadLength);
  size_t external() const { return external_; }
  void addConfirm(uint64_t first, uint64_t last, uint16_t errc);
  void addHeartbeat();
  void addAuth(const AuthBody& body);
  void addIdleClose(IdleClose action);
  // Room needed for a kInterest record.
  static size_t interestSize(std::string_view group, std::string_view pattern);
  void addInterest(InterestOp op, std::string_view group, std::string_view pattern);
  void addPubResult(uint64_t token, const PubResultBody& body);
  void addResume(ResumeKind kind, uint64_t nextExpected, uint64_t lowestUnsettled,
                 uint32_t session = 0, uint32_t peerSession = 0);
  // Writes the header; returns the bytes to send.
  size_t finish(uint32_t credits, uint16_t released = 0);

 private:
  RecordHeader* begin(RecordType type, size_t bodyLen);
  // A message record's header, names and total: where its payload goes.
  std::byte* writeMessageHead(uint64_t seq, uint8_t flags, std::string_view src,
                              std::string_view dst, uint64_t totalLength, size_t payloadLength);
  std::byte* buf_ = nullptr;
  size_t capacity_ = 0;
  size_t offset_ = 0;
  size_t external_ = 0;
  uint16_t records_ = 0;
};

// What a message costs its flow's window: what the receiver must hold for it.
inline constexpr uint64_t windowCost(size_t srcLen, size_t dstLen, size_t payload) {
  return payload + srcLen + dstLen + 32;
}

inline constexpr size_t kConfirmRecordSize = sizeof(RecordHeader) + sizeof(ConfirmBody);
inline constexpr size_t kAuthRecordSize = sizeof(RecordHeader) + sizeof(AuthBody);
inline constexpr size_t kIdleCloseRecordSize = sizeof(RecordHeader) + sizeof(IdleCloseBody);
inline constexpr size_t kPubResultRecordSize = sizeof(RecordHeader) + sizeof(PubResultBody);
inline constexpr size_t kResumeRecordSize = sizeof(RecordHeader) + sizeof(ResumeBody);

}  // namespace rdmamsg::peer
