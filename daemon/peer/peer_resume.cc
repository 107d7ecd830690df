// A configured peer daemon (peer.h): its session across connections
// (resume.h, docs/protocol.md "Resume").
#include "daemon/peer/peer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace rdmamsg::peer {

namespace {
using Clock = std::chrono::steady_clock;

// A name for this end's side of a new session (ResumeBody::session): never
// 0, and never one an earlier Peer object of this process gave.
uint32_t nextSessionName() {
  static uint32_t last = 0;
  if (++last == 0) ++last;
  return last;
}
}  // namespace

// A connection is established: the session goes on when both ends keep
// sessions and this end held the one it had with this incarnation of the
// peer; otherwise a new one starts (what a held one had in flight fails).
// Either way the peer's kResume decides (onResume).
void Peer::openSession(const Hello& remote) {
  const bool negotiated = resumes() && (remote.flags & kHelloResume) != 0;
  const bool continuing = negotiated && resume_.held && remote.incarnation == resume_.incarnation;
  if (resume_.held && !continuing)
    endSession(remote.incarnation != resume_.incarnation ? "the peer restarted"
                                                         : "the new connection keeps no session");
  resume_.held = false;
  if (!continuing) {
    freshSession();
    resume_.session = nextSessionName();
    resume_.peerSession = 0;
  } else
    in_.dropPartial();  // a message received in part comes again whole
  out_.reset(remote.flowWindow, remote.maxMessage, continuing);
  out_.retain(negotiated);
  resume_.negotiated = negotiated;
  resume_.resultAcks = negotiated && (remote.flags & kHelloResultAcks) != 0;
  resume_.resultsOwed = false;
  resume_.continuing = continuing;
  resume_.awaiting = resume_.owed = negotiated;
  resume_.incarnation = remote.incarnation;
}

// Nothing of an earlier session is owed or expected: its confirmations
// still to come are dropped (another epoch), sequences start at 1.
void Peer::freshSession() {
  epoch_++;
  in_.reset();
  confirms_.clear();
  resume_.outcomes.clear();
  resume_.resultsRead = resume_.resultsTold = 0;
  awaitingConsume_ = 0;
}

// The connection is gone (the caller has logged it). The session is held
// when both ends keep sessions, for the longer of connect_timeout and
// heartbeat_timeout from the loss: the rails are dialed meanwhile (the next
// at once, then after the backoff), the peer's own dial may come, and the
// first connection made goes on with it. Not while stopping, after an idle
// close or a change of address, nor once the peer refused a dial for good
// (any reason but the tie-break or nobody listening yet). A held session
// that is not held any longer ends.
bool Peer::holdSession(bool wasUp, const std::optional<RejectReason>& refusal, bool idleClosed) {
  const bool resumable = (wasUp && resume_.negotiated) || resume_.held;
  resume_.negotiated = resume_.awaiting = resume_.owed = resume_.continuing = false;
  bool hold = resumable && state_.get() != PeerState::kStopping && !removed_ && !idleClosed &&
              !redial_.closingToRedialPending();
  if (hold && !replacing_ && refusal)
    hold = *refusal == RejectReason::kDuplicate || *refusal == RejectReason::kNone;
  if (hold && !resume_.held) {
    resume_.held = true;
    resume_.lostBecause = lastError_;
    resume_.heldUntil = Clock::now() + sessionHold();
    spdlog::info("peer {}: session held for the next connection ({} message(s) unconfirmed)",
                 label(), out_.inFlight());
  }
  if (!hold && resume_.held) {
    endSession(refusal ? "then refused: " + lastError_ : lastError_);
  } else if (hold && Clock::now() > resume_.heldUntil) {
    hold = false;
    endSession(heldTooLong());
  }
  return hold;
}

// What the session had in flight fails: no connection will carry it. The
// reason starts with why the connection was lost.
void Peer::endSession(const std::string& why) {
  const std::string reason =
      resume_.held && why != resume_.lostBecause ? resume_.lostBecause + "; " + why : why;
  resume_.held = false;
  out_.failAll(Status(Errc::peer_unreachable, "connection to " + label() + " lost: " + reason));
  spdlog::info("peer {}: session ended: {}", label(), reason);
  subjects_.outbox.clear();
  if (std::exchange(subjects_.lossOwed, false)) events_.connectionLost(*this);
}

std::string Peer::heldTooLong() const {
  return "no connection over any rail within " + std::to_string(sessionHold().count()) + " ms";
}

// The peer's kResume. The first says whether it went on with the session:
// when both did, what it did not receive whole goes again, and the
// outcomes it may have missed too; when only this end did, what was in
// flight is lost and a new session starts here as well. Later ones say
// how far it has settled: outcomes before that are not kept any longer.
bool Peer::onResume(const Record& r) {
  const auto kind = static_cast<ResumeKind>(r.flags);
  if (kind == ResumeKind::kMove) return onMove(r);
  if (kind == ResumeKind::kResults) return onResultsRead(r);
  std::string fault;
  if (!resume_.negotiated)
    fault = "a resume record on a connection without resume";
  else if (kind == ResumeKind::kProgress && resume_.awaiting)
    fault = "resume progress before the peer's resume record";
  else if (kind != ResumeKind::kProgress && !resume_.awaiting)
    fault = "a second resume record";
  if (!fault.empty()) {
    conn_->close(fault);
    return false;
  }
  if (kind == ResumeKind::kProgress) {
    resume_.outcomes.dropBelow(r.resume.lowestUnsettled);
    return true;
  }
  resume_.awaiting = false;
  // A kContinue naming another pair than this end's is for another session
  // (ResumeBody). A side not known (0) passes: an end that never had the
  // peer's first record of its session never left `awaiting` in it, so it
  // sent and received nothing there (and an older daemon names nothing).
  const auto known = [](uint32_t name, uint32_t as) { return as == 0 || name == as; };
  const bool sameSession = kind == ResumeKind::kContinue &&
                           known(r.resume.session, resume_.peerSession) &&
                           known(resume_.session, r.resume.peerSession);
  resume_.peerSession = r.resume.session;
  if (resume_.continuing && sameSession) {
    const uint64_t before = out_.resent();
    if (Status st = out_.resume(r.seq); !st.ok()) {
      conn_->close(st.message());
      return false;
    }
    resume_.outcomes.dropBelow(r.resume.lowestUnsettled);
    resume_.outcomes.forEach([this](uint64_t first, uint64_t last, uint16_t errc) {
      confirms_.add(first, last - first + 1, static_cast<Errc>(errc), true);
    });
    counters_.sessionsResumed++;
    counters_.messagesResent += out_.resent() - before;
    if (connRail_ && health_.has(*connRail_))
      health_.at(*connRail_).traffic.messagesResent += out_.resent() - before;
    spdlog::info(
        "peer {}: session resumed: {} message(s) sent again from {}, {} outcome "
        "range(s) written again",
        label(), out_.resent() - before, r.seq, resume_.outcomes.ranges());
  } else if (resume_.continuing) {
    // This end's side keeps its name: the peer learnt it from this end's
    // kContinue (and named its own side anew when it started afresh).
    const Hello& remote = *conn_->remote();
    const std::string why = kind == ResumeKind::kContinue ? "the peer went on with another session"
                                                          : "the peer kept nothing of the session";
    spdlog::info("peer {}: session not resumed: {} ({} message(s) in flight fail)", label(), why,
                 out_.inFlight());
    out_.failAll(Status(Errc::peer_unreachable, "connection to " + label() + " lost: " + why));
    freshSession();
    subjects_.outbox.clearResults();  // the peer's publishes are not waiting for them
    out_.reset(remote.flowWindow, remote.maxMessage);
  }
  resume_.continuing = false;
  // The count of its results read goes now that this end knows which
  // session it is in (0 for a new one).
  resume_.resultsOwed = resume_.resultAcks;
  wake_();
  return true;
}

// The peer's count of this end's results it read (kResults): the ones
// kept for it up to there go, and on a connection that resumes the
// session the rest are written again, before any new one.
bool Peer::onResultsRead(const Record& r) {
  std::string fault;
  if (!resume_.resultAcks)
    fault = "a results record on a connection without result acknowledgements";
  else if (resume_.awaiting)
    fault = "a results record before the peer's resume record";
  else if (!subjects_.outbox.acknowledged(r.seq))
    fault = std::to_string(r.seq) + " results read, more than were written";
  if (!fault.empty()) {
    conn_->close(fault);
    return false;
  }
  wake_();
  return true;
}

// This end's count of the peer's results read.
void Peer::writeResultsRead() {
  if (!conn_->openBatch(false) || conn_->batch().room() < kResumeRecordSize) return;
  conn_->batch().addResume(ResumeKind::kResults, resume_.resultsRead, out_.lowestUnsettled());
  resume_.resultsTold = resume_.resultsRead;
  resume_.resultsOwed = false;
}

// This end's resume record: where the session goes on (the first, owed
// until a batch has room) or how far it has settled.
void Peer::writeResume(ResumeKind kind) {
  if (!conn_->openBatch(false) || conn_->batch().room() < kResumeRecordSize) return;
  conn_->batch().addResume(kind, in_.resumePoint(), out_.lowestUnsettled(), resume_.session,
                           resume_.peerSession);
  resume_.toldLowest = out_.lowestUnsettled();
  if (kind != ResumeKind::kProgress) resume_.owed = false;
}

void Peer::resumeTick(Clock::time_point now) {
  if (state_.get() == PeerState::kEstablished && !conn_->down() && resume_.negotiated &&
      !resume_.owed && !resume_.awaiting) {
    if (out_.lowestUnsettled() != resume_.toldLowest) writeResume(ResumeKind::kProgress);
    if (resume_.resultAcks && resume_.resultsRead != resume_.resultsTold) writeResultsRead();
  }
  // A session held while every dial fails (or the peer's never comes) ends.
  if (resume_.held && now > resume_.heldUntil && (conn_ == nullptr || !conn_->established()))
    endSession(heldTooLong());
}

}  // namespace rdmamsg::peer
