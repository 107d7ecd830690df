// Every batch authenticated (batch_auth.h).
#include "daemon/peer/batch_auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {

namespace {

constexpr std::string_view kKeyLabel = "rdmamsg batch keys v1";
constexpr std::string_view kUpdateLabel = "rdmamsg key update";
constexpr uint64_t kSeqBits = 48;
constexpr uint64_t kSeqMask = (uint64_t{1} << kSeqBits) - 1;
constexpr uint16_t kLastEpoch = 0xffff;

void put64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

uint64_t get64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

using auth::cryptoFailure;

// HKDF-SHA256 into `out`: extract and expand (salt given) or expand only.
Status hkdf(std::span<const uint8_t> key, std::span<const uint8_t> salt, std::string_view info,
            std::span<uint8_t> out) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (kdf == nullptr) return cryptoFailure("EVP_KDF_fetch(HKDF)");
  EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (ctx == nullptr) return cryptoFailure("EVP_KDF_CTX_new");
  char digest[] = "SHA256";
  char expandOnly[] = "EXPAND_ONLY";
  OSSL_PARAM params[6];
  size_t n = 0;
  params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
  params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
                                                  const_cast<uint8_t*>(key.data()), key.size());
  params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO,
                                                  const_cast<char*>(info.data()), info.size());
  if (salt.empty())
    params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_MODE, expandOnly, 0);
  else
    params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT,
                                                    const_cast<uint8_t*>(salt.data()), salt.size());
  params[n] = OSSL_PARAM_construct_end();
  Status st;
  if (EVP_KDF_derive(ctx, out.data(), out.size(), params) != 1)
    st = cryptoFailure("EVP_KDF_derive(HKDF-SHA256)");
  EVP_KDF_CTX_free(ctx);
  return st;
}

}  // namespace

const char* keyOf(BatchReject r) {
  switch (r) {
    case BatchReject::kBadMac:
      return "bad_mac";
    case BatchReject::kReplayed:
      return "replayed";
    case BatchReject::kReordered:
      return "reordered";
    case BatchReject::kTruncated:
      return "truncated";
  }
  return "other";
}

const char* toString(BatchReject r) {
  switch (r) {
    case BatchReject::kBadMac:
      return "its tag does not verify (forged or altered)";
    case BatchReject::kReplayed:
      return "replayed (a sequence number already seen)";
    case BatchReject::kReordered:
      return "out of order (a sequence number ahead of the next)";
    case BatchReject::kTruncated:
      return "truncated (shorter than its header says)";
  }
  return "rejected";
}

const char* toString(BatchProtection p) {
  return p == BatchProtection::kEncrypt ? "aes-256-gcm" : "aes-256-gmac";
}

Result<SessionKeys> deriveSessionKeys(std::string_view secret, const auth::Transcript& t,
                                      BatchProtection protection) {
  std::string info(kKeyLabel);
  info.push_back('\0');
  info.push_back(static_cast<char>(protection));
  info += auth::encode(t);
  uint8_t salt[2 * kNonceSize];
  std::memcpy(salt, t.dialerNonce.data(), kNonceSize);
  std::memcpy(salt + kNonceSize, t.acceptorNonce.data(), kNonceSize);
  uint8_t out[2 * kSessionKeySize];
  if (Status st =
          hkdf({reinterpret_cast<const uint8_t*>(secret.data()), secret.size()}, salt, info, out);
      !st.ok())
    return st;
  SessionKeys keys;
  std::memcpy(keys.dialerToAcceptor.data(), out, kSessionKeySize);
  std::memcpy(keys.acceptorToDialer.data(), out + kSessionKeySize, kSessionKeySize);
  OPENSSL_cleanse(out, sizeof out);
  return keys;
}

// One direction's key of one epoch, in an AES-256-GCM context keyed once
// (one that seals, or one that opens). Without encryption it is GMAC: the
// whole batch is associated data, nothing is encrypted.
struct BatchAuth::Direction {
  BatchProtection protection = BatchProtection::kMac;
  bool sealing = true;
  SessionKey secret{};
  uint16_t epoch = 0;
  uint64_t bytes = 0;  // sealed under this key
  std::chrono::steady_clock::time_point since;
  EVP_CIPHER_CTX* cipher = nullptr;

  ~Direction() {
    EVP_CIPHER_CTX_free(cipher);
    OPENSSL_cleanse(secret.data(), secret.size());
  }

  Status key(const SessionKey& s, uint16_t e) {
    secret = s;
    epoch = e;
    bytes = 0;
    since = std::chrono::steady_clock::now();
    if (cipher == nullptr && (cipher = EVP_CIPHER_CTX_new()) == nullptr)
      return cryptoFailure("EVP_CIPHER_CTX_new");
    if (sealing) {
      if (EVP_EncryptInit_ex(cipher, EVP_aes_256_gcm(), nullptr, s.data(), nullptr) != 1)
        return cryptoFailure("EVP_EncryptInit_ex(AES-256-GCM)");
    } else if (EVP_DecryptInit_ex(cipher, EVP_aes_256_gcm(), nullptr, s.data(), nullptr) != 1) {
      return cryptoFailure("EVP_DecryptInit_ex(AES-256-GCM)");
    }
    return Status();
  }

  // The next epoch's key, HKDF-Expand of this one's, into `to`.
  Status next(Direction& to) const {
    SessionKey s{};
    to.protection = protection;
    to.sealing = sealing;
    Status st = hkdf(secret, {}, kUpdateLabel, s);
    if (st.ok()) st = to.key(s, static_cast<uint16_t>(epoch + 1));
    OPENSSL_cleanse(s.data(), s.size());
    return st;
  }

  // AES-256-GCM in place, the IV 4 zero bytes and the word: the word and
  // the header are associated data, and the records too without
  // encryption (GMAC), else they are encrypted (or decrypted). `tag`: out
  // when sealing, in when opening (checked in constant time by OpenSSL).
  // A call that fails is this node's io_error, naming it; a tag that does
  // not verify is the peer's: protocol_error.
  Status gcm(const std::byte* word, std::byte* batch, size_t length, uint8_t* tag) {
    uint8_t iv[12] = {};
    std::memcpy(iv + 4, word, 8);
    const auto* w = reinterpret_cast<const uint8_t*>(word);
    auto* b = reinterpret_cast<uint8_t*>(batch);
    const bool encrypt = protection == BatchProtection::kEncrypt;
    const int clear = static_cast<int>(encrypt ? sizeof(BatchHeader) : length);
    const int body = static_cast<int>(length) - clear;
    uint8_t* records = b + clear;
    int n = 0;
    uint8_t end[16];
    if (sealing) {
      if (EVP_EncryptInit_ex(cipher, nullptr, nullptr, nullptr, iv) != 1)
        return cryptoFailure("EVP_EncryptInit_ex");
      if (EVP_EncryptUpdate(cipher, nullptr, &n, w, 8) != 1 ||
          EVP_EncryptUpdate(cipher, nullptr, &n, b, clear) != 1 ||
          (body != 0 && EVP_EncryptUpdate(cipher, records, &n, records, body) != 1))
        return cryptoFailure("EVP_EncryptUpdate");
      if (EVP_EncryptFinal_ex(cipher, end, &n) != 1) return cryptoFailure("EVP_EncryptFinal_ex");
      if (EVP_CIPHER_CTX_ctrl(cipher, EVP_CTRL_GCM_GET_TAG, kBatchTagSize, tag) != 1)
        return cryptoFailure("EVP_CIPHER_CTX_ctrl(EVP_CTRL_GCM_GET_TAG)");
      return Status();
    }
    if (EVP_DecryptInit_ex(cipher, nullptr, nullptr, nullptr, iv) != 1)
      return cryptoFailure("EVP_DecryptInit_ex");
    if (EVP_DecryptUpdate(cipher, nullptr, &n, w, 8) != 1 ||
        EVP_DecryptUpdate(cipher, nullptr, &n, b, clear) != 1 ||
        (body != 0 && EVP_DecryptUpdate(cipher, records, &n, records, body) != 1))
      return cryptoFailure("EVP_DecryptUpdate");
    if (EVP_CIPHER_CTX_ctrl(cipher, EVP_CTRL_GCM_SET_TAG, kBatchTagSize, tag) != 1)
      return cryptoFailure("EVP_CIPHER_CTX_ctrl(EVP_CTRL_GCM_SET_TAG)");
    // The tag is checked here: a failure is the batch's, not this node's.
    if (EVP_DecryptFinal_ex(cipher, end, &n) <= 0) {
      ERR_clear_error();
      return Status(Errc::protocol_error, toString(BatchReject::kBadMac));
    }
    return Status();
  }

  // Seals a batch: the tag lands after the word.
  Status seal(std::byte* word, std::byte* batch, size_t length) {
    bytes += length;
    return gcm(word, batch, length, reinterpret_cast<uint8_t*>(word + 8));
  }

  // Whether a received batch's tag verifies (decrypting it in place).
  Status open(const std::byte* word, std::byte* batch, size_t length) {
    uint8_t tag[kBatchTagSize];
    std::memcpy(tag, word + 8, kBatchTagSize);
    return gcm(word, batch, length, tag);
  }
};

BatchAuth::BatchAuth(KeyLimits limits) : limits_(limits) {}
BatchAuth::~BatchAuth() = default;

Status BatchAuth::start(const SessionKey& send, const SessionKey& receive,
                        BatchProtection protection) {
  reset();
  protection_ = protection;
  send_ = std::make_unique<Direction>();
  receive_ = std::make_unique<Direction>();
  send_->protection = receive_->protection = protection;
  receive_->sealing = false;
  Status st = send_->key(send, 0);
  if (st.ok()) st = receive_->key(receive, 0);
  if (!st.ok()) {
    reset();
    return Status(Errc::io_error, std::string(toString(protection)) +
                                      " is not available from OpenSSL: " + st.message());
  }
  active_ = true;
  return Status();
}

void BatchAuth::reset() {
  send_.reset();
  receive_.reset();
  next_.reset();
  nextSend_ = nextReceive_ = 1;
  rotations_ = 0;
  active_ = false;
}

bool BatchAuth::spent() const {
  if (!active_) return false;
  return nextSend_ >= kSeqMask ||
         (send_->epoch == kLastEpoch &&
          (send_->bytes >= limits_.bytes ||
           std::chrono::steady_clock::now() - send_->since >= limits_.age));
}

// The send side moves to its next key when this one has sealed enough, or
// is old enough (and has not reached the last epoch).
Status BatchAuth::rotateSend() {
  if (send_->epoch == kLastEpoch || (send_->bytes < limits_.bytes &&
                                     std::chrono::steady_clock::now() - send_->since < limits_.age))
    return Status();
  auto next = std::make_unique<Direction>();
  if (Status st = send_->next(*next); !st.ok()) return st;
  send_ = std::move(next);
  rotations_++;
  return Status();
}

Result<size_t> BatchAuth::seal(std::byte* batch, size_t length) {
  std::byte* trailer = batch + length;
  const uint64_t seq = nextSend_++;
  Status st = rotateSend();
  if (st.ok()) {
    put64(trailer, (seq & kSeqMask) | uint64_t{send_->epoch} << kSeqBits);
    st = send_->seal(trailer, batch, length);
  }
  if (!st.ok()) {
    // Nothing of it is sent: the connection fails with this reason.
    std::memset(trailer, 0, kBatchTrailerSize);
    return Status(st.code(), "sealing batch " + std::to_string(seq) + ": " + st.message());
  }
  return length + kBatchTrailerSize;
}

Result<BatchAuth::Verdict> BatchAuth::verify(std::span<std::byte> bytes) {
  Verdict v;
  if (bytes.size() < sizeof(BatchHeader) + kBatchTrailerSize) {
    v.reject = BatchReject::kTruncated;
    return v;
  }
  uint32_t length = 0;
  std::memcpy(&length, bytes.data() + offsetof(BatchHeader, length), sizeof length);
  if (length > bytes.size() - kBatchTrailerSize) {
    v.reject = BatchReject::kTruncated;
    return v;
  }
  const std::byte* trailer = bytes.data() + length;
  const uint64_t word = get64(trailer);
  v.seq = word & kSeqMask;
  const auto epoch = static_cast<uint16_t>(word >> kSeqBits);
  // This epoch's key, or the next one's (the sender rotated): the receive
  // side moves on only once a batch verifies under it.
  Direction* key = receive_.get();
  if (epoch == receive_->epoch + 1u) {
    if (!next_ || next_->epoch != epoch) {
      next_ = std::make_unique<Direction>();
      if (Status st = receive_->next(*next_); !st.ok()) {
        next_.reset();
        return Status(st.code(), "deriving the receive key of epoch " + std::to_string(epoch) +
                                     ": " + st.message());
      }
    }
    key = next_.get();
  } else if (epoch != receive_->epoch) {
    key = nullptr;
  }
  // Anything but the header's length and a trailer is not what was sealed.
  if (key == nullptr || length < sizeof(BatchHeader) ||
      length + kBatchTrailerSize != bytes.size()) {
    v.reject = BatchReject::kBadMac;
    return v;
  }
  if (Status st = key->open(trailer, bytes.data(), length); !st.ok()) {
    if (st.code() != Errc::protocol_error)  // this node's libcrypto, not the batch
      return Status(st.code(), "verifying batch " + std::to_string(v.seq) + ": " + st.message());
    v.reject = BatchReject::kBadMac;
    return v;
  }
  if (v.seq != nextReceive_) {
    v.reject = v.seq < nextReceive_ ? BatchReject::kReplayed : BatchReject::kReordered;
    return v;
  }
  if (key == next_.get()) {
    receive_ = std::move(next_);
    rotations_++;
  }
  nextReceive_++;
  v.length = length;
  return v;
}

}  // namespace rdmamsg::peer
