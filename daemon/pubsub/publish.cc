// PubSub: a client's publish — matched here and against the peers'
// interest, sent once to each host with a match, and answered with what
// came of it everywhere (pubsub.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/local/local_server.h"
#include "daemon/peer/mesh.h"
#include "daemon/peer/peer.h"
#include "daemon/pubsub/pubsub.h"

namespace rdmamsg::pubsub {

// hosts_: one entry per peer whose interest `subject` matches.
void PubSub::matchHosts(std::string_view subject) {
  hosts_.clear();
  remote_.match(subject, [&](uint64_t peer, std::string_view group) {
    auto it =
        std::find_if(hosts_.begin(), hosts_.end(), [&](const Host& h) { return h.peer == peer; });
    if (it == hosts_.end()) {
      hosts_.push_back(Host{peer, false, {}});
      it = hosts_.end() - 1;
    }
    if (group.empty())
      it->plain = true;
    else if (std::find(it->groups.begin(), it->groups.end(), group) == it->groups.end())
      it->groups.push_back(group);
  });
}

// Each queue group's message goes to one member across the mesh: a member
// here if there is one (localGroups_), else one host with a member, one
// whose flow has room for it first. Hosts left with nothing are dropped.
void PubSub::assignGroups(uint64_t cost) {
  std::vector<std::string_view> pending;
  for (const Host& h : hosts_)
    for (std::string_view g : h.groups)
      if (std::find(localGroups_.begin(), localGroups_.end(), g) == localGroups_.end() &&
          std::find(pending.begin(), pending.end(), g) == pending.end())
        pending.push_back(g);
  std::vector<size_t> chosen(pending.size(), SIZE_MAX);
  for (size_t gi = 0; gi < pending.size(); gi++) {
    const size_t n = hosts_.size();
    const size_t start = rr_++;
    for (size_t k = 0; k < n; k++) {
      const Host& h = hosts_[(start + k) % n];
      if (std::find(h.groups.begin(), h.groups.end(), pending[gi]) == h.groups.end()) continue;
      if (chosen[gi] == SIZE_MAX) chosen[gi] = (start + k) % n;  // any member, failing room
      peer::Peer* p = mesh_->peerByHandle(h.peer);
      if (p != nullptr && p->flowHasRoom(kPubService, cost)) {
        chosen[gi] = (start + k) % n;
        break;
      }
    }
  }
  for (size_t i = 0; i < hosts_.size(); i++) {
    Host& h = hosts_[i];
    std::erase_if(h.groups, [&](std::string_view g) {
      auto it = std::find(pending.begin(), pending.end(), g);
      return it == pending.end() || chosen[static_cast<size_t>(it - pending.begin())] != i;
    });
  }
  std::erase_if(hosts_, [](const Host& h) { return !h.plain && h.groups.empty(); });
}

Status PubSub::publish(local::SessionId session, const local::PublishRequest& r) {
  const bool request = r.timeout.count() > 0;
  collectLocal(r.subject, {}, true);
  matchHosts(r.subject);
  assignGroups(peer::windowCost(0, kPubService.size(), r.payload.size() + 32 + r.subject.size()));
  if (local_.empty() && hosts_.empty()) {
    if (request) {
      counters_.noResponders++;
      return Status(Errc::no_responders,
                    "no subscription in the mesh matches " + std::string(r.subject));
    }
    counters_.noSubscribers++;
    return Status(Errc::no_subscribers,
                  "no subscription in the mesh matches " + std::string(r.subject));
  }
  auto [token, p] = publishes_.add();
  p.session = session;
  p.msgId = r.msgId;
  p.request = request;
  request ? counters_.requests++ : counters_.published++;
  std::string replyTo;
  if (request) {
    replyTo = replyToken(config_.node, session, r.msgId);
    requests_[{session, r.msgId}] = token;
  }
  armDeadline(token, request ? r.timeout : config_.timers.messageTimeout);
  PubEnvelope e;
  e.token = token;
  e.request = request;
  e.subject = r.subject;
  e.replyTo = replyTo;
  sendToHosts(token, p, e, r.payload);
  if (local_.empty()) {
    finishIfDone(token);
    return Status();
  }
  p.localWaiting = true;
  p.localSlot = slots_.nextId();
  Slot origin;
  origin.token = token;
  // The last use of `p`: the fan-out may answer and forget the publish.
  fanOut(origin, session, config_.node, r.subject, replyTo, r.payload);
  return Status();
}

void PubSub::sendToHosts(uint64_t token, Publish& p, const PubEnvelope& base,
                         std::span<const std::byte> payload) {
  for (const Host& h : hosts_) {
    peer::Peer* peer = mesh_->peerByHandle(h.peer);
    if (peer == nullptr) continue;
    PubEnvelope e = base;
    e.groups = h.groups;
    envelope_.clear();
    encodePub(envelope_, e, payload);
    Result<peer::Admitted> sent =
        peer->send(kHostSessions | h.peer, token, "", kPubService, envelope_.readable());
    if (!sent) {
      if (p.failure.ok()) p.failure = sent.status();
      continue;
    }
    p.hosts.push_back(h.peer);
    if (sent->holdOn) holdPublisher(p.session, *sent->holdOn);
  }
}

void PubSub::hostOutcome(uint64_t handle, uint64_t token, const Status& status) {
  if (status.ok()) return;  // the host has it: its result follows
  Publish* found = publishes_.find(token);
  if (found == nullptr) return;
  Publish& p = *found;
  auto host = std::find(p.hosts.begin(), p.hosts.end(), handle);
  if (host == p.hosts.end()) return;
  p.hosts.erase(host);
  if (p.failure.ok()) p.failure = status;
  finishIfDone(token);
}

void PubSub::pubResult(peer::Peer& from, uint64_t token, const peer::PubResultBody& result) {
  Publish* found = publishes_.find(token);
  if (found == nullptr) return;  // answered already (its deadline passed)
  Publish& p = *found;
  auto host = std::find(p.hosts.begin(), p.hosts.end(), mesh_->handleOf(from));
  if (host == p.hosts.end()) return;  // not owed by that host
  p.hosts.erase(host);
  p.matched += result.matched;
  p.taken += result.taken;
  p.dropped += result.dropped;
  finishIfDone(token);
}

// Everything came back: a publish is answered with its counts (none
// matching: no_subscribers; a host lost: its failure); a request nobody
// matched is answered now, one somebody took waits for its reply.
void PubSub::finishIfDone(uint64_t token) {
  Publish* found = publishes_.find(token);
  if (found == nullptr) return;
  Publish& p = *found;
  if (!p.hosts.empty() || p.localWaiting) return;
  if (p.request) {
    if (p.matched != 0) return;  // its reply, or its deadline
    if (!p.failure.ok()) {
      counters_.unreachable++;
      return answer(token, p, p.failure.code(), p.failure.message());
    }
    counters_.noResponders++;
    return answer(token, p, Errc::no_responders,
                  "no subscription in the mesh took the request (its interest was stale)");
  }
  if (!p.failure.ok()) return answer(token, p, p.failure.code(), p.failure.message());
  if (p.matched == 0) {
    counters_.noSubscribers++;
    return answer(token, p, Errc::no_subscribers,
                  "no subscription in the mesh took the publish (its interest was stale)");
  }
  answer(token, p, Errc::ok, {});
}

void PubSub::answer(uint64_t token, Publish& p, Errc errc, std::string text) {
  server_->pubAck(p.session, p.msgId, {errc, p.matched, p.taken, p.dropped}, text);
  forget(token);
}

void PubSub::forget(uint64_t token) {
  const Publish* p = publishes_.find(token);
  if (p == nullptr) return;
  if (p->request) requests_.erase({p->session, p->msgId});
  publishes_.remove(token);
}

}  // namespace rdmamsg::pubsub
