// The mesh secret: the key daemons prove to each other that they hold
// (docs/security.md). It is read from a file named in the configuration,
// and refused unless only its owner (and its group) can read it.
#pragma once

#include <cstddef>
#include <string>

#include "config/parsed.h"

namespace rdmamsg::config {

inline constexpr std::size_t kMinSecretBytes = 32;
inline constexpr std::size_t kMaxSecretBytes = 4096;

struct Secret {
  std::string file;   // where it was read (absolute)
  std::string bytes;  // the key: the file's content without trailing whitespace
  // 16 hex digits of SHA-256 over a label and the key: safe to log and show,
  // so that operators can compare hosts without reading the files.
  std::string fingerprint;

  bool operator==(const Secret&) const = default;
};

// Reads and checks a secret file: an absolute path to a regular file owned
// by root or by this process's user, with no permission for others and no
// write permission for its group, holding kMinSecretBytes..kMaxSecretBytes.
Parsed<Secret> readSecret(std::string_view path);

// The fingerprint of `key` (Secret::fingerprint).
std::string fingerprintOf(std::string_view key);

}  // namespace rdmamsg::config
