// A message payload the daemon sends from where it lies, without copying
// it: a large SEND a shared-memory client wrote as one frame record stays
// in the client's ring (common/shm_channel.h) and is posted to the NIC as
// a scatter-gather entry beside a header in a send buffer.
//
// ExternalArea: memory such payloads lie in (a client's ring to the
// daemon), which a device registers once (rdma::Device::lkeyFor) and
// deregisters when the area dies: every registration leaves a callback
// that runs then.
//
// ExternalPayload: one payload in an area, held while sends post from it.
// Its owner (the local side) holds it while its handler runs; every send
// work request that posts from it holds it until its completion (or flush);
// the last drop() gives its memory back to the client.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace rdmamsg {

class ExternalArea {
 public:
  explicit ExternalArea(std::span<const std::byte> bytes) : bytes_(bytes) {}
  ExternalArea(const ExternalArea&) = delete;
  ExternalArea& operator=(const ExternalArea&) = delete;
  ~ExternalArea() {
    for (auto& f : onDeath_)
      f();
  }

  std::span<const std::byte> bytes() const { return bytes_; }
  // Bytes of its payloads that wait in the daemon's queues where they lie
  // (peer/outbound.h keeps this to half the area, so that a stalled flow
  // never takes a client's whole ring).
  size_t queued = 0;
  // `f` runs when the area dies (a registration forgets it).
  void onDeath(std::function<void()> f) { onDeath_.push_back(std::move(f)); }

 private:
  std::span<const std::byte> bytes_;
  std::vector<std::function<void()>> onDeath_;
};

class ExternalPayload {
 public:
  virtual ExternalArea& area() = 0;
  virtual void hold() = 0;
  virtual void drop() = 0;

 protected:
  ~ExternalPayload() = default;
};

}  // namespace rdmamsg
