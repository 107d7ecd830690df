// Reading the mesh secret (secret.h).
#include "config/secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <system_error>

#include "common/unique_fd.h"

namespace rdmamsg::config {

std::string fingerprintOf(std::string_view key) {
  static constexpr std::string_view kLabel = "rdmamsg mesh secret fingerprint\n";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(ctx, kLabel.data(), kLabel.size()) == 1 &&
            EVP_DigestUpdate(ctx, key.data(), key.size()) == 1 &&
            EVP_DigestFinal_ex(ctx, digest, &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok || len < 8) return "?";
  std::string out;
  char hex[3];
  for (unsigned i = 0; i < 8; i++) {
    std::snprintf(hex, sizeof hex, "%02x", digest[i]);
    out += hex;
  }
  return out;
}

namespace {

std::string lastError() {
  return std::error_code(errno, std::generic_category()).message();
}

std::string sizeProblem(const std::string& path, uint64_t size) {
  return path + " holds " + std::to_string(size) + " bytes; a mesh secret has " +
         std::to_string(kMinSecretBytes) + ".." + std::to_string(kMaxSecretBytes);
}

}  // namespace

Parsed<Secret> readSecret(std::string_view pathText) {
  const std::string path(pathText);
  using P = Parsed<Secret>;
  if (path.empty() || path.front() != '/') return P::fail("'" + path + "' is not an absolute path");
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    return P::fail("cannot read " + path + ": " + lastError());
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return P::fail(path + " is not a regular file");
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if (st.st_mode & S_IRWXO)
    return P::fail(path + " is accessible by other users (mode " + mode +
                   "): a mesh secret must not be; chmod o= " + path);
  if (st.st_mode & S_IWGRP)
    return P::fail(path + " is writable by its group (mode " + mode + "): chmod g-w " + path);
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return P::fail(path + " is owned by uid " + std::to_string(st.st_uid) +
                   ": a mesh secret must belong to root or to the daemon's user");
  if ((st.st_mode & S_IRGRP) && st.st_gid != 0 && st.st_gid != ::getegid())
    return P::fail(
        path + " is readable by group " + std::to_string(st.st_gid) +
        ", which is neither root's nor the daemon's: chgrp the file or chmod g= " + path);
  // An access ACL grants more than the mode bits show.
  if (::fgetxattr(fd.get(), "system.posix_acl_access", nullptr, 0) > 0)
    return P::fail(path +
                   " has an access ACL: a mesh secret is protected by its mode alone "
                   "(setfacl -b " +
                   path + ")");
  // Whoever may write its directory may replace it (also through a symlink).
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr)
    return P::fail("cannot resolve " + path + ": " + lastError());
  for (const std::string& file : {path, std::string(real)}) {
    const std::string dir = file.substr(0, std::max<size_t>(1, file.rfind('/')));
    struct stat ds {};
    if (::stat(dir.c_str(), &ds) != 0) continue;
    if ((ds.st_uid != 0 && ds.st_uid != ::geteuid()) || (ds.st_mode & (S_IWGRP | S_IWOTH)))
      return P::fail(path + " is in " + dir +
                     ", which another user than root or the daemon's may write: "
                     "keep the secret in a directory only they can change");
  }
  std::string bytes;
  char buf[1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return P::fail("cannot read " + path + ": " + lastError());
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    if (bytes.size() > kMaxSecretBytes + 64)
      return P::fail(sizeProblem(path, static_cast<uint64_t>(st.st_size)));
  }
  while (!bytes.empty() && (bytes.back() == '\n' || bytes.back() == '\r' || bytes.back() == ' ' ||
                            bytes.back() == '\t'))
    bytes.pop_back();
  if (bytes.size() < kMinSecretBytes || bytes.size() > kMaxSecretBytes)
    return P::fail(sizeProblem(path, bytes.size()) + " (make one with: openssl rand -base64 48 > " +
                   path + ")");
  Secret s;
  s.file = path;
  s.fingerprint = fingerprintOf(bytes);
  s.bytes = std::move(bytes);
  return P::ok(std::move(s));
}

}  // namespace rdmamsg::config
