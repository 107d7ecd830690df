// Unit tests of per-batch authentication (daemon/peer/batch_auth.h): the
// session keys a handshake yields, and what a receiver does with a batch
// that is genuine, forged, altered, replayed, reordered, truncated or made
// for another connection. Also prints the cost of the MAC per batch.
#include "daemon/peer/batch_auth.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {
namespace {

const std::string kSecret(32, 's');

auth::Transcript transcript() {
  auth::Transcript t;
  t.dialer = "alpha";
  t.acceptor = "beta";
  t.dialerIncarnation = 0x1111;
  t.acceptorIncarnation = 0x2222;
  t.dialerNonce.fill(1);
  t.acceptorNonce.fill(2);
  t.binding.dialerQpn = 0x123456;
  t.binding.acceptorQpn = 0x654321;
  t.binding.dialerGid.fill(3);
  t.binding.acceptorGid.fill(4);
  return t;
}

SessionKeys keysOf(const auth::Transcript& t, BatchProtection p = BatchProtection::kMac,
                   const std::string& secret = kSecret) {
  Result<SessionKeys> k = deriveSessionKeys(secret, t, p);
  EXPECT_TRUE(k.ok()) << k.status().message();
  return k.ok() ? *k : SessionKeys{};
}

// A batch of one message record, as a connection fills a send buffer: room
// for its trailer after it.
struct Batch {
  std::vector<std::byte> buf;
  size_t size = 0;
  explicit Batch(size_t payload = 40, uint32_t credits = 3) : buf(payload + 256) {
    BatchWriter w;
    w.reset(buf.data(), buf.size() - kBatchTrailerSize);
    std::vector<std::byte> body(payload, std::byte{'x'});
    w.addMessage(1, kFirstFragment | kLastFragment, "src", "inbox", 0, body);
    size = w.finish(credits);
  }
  std::span<const std::byte> bytes() const { return {buf.data(), size}; }
};

// A received batch is its own buffer (verify decrypts it in place): a copy.
BatchAuth::Verdict check(BatchAuth& receiver, std::span<const std::byte> bytes) {
  std::vector<std::byte> copy(bytes.begin(), bytes.end());
  return receiver.verify(copy).value();
}

// A dialer and an acceptor of one connection, each with its end's keys.
struct Ends {
  BatchAuth dialer, acceptor;
  explicit Ends(const SessionKeys& k, BatchProtection p = BatchProtection::kMac,
                KeyLimits limits = {})
      : dialer(limits), acceptor(limits) {
    EXPECT_TRUE(dialer.start(k.dialerToAcceptor, k.acceptorToDialer, p).ok());
    EXPECT_TRUE(acceptor.start(k.acceptorToDialer, k.dialerToAcceptor, p).ok());
  }
  // The dialer seals a fresh batch.
  Batch send(size_t payload = 40) {
    Batch b(payload);
    b.size = dialer.seal(b.buf.data(), b.size).value();
    return b;
  }
};

// Every attack, with a MAC and with encryption.
class BatchAuthTest : public ::testing::TestWithParam<BatchProtection> {
 protected:
  Ends ends() { return Ends(keysOf(transcript(), GetParam()), GetParam()); }
};

TEST(SessionKeys, AreFreshForEveryConnectionAndBoundToAllOfIt) {
  const SessionKeys base = keysOf(transcript());
  EXPECT_EQ(base.dialerToAcceptor, keysOf(transcript()).dialerToAcceptor) << "deterministic";
  EXPECT_NE(base.dialerToAcceptor, base.acceptorToDialer) << "one key per direction";
  std::vector<auth::Transcript> others(9, transcript());
  others[0].dialerNonce[5] ^= 1;
  others[1].acceptorNonce[0] ^= 1;
  others[2].dialer = "gamma";
  others[3].acceptorIncarnation++;
  others[4].binding.dialerQpn++;
  others[5].binding.acceptorQpn++;
  others[6].binding.dialerGid[15] ^= 1;
  others[7].binding.acceptorGid[0] ^= 1;
  others[8].dialerIncarnation++;
  for (size_t i = 0; i < others.size(); i++) {
    const SessionKeys k = keysOf(others[i]);
    EXPECT_NE(k.dialerToAcceptor, base.dialerToAcceptor) << "input " << i;
    EXPECT_NE(k.acceptorToDialer, base.acceptorToDialer) << "input " << i;
  }
  EXPECT_NE(keysOf(transcript(), BatchProtection::kMac, std::string(32, 't')).dialerToAcceptor,
            base.dialerToAcceptor);
  EXPECT_NE(keysOf(transcript(), BatchProtection::kEncrypt).dialerToAcceptor, base.dialerToAcceptor)
      << "keys for encryption are not the MAC's";
}

TEST_P(BatchAuthTest, GenuineBatchesVerifyInOrderAndKeepTheirBytes) {
  Ends e = ends();
  for (uint64_t seq = 1; seq <= 3; seq++) {
    const Batch b = e.send();
    ASSERT_EQ(b.size, Batch().size + kBatchTrailerSize);
    Batch received = b;
    const BatchAuth::Verdict v = e.acceptor.verify({received.buf.data(), received.size}).value();
    ASSERT_FALSE(v.reject) << keyOf(*v.reject);
    EXPECT_EQ(v.seq, seq);
    EXPECT_EQ(v.length, Batch().size);
    // With encryption only the header travels in the clear; verified, the
    // records are the sender's again.
    const Batch plain;
    const bool sameOnTheWire = std::memcmp(b.buf.data(), plain.buf.data(), plain.size) == 0;
    EXPECT_EQ(sameOnTheWire, GetParam() == BatchProtection::kMac);
    EXPECT_EQ(std::memcmp(b.buf.data(), plain.buf.data(), sizeof(BatchHeader)), 0);
    EXPECT_EQ(std::memcmp(received.buf.data(), plain.buf.data(), plain.size), 0);
    BatchReader r(received.bytes().first(v.length));
    EXPECT_TRUE(r.open());
    EXPECT_EQ(r.credits(), 3u);
  }
  EXPECT_EQ(e.dialer.sent(), 3u);
  EXPECT_EQ(e.acceptor.expected(), 4u);
}

TEST_P(BatchAuthTest, AForgedBatchIsRejected) {
  Ends e = ends();
  // Made up by someone without the keys: well formed, its trailer a guess.
  Batch forged;
  std::memset(forged.buf.data() + forged.size, 0, kBatchTrailerSize);
  forged.buf[forged.size] = std::byte{1};  // the right sequence number
  forged.size += kBatchTrailerSize;
  EXPECT_EQ(check(e.acceptor, forged.bytes()).reject, BatchReject::kBadMac);
  // Sealed under the keys of another connection (a relayed handshake).
  auth::Transcript other = transcript();
  other.binding.acceptorQpn ^= 0x10;
  Ends relayed(keysOf(other, GetParam()), GetParam());
  EXPECT_EQ(check(e.acceptor, relayed.send().bytes()).reject, BatchReject::kBadMac);
  // Reflected: the dialer's own batch sent back to it.
  EXPECT_EQ(check(e.dialer, e.send().bytes()).reject, BatchReject::kBadMac);
}

// A batch that does not verify is the peer's doing: a verdict, never this
// node's io_error (kept for a libcrypto call that fails here).
TEST_P(BatchAuthTest, ABatchThatDoesNotVerifyIsAVerdictNotALocalFailure) {
  Ends e = ends();
  const Batch genuine = e.send();
  Batch forged = genuine;
  forged.buf[forged.size - 1] ^= std::byte{1};  // the tag's last byte
  std::vector<std::byte> copy(forged.bytes().begin(), forged.bytes().end());
  const Result<BatchAuth::Verdict> v = e.acceptor.verify(copy);
  ASSERT_TRUE(v.ok()) << v.status().toString();
  EXPECT_EQ(v->reject, BatchReject::kBadMac);
  // The genuine one still verifies after it.
  EXPECT_FALSE(check(e.acceptor, genuine.bytes()).reject);
}

TEST_P(BatchAuthTest, EveryFlippedBitIsRejected) {
  Ends e = ends();
  const Batch b = e.send();
  for (size_t bit = 0; bit < b.size * 8; bit++) {
    Batch flipped = b;
    flipped.buf[bit / 8] ^= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
    const BatchAuth::Verdict v = check(e.acceptor, flipped.bytes());
    ASSERT_TRUE(v.reject) << "bit " << bit;
    // A flip in the header's length field may make it look short instead.
    if (*v.reject != BatchReject::kTruncated) {
      EXPECT_EQ(*v.reject, BatchReject::kBadMac) << bit;
    }
  }
  EXPECT_FALSE(check(e.acceptor, b.bytes()).reject) << "the genuine one still verifies";
}

TEST_P(BatchAuthTest, AReplayedBatchIsRejected) {
  Ends e = ends();
  const Batch first = e.send();
  ASSERT_FALSE(check(e.acceptor, first.bytes()).reject);
  const BatchAuth::Verdict v = check(e.acceptor, first.bytes());
  EXPECT_EQ(v.reject, BatchReject::kReplayed);
  EXPECT_EQ(v.seq, 1u);
  EXPECT_FALSE(check(e.acceptor, e.send().bytes()).reject);
}

TEST_P(BatchAuthTest, ReorderedBatchesAreRejected) {
  Ends e = ends();
  const Batch one = e.send(), two = e.send();
  EXPECT_EQ(check(e.acceptor, two.bytes()).reject, BatchReject::kReordered);
  EXPECT_FALSE(check(e.acceptor, one.bytes()).reject) << "a rejection changes nothing";
  EXPECT_FALSE(check(e.acceptor, two.bytes()).reject);
}

TEST_P(BatchAuthTest, TruncatedAndExtendedBatchesAreRejected) {
  Ends e = ends();
  const Batch b = e.send();
  for (size_t cut : {size_t{1}, size_t{8}, kBatchTagSize, kBatchTrailerSize, b.size - 17, b.size})
    EXPECT_EQ(check(e.acceptor, b.bytes().first(b.size - cut)).reject, BatchReject::kTruncated)
        << "cut " << cut;
  Batch longer = b;
  longer.size += 8;
  EXPECT_EQ(check(e.acceptor, longer.bytes()).reject, BatchReject::kBadMac);
  // A trailer moved up by a shortened length field does not verify either.
  Batch shortened = b;
  const uint32_t len = static_cast<uint32_t>(b.size - kBatchTrailerSize - 8);
  std::memcpy(shortened.buf.data() + offsetof(BatchHeader, length), &len, sizeof len);
  EXPECT_TRUE(check(e.acceptor, shortened.bytes()).reject);
  EXPECT_FALSE(check(e.acceptor, b.bytes()).reject);
}

TEST(BatchAuth, ProofsAreBoundToTheConnection) {
  const auth::Transcript t = transcript();
  auth::Transcript relayed = t;
  relayed.binding.dialerQpn ^= 1;
  const auth::Proof proof = auth::prove(kSecret, auth::Role::kDialer, t).value();
  EXPECT_TRUE(auth::verify(kSecret, auth::Role::kDialer, t, proof.data()));
  EXPECT_FALSE(auth::verify(kSecret, auth::Role::kDialer, relayed, proof.data()));
  relayed = t;
  relayed.binding.acceptorGid[3] ^= 1;
  EXPECT_FALSE(auth::verify(kSecret, auth::Role::kDialer, relayed, proof.data()));
}

INSTANTIATE_TEST_SUITE_P(Protections, BatchAuthTest,
                         ::testing::Values(BatchProtection::kMac, BatchProtection::kEncrypt),
                         [](const auto& param) {
                           return std::string(param.param == BatchProtection::kMac ? "Mac"
                                                                                   : "Encrypt");
                         });

// Keys rotate after a bounded amount of data: both directions move on
// together, in sequence, and nothing is lost or repeated.
TEST_P(BatchAuthTest, KeysRotateAfterBoundedDataWithoutLosingABatch) {
  const SessionKeys k = keysOf(transcript(), GetParam());
  Ends e(k, GetParam(), KeyLimits{300, std::chrono::seconds(600)});
  std::vector<Batch> sent;
  for (int i = 0; i < 20; i++) {
    sent.push_back(e.send(100));
    const BatchAuth::Verdict v = check(e.acceptor, sent.back().bytes());
    ASSERT_FALSE(v.reject) << i << ": " << keyOf(*v.reject);
    EXPECT_EQ(v.seq, static_cast<uint64_t>(i + 1));
  }
  EXPECT_GE(e.dialer.rotations(), 5u);
  EXPECT_EQ(e.acceptor.rotations(), e.dialer.rotations());
  // A batch of an epoch left behind, or of one skipped, does not verify.
  EXPECT_EQ(check(e.acceptor, sent[0].bytes()).reject, BatchReject::kBadMac);
  const Batch genuine = e.send(100);
  Batch skipped = genuine;
  std::byte* word = skipped.buf.data() + skipped.size - kBatchTrailerSize;
  word[6] = static_cast<std::byte>(static_cast<uint8_t>(word[6]) + 1);  // epoch + 1
  EXPECT_EQ(check(e.acceptor, skipped.bytes()).reject, BatchReject::kBadMac);
  word[6] = static_cast<std::byte>(static_cast<uint8_t>(word[6]) + 1);  // epoch + 2
  EXPECT_EQ(check(e.acceptor, skipped.bytes()).reject, BatchReject::kBadMac);
  ASSERT_FALSE(check(e.acceptor, genuine.bytes()).reject) << "rejections moved nothing";
  // A replay within the epoch is still a replay.
  const Batch last = e.send(10);
  ASSERT_FALSE(check(e.acceptor, last.bytes()).reject);
  EXPECT_EQ(check(e.acceptor, last.bytes()).reject, BatchReject::kReplayed);
}

TEST_P(BatchAuthTest, KeysRotateAfterBoundedTime) {
  Ends e(keysOf(transcript(), GetParam()), GetParam(),
         KeyLimits{1ULL << 40, std::chrono::seconds(0)});
  for (int i = 0; i < 3; i++)
    ASSERT_FALSE(check(e.acceptor, e.send().bytes()).reject);
  EXPECT_EQ(e.dialer.rotations(), 3u) << "every batch finds its key too old";
  EXPECT_EQ(e.acceptor.rotations(), 3u);
  EXPECT_FALSE(e.dialer.spent());
}

// What the MAC costs (printed, not asserted): sealing and verifying one
// batch of 64 KiB and one of a 64-byte message, each with its context
// re-initialised as the connection does.
TEST_P(BatchAuthTest, CostPerBatch) {
  Ends e = ends();
  for (size_t payload : {size_t{64}, size_t{64 * 1024 - 128}}) {
    Batch b(payload);
    const size_t length = b.size;
    constexpr int kRounds = 2000;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRounds; i++) {
      b.size = e.dialer.seal(b.buf.data(), length).value();
      ASSERT_FALSE(e.acceptor.verify({b.buf.data(), b.size}).value().reject);
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
        kRounds / 2;
    std::printf("[ cost     ] %s per batch of %zu bytes: %.0f ns (%.2f GB/s)\n",
                toString(GetParam()), length, ns, static_cast<double>(length) / ns);
  }
}

}  // namespace
}  // namespace rdmamsg::peer
