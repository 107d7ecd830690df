// libFuzzer target: the peer batch and record decoder (daemon/peer/protocol.h).
//
// The input is what a completion reports for one receive buffer: the batch as
// another daemon (or anything on the fabric) wrote it, `byte_len` bytes. The
// target opens it and reads records until the end or a malformed one, as the
// daemon's Peer does, and reads every byte of every view a Record gives (so
// that AddressSanitizer sees any view outside the input). A batch read to its
// end must be the one BatchWriter writes for the same records: written again
// and read back, it gives the same records.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "daemon/peer/protocol.h"
#include "fuzz/check.h"

namespace rdmamsg::peer {
namespace {

using Bytes = std::span<const std::byte>;

bool sameBytes(Bytes a, Bytes b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// A non-empty view lies inside `batch`; its bytes are read.
bool inside(Bytes batch, const void* p, size_t n) {
  if (n == 0) return true;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto batchBegin = reinterpret_cast<uintptr_t>(batch.data());
  if (begin < batchBegin || n > batch.size() || begin - batchBegin > batch.size() - n) return false;
  volatile unsigned sum = 0;
  for (size_t i = 0; i < n; ++i)
    sum = sum + static_cast<unsigned>(static_cast<const std::byte*>(p)[i]);
  return true;
}

void checkRecord(const Record& r, Bytes batch) {
  switch (r.type) {
    case RecordType::kMessage:
      FUZZ_CHECK(!r.dstService.empty());
      FUZZ_CHECK(r.srcService.size() <= UINT8_MAX && r.dstService.size() <= UINT8_MAX);
      FUZZ_CHECK(inside(batch, r.srcService.data(), r.srcService.size()));
      FUZZ_CHECK(inside(batch, r.dstService.data(), r.dstService.size()));
      FUZZ_CHECK(inside(batch, r.payload.data(), r.payload.size()));
      if (!hasTotalLength(r.flags)) FUZZ_CHECK(r.totalLength == 0);
      return;
    case RecordType::kConfirm:
      FUZZ_CHECK(r.confirm.lastSeq >= r.seq);
      FUZZ_CHECK(r.srcService.empty() && r.dstService.empty() && r.payload.empty());
      return;
    case RecordType::kHeartbeat:
      FUZZ_CHECK(r.srcService.empty() && r.dstService.empty() && r.payload.empty());
      return;
    case RecordType::kAuth:
      FUZZ_CHECK(r.auth.proofCount == 1 || r.auth.proofCount == 2);
      FUZZ_CHECK(r.srcService.empty() && r.dstService.empty() && r.payload.empty());
      return;
    case RecordType::kIdleClose:
      FUZZ_CHECK(r.idleClose == IdleClose::kRequest || r.idleClose == IdleClose::kAccept ||
                 r.idleClose == IdleClose::kRefuse);
      FUZZ_CHECK(r.srcService.empty() && r.dstService.empty() && r.payload.empty());
      return;
    case RecordType::kInterest:
      FUZZ_CHECK(r.flags == static_cast<uint8_t>(InterestOp::kAdd) ||
                 r.flags == static_cast<uint8_t>(InterestOp::kRemove));
      FUZZ_CHECK(!r.dstService.empty() && r.payload.empty());
      FUZZ_CHECK(inside(batch, r.srcService.data(), r.srcService.size()));
      FUZZ_CHECK(inside(batch, r.dstService.data(), r.dstService.size()));
      return;
    case RecordType::kPubResult:
      FUZZ_CHECK(uint64_t{r.pubResult.taken} + r.pubResult.dropped <= r.pubResult.matched);
      FUZZ_CHECK(r.srcService.empty() && r.dstService.empty() && r.payload.empty());
      return;
    case RecordType::kResume:
      FUZZ_CHECK(r.flags == static_cast<uint8_t>(ResumeKind::kContinue) ||
                 r.flags == static_cast<uint8_t>(ResumeKind::kFresh) ||
                 r.flags == static_cast<uint8_t>(ResumeKind::kProgress) ||
                 r.flags == static_cast<uint8_t>(ResumeKind::kMove) ||
                 r.flags == static_cast<uint8_t>(ResumeKind::kResults));
      FUZZ_CHECK((r.seq != 0 || r.flags == static_cast<uint8_t>(ResumeKind::kMove) ||
                  r.flags == static_cast<uint8_t>(ResumeKind::kResults)) &&
                 r.resume.lowestUnsettled != 0);
      FUZZ_CHECK(r.srcService.empty() && r.dstService.empty() && r.payload.empty());
      return;
  }
  FUZZ_CHECK(!"a record of an unknown type was accepted");
}

bool sameRecord(const Record& a, const Record& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case RecordType::kMessage:
      return a.flags == b.flags && a.seq == b.seq && a.srcService == b.srcService &&
             a.dstService == b.dstService && a.totalLength == b.totalLength &&
             sameBytes(a.payload, b.payload);
    case RecordType::kConfirm:  // the writer leaves flags and reserved bytes 0
      return a.seq == b.seq && a.confirm.lastSeq == b.confirm.lastSeq &&
             a.confirm.errc == b.confirm.errc;
    case RecordType::kHeartbeat:  // nothing but the type is read
      return true;
    case RecordType::kAuth:
      return std::memcmp(&a.auth, &b.auth, sizeof a.auth) == 0;
    case RecordType::kIdleClose:  // the writer leaves the reserved bytes 0
      return a.idleClose == b.idleClose;
    case RecordType::kInterest:
      return a.flags == b.flags && a.srcService == b.srcService && a.dstService == b.dstService;
    case RecordType::kPubResult:  // the writer leaves the reserved bytes 0
      return a.seq == b.seq && a.pubResult.matched == b.pubResult.matched &&
             a.pubResult.taken == b.pubResult.taken && a.pubResult.dropped == b.pubResult.dropped;
    case RecordType::kResume:
      return a.flags == b.flags && a.seq == b.seq &&
             a.resume.lowestUnsettled == b.resume.lowestUnsettled &&
             a.resume.session == b.resume.session && a.resume.peerSession == b.resume.peerSession;
  }
  return false;
}

// Writes `records` with BatchWriter and reads them back.
void checkRoundTrip(const std::vector<Record>& records, uint32_t credits, uint16_t released,
                    size_t originalSize) {
  // The writer pads every record to 8 bytes; the original's last one may be
  // unpadded, so the copy is at most 7 bytes longer.
  std::vector<std::byte> buffer(align8(originalSize) + 8);
  BatchWriter writer;
  writer.reset(buffer.data(), buffer.size());
  for (const Record& r : records) {
    switch (r.type) {
      case RecordType::kMessage:
        FUZZ_CHECK(writer.room() >= BatchWriter::messageSize(r.srcService.size(),
                                                             r.dstService.size(), r.payload.size(),
                                                             hasTotalLength(r.flags)));
        writer.addMessage(r.seq, r.flags, r.srcService, r.dstService, r.totalLength, r.payload);
        break;
      case RecordType::kConfirm:
        FUZZ_CHECK(writer.room() >= kConfirmRecordSize);
        writer.addConfirm(r.seq, r.confirm.lastSeq, r.confirm.errc);
        break;
      case RecordType::kHeartbeat:
        FUZZ_CHECK(writer.room() >= sizeof(RecordHeader));
        writer.addHeartbeat();
        break;
      case RecordType::kAuth:
        FUZZ_CHECK(writer.room() >= kAuthRecordSize);
        writer.addAuth(r.auth);
        break;
      case RecordType::kIdleClose:
        FUZZ_CHECK(writer.room() >= kIdleCloseRecordSize);
        writer.addIdleClose(r.idleClose);
        break;
      case RecordType::kInterest:
        FUZZ_CHECK(writer.room() >= BatchWriter::interestSize(r.srcService, r.dstService));
        writer.addInterest(static_cast<InterestOp>(r.flags), r.srcService, r.dstService);
        break;
      case RecordType::kPubResult:
        FUZZ_CHECK(writer.room() >= kPubResultRecordSize);
        writer.addPubResult(r.seq, r.pubResult);
        break;
      case RecordType::kResume:
        FUZZ_CHECK(writer.room() >= kResumeRecordSize);
        writer.addResume(static_cast<ResumeKind>(r.flags), r.seq, r.resume.lowestUnsettled,
                         r.resume.session, r.resume.peerSession);
        break;
    }
  }
  const size_t length = writer.finish(credits, released);
  FUZZ_CHECK(length <= align8(originalSize));

  BatchReader reader(Bytes(buffer.data(), length));
  FUZZ_CHECK(reader.open());
  FUZZ_CHECK(reader.records() == records.size() && reader.credits() == credits &&
             reader.released() == released);
  Record again;
  for (const Record& r : records) {
    FUZZ_CHECK(reader.next(again));
    FUZZ_CHECK(sameRecord(again, r));
  }
  FUZZ_CHECK(!reader.next(again) && reader.status().ok());
}

}  // namespace
}  // namespace rdmamsg::peer

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rdmamsg::peer;
  const Bytes bytes(reinterpret_cast<const std::byte*>(data), size);
  BatchReader reader(bytes);
  if (!reader.open()) return 0;

  BatchHeader header;
  std::memcpy(&header, data, sizeof header);
  FUZZ_CHECK(header.magic == kBatchMagic && header.length >= sizeof header &&
             header.length <= size);
  const Bytes batch = bytes.first(header.length);
  // Fewer bytes than the header announces: a truncated batch is refused.
  FUZZ_CHECK(!BatchReader(batch.first(header.length - 1)).open());

  std::vector<Record> records;
  Record r;
  while (reader.next(r)) {
    FUZZ_CHECK(records.size() < reader.records());
    checkRecord(r, batch.subspan(sizeof header));
    records.push_back(r);
  }
  const bool clean = reader.status().ok();
  FUZZ_CHECK(clean || reader.status().code() == rdmamsg::Errc::protocol_error);
  FUZZ_CHECK(!reader.next(r) && reader.status().ok() == clean);  // the end, or the fault, stays
  if (clean) {
    FUZZ_CHECK(records.size() == reader.records());
    checkRoundTrip(records, reader.credits(), reader.released(), header.length);
  }
  return 0;
}
