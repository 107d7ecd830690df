// A configured peer daemon (peer.h).
#include "daemon/peer/peer.h"
#include "daemon/logging.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace rdmamsg::peer {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

Peer::Peer(loop::EventLoop& loop, const config::Config& cfg, config::Peer peer, PeerEvents& events,
           loop::ServiceQueue::Waker wake, uint64_t handle, std::size_t lane)
    : config_(cfg),
      cfg_(std::move(peer)),
      events_(events),
      wake_(wake),
      id_(nodeId(cfg_.name)),
      handle_(handle),
      lane_(lane),
      label_(lane == 0 ? cfg_.name : cfg_.name + " lane " + std::to_string(lane)),
      redial_(loop, [this] { dial(); }),
      tickTimer_(std::make_unique<loop::Timer>(loop, [this] { onTick(); })),
      confirmTimer_(std::make_unique<loop::Timer>(loop,
                                                  [this] {
                                                    confirms_.markDue();
                                                    wake_();
                                                  })),
      railTimer_(std::make_unique<loop::Timer>(loop, [this] { railTick(); })),
      // Flow keys name the lane's flows apart from its siblings'.
      out_(cfg, cfg_.name, id_ ^ (uint64_t{lane} << 56), events, wake_) {
  health_.reset(config_.railsWith(cfg_), config_.timers.railProbeInterval);
  rails_.setHome(lane_, config_.railsWith(cfg_));
  in_.setRoomSource([this](std::string_view src, std::string_view dst, uint64_t total) {
    return events_.reserveIncoming(*this, src, dst, total);
  });
}

Peer::~Peer() = default;

Peer& Peer::laneFor(std::string_view srcService, std::string_view dstService) {
  if (lanes_.size() <= 1) return *this;
  const std::size_t h = std::hash<std::string_view>()(srcService) * 0x9e3779b97f4a7c15ULL ^
                        std::hash<std::string_view>()(dstService);
  return *lanes_[h % lanes_.size()];
}

// The one place a peer changes state: every edge is checked.
void Peer::setState(PeerState s) {
  state_.set(s, "peer " + label());
}

std::chrono::milliseconds Peer::tickPeriod() const {
  auto period = std::min(config_.timers.heartbeatInterval, std::chrono::milliseconds(1000));
  if (onDemand() && config_.timers.idleTimeout.count() > 0)
    period = std::min(period, config_.timers.idleTimeout);
  return std::max(period / 2, std::chrono::milliseconds(1));
}

void Peer::start() {
  tickTimer_->arm(tickPeriod());
  railTimer_->arm(config_.timers.railProbeInterval);
  dial();  // on demand: only once a message is queued
}

void Peer::shutdown(const std::string& why) {
  redial_.cancel();
  railTimer_->cancel();
  probeAsks_.clear();
  if (state_.get() == PeerState::kStopping || state_.get() == PeerState::kStopped) return;
  closeCandidates(why);
  if (conn_ == nullptr) {
    if (resume_.held) endSession(why);
    setState(PeerState::kStopped);
    return;
  }
  setState(PeerState::kStopping);
  conn_->close(why);
  wake_();
}

void Peer::retire(const std::string& why) {
  removed_ = true;
  shutdown(why);
}

void Peer::readdress(const config::Peer& now) {
  const std::string to = config::toString(now.rails());
  spdlog::info("peer {}: address changed from {} to {}", label(), config::toString(cfg_.rails()),
               to);
  cfg_.address = now.address;
  cfg_.extraRails = now.extraRails;
  redial_.startOver();
  rails_.setHome(lane_, config_.railsWith(cfg_));
  health_.reset(config_.railsWith(cfg_), config_.timers.railProbeInterval);
  probeAsks_.clear();
  move_ = {};
  closeCandidates("its address changed to " + to + " (configuration reloaded)");
  if (conn_ != nullptr) {
    redial_.closingToRedial();
    conn_->close("its address changed to " + to + " (configuration reloaded)");
    wake_();  // the service step sees it down and dials again
  } else {
    redialSoon();
  }
}

void Peer::requireAuthentication() {
  const std::string why = "the mesh secret is required now (configuration reloaded)";
  closeCandidates(why, /*onlyUnauthenticating=*/true);
  if (conn_ == nullptr || conn_->down() || conn_->authenticates()) return;
  redial_.closingToRedial();
  conn_->close(why);
  wake_();
}

void Peer::redialSoon() {
  if (state_.get() != PeerState::kBackoff || move_.awaited) return;
  redial_.startOver();
  redial_.now();
}

void Peer::applyConnectMode() {
  if (removed_ || state_.get() != PeerState::kIdle || onDemand()) return;
  redial_.now();  // connect: always now
}

void Peer::dialOnDemand() {
  if (state_.get() == PeerState::kIdle && !redial_.scheduled()) redial_.now();
}

bool Peer::readyToDial() {
  if (state_.get() != PeerState::kIdle && state_.get() != PeerState::kBackoff) return false;
  if (onDemand() && out_.queuedBytes() == 0) {  // nothing to send: wait for a message
    if (state_.get() == PeerState::kBackoff) setState(PeerState::kIdle);
    return false;
  }
  return true;
}

void Peer::dial() {
  if (!readyToDial()) return;
  redial_.ask();
  wake_();
}

bool Peer::takeDialRequest() {
  return redial_.takeAsk() && readyToDial();  // things may have changed since it asked
}

void Peer::dialed(Connection* c) {
  redial_.attempted();
  move_.awaited.reset();  // this end dials the rail moved to itself: its own outcome counts
  counters_.dials++;
  setState(PeerState::kConnecting);
  // A dial that fails at once is already down here; the service step sees
  // it like any other failure and schedules the next one.
  conn_ = c;
  wake_();
}

// ------------------------------------------------------------ service step

void Peer::service() {
  out_.serveSpills();
  if (!probes_.empty()) reapProbes();
  observe();
  if (state_.get() != PeerState::kEstablished) return;
  if (resume_.owed) writeResume(resume_.continuing ? ResumeKind::kContinue : ResumeKind::kFresh);
  receive();
  if (state_.get() != PeerState::kEstablished) return;
  if (idle_.hasReceived()) handleIdleClose();
  if (conn_->down()) return;  // idle-closed: observed at the next step
  writeIdleAnswers();
  // Interest first: a publish this step writes may depend on it. Messages
  // and outcomes wait for the peer's resume record.
  if (resume_.awaiting) {
    subjects_.outbox.write(*conn_);
    return;
  }
  if (resume_.resultsOwed) writeResultsRead();
  if (writeConfirms() && subjects_.outbox.write(*conn_) && !idle_.committed())
    pumpAgain_ = out_.pump(*conn_);
}

void Peer::post() {
  if (state_.get() == PeerState::kEstablished && !conn_->down()) conn_->post();
  // What a turn of the pump left ready goes on once the turn's batches are
  // posted, in this loop iteration: nothing else may wake the peer soon (a
  // held sender sends nothing; confirmations come lazily), and the window
  // would wait unused until then.
  if (std::exchange(pumpAgain_, false)) wake_();
}

void Peer::observe() {
  settleCandidates();
  if (conn_ == nullptr) return;
  if (conn_->down()) {
    onDown();
    return;
  }
  if (conn_->established() && state_.get() == PeerState::kConnecting) onUp();
}

void Peer::onUp() {
  const Hello& remote = *conn_->remote();
  redial_.startOver();
  rails_.connected();
  railUp();
  openSession(remote);
  idle_.reset(Clock::now());
  // Subjects: the whole interest is announced again either way (the
  // router's connectionUp); results owed go on with a continuing session.
  // A session that did not go on reports its loss first.
  const bool lossOwed = std::exchange(subjects_.lossOwed, false);
  if (lossOwed && !resume_.continuing) events_.connectionLost(*this);
  subjects_.outbox.clearInterest();
  subjects_.announced = subjects_.heard = 0;
  if (!resume_.continuing) subjects_.outbox.clear();
  subjects_.outbox.acknowledgeResults(resume_.resultAcks, resume_.continuing);
  counters_.connects++;
  connUp_ = true;
  lastError_.clear();
  setState(PeerState::kEstablished);
  spdlog::info("peer {}: established ({} side, incarnation {:x}{}{})", label(),
               conn_->active() ? "active" : "passive", remote.incarnation,
               resume_.continuing ? ", resuming its session" : "",
               !conn_->authenticated()     ? ", not authenticated"
               : conn_->secretIndex() == 0 ? ", authenticated"
                                           : ", authenticated with the previous mesh secret");
  subjects_.routed = routesSubjects();
  if (subjects_.routed) events_.connectionUp(*this);
}

// A connection that closed because a batch of the peer's failed
// verification (batch_auth.h) counts once, under its reason.
void Peer::countRejectedBatch(const Connection& c) {
  if (auto r = c.batchRejected()) counters_.batchesRejected[static_cast<size_t>(*r)]++;
}

void Peer::logDown(const Connection& c, const std::string& why) {
  if (state_.get() == PeerState::kStopping || redial_.closingToRedialPending() || move_.redial)
    return spdlog::info("peer {}: connection closed: {}", label(), why);
  LogLimit& limit = c.batchRejected() ? logs_.batchRejected : logs_.lost;
  if (limit.admit())
    spdlog::warn("peer {}: connection lost: {}{}", label(), why, limit.suffix());
  else
    spdlog::debug("peer {}: connection lost: {}", label(), why);
}

// The current connection is down (or replaced): everything on it is failed
// back, what the router holds from it is dropped, and the next dial is due.
void Peer::onDown() {
  countRejectedBatch(*conn_);
  std::string why = conn_->closeReason();
  bool wasUp = connUp_;
  // Established, if not yet seen up by this Peer: its close is a loss too.
  const bool wasEstablished = wasUp || conn_->wasEstablished();
  // Refused (nobody listening yet, the pair's tie-break, ...): the rail
  // reached the peer's host, so it is not the rail that failed.
  const std::optional<RejectReason> refusal = conn_->rejectReason();
  const bool refused = refusal.has_value();
  connUp_ = false;
  // Closed by agreement for being idle: nothing was in flight either way, and
  // what was queued since stays queued.
  const bool idleClosed = wasUp && idle_.agreedToClose() && state_.get() != PeerState::kStopping &&
                          !redial_.closingToRedialPending() && out_.settled();
  // Moved to another rail by either end (kMove): the session goes on there.
  move_.redial = move_.to.has_value() && state_.get() != PeerState::kStopping;
  if (move_.redial) {
    rails_.moveTo(*move_.to);
    why = "the session moves to rail " + std::to_string(*move_.to);
  }
  const bool closedOnPurpose = idleClosed || move_.to || superseded_ ||
                               state_.get() == PeerState::kStopping ||
                               redial_.closingToRedialPending();
  railDown(!closedOnPurpose && !refused, why);
  move_.to.reset();
  idle_.reset(Clock::now());
  const bool routedSubjects = wasUp && std::exchange(subjects_.routed, false);
  subjects_.outbox.clearInterest();
  subjects_.announced = subjects_.heard = 0;
  if (idleClosed) {
    why = "idle-closed (no messages either way; closed by agreement with the peer)";
    counters_.idleCloses++;
    spdlog::info("peer {}: idle connection closed{}", label(),
                 out_.queuedBytes() > 0 ? ": messages queued meanwhile, dialing again" : "");
  } else if (wasEstablished)
    logDown(*conn_, why);
  else if (refused && *refusal != RejectReason::kNone && *refusal != RejectReason::kDuplicate) {
    if (logs_.rejected.admit())
      spdlog::warn("peer {}: connection rejected: {}{}", label(), toString(*refusal),
                   logs_.rejected.suffix());
  } else
    spdlog::debug("peer {}: connection attempt failed: {}", label(), why);
  lastError_ = why;
  conn_ = nullptr;
  // Held, the session waits for the next connection (over another rail):
  // nothing in flight fails, nothing received is forgotten.
  const bool held = holdSession(wasUp, refusal, idleClosed);
  if (!held) {
    // A dial on demand that failed keeps its queued messages: they wait for
    // the next attempt, bounded by message_timeout.
    if (!idleClosed && (wasUp || !onDemand()))
      out_.failAll(Status(Errc::peer_unreachable, "connection to " + label() + " lost: " + why));
    awaitingConsume_ = 0;
    confirms_.clear();
    in_.reset();
  }
  // A session held keeps the peer's interest and the results it owes:
  // publishes meanwhile go into the session, and its loss is reported only
  // if it ends (endSession).
  if (held) {
    if (routedSubjects)
      subjects_.lossOwed = true;
    else if (wasUp)
      events_.connectionLost(*this);
  } else if (wasUp || std::exchange(subjects_.lossOwed, false)) {
    events_.connectionLost(*this);
  }
  if (!held) subjects_.outbox.clear();
  redialAfterDown(held, idleClosed, refused, wasEstablished);
}

// After a connection went down: stopped, idle (on demand), or the next dial
// — at once to another address or over the next rail, else after the backoff.
void Peer::redialAfterDown(bool held, bool idleClosed, bool refused, bool wasEstablished) {
  if (state_.get() == PeerState::kStopping) {
    setState(PeerState::kStopped);
    return;
  }
  // On demand with nothing to send (nor a session held): dialed at the next message.
  if (onDemand() && out_.queuedBytes() == 0 && !held) {
    redial_.takeClosingToRedial();
    redial_.cancel();
    setState(PeerState::kIdle);
    return;
  }
  if (idleClosed) {  // messages queued while it closed (or connect: always): dial at once
    redial_.takeClosingToRedial();
    setState(PeerState::kIdle);
    redial_.now();
    return;
  }
  setState(PeerState::kBackoff);
  if (redial_.takeClosingToRedial()) {  // closed to dial another address: no backoff
    redial_.now();
    return;
  }
  if (std::exchange(move_.redial, false)) return redialMoved();
  if (const std::size_t rails = config_.railsWith(cfg_); rails > 1 && !refused && !superseded_) {
    const std::size_t from = rails_.current();
    if (rails_.failed(rails)) {  // another rail to try: at once
      // A failover moves an established connection; a dial that never
      // connected only moves on.
      if (wasEstablished) {
        counters_.railFailovers++;
        if (health_.has(from)) health_.at(from).failovers++;
      }
      spdlog::info("peer {}: rail {} failed: dialing rail {} ({})", label(), from, rails_.current(),
                   cfg_.rail(rails_.current()).toString());
      redial_.now();
      return;
    }
  }
  redial_.afterBackoff(config_.timers.reconnectBackoffMin, config_.timers.reconnectBackoffMax);
}

// ------------------------------------------------------------ sending

Result<Admitted> Peer::send(uint64_t session, uint64_t msgId, std::string_view srcService,
                            std::string_view dstService, std::span<const std::byte> payload,
                            const PayloadHandle* inPlace) {
  const bool up = state_.get() == PeerState::kEstablished && !conn_->down();
  // Down, but not yet seen by the service step: with a session kept across
  // connections it will be held, so the message waits like any other.
  const bool toBeHeld = state_.get() == PeerState::kEstablished && resume_.negotiated;
  if (!up && !resume_.held && !toBeHeld &&
      (!onDemand() || state_.get() == PeerState::kStopping || state_.get() == PeerState::kStopped))
    return Status(Errc::peer_unreachable, "peer " + label() + " is not connected (" +
                                              toString(state_.get()) +
                                              (lastError_.empty() ? "" : ": " + lastError_) + ")");
  // Not connected (on demand, or a session held), closing for idleness, or
  // waiting for the peer's resume record: queued for the pump.
  Connection* conn = up && !idle_.committed() && !resume_.awaiting ? conn_ : nullptr;
  Result<Admitted> admitted =
      out_.send(conn, session, msgId, srcService, dstService, payload, inPlace);
  if (admitted) {
    counters_.messagesSent++;
    counters_.bytesSent += payload.size();
    if (!up) dialOnDemand();
    wake_();
  }
  return admitted;
}

void Peer::confirmLater(uint64_t epoch, uint64_t seq, uint64_t count, Errc errc,
                        size_t consumedBytes) {
  if (epoch != epoch_ || count == 0) return;
  if (state_.get() != PeerState::kEstablished && !resume_.held) return;
  awaitingConsume_ -= std::min(awaitingConsume_, count);
  if (sessionResumes()) resume_.outcomes.add(seq, seq + count - 1, static_cast<uint16_t>(errc));
  if (confirms_.addTaken(seq, count, errc, consumedBytes, config_.buffers.flowWindow))
    return wake_();
  if (!confirmTimer_->armed()) confirmTimer_->arm(std::chrono::milliseconds(1));
}

bool Peer::routesSubjects() const {
  return state_.get() == PeerState::kEstablished && conn_ != nullptr && !conn_->down() &&
         conn_->remote() && (conn_->remote()->flags & kHelloSubjects) != 0;
}

void Peer::announce(InterestOp op, std::string_view group, std::string_view pattern) {
  if (!routesSubjects()) return;
  subjects_.announced += op == InterestOp::kAdd ? 1 : -1;
  subjects_.outbox.interest(op, group, pattern);
  wake_();
}

void Peer::sendPubResult(uint64_t epoch, uint64_t token, const PubResultBody& result) {
  // While the session is held, the result waits for its next connection.
  if (epoch != epoch_ || (!routesSubjects() && !(resume_.held && subjects_.lossOwed))) return;
  subjects_.outbox.pubResult(token, result);
  wake_();
}

bool Peer::flowHasRoom(std::string_view service, uint64_t cost) const {
  return out_.wouldStart(service, cost);
}

void Peer::confirm(uint64_t seq, Errc errc) {
  confirms_.add(seq, 1, errc, true);
  if (sessionResumes()) resume_.outcomes.add(seq, seq, static_cast<uint16_t>(errc));
}

// Writes the confirmations that are due (or ride along in a batch that goes
// anyway); true when none is left that must go now.
bool Peer::writeConfirms() {
  const bool due = confirms_.due() || conn_->hasOpenBatch();
  if (!confirms_.empty() && due) confirmTimer_->cancel();
  return confirms_.write(*conn_);
}

// ------------------------------------------------------------ receiving

// The link is always drained: every batch is read as it arrives, so the
// peer's credits, heartbeats and confirmations never wait for listeners.
void Peer::receive() {
  const uint64_t confirmed = out_.confirmed();
  while (conn_->hasBatch())
    if (!readBatch(0)) break;
  if (connRail_ && health_.has(*connRail_))
    health_.at(*connRail_).traffic.messagesConfirmed += out_.confirmed() - confirmed;
}

// Reads every record of batch i; false when the connection was closed.
bool Peer::readBatch(size_t i) {
  BatchReader reader(conn_->batchAt(i));
  (void)reader.open();  // checked on arrival
  Record rec;
  while (reader.next(rec))
    if (!onRecord(rec)) return false;
  if (!reader.status().ok()) {
    conn_->close("malformed record from peer: " + reader.status().message());
    return false;
  }
  conn_->consumeBatch(i);
  return true;
}

bool Peer::onRecord(const Record& r) {
  switch (r.type) {
    case RecordType::kHeartbeat:
      return true;
    case RecordType::kConfirm:
      if (resume_.awaiting) {
        conn_->close("a confirmation before the peer's resume record");
        return false;
      }
      if (!isConfirmOutcome(r.confirm.errc)) {
        conn_->close("confirmation with an unknown outcome " + std::to_string(r.confirm.errc));
        return false;
      }
      if (Status st = out_.settle(r.seq, r.confirm.lastSeq, static_cast<Errc>(r.confirm.errc));
          !st.ok()) {
        conn_->close(st.message());
        return false;
      }
      return true;
    case RecordType::kMessage:
      if (resume_.awaiting) {
        conn_->close("a message before the peer's resume record");
        return false;
      }
      return handleMessage(r);
    case RecordType::kResume:
      return onResume(r);
    case RecordType::kAuth:
      conn_->close("authentication record after the handshake");
      return false;
    case RecordType::kIdleClose:
      idle_.received(r.idleClose);  // answered after the batches are read
      return true;
    case RecordType::kInterest: {
      const auto op = static_cast<InterestOp>(r.flags);
      if (Status st = events_.interest(*this, op, r.srcService, r.dstService); !st) {
        conn_->close(st.message());
        return false;
      }
      subjects_.heard += op == InterestOp::kAdd ? 1 : -1;
      return true;
    }
    case RecordType::kPubResult:
      if (resume_.resultAcks) resume_.resultsRead++;
      events_.pubResult(*this, r.seq, r.pubResult);
      return true;
  }
  return true;
}

bool Peer::handleMessage(const Record& r) {
  const Result<Inbound::Part> part = in_.onRecord(r);
  if (!part) {
    conn_->close(part.status().message());
    return false;
  }
  const Inbound::Part& m = *part;
  switch (m.kind) {
    case Inbound::Part::Kind::kMore:
      return true;
    case Inbound::Part::Kind::kTooLarge:
      confirm(m.seq, Errc::too_large);
      return true;
    case Inbound::Part::Kind::kMessage:
      break;
  }
  const Delivery d = events_.deliverIncoming(*this, epoch_, m.seq, m.src, m.dst, m.payload, m.room);
  in_.dropRoom();  // delivered in, or copied from
  counters_.messagesReceived++;
  counters_.bytesReceived += m.payload.size();
  if (connRail_ && health_.has(*connRail_)) health_.at(*connRail_).traffic.messagesReceived++;
  switch (d) {
    case Delivery::kDelivered:
      confirm(m.seq, Errc::ok);
      return true;
    case Delivery::kUnknownService:
      confirm(m.seq, Errc::unknown_service);
      return true;
    case Delivery::kAccepted:
      awaitingConsume_++;
      return true;
    case Delivery::kBusy:
      confirm(m.seq, Errc::busy);
      return true;
  }
  return true;
}

// ------------------------------------------------------------ timers

void Peer::onTick() {
  auto now = Clock::now();
  if (state_.get() == PeerState::kEstablished && !conn_->down()) {
    if (now - conn_->lastReceived() > config_.timers.heartbeatTimeout) {
      conn_->close("no traffic from peer for " +
                   std::to_string(config_.timers.heartbeatTimeout.count()) + " ms");
    } else if (now - conn_->lastSent() >= config_.timers.heartbeatInterval) {
      if (conn_->openBatch(false) && conn_->batch().room() >= sizeof(RecordHeader)) {
        conn_->batch().addHeartbeat();
        counters_.heartbeatsSent++;
      }
    }
    if (!conn_->down()) idleTick(now);
    wake_();
  }
  resumeTick(now);
  const bool connected = state_.get() == PeerState::kEstablished;
  out_.expire(connected ? std::string_view() : std::string_view(lastError_));
  if (state_.get() == PeerState::kStopped) return;  // nothing left to watch
  tickTimer_->arm(tickPeriod());
}

}  // namespace rdmamsg::peer
