// Peer authentication (auth.h).
#include "daemon/peer/auth.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <string>

namespace rdmamsg::peer::auth {

namespace {

constexpr std::string_view kLabel = "rdmamsg peer authentication v2";

void putName(std::string& out, std::string_view name) {
  out.push_back(static_cast<char>(name.size() > 255 ? 255 : name.size()));
  out.append(name.substr(0, 255));
}

void put64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; i++)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; i++)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string message(Role role, const Transcript& t) {
  std::string m(kLabel);
  m.push_back('\0');
  m.push_back(static_cast<char>(role));
  m += encode(t);
  m.append(reinterpret_cast<const char*>(t.dialerNonce.data()), t.dialerNonce.size());
  m.append(reinterpret_cast<const char*>(t.acceptorNonce.data()), t.acceptorNonce.size());
  return m;
}

}  // namespace

std::string encode(const Transcript& t) {
  std::string m;
  putName(m, t.dialer);
  putName(m, t.acceptor);
  put64(m, t.dialerIncarnation);
  put64(m, t.acceptorIncarnation);
  put32(m, t.binding.dialerQpn);
  put32(m, t.binding.acceptorQpn);
  m.append(reinterpret_cast<const char*>(t.binding.dialerGid.data()), t.binding.dialerGid.size());
  m.append(reinterpret_cast<const char*>(t.binding.acceptorGid.data()),
           t.binding.acceptorGid.size());
  return m;
}

Result<Nonce> freshNonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    return Status(Errc::io_error, "no random bytes from OpenSSL for an authentication nonce");
  return n;
}

Result<Proof> prove(std::string_view key, Role role, const Transcript& t) {
  const std::string m = message(role, t);
  Proof p{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(m.data()), m.size(), p.data(), &len) == nullptr ||
      len != p.size()) {
    return cryptoFailure("HMAC(EVP_sha256) of the authentication transcript");
  }
  return p;
}

Status verify(std::string_view key, Role role, const Transcript& t, const uint8_t* proof) {
  const Result<Proof> expected = prove(key, role, t);
  if (!expected) return expected.status();
  if (CRYPTO_memcmp(expected->data(), proof, expected->size()) != 0)
    return Status(Errc::permission_denied, "the proof does not verify");
  return Status();
}

Status cryptoFailure(std::string_view call) {
  std::string why = std::string(call) + " failed";
  if (const unsigned long e = ERR_get_error(); e != 0) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    why += std::string(": ") + text;
  }
  ERR_clear_error();
  return Status(Errc::io_error, std::move(why));
}

}  // namespace rdmamsg::peer::auth
