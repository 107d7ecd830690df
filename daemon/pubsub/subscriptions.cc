// This host's subscriptions and interest (subscriptions.h).
#include "daemon/pubsub/subscriptions.h"

namespace rdmamsg::pubsub {
namespace {

std::string keyOf(std::string_view group, std::string_view pattern) {
  std::string key;
  key.reserve(group.size() + 1 + pattern.size());
  key.append(group).append(1, '\n').append(pattern);
  return key;
}

}  // namespace

Result<Subscription*> Subscriptions::add(local::SessionId session, const local::SubscribeRequest& r,
                                         uint32_t pendingLimit) {
  auto& mine = bySession_[session];
  if (mine.contains(r.subId))
    return Status(Errc::bad_request,
                  "subscription id " + std::to_string(r.subId) + " is already in use");
  if (mine.size() >= maxPerSession_)
    return Status(Errc::busy, "this client holds " + std::to_string(mine.size()) +
                                  " subscriptions, the most max_subscriptions allows");
  auto sub = std::make_unique<Subscription>();
  sub->id = nextId_++;
  sub->session = session;
  sub->clientId = r.subId;
  sub->pattern = std::string(r.pattern);
  sub->group = std::string(r.group);
  sub->policy = r.policy;
  sub->pendingLimit = pendingLimit;
  Subscription* s = sub.get();
  mine.emplace(r.subId, s->id);
  trie_.insert(s->pattern, s);
  if (interest_[keyOf(s->group, s->pattern)]++ == 0)
    changes_.push_back({peer::InterestOp::kAdd, s->group, s->pattern});
  byId_.emplace(s->id, std::move(sub));
  return s;
}

void Subscriptions::erase(uint64_t id) {
  auto it = byId_.find(id);
  if (it == byId_.end()) return;
  Subscription& s = *it->second;
  trie_.erase(s.pattern, &s);
  auto in = interest_.find(keyOf(s.group, s.pattern));
  if (in != interest_.end() && --in->second == 0) {
    interest_.erase(in);
    changes_.push_back({peer::InterestOp::kRemove, s.group, s.pattern});
  }
  byId_.erase(it);
}

bool Subscriptions::remove(local::SessionId session, uint64_t clientId) {
  auto mine = bySession_.find(session);
  if (mine == bySession_.end()) return false;
  auto it = mine->second.find(clientId);
  if (it == mine->second.end()) return false;
  erase(it->second);
  mine->second.erase(it);
  if (mine->second.empty()) bySession_.erase(mine);
  return true;
}

void Subscriptions::removeSession(local::SessionId session) {
  auto mine = bySession_.find(session);
  if (mine == bySession_.end()) return;
  for (const auto& [clientId, id] : mine->second)
    erase(id);
  bySession_.erase(mine);
}

Subscription* Subscriptions::find(uint64_t id) const {
  auto it = byId_.find(id);
  return it == byId_.end() ? nullptr : it->second.get();
}

}  // namespace rdmamsg::pubsub
