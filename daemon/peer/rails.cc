// Rail health (rails.h).
#include "daemon/peer/rails.h"

#include <algorithm>

namespace rdmamsg::peer {

RailTraffic& RailTraffic::operator+=(const RailTraffic& o) {
  batchesSent += o.batchesSent;
  batchesReceived += o.batchesReceived;
  bytesSent += o.bytesSent;
  bytesReceived += o.bytesReceived;
  messagesReceived += o.messagesReceived;
  messagesConfirmed += o.messagesConfirmed;
  messagesResent += o.messagesResent;
  return *this;
}

const char* toString(RailState s) {
  switch (s) {
    case RailState::kActive:
      return "active";
    case RailState::kStandby:
      return "standby";
    case RailState::kDegraded:
      return "degraded";
    case RailState::kDown:
      return "down";
  }
  return "unknown";
}

bool RailHealth::failed(std::size_t rail, const std::string& why, Clock::time_point now) {
  if (!has(rail)) return false;
  RailStats& r = rails_[rail];
  r.health = std::max(0, r.health - kHealthStep);
  r.down = true;
  r.failures++;
  r.lastFailure = why;
  if (!r.movedBackAt || now - *r.movedBackAt >= probation()) return false;
  r.movedBackAt.reset();
  r.failbacksFailed++;
  r.holdDown =
      r.holdDown.count() == 0 ? probation() : std::min(r.holdDown * 2, probation() * kMaxHoldDown);
  r.heldDownUntil = now + r.holdDown;
  return true;
}

void RailHealth::succeeded(std::size_t rail, Clock::time_point now) {
  if (!has(rail)) return;
  RailStats& r = rails_[rail];
  r.health = std::min(kMaxHealth, r.health + kHealthStep);
  r.down = false;
  if (r.movedBackAt && now - *r.movedBackAt >= probation()) {  // the failback held
    r.movedBackAt.reset();
    r.holdDown = std::chrono::milliseconds(0);
  }
}

void RailHealth::movedBack(std::size_t rail, Clock::time_point now) {
  if (!has(rail)) return;
  rails_[rail].failbacks++;
  rails_[rail].movedBackAt = now;
}

std::chrono::milliseconds RailHealth::heldDownFor(std::size_t rail, Clock::time_point now) const {
  if (!has(rail) || now >= rails_[rail].heldDownUntil) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(rails_[rail].heldDownUntil - now);
}

std::optional<std::size_t> RailHealth::preferredOver(std::size_t current, std::size_t home,
                                                     Clock::time_point now) const {
  const std::size_t n = rails_.size();
  if (n == 0 || home >= n) home = 0;
  for (std::size_t i = 0; i < n; i++) {
    const std::size_t r = (home + i) % n;
    if (r == current) return std::nullopt;
    if (healthy(r) && heldDownFor(r, now).count() == 0) return r;
  }
  return std::nullopt;
}

RailState RailHealth::state(std::size_t rail, std::optional<std::size_t> active) const {
  if (active && *active == rail) return RailState::kActive;
  if (!has(rail) || rails_[rail].down) return RailState::kDown;
  return rails_[rail].health < kMaxHealth ? RailState::kDegraded : RailState::kStandby;
}

}  // namespace rdmamsg::peer
