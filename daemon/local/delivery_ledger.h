// DeliveryLedger: the deliveries a session handed its client and the
// receipts they carry, until the client's application has taken them.
//
// Every DELIVER appended to a session is numbered (1, 2, 3, … on its
// connection) and tracked with its receipt until the client's CONSUMED
// count covers it. A delivery that continues the last receipt (same owner
// and epoch, next seq) extends it, up to kReceiptSpan bytes, so a stream
// is handed back in runs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/ring.h"
#include "daemon/local/local_handler.h"

namespace rdmamsg::local {

class DeliveryLedger {
 public:
  static constexpr size_t kReceiptSpan = 64 * 1024;

  // A DELIVER of `frameBytes` carrying `r` was handed to the client.
  void track(const Receipt& r, size_t frameBytes);
  // The client's CONSUMED count: false when it goes back or past the
  // deliveries handed out (a protocol error).
  bool consume(uint64_t taken);
  // Hands f(receipt, bytes) every receipt the last CONSUMED covers: whole
  // runs, and the taken part of a run taken in part (exactly those
  // messages).
  template <typename F>
  void consumed(F&& f);
  // Hands back every delivery not taken (the session is closing).
  template <typename F>
  void unconsumed(F&& f);
  // Bytes of DELIVER frames the application has not taken yet.
  size_t unconsumedBytes() const { return unconsumedBytes_; }

 private:
  struct Tracked {
    uint64_t end;  // the delivery number of the run's last frame
    Receipt receipt;
    size_t bytes;
  };
  uint64_t delivered_ = 0;  // DELIVER frames handed out
  uint64_t taken_ = 0;      // the client's last CONSUMED count
  size_t unconsumedBytes_ = 0;
  Ring<Tracked> tracked_;
};

inline void DeliveryLedger::track(const Receipt& r, size_t frameBytes) {
  const uint64_t end = ++delivered_;
  unconsumedBytes_ += frameBytes;
  if (!tracked_.empty()) {
    Tracked& last = tracked_.back();
    if (last.receipt.continuedBy(r) && last.bytes < kReceiptSpan) {
      last.end = end;
      last.receipt.count += r.count;
      last.bytes += frameBytes;
      return;
    }
  }
  tracked_.pushBack({end, r, frameBytes});
}

inline bool DeliveryLedger::consume(uint64_t taken) {
  if (taken < taken_ || taken > delivered_) return false;
  taken_ = taken;
  return true;
}

template <typename F>
void DeliveryLedger::consumed(F&& f) {
  while (!tracked_.empty()) {
    Tracked& t = tracked_.front();
    if (t.end <= taken_) {
      unconsumedBytes_ -= t.bytes;
      f(t.receipt, t.bytes);
      tracked_.popFront();
      continue;
    }
    // A run taken in part: its first messages go back now, exactly those.
    const uint64_t first = t.end - t.receipt.count + 1;
    if (first > taken_) return;
    Receipt part = t.receipt;
    part.count = taken_ - first + 1;
    const size_t partBytes = t.bytes / t.receipt.count * part.count;
    t.receipt.seq += part.count;
    t.receipt.count -= part.count;
    t.bytes -= partBytes;
    unconsumedBytes_ -= partBytes;
    f(part, partBytes);
    return;
  }
}

template <typename F>
void DeliveryLedger::unconsumed(F&& f) {
  while (!tracked_.empty()) {
    unconsumedBytes_ -= tracked_.front().bytes;
    f(tracked_.front().receipt, tracked_.front().bytes);
    tracked_.popFront();
  }
}

}  // namespace rdmamsg::local
