// Peer authentication: a mutual challenge-response over a shared mesh
// secret (docs/security.md, docs/protocol.md).
//
// Each end contributes a fresh 32-byte nonce: the acceptor's travels in the
// REP, the dialer's in its first batch. A proof is HMAC-SHA256 under the
// secret over a transcript that binds both node names, both incarnations,
// both nonces, the connection itself (both queue pair numbers and GIDs,
// Binding) and the prover's role; the roles differ, so a proof cannot be
// reflected back to its sender, fresh nonces mean that no proof can be
// replayed on another connection, and the binding means that a handshake
// relayed between two other connections does not verify on either. The
// session keys of the connection (batch_auth.h) come from the same
// transcript. Proofs are compared in constant time.
//
// The crypto is OpenSSL's libcrypto: HMAC, RAND_bytes, CRYPTO_memcmp.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "daemon/peer/protocol.h"

namespace rdmamsg::peer::auth {

using Nonce = std::array<uint8_t, kNonceSize>;
using Proof = std::array<uint8_t, kProofSize>;

// A nonce from OpenSSL's CSPRNG; io_error when it has none.
Result<Nonce> freshNonce();

enum class Role : uint8_t { kDialer = 'D', kAcceptor = 'A' };

using Gid = std::array<uint8_t, 16>;

// The RC connection a handshake runs on, as each end sees it: its own
// queue pair number and GID and the peer's (ibv_query_qp's dest_qp_num,
// the route's dgid), put in the dialer's and acceptor's order.
struct Binding {
  uint32_t dialerQpn = 0, acceptorQpn = 0;
  Gid dialerGid{}, acceptorGid{};
};

struct Transcript {
  std::string_view dialer, acceptor;  // node names
  uint64_t dialerIncarnation = 0, acceptorIncarnation = 0;
  Nonce dialerNonce{}, acceptorNonce{};
  Binding binding;
};

// The transcript's bytes: the names (length-prefixed), the incarnations,
// the binding (little-endian numbers); the nonces are not in it (the
// proofs and the key derivation each add them).
std::string encode(const Transcript& t);

// HMAC-SHA256 of the transcript under `key`; io_error when libcrypto fails.
Result<Proof> prove(std::string_view key, Role role, const Transcript& t);
// OK when `proof` is prove(key, role, t), compared in constant time;
// permission_denied when it is not (the prover does not hold `key`, or
// the proof is not for this transcript), io_error when this node cannot
// compute the proof (libcrypto failed: not the peer's fault).
Status verify(std::string_view key, Role role, const Transcript& t, const uint8_t* proof);

// A libcrypto call that failed for a reason of this node's (not the
// peer's): io_error naming the call, with OpenSSL's reason when it left
// one (the error queue is cleared).
Status cryptoFailure(std::string_view call);

}  // namespace rdmamsg::peer::auth
