// Work marked during a loop turn and done once, at the end of it (Redis's
// beforeSleep). Event handlers only mark a key ("this peer has something to
// do"); the service step then calls the owner's function once for each
// marked key, in the order they were marked. Marking is idempotent until the
// key is serviced, and a key marked while the step runs is serviced again
// in the same loop iteration. This is how calls go one way: a connection
// never calls into the peer that owns it, it marks the peer's key.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "daemon/loop/turn.h"

namespace rdmamsg::loop {

class ServiceQueue {
 public:
  using Service = std::function<void(uint32_t key)>;
  ServiceQueue(EventLoop& loop, Service service, Phase phase = Phase::service);
  ServiceQueue(const ServiceQueue&) = delete;
  ServiceQueue& operator=(const ServiceQueue&) = delete;

  void mark(uint32_t key);

  // What a marker holds: the queue and its key.
  class Waker {
   public:
    Waker() = default;
    Waker(ServiceQueue* q, uint32_t key) : q_(q), key_(key) {}
    void operator()() const {
      if (q_ != nullptr) q_->mark(key_);
    }

   private:
    ServiceQueue* q_ = nullptr;
    uint32_t key_ = 0;
  };
  Waker waker(uint32_t key) { return Waker(this, key); }

 private:
  void run();
  Service service_;
  std::vector<uint32_t> marked_, running_;
  std::vector<uint8_t> isMarked_;
  PhaseTask step_;
};

}  // namespace rdmamsg::loop
