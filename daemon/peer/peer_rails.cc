// A peer's rails (rails.h): their health from what happens over them,
// the probes of the rails not in use, the move back to a preferred rail
// once it is healthy again (kMove), and what the status shows of them.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "daemon/peer/peer.h"

namespace rdmamsg::peer {

namespace {
using Clock = std::chrono::steady_clock;

RailTraffic trafficOf(const Connection& c) {
  const ConnCounters k = c.counters();
  RailTraffic t;
  t.batchesSent = k.sendsPosted;
  t.batchesReceived = k.batchesReceived;
  t.bytesSent = k.bytesPosted;
  t.bytesReceived = k.bytesReceived;
  return t;
}
}  // namespace

std::optional<std::size_t> Peer::takeProbeRequest() {
  if (probeAsks_.empty()) return std::nullopt;
  const std::size_t rail = probeAsks_.back();
  probeAsks_.pop_back();
  return rail;
}

void Peer::probing(std::unique_ptr<RailProbe> probe) {
  probes_.push_back(std::move(probe));
  wake_();  // it may have failed at once
}

// Every rail_probe_interval, with several rails. The rail carrying the
// connection gains health while it works; the others below full health are
// probed; a healthy rail before the one in use takes the session back.
void Peer::railTick() {
  railTimer_->arm(config_.timers.railProbeInterval);
  health_.setProbeInterval(config_.timers.railProbeInterval);  // a reload may change it
  const uint64_t tick = ++railTicks_;
  if (state_.get() != PeerState::kEstablished || conn_->down() || !connRail_) return;
  health_.succeeded(*connRail_);
  for (std::size_t r = 0; r < health_.size(); r++) {
    const bool under = std::any_of(probes_.begin(), probes_.end(),
                                   [&](const auto& p) { return p->rail() == r; }) ||
                       std::find(probeAsks_.begin(), probeAsks_.end(), r) != probeAsks_.end();
    if (!under && health_.wantsProbe(r, *connRail_, tick)) {
      probeAsks_.push_back(r);
      wake_();
    }
  }
  if (move_.to) {
    if (Clock::now() > move_.deadline)
      conn_->close("moving the session to rail " + std::to_string(*move_.to));
    return;
  }
  if (!resume_.negotiated || resume_.awaiting || resume_.owed || idle_.committed()) return;
  if (const std::optional<std::size_t> to = health_.preferredOver(*connRail_, lane_))
    startMove(*to);
}

// Probes with an outcome: the rail's health, and a line when a rail is
// found down or answers again.
void Peer::reapProbes() {
  std::erase_if(probes_, [this](const std::unique_ptr<RailProbe>& p) {
    if (p->outcome() == RailProbe::Outcome::kPending) return false;
    if (!health_.has(p->rail())) return true;  // the rails changed meanwhile
    RailStats& rail = health_.at(p->rail());
    const bool wasDown = rail.down;
    rail.probes++;
    if (!p->device().empty()) rail.device = p->device();
    if (p->outcome() == RailProbe::Outcome::kReached) {
      health_.succeeded(p->rail());
      if (wasDown)
        spdlog::info("peer {}: rail {} ({}) answers again (health {})", label(), p->rail(),
                     cfg_.rail(p->rail()).toString(), rail.health);
    } else {
      rail.probesFailed++;
      health_.failed(p->rail(), "probe: " + p->detail());
      if (!wasDown)
        spdlog::warn("peer {}: rail {} ({}) does not answer: {}", label(), p->rail(),
                     cfg_.rail(p->rail()).toString(), p->detail());
    }
    return true;
  });
}

void Peer::railUp() {
  connRail_ = railOf(*conn_);
  const std::optional<std::size_t> awaited = std::exchange(move_.awaited, std::nullopt);
  if (!connRail_ || !health_.has(*connRail_)) return;
  rails_.moveTo(*connRail_);  // a loss of it dials the next one, whoever dialed this one
  RailStats& rail = health_.at(*connRail_);
  rail.connects++;
  if (conn_->device() != nullptr) rail.device = conn_->device()->name();
  health_.succeeded(*connRail_);
  // The peer's dial over the rail moved to did not come: it failed there.
  if (awaited && *awaited != *connRail_ && health_.has(*awaited))
    railFailed(*awaited, "the peer's dial over it after the move did not connect");
}

// The current connection is down: what went over it counts for its rail,
// and a failure (`failed`: not closed on purpose, not refused) lowers the
// rail's health.
void Peer::railDown(bool failed, const std::string& why) {
  const std::optional<std::size_t> rail = connRail_ ? connRail_ : railOf(*conn_);
  connRail_.reset();
  if (!rail || !health_.has(*rail)) return;
  health_.at(*rail).traffic += trafficOf(*conn_);
  // Replaced by the peer's connection over another rail (it lost this one,
  // the loss not seen here): the rail failed on the peer's side, so it is
  // not moved back to before a probe over it answers.
  if (replacing_ && !move_.to && replacementRail_ && *replacementRail_ != *rail) {
    failed = true;
    counters_.railFailovers++;
    health_.at(*rail).failovers++;
    spdlog::warn(
        "peer {}: rail {} ({}) failed on the peer's side: it resumed the session over rail {}",
        label(), *rail, cfg_.rail(*rail).toString(), *replacementRail_);
  }
  if (failed) railFailed(*rail, why);
}

// A failure over `rail`: its health, and the hold-down when it ends a failback's probation.
void Peer::railFailed(std::size_t rail, const std::string& why) {
  if (health_.failed(rail, why))
    spdlog::warn(
        "peer {}: rail {} ({}) failed again within {} ms of the session moving back to it: not "
        "moving back to it for {} ms",
        label(), rail, cfg_.rail(rail).toString(),
        (config_.timers.railProbeInterval * RailHealth::kProbation).count(),
        health_.at(rail).holdDown.count());
}

// The session moved to another rail (kMove, either end asked): that rail
// is dialed by one end, the one whose dial wins the pair's tie-break (the
// lower name), at once. The other waits half the session's hold for that
// connection before it dials itself: two dials crossing, the loser's could
// arrive once the winner's is up and be taken for a resume, replacing it.
void Peer::redialMoved() {
  counters_.railFailbacks++;
  health_.movedBack(rails_.current());
  if (config_.node < cfg_.name) {
    redial_.now();
    return;
  }
  move_.awaited = rails_.current();
  redial_.after(sessionHold() / 2);
}

// Asks the peer to move the session to rail `to`: it closes the
// connection when it reads the record (after everything before it), so
// that nothing this end posted is flushed; past heartbeat_timeout this end
// closes it.
void Peer::startMove(std::size_t to) {
  if (!conn_->openBatch(false) || conn_->batch().room() < kResumeRecordSize) return;
  conn_->batch().addResume(ResumeKind::kMove, to, out_.lowestUnsettled());
  move_.to = to;
  move_.deadline = Clock::now() + config_.timers.heartbeatTimeout;
  spdlog::info("peer {}: rail {} ({}) is healthy again: moving the session back to it from rail {}",
               label(), to, cfg_.rail(to).toString(), connRail_.value_or(0));
  wake_();
}

bool Peer::onMove(const Record& r) {
  std::string fault;
  if (!resume_.negotiated || resume_.awaiting)
    fault = "a move before the session was resumed";
  else if (r.seq >= health_.size())
    fault = "a move to rail " + std::to_string(r.seq) + ", which the two nodes do not share";
  if (!fault.empty()) {
    conn_->close(fault);
    return false;
  }
  move_.to = static_cast<std::size_t>(r.seq);
  spdlog::info("peer {}: the peer moves the session to rail {} ({})", label(), *move_.to,
               cfg_.rail(*move_.to).toString());
  conn_->close("the peer moves the session to rail " + std::to_string(*move_.to));
  return false;
}

std::vector<RailSnapshot> Peer::railSnapshots() const {
  std::vector<RailSnapshot> out;
  const bool up = state_.get() == PeerState::kEstablished && conn_ != nullptr && !conn_->down();
  for (std::size_t i = 0; i < health_.size(); i++) {
    RailSnapshot s;
    s.index = i;
    s.local = config_.listenRail(i).toString();
    s.remote = cfg_.rail(i).toString();
    s.state = health_.state(i, up ? connRail_ : std::nullopt);
    s.stats = health_.at(i);
    s.heldDownMs = health_.heldDownFor(i).count();
    if (conn_ != nullptr && connRail_ == i) s.stats.traffic += trafficOf(*conn_);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace rdmamsg::peer
