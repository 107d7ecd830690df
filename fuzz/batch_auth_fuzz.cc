// libFuzzer target: the batch verifier (daemon/peer/batch_auth.h), which
// sees every batch from the fabric before anything else of the daemon does.
//
// The first input byte picks what the rest is:
// - below 0x80, a received batch (what a completion reports), checked by a
//   receiver that has already taken (byte % 4) genuine batches. Whatever it
//   is, the verifier reads only its bytes; a rejection changes nothing; and
//   a batch it accepts must be genuine: exactly what a sender with the
//   connection's key writes for those bytes at that sequence number.
// - from 0x80, a batch body the target seals with the sender's key and then
//   alters as the next bits say (none, one bit flipped, cut short, replayed,
//   two reordered, reflected to its sender; bit 0x08: encrypted): the
//   genuine batch verifies with its own length and bytes, and every
//   alteration is rejected with its reason.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "daemon/peer/batch_auth.h"
#include "daemon/peer/protocol.h"
#include "fuzz/check.h"

namespace rdmamsg::peer {
namespace {

const SessionKeys& keys() {
  static const SessionKeys k = [] {
    auth::Transcript t;
    t.dialer = "alpha";
    t.acceptor = "beta";
    t.dialerIncarnation = 1;
    t.acceptorIncarnation = 2;
    t.binding.dialerQpn = 0x11;
    t.binding.acceptorQpn = 0x22;
    return deriveSessionKeys(std::string(32, 'k'), t).value();
  }();
  return k;
}

void startSender(BatchAuth& a, BatchProtection p = BatchProtection::kMac) {
  FUZZ_CHECK(a.start(keys().dialerToAcceptor, keys().acceptorToDialer, p).ok());
}
void startReceiver(BatchAuth& a, BatchProtection p = BatchProtection::kMac) {
  FUZZ_CHECK(a.start(keys().acceptorToDialer, keys().dialerToAcceptor, p).ok());
}

// A received batch is a buffer of its own (verify decrypts in place).
BatchAuth::Verdict check(BatchAuth& receiver, std::span<const std::byte> bytes) {
  std::vector<std::byte> copy(bytes.begin(), bytes.end());
  return receiver.verify(copy).value();
}

// A body made a batch: at least a header, its length field its own size.
std::vector<std::byte> sealable(std::span<const uint8_t> body) {
  std::vector<std::byte> b(std::max(body.size(), sizeof(BatchHeader)) + kBatchTrailerSize);
  if (!body.empty()) std::memcpy(b.data(), body.data(), body.size());
  const auto length = static_cast<uint32_t>(b.size() - kBatchTrailerSize);
  std::memcpy(b.data() + offsetof(BatchHeader, length), &length, sizeof length);
  return b;
}

void received(uint8_t op, std::span<const uint8_t> input) {
  BatchAuth sender, receiver;
  startSender(sender);
  startReceiver(receiver);
  const unsigned taken = op % 4;
  for (unsigned i = 0; i < taken; i++) {
    std::vector<std::byte> b = sealable({});
    sender.seal(b.data(), b.size() - kBatchTrailerSize).value();
    FUZZ_CHECK(!receiver.verify(b).value().reject);
  }
  // A copy of its own, so that AddressSanitizer sees any read past it.
  std::vector<std::byte> bytes(input.size());
  if (!input.empty()) std::memcpy(bytes.data(), input.data(), input.size());
  const BatchAuth::Verdict v = receiver.verify(bytes).value();
  if (v.reject) {
    FUZZ_CHECK(receiver.expected() == taken + 1);
    return;
  }
  FUZZ_CHECK(receiver.expected() == taken + 2 && v.seq == taken + 1);
  FUZZ_CHECK(v.length + kBatchTrailerSize == bytes.size());
  std::vector<std::byte> genuine(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(v.length));
  genuine.resize(bytes.size());
  FUZZ_CHECK(sender.seal(genuine.data(), v.length).value() == bytes.size());
  FUZZ_CHECK(genuine == bytes);
}

void altered(uint8_t op, std::span<const uint8_t> input) {
  const uint16_t where = input.size() >= 2 ? static_cast<uint16_t>(input[0] | input[1] << 8) : 0;
  const BatchProtection p = (op & 0x08) != 0 ? BatchProtection::kEncrypt : BatchProtection::kMac;
  std::vector<std::byte> one = sealable(input), two = one;
  const std::vector<std::byte> plain = one;
  const size_t length = one.size() - kBatchTrailerSize;
  BatchAuth sender, receiver;
  startSender(sender, p);
  startReceiver(receiver, p);
  FUZZ_CHECK(sender.seal(one.data(), length).value() == one.size());
  sender.seal(two.data(), length).value();
  switch (op % 8) {  // 6, 7: as sealed
    case 1: {        // one bit flipped anywhere
      std::vector<std::byte> flipped = one;
      flipped[(where / 8) % flipped.size()] ^= std::byte{static_cast<uint8_t>(1u << (where % 8))};
      FUZZ_CHECK(check(receiver, flipped).reject);
      break;
    }
    case 2: {  // cut short
      const size_t cut = 1 + where % one.size();
      const BatchAuth::Verdict v = check(receiver, std::span(one).first(one.size() - cut));
      FUZZ_CHECK(v.reject == BatchReject::kTruncated || v.reject == BatchReject::kBadMac);
      break;
    }
    case 3:  // replayed
      FUZZ_CHECK(!check(receiver, one).reject);
      FUZZ_CHECK(check(receiver, one).reject == BatchReject::kReplayed);
      FUZZ_CHECK(!check(receiver, two).reject);
      return;
    case 4:  // reordered
      FUZZ_CHECK(check(receiver, two).reject == BatchReject::kReordered);
      break;
    case 5: {  // reflected: the receiver's own sending key does not verify it
      BatchAuth back;
      startSender(back, p);
      FUZZ_CHECK(check(back, one).reject == BatchReject::kBadMac);
      break;
    }
    default:
      break;
  }
  // Nothing rejected moved the receiver: the genuine batches verify, in
  // order, and give back the bytes that were sealed.
  const BatchAuth::Verdict v = receiver.verify(one).value();
  FUZZ_CHECK(!v.reject && v.length == length && v.seq == 1);
  FUZZ_CHECK(std::memcmp(one.data(), plain.data(), length) == 0);
  FUZZ_CHECK(!check(receiver, two).reject);
}

}  // namespace
}  // namespace rdmamsg::peer

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> rest(data + 1, size - 1);
  if (data[0] < 0x80)
    rdmamsg::peer::received(data[0], rest);
  else
    rdmamsg::peer::altered(data[0], rest);
  return 0;
}
