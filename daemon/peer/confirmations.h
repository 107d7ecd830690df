// The outcomes this node owes a peer for the messages it received from it,
// collected into ranges (one Confirm record for a run of messages with one
// outcome) and written into the connection's batches when due. Verbs-free,
// like Inbound and Outbound.
//
// An outcome that cannot wait (a message refused, or one handed to a
// listener without a receipt) is due at once. The outcome of a message a
// listener took may wait for company — a reply usually follows, and the
// confirmation rides with it — until a quarter of the flow window or
// kLazyMessages are pending (a streaming sender's window is counted in
// messages too), or until the peer's 1 ms timer says it is due; a batch
// that goes anyway takes every pending one along.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {

class Confirmations {
 public:
  static constexpr uint64_t kLazyMessages = 128;

  // Outcomes of seq .. seq + count - 1.
  void add(uint64_t seq, uint64_t count, Errc errc, bool due) {
    due_ = due_ || due;
    const auto code = static_cast<uint16_t>(errc);
    const uint64_t last = seq + count - 1;
    if (!ranges_.empty() && ranges_.back().last + 1 == seq && ranges_.back().errc == code)
      ranges_.back().last = last;
    else
      ranges_.push_back({seq, last, code});
  }
  // Outcomes of messages listeners took (`bytes` of them), which may wait;
  // true when they are due now, false when they wait (for company, or the
  // caller's timer: markDue()).
  bool addTaken(uint64_t seq, uint64_t count, Errc errc, size_t bytes, size_t flowWindow) {
    add(seq, count, errc, false);
    lazyBytes_ += bytes;
    lazyCount_ += count;
    if (bytes == 0 || lazyBytes_ >= flowWindow / 4 || lazyCount_ >= kLazyMessages) due_ = true;
    return due_;
  }
  void markDue() { due_ = true; }
  bool empty() const { return ranges_.empty(); }
  bool due() const { return due_; }
  // A new connection: nothing is owed on it.
  void clear() {
    ranges_.clear();
    due_ = false;
    lazyBytes_ = lazyCount_ = 0;
  }

  // Writes the pending outcomes into `link`'s batches when they are due or a
  // batch is open anyway; true when nothing is left that must go now (all
  // written, or none due). `link` is a Connection: hasOpenBatch(),
  // openBatch(false), batch().room(), batch().addConfirm(), sealBatch().
  template <typename Link>
  bool write(Link& link) {
    if (ranges_.empty()) return true;
    if (!due_ && !link.hasOpenBatch()) return true;  // may wait for company
    due_ = false;
    lazyBytes_ = lazyCount_ = 0;
    size_t done = 0;
    while (done < ranges_.size()) {
      if (!link.openBatch(false)) break;
      if (link.batch().room() < kConfirmRecordSize) {
        link.sealBatch();
        continue;
      }
      const Range& r = ranges_[done++];
      link.batch().addConfirm(r.first, r.last, r.errc);
    }
    ranges_.erase(ranges_.begin(), ranges_.begin() + static_cast<std::ptrdiff_t>(done));
    // What did not fit (no credit or send buffer now) goes as soon as one
    // comes back — the connection marks the peer then — not with some later
    // batch (a stalled sender may send none until its next heartbeat).
    due_ = !ranges_.empty();
    return ranges_.empty();
  }

 private:
  struct Range {
    uint64_t first, last;
    uint16_t errc;
  };
  std::vector<Range> ranges_;
  bool due_ = false;      // must go out at the next service step
  size_t lazyBytes_ = 0;  // taken and not yet due
  uint64_t lazyCount_ = 0;
};

}  // namespace rdmamsg::peer
