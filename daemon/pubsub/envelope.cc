// Envelopes of publishes and replies between daemons (envelope.h).
#include "daemon/pubsub/envelope.h"

#include <charconv>
#include <cstring>

#include "common/local_protocol.h"
#include "common/subject.h"

namespace rdmamsg::pubsub {
namespace {

constexpr size_t kPubHeader = 16;
constexpr size_t kReplyHeader = 24;

template <typename T>
void put(ByteBuffer& out, T v) {
  std::byte b[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); i++)
    b[i] = static_cast<std::byte>(static_cast<uint64_t>(v) >> (8 * i));
  out.append(b, sizeof b);
}

void putStr8(ByteBuffer& out, std::string_view s) {
  put<uint8_t>(out, static_cast<uint8_t>(s.size()));
  out.append(s.data(), s.size());
}

template <typename T>
T get(const std::byte* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); i++)
    v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return static_cast<T>(v);
}

// Reads a str8 at `at`; false when it runs past the message.
bool str8(std::span<const std::byte> m, size_t& at, std::string_view& out) {
  if (at >= m.size()) return false;
  const size_t n = static_cast<uint8_t>(m[at]);
  if (m.size() - at - 1 < n) return false;
  out = std::string_view(reinterpret_cast<const char*>(m.data() + at + 1), n);
  at += 1 + n;
  return true;
}

Status bad(const char* why) {
  return Status(Errc::protocol_error, std::string("publish envelope: ") + why);
}

}  // namespace

void encodePub(ByteBuffer& out, const PubEnvelope& e, std::span<const std::byte> payload) {
  put<uint8_t>(out, kEnvelopeVersion);
  put<uint8_t>(out, e.request ? 1 : 0);
  put<uint16_t>(out, static_cast<uint16_t>(e.groups.size()));
  put<uint32_t>(out, 0);
  put<uint64_t>(out, e.token);
  putStr8(out, e.subject);
  putStr8(out, e.replyTo);
  for (std::string_view g : e.groups)
    putStr8(out, g);
  out.append(payload);
}

Status decodePub(std::span<const std::byte> m, PubEnvelope& out) {
  if (m.size() < kPubHeader) return bad("shorter than its header");
  if (get<uint8_t>(m.data()) != kEnvelopeVersion) return bad("unknown version");
  const uint8_t flags = get<uint8_t>(m.data() + 1);
  if (flags > 1) return bad("unknown flags");
  const size_t groups = get<uint16_t>(m.data() + 2);
  if (get<uint32_t>(m.data() + 4) != 0) return bad("reserved bytes set");
  if (groups > kMaxGroupsPerHost) return bad("more queue groups than a host is assigned");
  out.request = flags == 1;
  out.token = get<uint64_t>(m.data() + 8);
  size_t at = kPubHeader;
  if (!str8(m, at, out.subject) || !str8(m, at, out.replyTo)) return bad("truncated names");
  if (!subject::checkSubject(out.subject).ok()) return bad("invalid subject");
  if (out.request != !out.replyTo.empty()) return bad("a reply token without a request");
  out.groups.clear();
  for (size_t i = 0; i < groups; i++) {
    std::string_view g;
    if (!str8(m, at, g)) return bad("truncated queue group");
    if (!proto::isValidName(g)) return bad("invalid queue group name");
    out.groups.push_back(g);
  }
  out.payload = m.subspan(at);
  return Status();
}

void encodeReply(ByteBuffer& out, uint64_t session, uint64_t requestId,
                 std::span<const std::byte> payload) {
  put<uint8_t>(out, kEnvelopeVersion);
  for (int i = 0; i < 7; i++)
    put<uint8_t>(out, 0);
  put<uint64_t>(out, session);
  put<uint64_t>(out, requestId);
  out.append(payload);
}

Status decodeReply(std::span<const std::byte> m, ReplyEnvelope& out) {
  if (m.size() < kReplyHeader) return Status(Errc::protocol_error, "reply envelope: too short");
  if (get<uint8_t>(m.data()) != kEnvelopeVersion)
    return Status(Errc::protocol_error, "reply envelope: unknown version");
  for (size_t i = 1; i < 8; i++)
    if (m[i] != std::byte{0}) return Status(Errc::protocol_error, "reply envelope: reserved set");
  out.session = get<uint64_t>(m.data() + 8);
  out.requestId = get<uint64_t>(m.data() + 16);
  out.payload = m.subspan(kReplyHeader);
  return Status();
}

std::string replyToken(std::string_view node, uint64_t session, uint64_t requestId) {
  return std::string(node) + "/" + std::to_string(session) + "/" + std::to_string(requestId);
}

bool parseReplyToken(std::string_view text, ReplyToken& out) {
  const size_t a = text.find('/');
  if (a == std::string_view::npos) return false;
  const size_t b = text.find('/', a + 1);
  if (b == std::string_view::npos) return false;
  out.node = text.substr(0, a);
  if (!proto::isValidName(out.node)) return false;
  auto number = [](std::string_view s, uint64_t& v) {
    if (s.empty() || s.size() > 20) return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size();
  };
  return number(text.substr(a + 1, b - a - 1), out.session) &&
         number(text.substr(b + 1), out.requestId) && out.requestId != 0;
}

}  // namespace rdmamsg::pubsub
