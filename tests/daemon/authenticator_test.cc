// Unit tests of a connection's mesh-secret handshake
// (daemon/peer/authenticator.h): a dialer and an acceptor, each with its
// own secrets, exchange the nonces and records a connection would carry.
#include "daemon/peer/authenticator.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace rdmamsg::peer {
namespace {

using Kind = Authenticator::Step::Kind;

// The step succeeded and asks for `kind`.
testing::AssertionResult isStep(const Result<Authenticator::Step>& step, Kind kind) {
  if (!step.ok()) return testing::AssertionFailure() << "failed: " << step.status().toString();
  if (step->kind != kind)
    return testing::AssertionFailure() << "kind " << static_cast<int>(step->kind);
  return testing::AssertionSuccess();
}

// Authentication failed (permission_denied: the peer's proof or batch), for
// `why` when it is given.
testing::AssertionResult isRefused(const Result<Authenticator::Step>& step,
                                   std::string_view why = {}) {
  if (step.ok()) return testing::AssertionFailure() << "a step, not a refusal";
  if (step.status().code() != Errc::permission_denied ||
      (!why.empty() && step.status().message() != why))
    return testing::AssertionFailure() << step.status().toString();
  return testing::AssertionSuccess();
}

config::Secret secret(char fill) {
  config::Secret s;
  s.bytes = std::string(32, fill);
  s.fingerprint = config::fingerprintOf(s.bytes);
  return s;
}

Hello hello(uint64_t incarnation, bool authenticates) {
  Hello h;
  h.incarnation = incarnation;
  h.flags = authenticates ? kHelloAuthenticates | kHelloBatchMac : 0;
  return h;
}

// A batch holding one authentication record, as the connection sends it.
class AuthBatch {
 public:
  explicit AuthBatch(const AuthBody& body) {
    BatchWriter w;
    w.reset(buf_.data(), buf_.size());
    w.addAuth(body);
    size_ = w.finish(0);
  }
  std::span<const std::byte> bytes() const { return {buf_.data(), size_}; }

 private:
  std::array<std::byte, 256> buf_{};
  size_t size_ = 0;
};

struct Pair {
  Authenticator dialer, acceptor;
  Pair(std::vector<config::Secret> dialerSecrets, std::vector<config::Secret> acceptorSecrets)
      : dialer(std::move(dialerSecrets), "alpha", "beta", 0x1111),
        acceptor(std::move(acceptorSecrets), "beta", "alpha", 0x2222) {}

  // REQ and REP, then the dialer's record to the acceptor: the acceptor's step.
  Result<Authenticator::Step> toAcceptor() {
    AcceptData rep{};
    EXPECT_TRUE(isStep(acceptor.startAcceptor(hello(0x1111, true), rep.nonce), Kind::kSend));
    EXPECT_TRUE(
        dialer.takeAcceptorNonce({reinterpret_cast<const uint8_t*>(&rep), sizeof rep}).ok());
    const Result<Authenticator::Step> proofs = dialer.startDialer(hello(0x2222, true));
    EXPECT_TRUE(isStep(proofs, Kind::kSend));
    if (!proofs.ok()) return proofs.status();
    return acceptor.onBatch(AuthBatch(proofs->record).bytes());
  }
};

TEST(Authenticator, BothEndsProveTheSameSecretAndAreEstablished) {
  Pair p({secret('a')}, {secret('a')});
  const Result<Authenticator::Step> answer = p.toAcceptor();
  ASSERT_TRUE(isStep(answer, Kind::kAnswer));
  EXPECT_EQ(answer->secret, 0u);
  const Result<Authenticator::Step> done = p.dialer.onBatch(AuthBatch(answer->record).bytes());
  ASSERT_TRUE(isStep(done, Kind::kProven));
  EXPECT_EQ(done->secret, 0u);
  EXPECT_FALSE(p.dialer.authenticated()) << "only once the connection settles it";
  p.dialer.settle(done->secret);
  EXPECT_TRUE(p.dialer.authenticated());
  EXPECT_EQ(p.dialer.fingerprint(), secret('a').fingerprint);
}

TEST(Authenticator, DuringARotationThePreviousSecretStillMatches) {
  // The dialer has the new secret and the previous one; the acceptor only the previous.
  Pair p({secret('n'), secret('o')}, {secret('o')});
  const Result<Authenticator::Step> answer = p.toAcceptor();
  ASSERT_TRUE(isStep(answer, Kind::kAnswer));
  EXPECT_EQ(answer->secret, 0u) << "the acceptor's own current secret";
  const Result<Authenticator::Step> done = p.dialer.onBatch(AuthBatch(answer->record).bytes());
  ASSERT_TRUE(isStep(done, Kind::kProven));
  EXPECT_EQ(done->secret, 1u) << "the dialer's previous secret";
}

TEST(Authenticator, ADifferentSecretIsRefusedOnBothSides) {
  Pair p({secret('a')}, {secret('b'), secret('c')});
  const Result<Authenticator::Step> step = p.toAcceptor();
  EXPECT_TRUE(
      isRefused(step, "its proof does not match this node's mesh secret or the previous one"));
  // An acceptor's answer under another secret does not prove it to the dialer.
  Pair q({secret('a')}, {secret('a')});
  Result<Authenticator::Step> answer = q.toAcceptor();
  ASSERT_TRUE(isStep(answer, Kind::kAnswer));
  answer->record.proofs[0][3] ^= 1;
  const Result<Authenticator::Step> done = q.dialer.onBatch(AuthBatch(answer->record).bytes());
  EXPECT_TRUE(isRefused(done));
  EXPECT_FALSE(q.dialer.authenticated());
}

TEST(Authenticator, AnAnswerFromAnotherHandshakeIsRefused) {
  Pair first({secret('a')}, {secret('a')});
  const Result<Authenticator::Step> old = first.toAcceptor();
  ASSERT_TRUE(isStep(old, Kind::kAnswer));
  Pair second({secret('a')}, {secret('a')});
  ASSERT_TRUE(isStep(second.toAcceptor(), Kind::kAnswer));
  EXPECT_TRUE(isRefused(second.dialer.onBatch(AuthBatch(old->record).bytes())))
      << "fresh nonces: a replayed answer proves nothing";
}

TEST(Authenticator, BothEndsMustAgreeToAuthenticate) {
  Authenticator with({secret('a')}, "alpha", "beta", 1), without({}, "alpha", "beta", 1);
  EXPECT_TRUE(with.required());
  EXPECT_FALSE(without.required());
  EXPECT_TRUE(with.agree(hello(2, true)).ok());
  EXPECT_TRUE(without.agree(hello(2, false)).ok());
  EXPECT_EQ(with.agree(hello(2, false)).message(),
            "it does not authenticate (no mesh secret), and this node requires it");
  EXPECT_EQ(without.agree(hello(2, true)).message(),
            "it authenticates with a mesh secret, and this node has none");
}

TEST(Authenticator, TheFirstBatchMustBeAnAuthenticationRecordAlone) {
  Pair p({secret('a')}, {secret('a')});
  AcceptData rep{};
  ASSERT_TRUE(isStep(p.acceptor.startAcceptor(hello(0x1111, true), rep.nonce), Kind::kSend));
  std::array<std::byte, 256> buf{};
  BatchWriter w;
  w.reset(buf.data(), buf.size());
  w.addHeartbeat();
  const size_t n = w.finish(0);
  const Result<Authenticator::Step> step = p.acceptor.onBatch({buf.data(), n});
  EXPECT_TRUE(isRefused(step, "its first batch is not an authentication record"));
  // A REP without a nonce.
  EXPECT_EQ(
      p.dialer.takeAcceptorNonce({reinterpret_cast<const uint8_t*>(&rep), sizeof(Hello)}).code(),
      Errc::protocol_error);
}

// Proofs and session keys are bound to the connection: a handshake relayed
// between two connections (each end sees other queue pairs) fails, and the
// two ends of one connection derive the same keys.
TEST(Authenticator, AHandshakeRelayedOntoAnotherConnectionIsRefused) {
  auth::Binding dialerView{0x100, 0x200, {}, {}}, acceptorView = dialerView;
  acceptorView.dialerQpn = 0x300;  // the relay's queue pair, not the dialer's
  Pair relayed({secret('a')}, {secret('a')});
  relayed.dialer.bind(dialerView);
  relayed.acceptor.bind(acceptorView);
  const Result<Authenticator::Step> step = relayed.toAcceptor();
  EXPECT_TRUE(isRefused(step, "its proof does not match this node's mesh secret"));

  Pair direct({secret('a')}, {secret('a')});
  direct.dialer.bind(dialerView);
  direct.acceptor.bind(dialerView);
  const Result<Authenticator::Step> answer = direct.toAcceptor();
  ASSERT_TRUE(isStep(answer, Kind::kAnswer));
  ASSERT_TRUE(isStep(direct.dialer.onBatch(AuthBatch(answer->record).bytes()), Kind::kProven));
  EXPECT_FALSE(direct.dialer.sessionKeys().ok()) << "no keys before it is settled";
  direct.dialer.settle(0);
  direct.acceptor.settle(answer->secret);
  const SessionKeys d = direct.dialer.sessionKeys().value(),
                    a = direct.acceptor.sessionKeys().value();
  EXPECT_EQ(d.dialerToAcceptor, a.dialerToAcceptor);
  EXPECT_EQ(d.acceptorToDialer, a.acceptorToDialer);
}

// The ledger takes a batch's credits on arrival, before its proof is
// checked: an authentication batch that carries any is refused.
TEST(Authenticator, AnAuthenticationBatchWithCreditsIsRefused) {
  Pair p({secret('a')}, {secret('a')});
  AcceptData rep{};
  ASSERT_TRUE(isStep(p.acceptor.startAcceptor(hello(0x1111, true), rep.nonce), Kind::kSend));
  ASSERT_TRUE(
      p.dialer.takeAcceptorNonce({reinterpret_cast<const uint8_t*>(&rep), sizeof rep}).ok());
  const Result<Authenticator::Step> proofs = p.dialer.startDialer(hello(0x2222, true));
  ASSERT_TRUE(isStep(proofs, Kind::kSend));
  std::array<std::byte, 256> buf{};
  BatchWriter w;
  w.reset(buf.data(), buf.size());
  w.addAuth(proofs->record);
  const size_t n = w.finish(5);
  const Result<Authenticator::Step> step = p.acceptor.onBatch({buf.data(), n});
  EXPECT_TRUE(isRefused(step, "its authentication batch carries credits"));
}

}  // namespace
}  // namespace rdmamsg::peer
