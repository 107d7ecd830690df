// Peer authentication: a mutual challenge-response over a shared mesh
// secret (docs/security.md, docs/protocol.md).
//
// Each end contributes a fresh 32-byte nonce: the acceptor's travels in the
// REP, the dialer's in its first batch. A proof is HMAC-SHA256 under the
// secret over a transcript that binds both node names, both incarnations,
// both nonces and the prover's role; the roles differ, so a proof cannot be
// reflected back to its sender, and fresh nonces mean that no proof can be
// replayed on another connection. Proofs are compared in constant time.
//
// The crypto is OpenSSL's libcrypto: HMAC, RAND_bytes, CRYPTO_memcmp.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "daemon/peer/protocol.h"

namespace rdmamsg::peer::auth {

using Nonce = std::array<uint8_t, kNonceSize>;
using Proof = std::array<uint8_t, kProofSize>;

// A nonce from OpenSSL's CSPRNG; io_error when it has none.
Result<Nonce> freshNonce();

enum class Role : uint8_t { kDialer = 'D', kAcceptor = 'A' };

struct Transcript {
  std::string_view dialer, acceptor;  // node names
  uint64_t dialerIncarnation = 0, acceptorIncarnation = 0;
  Nonce dialerNonce{}, acceptorNonce{};
};

// HMAC-SHA256 of the transcript under `key`; io_error when libcrypto fails.
Result<Proof> prove(std::string_view key, Role role, const Transcript& t);
// True when `proof` is prove(key, role, t) (false when it cannot be
// computed); constant time in the proof.
bool verify(std::string_view key, Role role, const Transcript& t, const uint8_t* proof);

}  // namespace rdmamsg::peer::auth
