// The name rule shared by node names (here) and service names (validated by the
// daemon and the client library): 1..63 characters of [A-Za-z0-9._-].
#pragma once

#include <cstddef>
#include <string_view>

namespace rdmamsg::config {

inline constexpr std::size_t kMaxNameLength = 63;

// A human-readable statement of the rule, for error messages.
inline constexpr std::string_view kNameRule = "1..63 characters of A-Z a-z 0-9 . _ -";

// True for a character a name may hold.
constexpr bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// True when every character of `s` may be in a name (whatever its length).
constexpr bool hasOnlyNameChars(std::string_view s) {
  for (char c : s)
    if (!isNameChar(c)) return false;
  return true;
}

// True when `name` follows the rule above.
constexpr bool isValidName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxNameLength && hasOnlyNameChars(name);
}

}  // namespace rdmamsg::config
