// What a publish and a reply carry between daemons, in front of their
// payload, as messages of the peer protocol to the reserved destinations
// "$pub" and "$reply" (docs/protocol.md, "Subjects between daemons"):
//
//   "$pub":   u8 version (1) | u8 flags (1: a request) | u16 groupCount |
//             u32 0 | u64 token | str8 subject | str8 replyTo |
//             groupCount × str8 group | payload
//   "$reply": u8 version (1) | 7 × u8 0 | u64 session | u64 requestId | payload
//
// A publish crosses to a host once; `groups` names the queue groups whose
// one member that host is to pick (the publishing daemon chose the host).
// The receiver checks every length and name before it uses any (hostile
// peers); what does not decode is refused with its reason.
//
// A request's reply token (a MSG's replyTo) names where its reply goes:
// "node/session/requestId" (decimal), opaque to clients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/byte_buffer.h"
#include "common/status.h"

namespace rdmamsg::pubsub {

inline constexpr std::string_view kPubService = "$pub";
inline constexpr std::string_view kReplyService = "$reply";
inline constexpr uint8_t kEnvelopeVersion = 1;
// At most this many queue groups a publish assigns one host.
inline constexpr size_t kMaxGroupsPerHost = 64;

struct PubEnvelope {
  uint64_t token = 0;
  bool request = false;
  std::string_view subject, replyTo;
  std::vector<std::string_view> groups;
  std::span<const std::byte> payload;
};

// Appends the envelope and `payload` to `out`.
void encodePub(ByteBuffer& out, const PubEnvelope& e, std::span<const std::byte> payload);
// Decodes `message` (views into it); an error names what is wrong.
Status decodePub(std::span<const std::byte> message, PubEnvelope& out);

struct ReplyEnvelope {
  uint64_t session = 0;
  uint64_t requestId = 0;
  std::span<const std::byte> payload;
};
void encodeReply(ByteBuffer& out, uint64_t session, uint64_t requestId,
                 std::span<const std::byte> payload);
Status decodeReply(std::span<const std::byte> message, ReplyEnvelope& out);

struct ReplyToken {
  std::string_view node;
  uint64_t session = 0;
  uint64_t requestId = 0;
};
std::string replyToken(std::string_view node, uint64_t session, uint64_t requestId);
// False when `text` is not a reply token.
bool parseReplyToken(std::string_view text, ReplyToken& out);

}  // namespace rdmamsg::pubsub
