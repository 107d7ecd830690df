// librdmamsg: subjects (include/rdmamsg/client.h, "Subjects") —
// subscribing, publishing, requests and their replies, replying. What the
// daemon would refuse (a subject, a pattern, a queue group, a reply token,
// a size, a timeout) is refused here first with bad_request or too_large,
// without using an id. Publishes, requests and replies take their ids from
// the sends' sequence and are queued and written as sends are.
#include <string>

#include "client/client_wait.h"
#include "common/subject.h"

namespace rdmamsg {
namespace {

// How long requestAndWait() waits past a request's timeout for the
// daemon's outcome (which it sends at the deadline).
constexpr std::chrono::seconds kOutcomeGrace{5};
constexpr uint64_t kMaxTimeoutMs = 0xffffffffu;  // u32 timeoutMs

Status badSubject(std::string_view what, std::string_view text, const Status& why) {
  return Status(Errc::bad_request,
                "invalid " + std::string(what) + " '" + std::string(text) + "': " + why.message());
}

// A request's timeout in whole milliseconds, 1 to 2^32 - 1.
Result<uint32_t> requestTimeout(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0 || static_cast<uint64_t>(timeout.count()) > kMaxTimeoutMs) {
    return Status(Errc::bad_request, "a request's timeout is 1 ms to " +
                                         std::to_string(kMaxTimeoutMs) + " ms, not " +
                                         std::to_string(timeout.count()) + " ms");
  }
  return static_cast<uint32_t>(timeout.count());
}

// A reply token as a MSG carries it: 1-255 printable ASCII characters.
bool isReplyToken(std::string_view token) {
  if (token.empty() || token.size() > subject::kMaxSubjectLength) return false;
  for (char c : token) {
    if (c <= ' ' || c >= 0x7f) return false;
  }
  return true;
}

std::span<const std::byte> bytesOf(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

}  // namespace

Result<uint64_t> Client::subscribe(std::string_view pattern, const SubscribeOptions& options,
                                   std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  if (!im.conn.ok()) return im.conn;
  if (Status why = subject::checkPattern(pattern); !why.ok())
    return badSubject("pattern", pattern, why);
  if (!options.group.empty()) {
    if (Status st = client::checkName("queue group", options.group); !st.ok()) return st;
  }
  const uint64_t id = im.subs.issue();
  const auto policy = options.policy == SlowConsumer::block ? proto::SlowConsumer::block
                                                            : proto::SlowConsumer::drop;
  proto::encodeSub(im.out, id, pattern, options.group, policy, options.pendingLimit);
  Status st = im.waitFor([&] { return im.subs.answered(id); }, timeout);
  if (!im.subs.answered(id)) {
    im.subs.abandon(id);
    if (!im.conn.ok()) return im.conn;
    proto::encodeUnsub(im.out, id);  // should the daemon take it after all
    im.writeSome();
    return Status(Errc::timeout,
                  "no answer from rdmamsgd to subscribing to " + std::string(pattern) + " in time");
  }
  if (Status answer = im.subs.take(id); !answer.ok()) return answer;
  return id;
}

Status Client::unsubscribe(uint64_t subscription) {
  Impl& im = *impl_;
  if (!im.conn.ok()) return im.conn;
  if (!im.subs.remove(subscription)) {
    return Status(Errc::bad_request,
                  "no subscription " + std::to_string(subscription) + " on this client");
  }
  proto::encodeUnsub(im.out, subscription);
  im.writeSome();
  return {};
}

Result<uint64_t> Client::publish(std::string_view subject, std::span<const std::byte> payload) {
  return impl_->queuePub(subject, 0, payload, false);
}

Result<uint64_t> Client::publish(std::string_view subject, std::string_view text) {
  return publish(subject, bytesOf(text));
}

Result<uint64_t> Client::request(std::string_view subject, std::span<const std::byte> payload,
                                 std::chrono::milliseconds timeout) {
  Result<uint32_t> ms = requestTimeout(timeout);
  if (!ms) return ms.status();
  return impl_->queuePub(subject, *ms, payload, false);
}

Status Client::requestAndWait(std::string_view subject, std::span<const std::byte> payload,
                              Message& reply, std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  if (im.view.held()) return detail::viewHeldError();
  Result<uint32_t> ms = requestTimeout(timeout);
  if (!ms) return ms.status();
  Result<uint64_t> id = im.queuePub(subject, *ms, payload, true);
  if (!id) return id.status();
  Completion failed;
  bool done = false;  // the daemon said why no reply comes
  const Status st = im.waitFor(
      [&] {
        done = done || im.completions.take(*id, failed);
        return done || im.inbox.replyArrived();
      },
      timeout + kOutcomeGrace);
  if (im.inbox.replyArrived()) {
    im.inbox.takeReply(reply);
    im.afterTaken();
    return {};
  }
  im.inbox.stopAwaiting();  // a reply that comes later is received as any message
  if (done) return failed.status;
  if (!im.conn.ok()) return im.conn;
  if (!st.ok() && st.code() != Errc::timeout) return st;
  return Status(Errc::timeout, "no outcome of request " + std::to_string(*id) + " to " +
                                   std::string(subject) + " from rdmamsgd in time");
}

Result<uint64_t> Client::reply(const Message& request, std::span<const std::byte> payload) {
  Impl& im = *impl_;
  if (!im.conn.ok()) return im.conn;
  if (request.replyTo.empty())
    return Status(Errc::bad_request, "the message is not a request: it has no reply token");
  if (!isReplyToken(request.replyTo))
    return Status(Errc::bad_request, "'" + request.replyTo + "' is not a reply token");
  if (Status st = client::checkSize(payload.size(), im.maxMessage); !st.ok()) return st;
  const uint64_t id = im.nextId++;
  proto::encodeRespond(im.out, id, request.replyTo, payload);
  return im.queued(id, true);
}

Result<uint64_t> Client::reply(const Message& request, std::string_view text) {
  return reply(request, bytesOf(text));
}

Status Client::Impl::checkPublish(std::string_view subject, size_t size) const {
  if (Status why = subject::checkSubject(subject); !why.ok())
    return badSubject("subject", subject, why);
  return client::checkSize(size, maxMessage);
}

Result<uint64_t> Client::Impl::queuePub(std::string_view subject, uint32_t timeoutMs,
                                        std::span<const std::byte> payload, bool awaitReply,
                                        bool mayWait, const Block* claimed) {
  if (!conn.ok()) return conn;
  if (Status st = checkPublish(subject, payload.size()); !st.ok()) return st;
  if (Status st = checkRoom(mayWait); !st.ok()) return st;
  const uint64_t id = nextId++;
  if (claimed) claim.giveBlock();        // the publish's block now, whatever happens
  if (awaitReply) inbox.awaitReply(id);  // before the PUB goes out: its reply may come at once
  client::OutgoingSend pub;
  pub.id = id;
  pub.payload = payload;
  pub.subject = subject;
  pub.timeoutMs = timeoutMs;
  Result<client::ShmLink::LargeSend> large = link.sendLarge(out, pub, claimed);
  if (!large) lose(large.status());  // the connection's error answers
  Result<uint64_t> queuedId = [&]() -> Result<uint64_t> {
    if (!large || *large == client::ShmLink::LargeSend::written) return sent(id);
    if (*large == client::ShmLink::LargeSend::inStream)
      proto::encodePub(out, id, timeoutMs, subject, payload);
    return queued(id, mayWait);
  }();
  if (!queuedId && awaitReply) inbox.stopAwaiting();
  return queuedId;
}

}  // namespace rdmamsg
