// Subjects: the names publish/subscribe, request/reply and queue groups
// route by (docs/protocol.md, "Subjects").
//
// A subject is tokens separated by dots: "orders.eu.x". A token is 1 or
// more printable ASCII characters other than the dot (no space, no
// control character). A subscription names a pattern, which may use two
// wildcards, each a whole token: `*` matches exactly one token, `>` (only
// as the last token) matches one or more tokens. A publish names a full
// subject: no wildcard. These are NATS's rules, with limits: at most
// kMaxSubjectLength bytes and kMaxTokens tokens.
//
// Queue group names follow the node and service name rules
// (proto::isValidName).
#pragma once

#include <cstddef>
#include <string_view>

#include "common/status.h"

namespace rdmamsg::subject {

inline constexpr size_t kMaxSubjectLength = 255;
inline constexpr size_t kMaxTokens = 32;

// OK when `text` is a subject a publish may name, else bad_request saying
// why (the message is only built then: checking allocates nothing).
Status checkSubject(std::string_view text);
// OK when `text` is a pattern a subscription may name, else bad_request
// saying why.
Status checkPattern(std::string_view text);

// Whether subject `s` (valid) matches pattern `p` (valid), token by token:
// the reference the subject trie is tested against.
bool matches(std::string_view pattern, std::string_view s);

// Splits `text` at its dots into `out` (at most kMaxTokens); returns the
// count. For text already checked.
size_t tokenize(std::string_view text, std::string_view* out);

}  // namespace rdmamsg::subject
