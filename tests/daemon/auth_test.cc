// Tests of peer authentication's proofs (daemon/peer/auth.h) and of the
// record that carries them.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "daemon/peer/auth.h"

namespace rdmamsg::peer {
namespace {

// One BatchReader::next as a number: 1 a record, 0 the end, -1 malformed.
int nextOf(BatchReader& r, Record& rec) {
  if (r.next(rec)) return 1;
  return r.status().ok() ? 0 : -1;
}

using auth::Role;

auth::Transcript transcript() {
  auth::Transcript t;
  t.dialer = "alpha";
  t.acceptor = "beta";
  t.dialerIncarnation = 0x1111;
  t.acceptorIncarnation = 0x2222;
  t.dialerNonce = auth::freshNonce().value();
  t.acceptorNonce = auth::freshNonce().value();
  return t;
}

const std::string kKey = "0123456789abcdef0123456789abcdef";

TEST(Auth, AProofVerifiesUnderItsOwnKeyRoleAndTranscriptOnly) {
  const auth::Transcript t = transcript();
  const auth::Proof p = auth::prove(kKey, Role::kDialer, t).value();
  EXPECT_TRUE(auth::verify(kKey, Role::kDialer, t, p.data()));
  EXPECT_FALSE(auth::verify(kKey + "x", Role::kDialer, t, p.data())) << "another secret";
  EXPECT_FALSE(auth::verify(kKey, Role::kAcceptor, t, p.data())) << "reflected to its sender";
  auto other = t;
  other.dialerNonce[0] ^= 1;
  EXPECT_FALSE(auth::verify(kKey, Role::kDialer, other, p.data())) << "another dialer nonce";
  other = t;
  other.acceptorNonce[31] ^= 0x80;
  EXPECT_FALSE(auth::verify(kKey, Role::kDialer, other, p.data())) << "another acceptor nonce";
  other = t;
  other.acceptorIncarnation++;
  EXPECT_FALSE(auth::verify(kKey, Role::kDialer, other, p.data())) << "another incarnation";
  other = t;
  other.dialer = "gamma";
  EXPECT_FALSE(auth::verify(kKey, Role::kDialer, other, p.data())) << "another name";
  // Names are length-prefixed: moving a character from one to the other changes the proof.
  other = t;
  other.dialer = "alphab";
  other.acceptor = "eta";
  EXPECT_FALSE(auth::verify(kKey, Role::kDialer, other, p.data())) << "names run together";
  auto tampered = p;
  tampered[5] ^= 1;
  EXPECT_FALSE(auth::verify(kKey, Role::kDialer, t, tampered.data()));
}

// A proof that does not verify is the peer's fault (permission_denied), not
// this node's (io_error, for a libcrypto failure).
TEST(Auth, AProofThatDoesNotVerifyIsPermissionDeniedNotALocalFailure) {
  const auth::Transcript t = transcript();
  const auth::Proof p = auth::prove(kKey, Role::kDialer, t).value();
  EXPECT_EQ(auth::verify(kKey, Role::kDialer, t, p.data()), Status());
  const Status st = auth::verify(kKey + "x", Role::kDialer, t, p.data());
  EXPECT_EQ(st.code(), Errc::permission_denied) << st.toString();
  EXPECT_NE(st.code(), Errc::io_error);
}

TEST(Auth, ProofsAreHmacSha256AndNoncesAreFresh) {
  const auth::Transcript t = transcript();
  EXPECT_EQ(auth::prove(kKey, Role::kDialer, t).value(),
            auth::prove(kKey, Role::kDialer, t).value());
  EXPECT_NE(auth::prove(kKey, Role::kDialer, t).value(),
            auth::prove(kKey, Role::kAcceptor, t).value());
  EXPECT_NE(auth::freshNonce().value(), auth::freshNonce().value());
}

TEST(Auth, TheRecordRoundTripsAndIsCheckedOnArrival) {
  AuthBody body{};
  body.proofCount = 2;
  for (size_t i = 0; i < kNonceSize; i++)
    body.nonce[i] = static_cast<uint8_t>(i);
  body.proofs[1][0] = 0xab;
  std::vector<std::byte> buf(256);
  BatchWriter w;
  w.reset(buf.data(), buf.size());
  w.addAuth(body);
  const size_t n = w.finish(3);
  EXPECT_EQ(n, sizeof(BatchHeader) + kAuthRecordSize);
  BatchReader r({buf.data(), n});
  ASSERT_TRUE(r.open());
  Record rec;
  ASSERT_EQ(nextOf(r, rec), 1);
  EXPECT_EQ(rec.type, RecordType::kAuth);
  EXPECT_EQ(std::memcmp(&rec.auth, &body, sizeof body), 0);
  EXPECT_EQ(nextOf(r, rec), 0);

  for (uint8_t count : {0, 3}) {  // one or two proofs, nothing else
    body.proofCount = count;
    w.reset(buf.data(), buf.size());
    w.addAuth(body);
    BatchReader bad({buf.data(), w.finish(0)});
    ASSERT_TRUE(bad.open());
    EXPECT_EQ(nextOf(bad, rec), -1) << int{count};
  }
  // A record shorter than its body.
  body.proofCount = 1;
  w.reset(buf.data(), buf.size());
  w.addAuth(body);
  const size_t len = w.finish(0);
  uint32_t shorter = sizeof(AuthBody) - 8;
  std::memcpy(buf.data() + sizeof(BatchHeader) + offsetof(RecordHeader, length), &shorter, 4);
  BatchReader cut({buf.data(), len});
  ASSERT_TRUE(cut.open());
  EXPECT_EQ(nextOf(cut, rec), -1);
}

TEST(Auth, TheAcceptorsNonceFitsItsRepAndTheFlagIsInTheHello) {
  EXPECT_LE(sizeof(AcceptData), 196u);
  Hello h{};
  h.flags = kHelloAuthenticates;
  auto decoded = decodeHello(&h, sizeof h);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->flags & kHelloAuthenticates, kHelloAuthenticates);
}

}  // namespace
}  // namespace rdmamsg::peer
