// Subscriptions: this client's subscriptions — their ids (1, 2, 3, …,
// chosen by the library), the SUBs waiting for the daemon's answer
// (SUBSCRIBED, or an ERROR naming the id) and the subscriptions that hold.
// The answer to a SUB whose caller gave up waiting is dropped.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "rdmamsg/status.h"

namespace rdmamsg::client {

class Subscriptions {
 public:
  // A new subscription about to be asked for: its id.
  uint64_t issue() {
    waiting_.insert(++last_);
    return last_;
  }
  // The daemon's answer to SUB `id` (ok: SUBSCRIBED). False when no SUB
  // with that id waits for one, nor was given up: the daemon is wrong.
  bool answer(uint64_t id, Status st) {
    if (waiting_.erase(id) != 0) {
      answers_.insert_or_assign(id, std::move(st));
      return true;
    }
    return abandoned_.erase(id) != 0;
  }
  bool answered(uint64_t id) const { return answers_.contains(id); }
  // The answer to SUB `id` (answered()), removed; a subscription that holds
  // is active from now on.
  Status take(uint64_t id) {
    auto it = answers_.find(id);
    Status st = std::move(it->second);
    answers_.erase(it);
    if (st.ok()) active_.insert(id);
    return st;
  }
  // SUB `id`'s caller does not wait any more: its answer, when it comes, is dropped.
  void abandon(uint64_t id) {
    answers_.erase(id);
    if (waiting_.erase(id) != 0) abandoned_.insert(id);
  }
  // Subscription `id` is given up; false if it did not hold.
  bool remove(uint64_t id) { return active_.erase(id) != 0; }
  size_t active() const { return active_.size(); }

 private:
  uint64_t last_ = 0;
  std::unordered_set<uint64_t> waiting_;          // SUBs sent, not answered
  std::unordered_map<uint64_t, Status> answers_;  // answered, not taken by the caller
  std::unordered_set<uint64_t> abandoned_;        // SUBs whose caller gave up
  std::unordered_set<uint64_t> active_;           // the subscriptions that hold
};

}  // namespace rdmamsg::client
