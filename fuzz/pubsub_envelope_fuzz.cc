// libFuzzer target: what a peer's "$pub" and "$reply" messages carry in
// front of their payload, and reply tokens (daemon/pubsub/envelope.h).
//
// The input is the payload of a message a hostile peer sent to "$pub" (or
// "$reply"), or the reply token a hostile local client names in a RESPOND.
// Each decoder must refuse what is not well formed and, for what it takes,
// give views inside the input, names and subjects as docs/protocol.md
// requires, and encode again to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "common/local_protocol.h"
#include "common/subject.h"
#include "daemon/pubsub/envelope.h"
#include "fuzz/check.h"

namespace rdmamsg::pubsub {
namespace {

using Bytes = std::span<const std::byte>;

bool inside(Bytes in, const void* p, size_t n) {
  if (n == 0) return true;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto inBegin = reinterpret_cast<uintptr_t>(in.data());
  return begin >= inBegin && n <= in.size() && begin - inBegin <= in.size() - n;
}

bool same(Bytes a, Bytes b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

void checkPub(Bytes in) {
  PubEnvelope e;
  if (!decodePub(in, e).ok()) return;
  FUZZ_CHECK(subject::checkSubject(e.subject).ok());
  FUZZ_CHECK(e.request == !e.replyTo.empty());
  FUZZ_CHECK(e.groups.size() <= kMaxGroupsPerHost);
  FUZZ_CHECK(inside(in, e.subject.data(), e.subject.size()));
  FUZZ_CHECK(inside(in, e.replyTo.data(), e.replyTo.size()));
  FUZZ_CHECK(inside(in, e.payload.data(), e.payload.size()));
  for (std::string_view g : e.groups) {
    FUZZ_CHECK(proto::isValidName(g));
    FUZZ_CHECK(inside(in, g.data(), g.size()));
  }
  ByteBuffer again;
  encodePub(again, e, e.payload);
  FUZZ_CHECK(same(again.readable(), in));
}

void checkReply(Bytes in) {
  ReplyEnvelope e;
  if (!decodeReply(in, e).ok()) return;
  FUZZ_CHECK(inside(in, e.payload.data(), e.payload.size()));
  ByteBuffer again;
  encodeReply(again, e.session, e.requestId, e.payload);
  FUZZ_CHECK(same(again.readable(), in));
}

void checkToken(std::string_view text) {
  ReplyToken t;
  if (!parseReplyToken(text, t)) return;
  FUZZ_CHECK(proto::isValidName(t.node) && t.requestId != 0);
  const std::string again = replyToken(t.node, t.session, t.requestId);
  ReplyToken t2;
  FUZZ_CHECK(parseReplyToken(again, t2));
  FUZZ_CHECK(t2.node == t.node && t2.session == t.session && t2.requestId == t.requestId);
}

}  // namespace
}  // namespace rdmamsg::pubsub

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto in = std::as_bytes(std::span(data, size));
  rdmamsg::pubsub::checkPub(in);
  rdmamsg::pubsub::checkReply(in);
  rdmamsg::pubsub::checkToken(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
