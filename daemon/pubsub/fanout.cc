// PubSub: delivering a publish to this host's subscribers — one MSG frame
// each, counted in a fan-out slot until every one took it or dropped it —
// and the "$pub" messages of peers (pubsub.h, fanout.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/log_limit.h"
#include "daemon/local/local_server.h"
#include "daemon/peer/mesh.h"
#include "daemon/peer/peer.h"
#include "daemon/pubsub/pubsub.h"

namespace rdmamsg::pubsub {
namespace {

bool hasRoom(const Subscription& s) {
  return s.pending < s.pendingLimit;
}

// The member of a queue group to give the next message: one with room
// before one without, then the one with the fewest pending.
bool better(const Subscription& a, const Subscription& b) {
  if (hasRoom(a) != hasRoom(b)) return hasRoom(a);
  return a.pending < b.pending;
}

bool blocks(const Subscription& s) {
  return s.policy == proto::SlowConsumer::block;
}

}  // namespace

void PubSub::collectLocal(std::string_view subject, std::span<const std::string_view> groups,
                          bool allGroups) {
  local_.clear();
  localGroups_.clear();
  groupBest_.clear();
  subs_.match(subject, [&](Subscription& s) {
    if (s.group.empty()) return local_.push_back(&s);
    if (!allGroups && std::find(groups.begin(), groups.end(), s.group) == groups.end()) return;
    auto it = std::find_if(groupBest_.begin(), groupBest_.end(),
                           [&](const auto& g) { return g.first == s.group; });
    if (it == groupBest_.end())
      groupBest_.emplace_back(s.group, &s);
    else if (better(s, *it->second))
      it->second = &s;
  });
  for (const auto& [group, member] : groupBest_) {
    local_.push_back(member);
    localGroups_.push_back(group);
  }
}

bool PubSub::fanOut(const Slot& origin, local::SessionId publisher, std::string_view srcNode,
                    std::string_view subject, std::string_view replyTo,
                    std::span<const std::byte> payload) {
  auto [id, slot] = slots_.open();
  *slot = origin;
  counters_.fannedOut++;
  for (Subscription* sub : local_) {
    slot->matched++;
    if (!blocks(*sub) && !hasRoom(*sub)) {  // a slow consumer: dropped, for it alone
      slot->dropped++;
      sub->dropped++;
      counters_.dropped++;
      continue;
    }
    const local::Receipt receipt{local::Receipt::Kind::pub, sub->id, blocks(*sub) ? 1u : 0u, id, 1};
    if (!server_->deliverMsg(sub->session, sub->clientId, srcNode, subject, replyTo, payload,
                             receipt)) {
      slot->dropped++;
      counters_.dropped++;
      continue;
    }
    sub->pending++;
    sub->delivered++;
    counters_.delivered++;
    slot->waiting++;
    if (!blocks(*sub)) continue;
    slot->waitingBlock++;
    // A block subscriber over its limit holds a publisher on this host:
    // it is not read until the subscriber catches up.
    if (!hasRoom(*sub) && !slot->remote && publisher != sub->session) {
      auto& held = heldOnSession_[sub->session];
      if (std::find(held.begin(), held.end(), publisher) == held.end()) {
        held.push_back(publisher);
        server_->pauseReading(publisher);
      }
    }
  }
  const bool windowNow = slot->waitingBlock == 0;
  slot->windowOwed = slot->remote && !windowNow;
  if (slot->waiting == 0) slotDone(*slot);
  return windowNow;
}

void PubSub::consumed(const local::Receipt& r, Errc errc) {
  for (uint64_t i = 0; i < r.count; i++)
    settle(r.seq + i, r.owner, r.epoch == 1, errc);
}

void PubSub::settle(uint64_t slotId, uint64_t subId, bool block, Errc errc) {
  const bool took = errc == Errc::ok;
  if (Subscription* sub = subs_.find(subId)) {
    sub->pending -= std::min<uint32_t>(sub->pending, 1);
    took ? sub->taken++ : sub->dropped++;
    if (block && hasRoom(*sub)) sessionDrained(sub->session);
  }
  if (!took) counters_.dropped++;
  Slot* s = slots_.find(slotId);
  if (s == nullptr) return;
  took ? s->taken++ : s->dropped++;
  s->waiting--;
  if (block && --s->waitingBlock == 0 && s->windowOwed) {
    s->windowOwed = false;
    if (peer::Peer* p = mesh_->peerByHandle(s->peer))
      p->confirmLater(s->epoch, s->seq, 1, Errc::ok, s->bytes);
  }
  if (s->waiting == 0) slotDone(*s);
}

// Nobody is left to take it: the publisher hears what came of it here.
void PubSub::slotDone(Slot& s) {
  const Slot done = s;
  slots_.close(s);
  if (done.remote) {
    if (peer::Peer* p = mesh_->peerByHandle(done.peer))
      p->sendPubResult(done.epoch, done.token, {done.matched, done.taken, done.dropped, 0});
    return;
  }
  Publish* found = publishes_.find(done.token);
  if (found == nullptr) return;
  Publish& p = *found;
  p.matched += done.matched;
  p.taken += done.taken;
  p.dropped += done.dropped;
  p.localWaiting = false;
  finishIfDone(done.token);
}

peer::Delivery PubSub::incoming(peer::Peer& from, uint64_t epoch, uint64_t seq,
                                std::string_view dst, std::span<const std::byte> payload) {
  if (dst == kPubService) return incomingPub(from, epoch, seq, payload);
  if (dst == kReplyService) return incomingReply(from, epoch, seq, payload);
  return peer::Delivery::kUnknownService;
}

// One copy came for this host: every subscription here that matches (and
// one member of each queue group the publisher assigned us) gets it.
peer::Delivery PubSub::incomingPub(peer::Peer& from, uint64_t epoch, uint64_t seq,
                                   std::span<const std::byte> payload) {
  PubEnvelope e;
  if (Status st = decodePub(payload, e); !st) {
    static LogLimit log;
    if (log.admit())
      spdlog::warn("peer {}: {}: refused{}", from.name(), st.message(), log.suffix());
    return peer::Delivery::kUnknownService;
  }
  collectLocal(e.subject, e.groups, false);
  Slot origin;
  origin.remote = true;
  origin.token = e.token;
  origin.peer = mesh_->handleOf(from);
  origin.epoch = epoch;
  origin.seq = seq;
  origin.bytes = payload.size();
  const bool windowNow = fanOut(origin, 0, from.name(), e.subject, e.replyTo, e.payload);
  return windowNow ? peer::Delivery::kDelivered : peer::Delivery::kAccepted;
}

}  // namespace rdmamsg::pubsub
