// The health of a peer's rails, kept as LNet Health keeps it for
// interfaces. Every rail starts at full health (kMaxHealth). A failure
// over it — a dial that did not reach the peer, an established connection
// lost (not closed on purpose), a probe that failed — takes kHealthStep
// off (never below 0) and marks it down; a success — a connection made
// over it, a probe answered, or each probe interval its connection stays
// up — gives kHealthStep back and clears the mark. So a rail that failed
// once is back after one good probe, and one that kept failing needs as
// many good probes as it had failures: a flapping rail is not trusted at
// its first answer.
//
// What the peer does with it (peer_rails.cc): while its connection runs
// over one rail, every other rail below full health (or down) is probed
// once per rail_probe_interval (rail_probe.h), a healthy one every tenth; active-standby prefers
// the lowest rail at full health, so when a rail before the one in use is healthy again the session
// moves back to it (a kMove resume record: the move loses nothing, resume.h).
//
// Failback hold-down: a rail that fails within kProbation probe intervals
// of the session moving back to it (it answers probes but does not carry
// the session) is not moved back to for a hold-down, kProbation intervals
// the first time, twice as long at each failback that fails again, at most
// kMaxHoldDown times that; a failback that carries the session through its
// probation clears it. So a rail that only answers probes costs a failback
// every few minutes at most, instead of one per heartbeat_timeout.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdmamsg::peer {

inline constexpr int kMaxHealth = 1000;
inline constexpr int kHealthStep = 100;

// What went over a rail: its connections' batches and bytes (both ways),
// and the messages received whole and confirmed to this node over it.
struct RailTraffic {
  uint64_t batchesSent = 0, batchesReceived = 0;
  uint64_t bytesSent = 0, bytesReceived = 0;
  uint64_t messagesReceived = 0, messagesConfirmed = 0, messagesResent = 0;
  RailTraffic& operator+=(const RailTraffic& o);
};

// What is shown of a rail: active (the peer's connection runs over it),
// standby (healthy, unused), degraded (reached, but below full health),
// down (its last dial, connection or probe failed).
enum class RailState { kActive, kStandby, kDegraded, kDown };
const char* toString(RailState s);

struct RailStats {
  int health = kMaxHealth;
  bool down = false;  // the last event over it failed
  uint64_t connects = 0;
  uint64_t failures = 0;   // dials, connections and probes that failed over it
  uint64_t failovers = 0;  // times the peer left it because it failed
  uint64_t failbacks = 0;  // times the peer moved back to it once healthy
  uint64_t probes = 0, probesFailed = 0;
  RailTraffic traffic;  // of its connections closed so far
  std::string device;   // the RDMA device of its last connection ("" before one)
  std::string lastFailure;
  // Failback hold-down (above): failbacks to it that failed in their
  // probation, the last hold-down (0: none), until when it lasts, and when
  // the session last moved back to it (while on probation).
  uint64_t failbacksFailed = 0;
  std::chrono::milliseconds holdDown{0};
  std::chrono::steady_clock::time_point heldDownUntil{};
  std::optional<std::chrono::steady_clock::time_point> movedBackAt;
};

class RailHealth {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kProbation = 10;    // probe intervals
  static constexpr int kMaxHoldDown = 32;  // times the first hold-down

  // The rails changed (start, a reload): as many as `n`, all healthy.
  // `probeInterval`: rail_probe_interval, which the hold-down counts in.
  void reset(std::size_t n, std::chrono::milliseconds probeInterval = std::chrono::seconds(1)) {
    rails_.assign(n, RailStats{});
    interval_ = probeInterval;
  }
  void setProbeInterval(std::chrono::milliseconds probeInterval) { interval_ = probeInterval; }
  std::size_t size() const { return rails_.size(); }
  RailStats& at(std::size_t rail) { return rails_.at(rail); }
  const RailStats& at(std::size_t rail) const { return rails_.at(rail); }
  bool has(std::size_t rail) const { return rail < rails_.size(); }

  // A failure over `rail`; true when it ends a failback's probation (the
  // rail is held down then: heldDownFor).
  bool failed(std::size_t rail, const std::string& why, Clock::time_point now = Clock::now());
  void succeeded(std::size_t rail, Clock::time_point now = Clock::now());
  // The session moves back to `rail` (a failback): its probation starts.
  void movedBack(std::size_t rail, Clock::time_point now = Clock::now());
  // How much longer `rail` is held down (0: not).
  std::chrono::milliseconds heldDownFor(std::size_t rail,
                                        Clock::time_point now = Clock::now()) const;
  bool healthy(std::size_t rail) const {
    return has(rail) && rails_[rail].health == kMaxHealth && !rails_[rail].down;
  }
  // Whether a rail other than `active` should be probed at the `tick`-th
  // probe interval: one below full health at every one, a healthy standby
  // rail at every kStandbyProbeEvery-th (so that one that died quietly is
  // known before a failover needs it).
  static constexpr uint64_t kStandbyProbeEvery = 10;
  bool wantsProbe(std::size_t rail, std::size_t active, uint64_t tick = 1) const {
    return has(rail) && rail != active && (!healthy(rail) || tick % kStandbyProbeEvery == 0);
  }
  // The first healthy rail (not held down) before `current` in the order
  // rails are preferred: from `home` (0, or a lane's own rail with spread)
  // on, then from the first.
  std::optional<std::size_t> preferredOver(std::size_t current, std::size_t home = 0,
                                           Clock::time_point now = Clock::now()) const;
  RailState state(std::size_t rail, std::optional<std::size_t> active) const;

 private:
  std::chrono::milliseconds probation() const { return interval_ * kProbation; }
  std::vector<RailStats> rails_;
  std::chrono::milliseconds interval_{1000};
};

}  // namespace rdmamsg::peer
