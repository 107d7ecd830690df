// A configured peer daemon (peer.h): which connection is the peer's — the
// tie-break for a connect request, an accepted connection adopted (or kept a
// candidate until it has authenticated), and one replacing another.
#include "daemon/peer/peer.h"

#include <spdlog/spdlog.h>

namespace rdmamsg::peer {

RejectReason Peer::admit(const Hello& hello, bool selfIsLower) const {
  if (state_.get() == PeerState::kStopping || state_.get() == PeerState::kStopped)
    return RejectReason::kShuttingDown;
  if (config_.auth.secret) {
    // Nothing unproven is refused for what it claims (its incarnation): it
    // becomes a candidate, settled once proven. Only the tie-break against
    // this node's own dial in progress applies.
    if (conn_ != nullptr && !conn_->down() && conn_->active() && !conn_->established())
      return selfIsLower ? RejectReason::kDuplicate : RejectReason::kNone;
    return RejectReason::kNone;
  }
  if (conn_ == nullptr || conn_->down()) return RejectReason::kNone;
  if (conn_->state() == ConnState::kEstablished || conn_->state() == ConnState::kAccepting ||
      conn_->state() == ConnState::kAuthenticating) {
    // A new incarnation means the peer restarted: the old connection is stale.
    if (conn_->remote() && conn_->remote()->incarnation != hello.incarnation)
      return RejectReason::kNone;
    // The peer lost it (the loss not seen here yet) and resumes the session.
    if ((hello.flags & kHelloResuming) != 0 && resumes()) return RejectReason::kNone;
    return RejectReason::kDuplicate;
  }
  // Both ends are dialing: the connection initiated by the lower name wins.
  return selfIsLower ? RejectReason::kDuplicate : RejectReason::kNone;
}

void Peer::adopt(Connection* c, const Hello& hello, const std::string& remoteAddress) {
  if (config_.auth.secret) {
    if (candidates_.size() >= kMaxCandidates) {
      candidates_.front()->close("more unproven connections claim this peer than are kept");
      candidates_.erase(candidates_.begin());
    }
    candidates_.push_back(c);  // observe() settles it once it has authenticated
    return;
  }
  if (resumesCurrent(hello))
    return makeCurrent(c, "replaced by the peer's new connection (it lost this one)", true,
                       railOf(remoteAddress));
  makeCurrent(c, connUp_ ? "replaced by a new connection from a restarted peer"
                         : "simultaneous dial: keeping the peer's connection");
}

bool Peer::resumesCurrent(const Hello& remote) const {
  return resumes() && connUp_ && conn_ != nullptr && conn_->remote() &&
         conn_->remote()->incarnation == remote.incarnation && (remote.flags & kHelloResuming) != 0;
}

void Peer::closeCandidates(const std::string& why, bool onlyUnauthenticating) {
  for (Connection* c : candidates_)
    if (!onlyUnauthenticating || !c->authenticates()) c->close(why);
}

// Candidates that failed are dropped (the mesh counts and logs them); one
// that has authenticated becomes current, unless the current connection is
// an established one of the same incarnation (a duplicate: the candidate goes).
void Peer::settleCandidates() {
  for (size_t i = 0; i < candidates_.size();) {
    Connection* c = candidates_[i];
    if (!c->down() && !c->established()) {
      i++;
      continue;
    }
    candidates_.erase(candidates_.begin() + static_cast<std::ptrdiff_t>(i));
    if (c->down()) {
      countRejectedBatch(*c);
      if (c->wasEstablished()) logDown(*c, c->closeReason());  // proven, then gone before settled
      continue;
    }
    if (c->remote() && resumesCurrent(*c->remote())) {
      makeCurrent(c, "replaced by the peer's new connection (it lost this one)", true, railOf(*c));
      continue;
    }
    if (conn_ != nullptr && conn_->established() && conn_->remote() && c->remote() &&
        conn_->remote()->incarnation == c->remote()->incarnation) {
      c->close("duplicate connection: the peer's other connection is established");
      spdlog::info("peer {}: closing connection: {}", label(), c->closeReason());
      continue;
    }
    makeCurrent(c, connUp_ ? "replaced by an authenticated connection from a restarted peer"
                           : "simultaneous dial: keeping the peer's authenticated connection");
  }
}

void Peer::makeCurrent(Connection* c, const char* whyOldGoes, bool resuming,
                       std::optional<std::size_t> over) {
  if (conn_ != nullptr && conn_ != c) {
    conn_->close(whyOldGoes);
    replacing_ = resuming;
    replacementRail_ = over;
    superseded_ = true;
    onDown();
    replacing_ = superseded_ = false;
    replacementRail_.reset();
  }
  redial_.cancel();
  conn_ = c;
  setState(PeerState::kConnecting);
  wake_();
}

}  // namespace rdmamsg::peer
