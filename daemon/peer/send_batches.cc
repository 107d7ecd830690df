// The send buffers one connection holds (send_batches.h).
#include "daemon/peer/send_batches.h"

#include <algorithm>

namespace rdmamsg::peer {

namespace {
constexpr uint32_t kSignalEvery = 16;
}  // namespace

void SendBatches::setCap(uint32_t cap) {
  cap_ = cap;
  signalEvery_ = std::min(kSignalEvery, std::max<uint32_t>(1, cap / 2));
}

void SendBatches::open(uint32_t index) {
  openIdx_ = index;
  open_ = true;
}

void SendBatches::seal(uint32_t bytes) {
  sealed_.push_back({openIdx_, bytes});
  open_ = false;
}

bool SendBatches::signal(size_t i, const Pool& pool, bool must) {
  const bool last = i + 1 == sealed_.size();
  const uint32_t quarter = std::max<uint32_t>(1, pool.count / 4);
  const bool low = cap_ - std::min(cap_, held()) < signalEvery_ || pool.available < quarter;
  if (must || unsignaled_ + 1 >= signalEvery_ || pool.unsignaled >= quarter || (last && low)) {
    unsignaled_ = 0;
    return true;
  }
  unsignaled_++;
  return false;
}

void SendBatches::posted() {
  for (const Sealed& s : sealed_)
    posted_.pushBack(s.index);
  sealed_.clear();
}

}  // namespace rdmamsg::peer
