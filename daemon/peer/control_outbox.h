// The subject records this node owes a peer beside its messages: the
// interest its clients' subscriptions make (added, removed) and the
// results of the peer's publishes on this host (protocol.h: kInterest,
// kPubResult). Queued by the router's calls, written into the connection's
// batches by the peer's service step before the step's messages — so an
// interest announced before a publish travels before it — and dropped with
// the connection: the next one starts from the whole interest again, and
// the publisher answers for results a lost connection never carried.
// Verbs-free, like Confirmations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "common/ring.h"
#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {

class ControlOutbox {
 public:
  void interest(InterestOp op, std::string_view group, std::string_view pattern) {
    interest_.pushBack({op, std::string(group), std::string(pattern)});
  }
  void pubResult(uint64_t token, const PubResultBody& body) { results_.pushBack({token, body}); }
  bool empty() const { return interest_.empty() && results_.empty(); }
  size_t size() const { return interest_.size() + results_.size(); }
  // A new session: nothing queued for the old one goes on it.
  void clear() {
    interest_.clear();
    results_.clear();
  }
  // A new connection: the whole interest is announced again on it, but the
  // results owed go on with a session that continues there.
  void clearInterest() { interest_.clear(); }

  // Writes what fits into `link`'s batches (a Connection: openBatch(false),
  // batch(), sealBatch()); true when everything is written. What did not
  // fit goes when a credit or buffer comes back (the connection marks the
  // peer then).
  template <typename Link>
  bool write(Link& link) {
    while (!interest_.empty()) {
      const Interest& i = interest_.front();
      if (!room(link, BatchWriter::interestSize(i.group, i.pattern))) return false;
      link.batch().addInterest(i.op, i.group, i.pattern);
      interest_.popFront();
    }
    while (!results_.empty()) {
      if (!room(link, kPubResultRecordSize)) return false;
      link.batch().addPubResult(results_.front().first, results_.front().second);
      results_.popFront();
    }
    return true;
  }

 private:
  template <typename Link>
  static bool room(Link& link, size_t bytes) {
    for (int i = 0; i < 2; i++) {
      if (!link.openBatch(false)) return false;
      if (link.batch().room() >= bytes) return true;
      link.sealBatch();
    }
    return false;
  }
  struct Interest {
    InterestOp op;
    std::string group, pattern;
  };
  Ring<Interest> interest_;
  Ring<std::pair<uint64_t, PubResultBody>> results_;
};

}  // namespace rdmamsg::peer
