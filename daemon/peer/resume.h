// A peer's session across connections (several rails; docs/protocol.md,
// "Resume"). When a connection between two kHelloResume peers is lost and
// another rail is left to try, neither end fails what was in flight: the
// session is held, the next connection (over the next rail) exchanges
// kResume records, the sender sends again what the receiver did not get
// whole (Outbound::resume), and the receiver sends again the outcomes the
// sender may have missed (OutcomeLog). Nothing confirmed is lost, nothing is
// delivered twice, every flow keeps its order.
#pragma once

#include <chrono>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>

#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {

// The outcomes this node gave a peer's messages, as ranges of sequence
// numbers with one outcome each, from the lowest the peer has not settled
// on: after a resume they are written again (the peer settles each once).
class OutcomeLog {
 public:
  // Outcome `errc` for messages first .. last (none of them logged yet).
  void add(uint64_t first, uint64_t last, uint16_t errc) {
    auto next = ranges_.upper_bound(first);
    if (next != ranges_.begin()) {
      auto prev = std::prev(next);
      if (prev->second.last >= first) return;  // logged already
      if (prev->second.last + 1 == first && prev->second.errc == errc) {
        prev->second.last = last;
        mergeNext(prev);
        return;
      }
    }
    mergeNext(ranges_.emplace(first, Range{last, errc}).first);
  }
  // The peer settled every message before `seq`.
  void dropBelow(uint64_t seq) {
    auto it = ranges_.begin();
    while (it != ranges_.end() && it->second.last < seq)
      it = ranges_.erase(it);
    if (it != ranges_.end() && it->first < seq) {
      const Range r = it->second;
      ranges_.erase(it);
      ranges_.emplace(seq, r);
    }
  }
  // f(first, last, errc) for every range, in order.
  template <typename F>
  void forEach(F&& f) const {
    for (const auto& [first, r] : ranges_)
      f(first, r.last, r.errc);
  }
  size_t ranges() const { return ranges_.size(); }
  void clear() { ranges_.clear(); }

 private:
  struct Range {
    uint64_t last;
    uint16_t errc;
  };
  using Map = std::map<uint64_t, Range>;
  void mergeNext(Map::iterator it) {
    auto next = std::next(it);
    if (next != ranges_.end() && next->first == it->second.last + 1 &&
        next->second.errc == it->second.errc) {
      it->second.last = next->second.last;
      ranges_.erase(next);
    }
  }
  Map ranges_;
};

// What a Peer knows of its session's resume.
struct ResumeState {
  using Clock = std::chrono::steady_clock;
  // The current connection: both Hellos carry kHelloResume.
  bool negotiated = false;
  // This end went on with the session it had (it sent kContinue).
  bool continuing = false;
  // The peer's kContinue or kFresh is not in yet: no message and no
  // outcome goes before it.
  bool awaiting = false;
  // This end's first kResume record is still to be written.
  bool owed = false;
  // No connection: the session waits for the next one until `heldUntil`.
  bool held = false;
  Clock::time_point heldUntil{};
  std::string lostBecause;   // why the connection it was held after was lost
  uint64_t incarnation = 0;  // the peer's, whose session this is
  // The session's two sides' names (ResumeBody): this end's, and the
  // peer's as its last kContinue or kFresh gave it (0: none yet).
  uint32_t session = 0, peerSession = 0;
  // Results acknowledged (kHelloResultAcks on both ends): the peer's
  // kPubResult records read in this session, the count last told it, and
  // whether a count is owed (one after the exchange, then as it grows).
  bool resultAcks = false;
  bool resultsOwed = false;
  uint64_t resultsRead = 0, resultsTold = 0;
  uint64_t toldLowest = 0;  // the lowest unsettled message last told the peer
  OutcomeLog outcomes;
};

}  // namespace rdmamsg::peer
