// The subscriptions this host's clients hold: found by the subjects they
// match (a SubjectTrie), by the router's id (receipts name it), and by
// session and the client's id (UNSUB, a closing session).
//
// They are also this host's interest: the (queue group, pattern) pairs at
// least one subscription holds, which peers are told of. A pair's first
// subscription and its last one are interest changes, collected for the
// router to announce (takeChanges()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/local_protocol.h"
#include "common/status.h"
#include "daemon/local/local_handler.h"
#include "daemon/peer/protocol.h"
#include "daemon/pubsub/subject_trie.h"

namespace rdmamsg::pubsub {

struct Subscription {
  uint64_t id = 0;  // the router's: unique for the daemon's lifetime
  local::SessionId session = 0;
  uint64_t clientId = 0;  // the client's subId
  std::string pattern, group;
  proto::SlowConsumer policy = proto::SlowConsumer::drop;
  uint32_t pendingLimit = 0;  // messages not taken before the policy acts
  uint32_t pending = 0;       // delivered and not yet taken
  uint64_t delivered = 0, taken = 0, dropped = 0;
};

struct InterestChange {
  peer::InterestOp op;
  std::string group, pattern;
};

class Subscriptions {
 public:
  explicit Subscriptions(size_t maxPerSession) : maxPerSession_(maxPerSession) {}

  // Errors: bad_request (the id is taken), busy (the session holds
  // maxPerSession subscriptions).
  Result<Subscription*> add(local::SessionId session, const local::SubscribeRequest& r,
                            uint32_t pendingLimit);
  // False when the session holds no such subscription.
  bool remove(local::SessionId session, uint64_t clientId);
  void removeSession(local::SessionId session);
  Subscription* find(uint64_t id) const;

  // f(Subscription&) for each subscription `s` (a valid subject) matches.
  template <typename F>
  void match(std::string_view s, F&& f) const {
    trie_.match(s, [&](Subscription* sub) { f(*sub); });
  }
  // f(group, pattern) for the whole interest.
  template <typename F>
  void forEachInterest(F&& f) const {
    for (const auto& [key, count] : interest_) {
      const size_t cut = key.find('\n');
      f(std::string_view(key).substr(0, cut), std::string_view(key).substr(cut + 1));
    }
  }
  template <typename F>
  void forEach(F&& f) const {
    for (const auto& [id, sub] : byId_)
      f(*sub);
  }
  // The interest changes since the last call, in order.
  std::vector<InterestChange> takeChanges() { return std::exchange(changes_, {}); }
  size_t size() const { return byId_.size(); }
  size_t interestSize() const { return interest_.size(); }

 private:
  void erase(uint64_t id);

  const size_t maxPerSession_;
  uint64_t nextId_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Subscription>> byId_;
  // session → (client id → id)
  std::unordered_map<local::SessionId, std::unordered_map<uint64_t, uint64_t>> bySession_;
  SubjectTrie<Subscription*> trie_;
  std::unordered_map<std::string, size_t> interest_;  // "group\npattern" → subscriptions
  std::vector<InterestChange> changes_;
};

}  // namespace rdmamsg::pubsub
