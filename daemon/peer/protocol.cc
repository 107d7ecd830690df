// Encoding and bounds-checked decoding of the peer protocol (protocol.h).
#include "daemon/peer/protocol.h"
#include "common/status.h"

#include <algorithm>
#include <cstring>

namespace rdmamsg::peer {

const char* toString(RejectReason r) {
  switch (r) {
    case RejectReason::kNone:
      return "none";
    case RejectReason::kUnknownPeer:
      return "unknown peer";
    case RejectReason::kVersion:
      return "protocol version not supported";
    case RejectReason::kDuplicate:
      return "duplicate connection";
    case RejectReason::kWrongTarget:
      return "connection meant for another node";
    case RejectReason::kShuttingDown:
      return "shutting down";
    case RejectReason::kBadHandshake:
      return "bad handshake";
    case RejectReason::kWrongAddress:
      return "not from the node's configured address";
    case RejectReason::kAuthentication:
      return "authentication failed";
    case RejectReason::kProbed:
      return "probe answered";
    case RejectReason::kNoLane:
      return "no such lane (rail_policy or rails differ)";
  }
  return "unknown reason";
}

const char* keyOf(RejectReason r) {
  switch (r) {
    case RejectReason::kNone:
      return "none";
    case RejectReason::kUnknownPeer:
      return "unknown_peer";
    case RejectReason::kVersion:
      return "version";
    case RejectReason::kDuplicate:
      return "duplicate";
    case RejectReason::kWrongTarget:
      return "wrong_target";
    case RejectReason::kShuttingDown:
      return "shutting_down";
    case RejectReason::kBadHandshake:
      return "bad_handshake";
    case RejectReason::kWrongAddress:
      return "wrong_address";
    case RejectReason::kAuthentication:
      return "authentication";
    case RejectReason::kProbed:
      return "probed";
    case RejectReason::kNoLane:
      return "no_lane";
  }
  return "other";
}

uint64_t nodeId(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

bool isConfirmOutcome(uint16_t errc) {
  switch (static_cast<Errc>(errc)) {
    case Errc::ok:
    case Errc::unknown_service:
    case Errc::too_large:
    case Errc::busy:
      return true;
    default:
      return false;
  }
}

Result<Hello> decodeHello(const void* data, size_t len) {
  constexpr size_t kPrefix = 8;  // magic, version, reason, reserved: the same in every version
  if (data == nullptr || len < kPrefix)
    return Status(Errc::protocol_error,
                  "no Hello (" + std::to_string(data == nullptr ? 0 : len) + " bytes)");
  Hello h{};
  std::memcpy(&h, data, std::min(len, kHelloSize));
  if (h.magic != kHelloMagic) return Status(Errc::protocol_error, "not a Hello (wrong magic)");
  if (h.version == kProtocolVersion && len < kHelloSize)
    return Status(Errc::protocol_error, "a Hello of " + std::to_string(len) + " bytes, not " +
                                            std::to_string(kHelloSize));
  return h;
}

Status BatchReader::open() {
  if (bytes_.size() < sizeof(BatchHeader))
    return stop("a batch of " + std::to_string(bytes_.size()) + " bytes, shorter than its header");
  std::memcpy(&header_, bytes_.data(), sizeof header_);
  if (header_.magic != kBatchMagic) return stop("not a batch (wrong magic)");
  if (header_.length < sizeof(BatchHeader) || header_.length > bytes_.size())
    return stop("a batch header of length " + std::to_string(header_.length) + " in " +
                std::to_string(bytes_.size()) + " bytes");
  bytes_ = bytes_.first(header_.length);
  offset_ = sizeof(BatchHeader);
  return Status();
}

// The reader stops with `why` (a batch that cannot be opened reads no record).
Status BatchReader::stop(std::string why) {
  done_ = true;
  status_ = Status(Errc::protocol_error, std::move(why));
  return status_;
}

bool BatchReader::malformed(std::string what) {
  done_ = true;
  status_ =
      Status(Errc::protocol_error, "record " + std::to_string(read_ + 1) + " of " +
                                       std::to_string(header_.records) + ": " + std::move(what));
  return false;
}

namespace {

Status fault(std::string what) {
  return Status(Errc::protocol_error, std::move(what));
}

// Checks a record's body against its type and reads it into `out`.
Status readBody(const RecordHeader& h, std::span<const std::byte> bodyBytes, Record& out) {
  switch (h.type) {
    case RecordType::kMessage: {
      size_t names = size_t{h.srcLen} + h.dstLen;
      bool first = hasTotalLength(h.flags);
      size_t fixed = names + (first ? 8 : 0);
      if (h.dstLen == 0 || fixed > bodyBytes.size())
        return fault("a message without a destination or room for its names");
      const char* p = reinterpret_cast<const char*>(bodyBytes.data());
      out.srcService = std::string_view(p, h.srcLen);
      out.dstService = std::string_view(p + h.srcLen, h.dstLen);
      if (first) std::memcpy(&out.totalLength, p + names, 8);
      out.payload = bodyBytes.subspan(fixed);
      break;
    }
    case RecordType::kConfirm:
      if (h.length != sizeof(ConfirmBody)) return fault("a confirmation of the wrong length");
      std::memcpy(&out.confirm, bodyBytes.data(), sizeof out.confirm);
      if (out.confirm.lastSeq < h.seq)
        return fault("a confirmation whose range ends before it starts");
      break;
    case RecordType::kHeartbeat:
      if (h.length != 0) return fault("a heartbeat with a body");
      break;
    case RecordType::kAuth:
      if (h.length != sizeof(AuthBody))
        return fault("an authentication record of the wrong length");
      std::memcpy(&out.auth, bodyBytes.data(), sizeof out.auth);
      if (out.auth.proofCount < 1 || out.auth.proofCount > 2)
        return fault("an authentication record with " + std::to_string(out.auth.proofCount) +
                     " proofs");
      break;
    case RecordType::kIdleClose: {
      if (h.length != sizeof(IdleCloseBody))
        return fault("an idle-close record of the wrong length");
      IdleCloseBody b;
      std::memcpy(&b, bodyBytes.data(), sizeof b);
      if (b.action != IdleClose::kRequest && b.action != IdleClose::kAccept &&
          b.action != IdleClose::kRefuse)
        return fault("an idle-close record with action " +
                     std::to_string(static_cast<int>(b.action)));
      out.idleClose = b.action;
      break;
    }
    case RecordType::kInterest: {
      const auto op = static_cast<InterestOp>(h.flags);
      if (op != InterestOp::kAdd && op != InterestOp::kRemove)
        return fault("an interest record with operation " + std::to_string(int{h.flags}));
      if (h.dstLen == 0 || size_t{h.srcLen} + h.dstLen != h.length)
        return fault("an interest record whose names do not fill it");
      const char* p = reinterpret_cast<const char*>(bodyBytes.data());
      out.srcService = std::string_view(p, h.srcLen);
      out.dstService = std::string_view(p + h.srcLen, h.dstLen);
      break;
    }
    case RecordType::kPubResult:
      if (h.length != sizeof(PubResultBody)) return fault("a publish result of the wrong length");
      std::memcpy(&out.pubResult, bodyBytes.data(), sizeof out.pubResult);
      if (uint64_t{out.pubResult.taken} + out.pubResult.dropped > out.pubResult.matched)
        return fault("a publish result that took or dropped more than it matched");
      break;
    case RecordType::kResume: {
      if (h.length != sizeof(ResumeBody)) return fault("a resume record of the wrong length");
      const auto kind = static_cast<ResumeKind>(h.flags);
      if (kind != ResumeKind::kContinue && kind != ResumeKind::kFresh &&
          kind != ResumeKind::kProgress && kind != ResumeKind::kMove &&
          kind != ResumeKind::kResults)
        return fault("a resume record of kind " + std::to_string(int{h.flags}));
      std::memcpy(&out.resume, bodyBytes.data(), sizeof out.resume);
      // (A move's seq is a rail's index, a results count a count: either may be 0.)
      const bool seqCounts = kind == ResumeKind::kMove || kind == ResumeKind::kResults;
      if ((h.seq == 0 && !seqCounts) || out.resume.lowestUnsettled == 0)
        return fault("a resume record naming message 0");
      break;
    }
    default:
      return fault("unknown record type " + std::to_string(static_cast<int>(h.type)));
  }
  return Status();
}

}  // namespace

bool BatchReader::next(Record& out) {
  if (done_) return false;
  if (read_ == header_.records) {
    done_ = true;
    if (offset_ != bytes_.size())
      (void)stop(std::to_string(bytes_.size() - offset_) + " bytes after the batch's " +
                 std::to_string(header_.records) + " records");
    return false;
  }
  if (bytes_.size() - offset_ < sizeof(RecordHeader)) return malformed("the batch ends before it");
  RecordHeader h;
  std::memcpy(&h, bytes_.data() + offset_, sizeof h);
  size_t body = offset_ + sizeof h;
  if (h.length > bytes_.size() - body) return malformed("its length runs past the batch");
  auto bodyBytes = bytes_.subspan(body, h.length);
  out = Record{};
  out.type = h.type;
  out.flags = h.flags;
  out.seq = h.seq;
  if (Status st = readBody(h, bodyBytes, out); !st.ok()) return malformed(st.message());
  size_t end = align8(body + h.length);
  offset_ = end < bytes_.size() ? end : bytes_.size();
  read_++;
  return true;
}

void BatchWriter::reset(std::byte* buffer, size_t capacity) {
  buf_ = buffer;
  capacity_ = capacity;
  offset_ = sizeof(BatchHeader);
  external_ = 0;
  records_ = 0;
}

size_t BatchWriter::messageSize(size_t srcLen, size_t dstLen, size_t payload, bool withTotal) {
  return align8(sizeof(RecordHeader) + srcLen + dstLen + (withTotal ? 8 : 0) + payload);
}

RecordHeader* BatchWriter::begin(RecordType type, size_t bodyLen) {
  auto* h = reinterpret_cast<RecordHeader*>(buf_ + offset_);
  std::memset(h, 0, sizeof *h);
  h->type = type;
  h->length = static_cast<uint32_t>(bodyLen);
  offset_ = align8(offset_ + sizeof(RecordHeader) + bodyLen);
  records_++;
  return h;
}

void BatchWriter::addMessage(uint64_t seq, uint8_t flags, std::string_view src,
                             std::string_view dst, uint64_t totalLength,
                             std::span<const std::byte> payload) {
  std::byte* p = writeMessageHead(seq, flags, src, dst, totalLength, payload.size());
  if (!payload.empty()) std::memcpy(p, payload.data(), payload.size());
}

void BatchWriter::addMessageHead(uint64_t seq, uint8_t flags, std::string_view src,
                                 std::string_view dst, uint64_t totalLength, size_t payloadLength) {
  const size_t start = offset_;
  std::byte* p = writeMessageHead(seq, flags, src, dst, totalLength, payloadLength);
  // Unpadded: the receiver takes the batch's last record up to its length.
  offset_ = static_cast<size_t>(p - (buf_ + start)) + start + payloadLength;
  external_ = payloadLength;
}

std::byte* BatchWriter::writeMessageHead(uint64_t seq, uint8_t flags, std::string_view src,
                                         std::string_view dst, uint64_t totalLength,
                                         size_t payloadLength) {
  bool first = hasTotalLength(flags);
  size_t body = src.size() + dst.size() + (first ? 8 : 0) + payloadLength;
  std::byte* p = buf_ + offset_ + sizeof(RecordHeader);
  RecordHeader* h = begin(RecordType::kMessage, body);
  h->flags = flags;
  h->srcLen = static_cast<uint8_t>(src.size());
  h->dstLen = static_cast<uint8_t>(dst.size());
  h->seq = seq;
  if (!src.empty()) std::memcpy(p, src.data(), src.size());
  p += src.size();
  if (!dst.empty()) std::memcpy(p, dst.data(), dst.size());
  p += dst.size();
  if (first) {
    std::memcpy(p, &totalLength, 8);
    p += 8;
  }
  return p;
}

void BatchWriter::addConfirm(uint64_t first, uint64_t last, uint16_t errc) {
  ConfirmBody b{};
  b.lastSeq = last;
  b.errc = errc;
  std::byte* p = buf_ + offset_ + sizeof(RecordHeader);
  RecordHeader* h = begin(RecordType::kConfirm, sizeof b);
  h->seq = first;
  std::memcpy(p, &b, sizeof b);
}

void BatchWriter::addHeartbeat() {
  begin(RecordType::kHeartbeat, 0);
}

void BatchWriter::addAuth(const AuthBody& body) {
  std::byte* p = buf_ + offset_ + sizeof(RecordHeader);
  begin(RecordType::kAuth, sizeof body);
  std::memcpy(p, &body, sizeof body);
}

void BatchWriter::addIdleClose(IdleClose action) {
  IdleCloseBody b{};
  b.action = action;
  std::byte* p = buf_ + offset_ + sizeof(RecordHeader);
  begin(RecordType::kIdleClose, sizeof b);
  std::memcpy(p, &b, sizeof b);
}

size_t BatchWriter::interestSize(std::string_view group, std::string_view pattern) {
  return align8(sizeof(RecordHeader) + group.size() + pattern.size());
}

void BatchWriter::addInterest(InterestOp op, std::string_view group, std::string_view pattern) {
  std::byte* p = buf_ + offset_ + sizeof(RecordHeader);
  RecordHeader* h = begin(RecordType::kInterest, group.size() + pattern.size());
  h->flags = static_cast<uint8_t>(op);
  h->srcLen = static_cast<uint8_t>(group.size());
  h->dstLen = static_cast<uint8_t>(pattern.size());
  std::memcpy(p, group.data(), group.size());
  std::memcpy(p + group.size(), pattern.data(), pattern.size());
}

void BatchWriter::addPubResult(uint64_t token, const PubResultBody& body) {
  std::byte* p = buf_ + offset_ + sizeof(RecordHeader);
  RecordHeader* h = begin(RecordType::kPubResult, sizeof body);
  h->seq = token;
  std::memcpy(p, &body, sizeof body);
}

void BatchWriter::addResume(ResumeKind kind, uint64_t nextExpected, uint64_t lowestUnsettled,
                            uint32_t session, uint32_t peerSession) {
  ResumeBody b{lowestUnsettled, session, peerSession};
  std::byte* p = buf_ + offset_ + sizeof(RecordHeader);
  RecordHeader* h = begin(RecordType::kResume, sizeof b);
  h->flags = static_cast<uint8_t>(kind);
  h->seq = nextExpected;
  std::memcpy(p, &b, sizeof b);
}

size_t BatchWriter::finish(uint32_t credits, uint16_t released) {
  BatchHeader h{};
  h.magic = kBatchMagic;
  h.records = records_;
  h.released = released;
  h.credits = credits;
  h.length = static_cast<uint32_t>(offset_);
  std::memcpy(buf_, &h, sizeof h);
  return offset_;
}

}  // namespace rdmamsg::peer
