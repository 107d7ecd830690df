// PubSub: requests — a reply found its way back to the requester (REPLY),
// or the deadline passed (PUB_ACK timeout) — and the deadlines of
// everything that waits (pubsub.h).
#include <spdlog/spdlog.h>

#include "common/log_limit.h"
#include "daemon/local/local_server.h"
#include "daemon/peer/mesh.h"
#include "daemon/peer/peer.h"
#include "daemon/pubsub/pubsub.h"

namespace rdmamsg::pubsub {
namespace {

Status noLongerWaits() {
  return Status(Errc::unknown_service,
                "no request waits for this reply (answered already, past its deadline, or its "
                "requester left)");
}

}  // namespace

uint64_t* PubSub::waitingRequest(local::SessionId session, uint64_t requestId) {
  auto it = requests_.find({session, requestId});
  return it == requests_.end() ? nullptr : &it->second;
}

Status PubSub::respond(local::SessionId session, const local::RespondRequest& r) {
  ReplyToken to;
  if (!parseReplyToken(r.replyTo, to))
    return Status(Errc::bad_request, "'" + std::string(r.replyTo.substr(0, 64)) +
                                         "' is not the reply token of a request");
  if (to.node == config_.node) {
    uint64_t* token = waitingRequest(to.session, to.requestId);
    if (token == nullptr) {
      counters_.lateReplies++;
      return noLongerWaits();
    }
    // The responder is acknowledged once the requester's application took it.
    const local::Receipt receipt{local::Receipt::Kind::local, session, 0, r.msgId, 1};
    if (!server_->deliverReply(to.session, to.requestId, config_.node, r.payload, receipt))
      return noLongerWaits();
    counters_.replies++;
    forget(*token);
    return Status();
  }
  peer::Peer* p = mesh_->peer(to.node);
  if (p == nullptr)
    return Status(Errc::unknown_node, "the request came from unknown node " + std::string(to.node));
  envelope_.clear();
  encodeReply(envelope_, to.session, to.requestId, r.payload);
  Result<peer::Admitted> sent = p->send(session, r.msgId, "", kReplyService, envelope_.readable());
  if (!sent) return sent.status();
  if (sent->holdOn) holdPublisher(session, *sent->holdOn);
  return Status();
}

// A reply from a responder on `from`'s host: handed to its requester if
// the request still waits, refused otherwise (the responder hears why).
peer::Delivery PubSub::incomingReply(peer::Peer& from, uint64_t epoch, uint64_t seq,
                                     std::span<const std::byte> payload) {
  ReplyEnvelope e;
  if (Status st = decodeReply(payload, e); !st) {
    static LogLimit log;
    if (log.admit())
      spdlog::warn("peer {}: {}: refused{}", from.name(), st.message(), log.suffix());
    return peer::Delivery::kUnknownService;
  }
  uint64_t* token = waitingRequest(e.session, e.requestId);
  if (token == nullptr) {
    counters_.lateReplies++;
    return peer::Delivery::kUnknownService;
  }
  const local::Receipt receipt{local::Receipt::Kind::peer, mesh_->handleOf(from), epoch, seq, 1};
  if (!server_->deliverReply(e.session, e.requestId, from.name(), e.payload, receipt))
    return peer::Delivery::kUnknownService;
  counters_.replies++;
  forget(*token);
  return peer::Delivery::kAccepted;
}

void PubSub::armDeadline(uint64_t token, std::chrono::milliseconds after) {
  if (publishes_.setDeadline(token, std::chrono::steady_clock::now() + after))
    deadlineTimer_.arm(after);
}

// Requests past their deadline answer timeout; publishes whose results did
// not all come within message_timeout answer timeout with what came.
void PubSub::onDeadline() {
  const auto now = std::chrono::steady_clock::now();
  while (const uint64_t token = publishes_.popExpired(now)) {
    Publish& p = *publishes_.find(token);
    if (p.request) {
      counters_.timeouts++;
      answer(token, p, Errc::timeout, "no reply to " + std::to_string(p.msgId) + " in time");
    } else {
      // What is known: the local subscriptions it matched, and those of
      // them that took or dropped it so far.
      if (const Slot* local = p.localWaiting ? slots_.find(p.localSlot) : nullptr) {
        p.matched += local->matched;
        p.taken += local->taken;
        p.dropped += local->dropped;
      }
      answer(token, p, Errc::timeout,
             "not every subscriber took or dropped it within message_timeout");
    }
  }
  if (const auto next = publishes_.earliest())
    deadlineTimer_.arm(std::chrono::duration_cast<std::chrono::microseconds>(*next - now));
}

}  // namespace rdmamsg::pubsub
