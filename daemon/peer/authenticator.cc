// The mesh-secret handshake of one connection (authenticator.h).
#include "daemon/peer/authenticator.h"

#include <cstring>
#include <exception>

namespace rdmamsg::peer {

Authenticator::Authenticator(std::vector<config::Secret> secrets, std::string selfName,
                             std::string peerName, uint64_t incarnation)
    : secrets_(std::move(secrets)),
      selfName_(std::move(selfName)),
      peerName_(std::move(peerName)),
      incarnation_(incarnation) {}

Status Authenticator::agree(const Hello& remote) const {
  const bool theirs = (remote.flags & kHelloAuthenticates) != 0;
  if (theirs && required() && (remote.flags & kHelloBatchMac) == 0)
    return Status(Errc::permission_denied,
                  "it authenticates without per-batch MACs (an older rdmamsgd), and this node "
                  "takes no batch unauthenticated");
  if (required() == theirs) return Status();
  return Status(Errc::permission_denied,
                required() ? "it does not authenticate (no mesh secret), and this node requires it"
                           : "it authenticates with a mesh secret, and this node has none");
}

Status Authenticator::refused(std::string why) {
  return Status(Errc::permission_denied, std::move(why));
}

Result<Authenticator::Step> Authenticator::startAcceptor(const Hello& remote,
                                                         uint8_t (&nonce)[kNonceSize]) {
  dialer_ = false;
  remoteIncarnation_ = remote.incarnation;
  Step s;
  Result<auth::Nonce> n = auth::freshNonce();
  if (!n) return n.status();
  ownNonce_ = *n;
  std::memcpy(nonce, ownNonce_.data(), kNonceSize);
  s.kind = Step::Kind::kSend;
  return s;
}

Status Authenticator::takeAcceptorNonce(std::span<const uint8_t> rep) {
  dialer_ = true;
  if (rep.size() < sizeof(AcceptData))
    return Status(Errc::protocol_error, "its answer carries no nonce (" +
                                            std::to_string(rep.size()) + " bytes of private data)");
  std::memcpy(remoteNonce_.data(), rep.data() + offsetof(AcceptData, nonce), kNonceSize);
  return Status();
}

Result<Authenticator::Step> Authenticator::startDialer(const Hello& remote) {
  dialer_ = true;
  remoteIncarnation_ = remote.incarnation;
  Step s;
  Result<auth::Nonce> n = auth::freshNonce();
  if (!n) return n.status();
  ownNonce_ = *n;
  std::memcpy(s.record.nonce, ownNonce_.data(), kNonceSize);
  const auth::Transcript t = transcript();
  for (size_t k = 0; k < secrets_.size() && k < 2; k++) {
    Result<auth::Proof> proof = auth::prove(secrets_[k].bytes, auth::Role::kDialer, t);
    if (!proof) return proof.status();
    std::memcpy(s.record.proofs[k], proof->data(), kProofSize);
    s.record.proofCount++;
  }
  s.kind = Step::Kind::kSend;
  return s;
}

Result<Authenticator::Step> Authenticator::onBatch(std::span<const std::byte> batch) {
  BatchReader reader(batch);
  Record rec;
  if (!reader.open().ok() || reader.records() != 1 || !reader.next(rec) ||
      rec.type != RecordType::kAuth || reader.next(rec) || !reader.status().ok())
    return refused("its first batch is not an authentication record");
  if (reader.credits() != 0 || reader.released() != 0)
    return refused("its authentication batch carries credits");
  return onRecord(rec.auth);
}

Result<Authenticator::Step> Authenticator::onRecord(const AuthBody& body) {
  if (!dialer_) return answer(body);
  // The acceptor's proof, under whichever of our secrets it matched.
  const auth::Transcript t = transcript();
  for (size_t k = 0; k < secrets_.size(); k++) {
    const Status v = auth::verify(secrets_[k].bytes, auth::Role::kAcceptor, t, body.proofs[0]);
    if (v.code() == Errc::io_error) return v;  // this node's libcrypto, not the peer
    if (v.ok()) {
      Step s;
      s.kind = Step::Kind::kProven;
      s.secret = k;
      return s;
    }
  }
  return refused(mismatch());
}

// The dialer's proofs (one per secret it holds), against ours, current first.
Result<Authenticator::Step> Authenticator::answer(const AuthBody& body) {
  std::memcpy(remoteNonce_.data(), body.nonce, kNonceSize);
  const auth::Transcript t = transcript();
  for (size_t k = 0; k < secrets_.size(); k++) {
    for (uint8_t j = 0; j < body.proofCount && j < 2; j++) {
      const Status v = auth::verify(secrets_[k].bytes, auth::Role::kDialer, t, body.proofs[j]);
      if (v.code() == Errc::io_error) return v;  // this node's libcrypto, not the peer
      if (!v.ok()) continue;
      Step s;
      s.kind = Step::Kind::kAnswer;
      s.secret = k;
      s.record.proofCount = 1;
      Result<auth::Proof> proof = auth::prove(secrets_[k].bytes, auth::Role::kAcceptor, t);
      if (!proof) return proof.status();
      std::memcpy(s.record.proofs[0], proof->data(), kProofSize);
      return s;
    }
  }
  return refused(mismatch());
}

void Authenticator::settle(size_t secret) {
  secretIndex_ = secret;
  authenticated_ = true;
}

void Authenticator::onPeerClosed() {
  refuse(dialer_ ? "the peer closed the connection after this node's proof "
                   "(does it hold the same mesh secret? its log says)"
                 : "the peer closed the connection before proving the mesh secret");
}

Result<SessionKeys> Authenticator::sessionKeys(BatchProtection protection) const {
  if (!authenticated_ || secretIndex_ >= secrets_.size())
    return Status(Errc::bad_request, "no session keys before authentication");
  return deriveSessionKeys(secrets_[secretIndex_].bytes, transcript(), protection);
}

std::string Authenticator::fingerprint() const {
  return authenticated_ && secretIndex_ < secrets_.size() ? secrets_[secretIndex_].fingerprint
                                                          : std::string();
}

// The proofs' transcript: the dialer's name, incarnation and nonce first.
auth::Transcript Authenticator::transcript() const {
  if (dialer_)
    return {selfName_, peerName_,    incarnation_, remoteIncarnation_,
            ownNonce_, remoteNonce_, binding_};
  return {peerName_, selfName_, remoteIncarnation_, incarnation_, remoteNonce_,
          ownNonce_, binding_};
}

std::string Authenticator::mismatch() const {
  return std::string("its proof does not match this node's mesh secret") +
         (secrets_.size() > 1 ? " or the previous one" : "");
}

}  // namespace rdmamsg::peer
