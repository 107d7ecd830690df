// The per-turn service step (service_queue.h).
#include "daemon/loop/service_queue.h"

namespace rdmamsg::loop {

ServiceQueue::ServiceQueue(EventLoop& loop, Service service, Phase phase)
    : service_(std::move(service)), step_(loop, phase, [this] { run(); }) {}

void ServiceQueue::mark(uint32_t key) {
  if (key >= isMarked_.size()) isMarked_.resize(key + 1, 0);
  if (isMarked_[key]) return;
  isMarked_[key] = 1;
  marked_.push_back(key);
  step_.schedule();
}

void ServiceQueue::run() {
  running_.swap(marked_);
  for (uint32_t key : running_)
    isMarked_[key] = 0;
  for (uint32_t key : running_)
    service_(key);
  running_.clear();
}

}  // namespace rdmamsg::loop
