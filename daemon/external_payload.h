// A message payload the daemon sends from where it lies, without copying
// it: a large SEND a shared-memory client wrote as one frame record stays
// in the client's ring (common/shm_channel.h) — or in its payload area — and
// is posted to the NIC as a scatter-gather entry beside a header in a send
// buffer.
//
// ExternalArea: memory such payloads lie in (a client's ring to the
// daemon, or its payload area), which a device registers once (rdma::Device::lkeyFor) and
// deregisters when the area dies: every registration leaves a callback
// that runs then.
//
// ExternalHolder: who keeps payloads of an area waiting where they lie (a
// peer's queues). When the area's owner needs its room back — the client's
// ring gives nothing back past its oldest record held — spillAll() has every
// holder copy them out and let go.
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

class ExternalArea;

class ExternalHolder {
 public:
  // Copies out every payload of `area` it keeps waiting, drops them and
  // leaves the area's holders.
  virtual void spill(ExternalArea& area) = 0;

 protected:
  ~ExternalHolder() = default;
};

class ExternalArea {
 public:
  // inOrder: the area gives room back in order (a ring): a payload that
  // waits pins what was written after it. anyOrder: each payload pins only
  // itself (a payload area's block).
  enum class Order : uint8_t { inOrder, anyOrder };
  ExternalArea(std::span<const std::byte> bytes, Order order) : bytes_(bytes), order_(order) {}
  ExternalArea(const ExternalArea&) = delete;
  ExternalArea& operator=(const ExternalArea&) = delete;
  ~ExternalArea() {
    for (auto& f : onDeath_)
      f();
  }

  std::span<const std::byte> bytes() const { return bytes_; }
  Order order() const { return order_; }
  // Bytes of its payloads that wait in the daemon's queues where they lie.
  size_t queued = 0;
  void addHolder(ExternalHolder* h) { holders_.push_back(h); }
  void removeHolder(ExternalHolder* h) { std::erase(holders_, h); }
  void spillAll() {
    const std::vector<ExternalHolder*> holders = holders_;  // spill() leaves the list
    for (ExternalHolder* h : holders)
      h->spill(*this);
  }
  // `f` runs when the area dies (a registration forgets it).
  void onDeath(std::function<void()> f) { onDeath_.push_back(std::move(f)); }

 private:
  std::span<const std::byte> bytes_;
  Order order_;
  std::vector<std::function<void()>> onDeath_;
  std::vector<ExternalHolder*> holders_;
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
