// The send buffers one connection holds, and which of its sends are
// signaled. No verbs: buffers are indexes into the device's send pool
// (rdma/shared_pools.h), which the connection takes and gives back.
//
// A connection holds a buffer from when it opens a batch until the send's
// completion: the open batch, batches sealed and not yet posted, and those
// posted and not yet known complete (oldest first). It holds at most
// `cap` (what its QP may have posted).
//
// Sends are selectively signaled: every (cap / 2)-th, at most every 16th,
// and sooner when a quarter of the device's pool is behind unsignaled
// sends (a connection that goes quiet keeps those until its next signaled
// one), or, for the last send of a list, when this connection's own room
// or the pool runs low — and the last send of a list that posts a client's
// memory in place. A signaled completion frees its buffer and every one
// posted before it (RC completes in order).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/ring.h"

namespace rdmamsg::peer {

class SendBatches {
 public:
  struct Sealed {
    uint32_t index, bytes;
  };
  // The device's send pool, as signalling needs it.
  struct Pool {
    uint32_t count = 0;       // buffers
    uint32_t available = 0;   // free now
    uint32_t unsignaled = 0;  // behind unsignaled sends, of every connection
  };

  void setCap(uint32_t cap);
  uint32_t cap() const { return cap_; }
  uint32_t held() const {
    return static_cast<uint32_t>(posted_.size() + sealed_.size()) + (open_ ? 1 : 0);
  }
  bool full() const { return held() >= cap_; }

  bool hasOpen() const { return open_; }
  uint32_t openIndex() const { return openIdx_; }
  void open(uint32_t index);
  void seal(uint32_t bytes);  // the open batch, `bytes` long, waits to be posted
  const std::vector<Sealed>& sealed() const { return sealed_; }
  // Whether send i of the sealed list is signaled; counts it either way.
  // `pool.unsignaled` is read before this send. `must`: it is (the last
  // send of a list that posts a client's memory in place: that memory comes
  // back with a completion, even when the link then goes quiet).
  bool signal(size_t i, const Pool& pool, bool must = false);
  uint32_t unsignaled() const { return unsignaled_; }
  uint32_t signalEvery() const { return signalEvery_; }
  // The sealed batches were posted.
  void posted();
  // A completion for buffer `index`: it and every buffer posted before it
  // go to `give`. Returns how many, 0 when `index` was not posted.
  template <typename Give>
  uint32_t complete(uint32_t index, Give&& give);
  // Every posted send is done (the teardown beacon came back): their
  // buffers go to `give`; the count of unsignaled sends is returned and
  // cleared.
  template <typename Give>
  uint32_t completeAll(Give&& give);
  // The same, and the open and sealed batches' buffers too (the connection
  // is gone).
  template <typename Give>
  uint32_t releaseAll(Give&& give);

 private:
  uint32_t cap_ = 0, signalEvery_ = 1;
  Ring<uint32_t> posted_;
  std::vector<Sealed> sealed_;
  uint32_t openIdx_ = 0;
  bool open_ = false;
  uint32_t unsignaled_ = 0;  // posted after the last signaled send
};

template <typename Give>
uint32_t SendBatches::complete(uint32_t index, Give&& give) {
  size_t i = 0;
  while (i < posted_.size() && posted_[i] != index)
    i++;
  if (i == posted_.size()) return 0;
  for (size_t k = 0; k <= i; k++) {
    give(posted_.front());
    posted_.popFront();
  }
  return static_cast<uint32_t>(i + 1);
}

template <typename Give>
uint32_t SendBatches::completeAll(Give&& give) {
  while (!posted_.empty()) {
    give(posted_.front());
    posted_.popFront();
  }
  return std::exchange(unsignaled_, 0);
}

template <typename Give>
uint32_t SendBatches::releaseAll(Give&& give) {
  if (open_) give(openIdx_);
  for (const Sealed& s : sealed_)
    give(s.index);
  open_ = false;
  sealed_.clear();
  return completeAll(give);
}

}  // namespace rdmamsg::peer
