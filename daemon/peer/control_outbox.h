// The subject records this node owes a peer beside its messages: the
// interest its clients' subscriptions make (added, removed) and the
// results of the peer's publishes on this host (protocol.h: kInterest,
// kPubResult). Queued by the router's calls, written into the connection's
// batches by the peer's service step before the step's messages — so an
// interest announced before a publish travels before it — and dropped with
// the connection: the next one starts from the whole interest again, and
// the publisher answers for results a lost connection never carried.
// Verbs-free, like Confirmations.
//
// Between peers that acknowledge results (kHelloResultAcks, with a session
// across connections) the results written in a session are numbered 1, 2,
// … in the order written and kept until the peer says it has read them
// (a kResume record of kind kResults), and on the session's next
// connection none is written before the peer's count: the ones it had not
// read go again first, under the same numbers, then the new ones.
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
    clearResults();
  }
  // The session's results are void (the peer started afresh).
  void clearResults() {
    results_.clear();
    kept_.clear();
    written_ = 0;
  }
  // A connection is up: whether the results written are kept until the
  // peer acknowledges them, and (`resuming`) whether the next ones wait for
  // its count (resend).
  void acknowledgeResults(bool acks, bool resuming) {
    keep_ = acks;
    waiting_ = acks && resuming;
    if (!acks) kept_.clear();
  }
  // The peer read the first `count` results of the session. The first count
  // on a connection that resumes the session (waiting) sends the rest of the
  // kept ones again, before anything new. False: a count beyond those written.
  bool acknowledged(uint64_t count) {
    if (count > written_) return false;
    while (!kept_.empty() && kept_.front().first <= count)
      kept_.popFront();
    if (!std::exchange(waiting_, false)) return true;
    Ring<Result> again;
    for (size_t i = 0; i < kept_.size(); i++)
      again.pushBack(kept_[i].second);
    for (size_t i = 0; i < results_.size(); i++)
      again.pushBack(results_[i]);
    results_ = std::move(again);
    kept_.clear();
    written_ = count;
    return true;
  }
  size_t keptResults() const { return kept_.size(); }
  static constexpr size_t kMaxKept = 65536;
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
    while (!results_.empty() && !waiting_) {
      if (!room(link, kPubResultRecordSize)) return false;
      link.batch().addPubResult(results_.front().first, results_.front().second);
      written_++;
      if (keep_) kept_.pushBack({written_, results_.front()});
      if (kept_.size() > kMaxKept) kept_.popFront();  // a peer that never says: the oldest go
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
  using Result = std::pair<uint64_t, PubResultBody>;  // the publish's token, the result
  Ring<Interest> interest_;
  Ring<Result> results_;
  // Results acknowledged by count (above): those written this session and
  // not acknowledged yet, by their number; how many were written; whether
  // they are kept; whether the next wait for the peer's count.
  Ring<std::pair<uint64_t, Result>> kept_;
  uint64_t written_ = 0;
  bool keep_ = false, waiting_ = false;
};

}  // namespace rdmamsg::peer
