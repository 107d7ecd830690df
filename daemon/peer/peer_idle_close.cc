// Peer's idle-close agreement (peer.h, IdleAgreement in peer_state.h): a
// connection on demand with nothing in flight either way for idle_timeout
// is closed by agreement with the peer (IdleClose records, docs/protocol.md).
#include <spdlog/spdlog.h>

#include "daemon/peer/peer.h"

namespace rdmamsg::peer {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

bool Peer::quiet() const {
  return out_.settled() && confirms_.empty() && awaitingConsume_ == 0 && !in_.midMessage() &&
         !conn_->hasBatch() && subjects_.outbox.empty() && subjects_.announced == 0 &&
         subjects_.heard == 0;
}

// The peer's requests and answers, in order. A request is accepted when
// this node connects on demand and has nothing to send and nothing pending
// either way; it then starts no message until the connection closes. On an
// accept of this node's request, it disconnects (what it queued meanwhile
// dials again at once).
void Peer::handleIdleClose() {
  std::vector<IdleClose> in;
  in.swap(idleIn_);
  for (IdleClose action : in) {
    switch (action) {
      case IdleClose::kRequest:
        if (onDemand() && out_.queuedBytes() == 0 && quiet() && idle_ != IdleAgreement::kClosing) {
          if (idle_ == IdleAgreement::kNone || idle_ == IdleAgreement::kAsked) {
            committedAt_ = Clock::now();
            setIdle(idle_ == IdleAgreement::kNone ? IdleAgreement::kAgreed
                                                  : IdleAgreement::kAskedAndAgreed);
          }
          idleOut_.push_back(IdleClose::kAccept);
        } else {
          idleOut_.push_back(IdleClose::kRefuse);
        }
        break;
      case IdleClose::kAccept:
        if (!idleAsked()) {
          conn_->close("idle close accepted without a request from this node");
          return;
        }
        setIdle(IdleAgreement::kClosing);
        conn_->close("idle-closed");
        return;
      case IdleClose::kRefuse:
        if (!idleAsked()) {
          conn_->close("idle close refused without a request from this node");
          return;
        }
        setIdle(idle_ == IdleAgreement::kAsked ? IdleAgreement::kNone : IdleAgreement::kAgreed);
        lastActivity_ = Clock::now();  // asks again after another idle_timeout
        break;
    }
  }
}

void Peer::writeIdleAnswers() {
  size_t done = 0;
  while (done < idleOut_.size()) {
    if (!conn_->openBatch(false)) break;
    if (conn_->batch().room() < kIdleCloseRecordSize) {
      conn_->sealBatch();
      continue;
    }
    conn_->batch().addIdleClose(idleOut_[done++]);
  }
  idleOut_.erase(idleOut_.begin(), idleOut_.begin() + static_cast<std::ptrdiff_t>(done));
}

// From the tick: asks to close a connection idle for idle_timeout, and ends
// an agreement the peer does not complete within heartbeat_timeout.
void Peer::idleTick(Clock::time_point now) {
  const uint64_t activity = counters_.messagesSent + counters_.messagesReceived + out_.confirmed();
  if (activity != activitySeen_) {
    activitySeen_ = activity;
    lastActivity_ = now;
  }
  if (committed()) {
    if (idle_ != IdleAgreement::kClosing && now - committedAt_ > config_.heartbeatTimeout) {
      // Nothing is in flight either way: closing loses nothing.
      setIdle(IdleAgreement::kClosing);
      conn_->close("idle close not completed by the peer within heartbeat_timeout");
    }
    return;
  }
  if (!onDemand() || config_.idleTimeout.count() == 0 || !conn_->established()) return;
  if (!conn_->remote() || !(conn_->remote()->flags & kHelloIdleClose)) return;
  if (now - lastActivity_ < config_.idleTimeout || out_.queuedBytes() > 0 || !quiet()) return;
  if (!idleIn_.empty() || !idleOut_.empty()) return;
  if (!conn_->openBatch(false) || conn_->batch().room() < kIdleCloseRecordSize) return;
  conn_->batch().addIdleClose(IdleClose::kRequest);
  setIdle(IdleAgreement::kAsked);
  committedAt_ = now;
  spdlog::debug("peer {}: no messages for {} ms: asking to close the connection", name(),
                config_.idleTimeout.count());
}

}  // namespace rdmamsg::peer
