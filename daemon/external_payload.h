// A message payload the daemon sends from where it lies, without copying
// it: a large SEND a shared-memory client wrote as one frame record stays
// in the client's ring (common/shm_channel.h) — or in its payload area — and
// is posted to the NIC as a scatter-gather entry beside a header in a send
// buffer.
//
// ExternalArea: memory such payloads lie in (a client's ring to the
// daemon, or its payload area), which a device registers once
// (rdma::Device::lkeyFor) and deregisters when the area dies: every
// registration leaves a callback that runs then.
//
// ExternalHolder: who keeps payloads of an area waiting where they lie (a
// peer's queues). When the area's owner needs its room back — the client's
// ring gives nothing back past its oldest record held — it asks with
// requestSpill(), which only marks each holder (spillRequested()); the
// holder copies what waits there out and lets go in its own service step.
// Calls go one way: the local side never runs the peer layer's code.
//
// PayloadHandle: one payload in an area, held. Move-only: whoever has the
// handle holds the payload — the local side while its handler runs, a
// flow's queue while the message waits, every send work request posting
// from it until its completion (or flush). share() makes one more handle
// to the same payload, for one more holder; when the last handle goes, the
// payload's room goes back to the client (PayloadHold's destructor).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace rdmamsg {

class ExternalArea;

class ExternalHolder {
 public:
  // `area` wants its room back: copy out the payloads of it that wait here,
  // and let go — later, in the holder's own service step (mark only).
  virtual void spillRequested(ExternalArea& area) = 0;

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
  bool held() const { return !holders_.empty(); }
  // Asks every holder to copy out what it keeps waiting here (marks them).
  void requestSpill() {
    for (ExternalHolder* h : holders_)
      h->spillRequested(*this);
  }
  // `f` runs when the area dies (a registration forgets it).
  void onDeath(std::function<void()> f) { onDeath_.push_back(std::move(f)); }

 private:
  std::span<const std::byte> bytes_;
  Order order_;
  std::vector<std::function<void()>> onDeath_;
  std::vector<ExternalHolder*> holders_;
};

// What keeps one payload's memory from its client: the local side's hold
// on a ring record or a block of the payload area. Its destructor gives
// the room back; it lives as long as the last PayloadHandle to it.
class PayloadHold {
 public:
  virtual ~PayloadHold() = default;
  virtual ExternalArea& area() = 0;
};

class PayloadHandle {
 public:
  PayloadHandle() = default;
  explicit PayloadHandle(std::shared_ptr<PayloadHold> hold) : hold_(std::move(hold)) {}
  PayloadHandle(PayloadHandle&&) noexcept = default;
  PayloadHandle& operator=(PayloadHandle&&) noexcept = default;
  PayloadHandle(const PayloadHandle&) = delete;
  PayloadHandle& operator=(const PayloadHandle&) = delete;

  explicit operator bool() const { return hold_ != nullptr; }
  // Another handle to the same payload: one more holder.
  PayloadHandle share() const { return PayloadHandle(hold_); }
  ExternalArea& area() const { return hold_->area(); }
  // Lets go of the payload now (as destroying the handle would).
  void reset() { hold_.reset(); }
  // Whether two handles hold the same payload.
  bool sameAs(const PayloadHandle& other) const { return hold_ == other.hold_; }

 private:
  std::shared_ptr<PayloadHold> hold_;
};

}  // namespace rdmamsg
