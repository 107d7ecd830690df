// PubSub: subscriptions, interest and peers (pubsub.h).
#include "daemon/pubsub/pubsub.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "daemon/local/local_server.h"
#include "daemon/peer/mesh.h"
#include "daemon/peer/peer.h"

namespace rdmamsg::pubsub {

PubSub::PubSub(loop::EventLoop& loop, const config::Config& cfg)
    : loop_(loop),
      config_(cfg),
      subs_(cfg.subjects.maxSubscriptions),
      remote_(cfg.subjects.maxPeerInterest),
      deadlineTimer_(loop, [this] { onDeadline(); }) {}

void PubSub::attach(local::LocalServer* server, peer::Mesh* mesh) {
  server_ = server;
  mesh_ = mesh;
}

Status PubSub::subscribe(local::SessionId session, const local::SubscribeRequest& r) {
  const uint32_t limit = r.pendingLimit == 0
                             ? config_.subjects.pendingLimit
                             : std::min(r.pendingLimit, config_.subjects.pendingLimit);
  Result<Subscription*> sub = subs_.add(session, r, limit);
  if (!sub) return sub.status();
  announceChanges();
  return Status();
}

void PubSub::unsubscribe(local::SessionId session, uint64_t subId) {
  if (subs_.remove(session, subId)) announceChanges();
}

void PubSub::sessionClosed(local::SessionId session) {
  subs_.removeSession(session);
  announceChanges();
  // Its requests wait for nobody now; its publishes' results are answered to nobody.
  std::vector<uint64_t> gone;
  publishes_.forEach([&](uint64_t token, const Publish& p) {
    if (p.session == session) gone.push_back(token);
  });
  for (uint64_t token : gone)
    forget(token);
  for (auto& [flow, held] : heldOnFlow_)
    std::erase(held, session);
  for (auto& [subscriber, held] : heldOnSession_)
    std::erase(held, session);
  if (auto it = heldOnSession_.find(session); it != heldOnSession_.end()) {
    for (local::SessionId publisher : it->second)
      server_->resumeReading(publisher);
    heldOnSession_.erase(it);
  }
}

// Every peer whose connection routes subjects hears what changed, in order.
void PubSub::announceChanges() {
  for (const InterestChange& c : subs_.takeChanges()) {
    for (uint64_t handle : subjectPeers_)
      if (peer::Peer* p = mesh_->peerByHandle(handle)) p->announce(c.op, c.group, c.pattern);
  }
}

void PubSub::connectionUp(peer::Peer& from) {
  const uint64_t handle = mesh_->handleOf(from);
  remote_.clear(handle);  // what it said on its last connection is gone
  if (std::find(subjectPeers_.begin(), subjectPeers_.end(), handle) == subjectPeers_.end())
    subjectPeers_.push_back(handle);
  subs_.forEachInterest([&](std::string_view group, std::string_view pattern) {
    from.announce(peer::InterestOp::kAdd, group, pattern);
  });
}

void PubSub::connectionLost(peer::Peer& from) {
  const uint64_t handle = mesh_->handleOf(from);
  remote_.clear(handle);
  std::erase(subjectPeers_, handle);
  // Results it owed will not come: those publishes answer for it.
  std::vector<uint64_t> waiting;
  publishes_.forEach([&](uint64_t token, Publish& p) {
    auto it = std::find(p.hosts.begin(), p.hosts.end(), handle);
    if (it == p.hosts.end()) return;
    p.hosts.erase(it);
    if (p.failure.ok())
      p.failure = Status(Errc::peer_unreachable,
                         "the connection to " + from.name() + " was lost before its result");
    waiting.push_back(token);
  });
  for (uint64_t token : waiting)
    finishIfDone(token);
}

Status PubSub::interest(peer::Peer& from, peer::InterestOp op, std::string_view group,
                        std::string_view pattern) {
  const uint64_t handle = mesh_->handleOf(from);
  if (op == peer::InterestOp::kRemove) {
    remote_.remove(handle, group, pattern);
    return Status();
  }
  Status st = remote_.add(handle, group, pattern);
  if (!st.ok()) {
    counters_.interestRefused++;
    spdlog::warn("peer {}: {}: closing its connection", from.name(), st.message());
  }
  return st;
}

void PubSub::holdPublisher(local::SessionId publisher, const peer::FlowKey& flow) {
  auto& held = heldOnFlow_[flow];
  if (std::find(held.begin(), held.end(), publisher) != held.end()) return;
  held.push_back(publisher);
  server_->pauseReading(publisher);
}

void PubSub::queueDrained(const peer::FlowKey& flow) {
  auto waiting = heldOnFlow_.extract(flow);
  if (waiting.empty()) return;
  for (local::SessionId publisher : waiting.mapped())
    server_->resumeReading(publisher);
}

PubSubSnapshot PubSub::snapshot() const {
  PubSubSnapshot s;
  s.subscriptions = subs_.size();
  s.pendingPublishes = publishes_.size();
  s.counters = counters_;
  std::map<std::pair<std::string, std::string>, PatternStats> byPattern;
  subs_.forEach([&](const Subscription& sub) {
    PatternStats& p = byPattern[{sub.pattern, sub.group}];
    p.subscriptions++;
    p.pending += sub.pending;
    p.delivered += sub.delivered;
    p.taken += sub.taken;
    p.dropped += sub.dropped;
  });
  for (auto& [key, p] : byPattern) {
    if (s.patterns.size() == kMaxPatternsShown) {
      s.truncated = true;
      break;
    }
    p.pattern = key.first;
    p.group = key.second;
    s.patterns.push_back(std::move(p));
  }
  for (uint64_t handle : subjectPeers_)
    if (const peer::Peer* p = mesh_->peerByHandle(handle))
      s.interest.emplace_back(p->name(), remote_.count(handle));
  std::sort(s.interest.begin(), s.interest.end());
  return s;
}

void PubSub::sessionDrained(local::SessionId session) {
  auto waiting = heldOnSession_.extract(session);
  if (waiting.empty()) return;
  for (local::SessionId publisher : waiting.mapped())
    server_->resumeReading(publisher);
}

}  // namespace rdmamsg::pubsub
