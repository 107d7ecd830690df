// Every batch authenticated (docs/security.md, docs/protocol.md "Session
// keys and batch MACs"): the session keys of one connection, and the tag
// and sequence number each batch carries under them.
//
// Keys: with a mesh secret, both ends derive two keys from the handshake,
// fresh for every connection: HKDF-SHA256 (RFC 5869, OpenSSL's EVP_KDF
// "HKDF") with the secret that was proven as input keying material, both
// nonces as salt, and as info a label, the protection (MAC or encryption)
// and the transcript of auth.h: both node names and incarnations and the
// connection's binding (both queue pair numbers and GIDs). One key protects
// what the dialer sends, the other what the acceptor sends, so a batch
// reflected back to its sender does not verify either.
//
// Batches: after the handshake's authentication batch (one each way,
// proven by its record), every batch carries a trailer after its `length`
// bytes: a word holding the batch's sequence number on the connection in
// its direction (1, 2, 3, ...; the authentication batch was 0) and the key
// epoch it was sealed under, then a 16-byte AES-256-GCM tag (the IV is the
// word, unique under a key). Without encryption the tag is GMAC's: the word
// and the whole batch are associated data. With encryption the header
// stays associated data (the receiver needs its length and credits) and
// the records are ciphertext. The receiver checks, before anything of the
// batch is acted on (its credits included): the trailer is where the
// header's length puts it, the tag verifies, and the number is the next
// one. Anything else is a rejection with its reason; the connection then
// closes.
//
// Key rotation: each direction moves to its next key (epoch + 1, the key
// HKDF-Expand of the last) once it has sealed KeyLimits::bytes or
// KeyLimits::age has passed; the receiver follows at the first batch of
// the new epoch that verifies under it. Sequence numbers go on across
// epochs, so no batch is lost or repeated by a rotation.
//
// One tag per batch, never per message; each direction keeps one cipher
// context, keyed once per epoch and given a new IV per batch: nothing is
// allocated per batch. (HMAC-SHA256 through OpenSSL 3.0's EVP_MAC
// allocates twice per re-initialisation and runs at 1.4 GB/s here, against
// 3.5 GB/s for GCM with AES-NI: docs/performance.md.)
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "common/status.h"
#include "daemon/peer/auth.h"

namespace rdmamsg::peer {

inline constexpr size_t kBatchTagSize = 16;
// After the batch's bytes: u64 word (little-endian: sequence number in the
// low 48 bits, key epoch in the high 16), then the tag.
inline constexpr size_t kBatchTrailerSize = 8 + kBatchTagSize;
inline constexpr size_t kSessionKeySize = 32;

// Why a received batch was not acted on.
enum class BatchReject : uint8_t {
  kBadMac = 0,     // its tag does not verify: forged, or altered on the way
  kReplayed = 1,   // a genuine batch of this connection seen before
  kReordered = 2,  // a genuine batch ahead of its turn (one before it is missing)
  kTruncated = 3,  // shorter than its header says (or than a header and a trailer)
};
inline constexpr size_t kBatchRejects = 4;
// "bad_mac", "replayed", "reordered", "truncated": status and metrics keys.
const char* keyOf(BatchReject r);
// For logs: "its tag does not verify (forged or altered)", ...
const char* toString(BatchReject r);

// What protects a batch: a MAC over it (AES-256-GMAC), or AES-256-GCM
// encryption of its records (encryption: on).
enum class BatchProtection : uint8_t { kMac = 'M', kEncrypt = 'E' };
const char* toString(BatchProtection p);  // "aes-256-gmac", "aes-256-gcm"

using SessionKey = std::array<uint8_t, kSessionKeySize>;
struct SessionKeys {
  SessionKey dialerToAcceptor{}, acceptorToDialer{};
};

// The connection's keys from the secret it was proven with, the
// protection and the handshake's transcript (nonces and binding included);
// io_error when libcrypto fails.
Result<SessionKeys> deriveSessionKeys(std::string_view secret, const auth::Transcript& t,
                                      BatchProtection protection = BatchProtection::kMac);

// A direction moves to its next key after this much sealed, or this long.
struct KeyLimits {
  uint64_t bytes = uint64_t{1} << 30;
  std::chrono::seconds age{600};
};

class BatchAuth {
 public:
  explicit BatchAuth(KeyLimits limits = {});
  ~BatchAuth();
  BatchAuth(const BatchAuth&) = delete;
  BatchAuth& operator=(const BatchAuth&) = delete;

  // Keys this end's two contexts: `send` for what it sends, `receive` for
  // what it receives. Sequence numbers start at 1 both ways, epochs at 0.
  Status start(const SessionKey& send, const SessionKey& receive,
               BatchProtection protection = BatchProtection::kMac);
  bool active() const { return active_; }
  BatchProtection protection() const { return protection_; }
  // Forgets the keys (a new connection starts again).
  void reset();

  // Seals the next batch sent: its `length` bytes at `batch` (encrypted in
  // place with encryption), then its trailer (kBatchTrailerSize bytes of
  // room must follow); returns the bytes to send, or io_error naming the
  // libcrypto call that failed (this node's failure: nothing may be sent).
  Result<size_t> seal(std::byte* batch, size_t length);

  struct Verdict {
    std::optional<BatchReject> reject;  // nullopt: it verifies
    size_t length = 0;                  // verified: the batch without its trailer
    uint64_t seq = 0;                   // the number it carries (0 when truncated)
  };
  // Checks a received batch (the bytes its completion reported; decrypted
  // in place with encryption). A batch that verifies is the next one
  // expected from then on; a rejected one changes nothing that counts.
  // A Verdict is the batch's (a rejection is the peer's fault); an error
  // is this node's: io_error naming the libcrypto call that failed.
  Result<Verdict> verify(std::span<std::byte> bytes);

  uint64_t sent() const { return nextSend_ - 1; }
  uint64_t expected() const { return nextReceive_; }
  // Key epochs moved to, both directions.
  uint64_t rotations() const { return rotations_; }
  // The keys can seal no more (2^48 batches, or 65535 rotations): the
  // connection must be made again.
  bool spent() const;

 private:
  struct Direction;
  Status rotateSend();

  KeyLimits limits_;
  BatchProtection protection_ = BatchProtection::kMac;
  std::unique_ptr<Direction> send_, receive_, next_;  // next_: the receive side's next epoch
  uint64_t nextSend_ = 1, nextReceive_ = 1;
  uint64_t rotations_ = 0;
  bool active_ = false;
};

}  // namespace rdmamsg::peer
