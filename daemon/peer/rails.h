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
#pragma once

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
};

class RailHealth {
 public:
  // The rails changed (start, a reload): as many as `n`, all healthy.
  void reset(std::size_t n) { rails_.assign(n, RailStats{}); }
  std::size_t size() const { return rails_.size(); }
  RailStats& at(std::size_t rail) { return rails_.at(rail); }
  const RailStats& at(std::size_t rail) const { return rails_.at(rail); }
  bool has(std::size_t rail) const { return rail < rails_.size(); }

  void failed(std::size_t rail, const std::string& why);
  void succeeded(std::size_t rail);
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
  // The first healthy rail before `current` in the order rails are
  // preferred: from `home` (0, or a lane's own rail with spread) on, then
  // from the first.
  std::optional<std::size_t> preferredOver(std::size_t current, std::size_t home = 0) const;
  RailState state(std::size_t rail, std::optional<std::size_t> active) const;

 private:
  std::vector<RailStats> rails_;
};

}  // namespace rdmamsg::peer
