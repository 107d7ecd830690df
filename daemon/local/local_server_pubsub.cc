// LocalServer: subjects — a client's SUB, UNSUB, PUB and RESPOND, checked
// and handed to the handler, and what the router answers: SUBSCRIBED,
// MSG, REPLY and PUB_ACK (see local_server.h; docs/protocol.md, "Subjects").
#include <string>

#include "common/subject.h"
#include "daemon/local/local_server.h"
#include "daemon/local/log.h"
#include "daemon/local/peer_cred.h"
#include "daemon/local/session.h"
#include "daemon/loop/counters.h"

namespace rdmamsg::local {
namespace {

uint8_t kindOf(proto::FrameKind k) {
  return static_cast<uint8_t>(k);
}

Status badSubject(const Status& why, std::string_view text) {
  return Status(Errc::bad_request, why.message() + ": '" + std::string(text.substr(0, 64)) +
                                       (text.size() > 64 ? "…'" : "'"));
}

}  // namespace

void LocalServer::onSub(Client& c, const proto::Frame& f) {
  Session& s = *c.session;
  Status st;
  if (f.msgId == 0) {
    st = Status(Errc::bad_request, "subscription id 0 is reserved");
  } else if (Status why = subject::checkPattern(f.subject); !why.ok()) {
    st = badSubject(why, f.subject);
  } else if (st = maySubscribe(c, f.subject); st.ok()) {
    SubscribeRequest req;
    req.subId = f.msgId;
    req.pattern = f.subject;
    req.group = f.group;
    req.policy = f.policy;
    req.pendingLimit = f.limit;
    st = handler_.onSubscribe(s.id(), req);
  }
  if (s.closing()) return;
  if (st.ok()) {
    localLog().debug("{}: subscribed {} to {}{}{}", s.name(), f.msgId, f.subject,
                     f.group.empty() ? "" : " in queue group ", f.group);
    proto::encodeSubscribed(s.outputBuffer(), f.msgId);
  } else {
    localLog().info("{}: subscription to {} refused: {}", s.name(), f.subject, st.toString());
    proto::encodeError(s.outputBuffer(), f.msgId, st.code(), kindOf(proto::FrameKind::sub),
                       st.message());
  }
  markDirty(c);
}

void LocalServer::onUnsub(Client& c, uint64_t subId) {
  handler_.onUnsubscribe(c.session->id(), subId);
}

void LocalServer::onPub(Client& c, const proto::Frame& f) {
  Session& s = *c.session;
  Status st;
  if (f.msgId == 0) {
    proto::encodeError(s.outputBuffer(), 0, Errc::bad_request, kindOf(proto::FrameKind::pub),
                       "message id 0 is reserved");
    return markDirty(c);
  }
  if (Status why = subject::checkSubject(f.subject); !why.ok()) {
    st = badSubject(why, f.subject);
  } else if (st = mayPublish(c, f.subject); !st.ok()) {
  } else if (f.payload.size() > config_.maxMessageSize) {
    st = Status(Errc::too_large, "message of " + std::to_string(f.payload.size()) +
                                     " bytes exceeds the maximum of " +
                                     std::to_string(config_.maxMessageSize));
  } else {
    PublishRequest req;
    req.msgId = f.msgId;
    req.subject = f.subject;
    req.payload = f.payload;
    req.timeout = std::chrono::milliseconds(f.limit);
    st = handler_.onPublish(s.id(), req);
  }
  if (!st.ok() && !s.closing()) pubAck(s.id(), f.msgId, {st.code()}, st.message());
}

void LocalServer::onRespond(Client& c, const proto::Frame& f) {
  Session& s = *c.session;
  if (f.msgId == 0) {
    proto::encodeError(s.outputBuffer(), 0, Errc::bad_request, kindOf(proto::FrameKind::respond),
                       "message id 0 is reserved");
    return markDirty(c);
  }
  Status st;
  if (f.payload.size() > config_.maxMessageSize) {
    st = Status(Errc::too_large, "reply of " + std::to_string(f.payload.size()) +
                                     " bytes exceeds the maximum of " +
                                     std::to_string(config_.maxMessageSize));
  } else {
    st = handler_.onRespond(s.id(), {f.msgId, f.replyTo, f.payload});
  }
  if (!st.ok() && !s.closing()) fail(s.id(), f.msgId, st);
}

Status LocalServer::mayPublish(Client& c, std::string_view subject) {
  if (!config_.policy) return Status();
  const config::Verdict v =
      config::checkPublish(*config_.policy, identityOf(c.session->cred()), subject);
  if (v) return Status();
  refused(*c.session, PolicyAction::publish, v);
  return Status(Errc::permission_denied, v.reason);
}

Status LocalServer::maySubscribe(Client& c, std::string_view pattern) {
  if (!config_.policy) return Status();
  const config::Verdict v =
      config::checkSubscribe(*config_.policy, identityOf(c.session->cred()), pattern);
  if (v) return Status();
  refused(*c.session, PolicyAction::subscribe, v);
  return Status(Errc::permission_denied, v.reason);
}

bool LocalServer::deliverMsg(SessionId id, uint64_t subId, std::string_view srcNode,
                             std::string_view subject, std::string_view replyTo,
                             std::span<const std::byte> payload, const Receipt& receipt) {
  Client* c = find(id);
  if (c == nullptr) return false;
  Session& s = *c->session;
  const size_t bytes = proto::msgFrameSize(srcNode, subject, replyTo, payload.size());
  if (!s.writeInPlace(bytes, [&](std::span<std::byte> at) {
        proto::encodeMsgAt(at, subId, srcNode, subject, replyTo, payload);
      }))
    proto::encodeMsg(s.outputBuffer(), subId, srcNode, subject, replyTo, payload);
  loop::copies().deliver += payload.size();
  tracked(*c, receipt, bytes);
  return true;
}

bool LocalServer::deliverReply(SessionId id, uint64_t requestId, std::string_view srcNode,
                               std::span<const std::byte> payload, const Receipt& receipt) {
  Client* c = find(id);
  if (c == nullptr) return false;
  Session& s = *c->session;
  const size_t bytes = proto::replyFrameSize(srcNode, payload.size());
  if (!s.writeInPlace(bytes, [&](std::span<std::byte> at) {
        proto::encodeReplyAt(at, requestId, srcNode, payload);
      }))
    proto::encodeReply(s.outputBuffer(), requestId, srcNode, payload);
  loop::copies().deliver += payload.size();
  tracked(*c, receipt, bytes);
  return true;
}

bool LocalServer::pubAck(SessionId id, uint64_t msgId, const proto::PubOutcome& outcome,
                         std::string_view text) {
  Client* c = find(id);
  if (c == nullptr) return false;
  proto::encodePubAck(c->session->outputBuffer(), msgId, outcome, text);
  markDirty(*c);
  return true;
}

}  // namespace rdmamsg::local
