// AckQueue: the ACKs a session owes its client in one loop turn, as runs of
// consecutive message ids, encoded at flush time — one ACK frame carries
// all of a turn's acks (so they may overtake the turn's other frames).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/byte_buffer.h"
#include "common/local_protocol.h"

namespace rdmamsg::local {

class AckQueue {
 public:
  // `maxPerFrame`: the runs one ACK frame may carry (the client's frame limit).
  explicit AckQueue(size_t maxPerFrame) : maxPerFrame_(std::max<size_t>(1, maxPerFrame)) {
    runs_.reserve(256);
  }
  // Acks ids msgId .. msgId + count - 1; consecutive ids (the usual case)
  // extend one run.
  void add(uint64_t msgId, uint64_t count) {
    while (count > 0) {
      if (runs_.empty() || runs_.back().first + runs_.back().count != msgId ||
          runs_.back().count == UINT32_MAX)
        runs_.push_back({msgId, 0});
      proto::AckRange& last = runs_.back();
      const uint64_t n = std::min<uint64_t>(count, UINT32_MAX - last.count);
      last.count += static_cast<uint32_t>(n);
      msgId += n;
      count -= n;
    }
  }
  // Appends the ACK frames for every run to `out` and forgets them.
  void encode(ByteBuffer& out) {
    std::span<const proto::AckRange> runs(runs_);
    while (!runs.empty()) {
      const size_t n = std::min(runs.size(), maxPerFrame_);
      proto::encodeAck(out, runs.first(n));
      runs = runs.subspan(n);
    }
    runs_.clear();
  }
  bool empty() const { return runs_.empty(); }
  size_t bytes() const { return runs_.size() * proto::kAckRangeSize; }

 private:
  const size_t maxPerFrame_;
  std::vector<proto::AckRange> runs_;
};

}  // namespace rdmamsg::local
