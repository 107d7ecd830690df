// Subjects and patterns (subject.h).
#include "common/subject.h"

namespace rdmamsg::subject {
namespace {

bool tokenChar(char c) {
  return c > ' ' && c < 0x7f && c != '.';
}

Status invalid(const char* why) {
  return Status(Errc::bad_request, why);
}

// OK when `text` is dot-separated tokens within the limits, else why not
// (bad_request); wildcards are allowed as whole tokens when `wildcards`.
Status check(std::string_view text, bool wildcards) {
  if (text.empty()) return invalid("the subject is empty");
  if (text.size() > kMaxSubjectLength) return invalid("the subject is longer than 255 bytes");
  size_t tokens = 0;
  size_t start = 0;
  for (;;) {
    const size_t dot = text.find('.', start);
    const std::string_view token =
        text.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (token.empty())
      return invalid("the subject has an empty token (two dots, or a dot at an end)");
    if (++tokens > kMaxTokens) return invalid("the subject has more than 32 tokens");
    for (char c : token)
      if (!tokenChar(c)) return invalid("the subject has a character that is not printable ASCII");
    const bool star = token == "*", rest = token == ">";
    if (!wildcards && (star || rest))
      return invalid("a published subject has no wildcard ('*' and '>' are for subscriptions)");
    if (token.size() > 1 && token.find_first_of("*>") != std::string_view::npos)
      return invalid("'*' and '>' are wildcards only as whole tokens");
    if (dot == std::string_view::npos) break;
    if (rest) return invalid("'>' is only the last token");
    start = dot + 1;
  }
  return Status();
}

}  // namespace

Status checkSubject(std::string_view text) {
  return check(text, false);
}

Status checkPattern(std::string_view text) {
  return check(text, true);
}

size_t tokenize(std::string_view text, std::string_view* out) {
  size_t n = 0;
  size_t start = 0;
  while (n < kMaxTokens) {
    const size_t dot = text.find('.', start);
    if (dot == std::string_view::npos) {
      out[n++] = text.substr(start);
      break;
    }
    out[n++] = text.substr(start, dot - start);
    start = dot + 1;
  }
  return n;
}

bool matches(std::string_view pattern, std::string_view s) {
  std::string_view p[kMaxTokens], t[kMaxTokens];
  const size_t np = tokenize(pattern, p), nt = tokenize(s, t);
  for (size_t i = 0; i < np; i++) {
    if (p[i] == ">") return nt > i;
    if (i >= nt) return false;
    if (p[i] != "*" && p[i] != t[i]) return false;
  }
  return np == nt;
}

}  // namespace rdmamsg::subject
