// The mesh-secret handshake of one connection (docs/security.md): which
// nonces it used, which proofs it sends and accepts, and how it ended. The
// proofs themselves are auth.h's; the connection (connection.h) carries the
// nonces and records and acts on each step.
//
// Both Hellos say whether their node authenticates; they must agree. The
// acceptor's nonce travels in its REP (AcceptData), the dialer's in its
// first batch, an authentication record alone, with one proof per secret
// it holds (current, then previous). The acceptor checks them against its
// own secrets, current first, and answers with one proof under the secret
// that matched; the dialer checks that proof. Then (and only then) the
// connection is established, and both ends derive its session keys
// (batch_auth.h) from the secret that matched and the same transcript.
// The proofs and the keys are bound to the connection (bind(): its queue
// pair numbers and GIDs), so a handshake relayed onto another connection
// fails. An authentication batch carries no credits (the ledger would take
// them before its proof is checked) and no trailer: its record is proven.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "config/secret.h"
#include "daemon/peer/auth.h"
#include "daemon/peer/batch_auth.h"
#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {

class Authenticator {
 public:
  // `secrets`: current first (empty: this node does not authenticate).
  Authenticator(std::vector<config::Secret> secrets, std::string selfName, std::string peerName,
                uint64_t incarnation);

  // This node authenticates (or fails).
  bool required() const { return !secrets_.empty(); }
  // The connection the handshake runs on (before any proof is made or checked).
  void bind(const auth::Binding& binding) { binding_ = binding; }
  // Whether the peer's Hello agrees: ok when both authenticate or neither
  // does, else permission_denied and why the connection fails.
  Status agree(const Hello& remote) const;

  // What a step of the handshake asks of the connection. A step that fails
  // is the Result's Status instead: permission_denied when authentication
  // failed (the peer's proof or batch), io_error when this node has no
  // randomness or HMAC (not the peer's fault).
  struct Step {
    enum class Kind {
      kSend,    // send `record`, the dialer's proofs, and wait for the answer
      kAnswer,  // the dialer is proven: send `record`, the answer, then established
      kProven,  // the acceptor is proven: established
    };
    Kind kind = Kind::kSend;
    AuthBody record{};
    size_t secret = 0;  // kAnswer, kProven: the secret that matched
  };

  // Acceptor: its nonce, for the REP (io_error when there is none).
  Result<Step> startAcceptor(const Hello& remote, uint8_t (&nonce)[kNonceSize]);
  // Dialer: the acceptor's nonce from its REP; protocol_error when it has none.
  Status takeAcceptorNonce(std::span<const uint8_t> rep);
  // Dialer: its nonce and proofs, for its first batch.
  Result<Step> startDialer(const Hello& remote);
  // The peer's authentication batch (its first, alone).
  Result<Step> onBatch(std::span<const std::byte> batch);

  // The peer proved `secret`: it is authenticated.
  void settle(size_t secret);
  // Authentication failed, and why (the connection is then down).
  void refuse(std::string why) { failure_ = Status(Errc::permission_denied, std::move(why)); }
  // The peer closed the connection during the handshake: counted as an
  // authentication failure (it refused this node's proof, or went away
  // before it proved itself).
  void onPeerClosed();

  bool authenticated() const { return authenticated_; }
  bool dialer() const { return dialer_; }
  // The connection's session keys (authenticated only; io_error when
  // libcrypto fails).
  Result<SessionKeys> sessionKeys(BatchProtection protection = BatchProtection::kMac) const;
  size_t secretIndex() const { return secretIndex_; }
  // The fingerprint of the secret it was proven with (authenticated only).
  std::string fingerprint() const;
  // Why authentication failed (permission_denied); ok while it has not.
  const Status& failure() const { return failure_; }

 private:
  Result<Step> onRecord(const AuthBody& body);
  Result<Step> answer(const AuthBody& body);
  auth::Transcript transcript() const;
  std::string mismatch() const;
  static Status refused(std::string why);

  std::vector<config::Secret> secrets_;
  std::string selfName_, peerName_;
  uint64_t incarnation_ = 0, remoteIncarnation_ = 0;
  bool dialer_ = false;
  auth::Nonce ownNonce_{}, remoteNonce_{};
  auth::Binding binding_;
  bool authenticated_ = false;
  size_t secretIndex_ = 0;
  Status failure_;
};

}  // namespace rdmamsg::peer
