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

// The peer's requests and answers, in order (IdleCloser::handle): this
// node may agree when it connects on demand and has nothing to send and
// nothing pending either way. On an accept of this node's request, it
// disconnects (what it queued meanwhile dials again at once).
void Peer::handleIdleClose() {
  const bool mayAgree = onDemand() && out_.queuedBytes() == 0 && quiet();
  const Result<IdleCloser::Decision> d = idle_.handle(mayAgree, Clock::now());
  if (!d)
    conn_->close(d.status().message());
  else if (*d == IdleCloser::Decision::kClose)
    conn_->close(IdleCloser::kClosedByAgreement);
}

void Peer::writeIdleAnswers() {
  const std::vector<IdleClose>& answers = idle_.answers();
  size_t done = 0;
  while (done < answers.size()) {
    if (!conn_->openBatch(false)) break;
    if (conn_->batch().room() < kIdleCloseRecordSize) {
      conn_->sealBatch();
      continue;
    }
    conn_->batch().addIdleClose(answers[done++]);
  }
  idle_.written(done);
}

// From the tick: asks to close a connection idle for idle_timeout, and ends
// an agreement the peer does not complete within heartbeat_timeout.
void Peer::idleTick(Clock::time_point now) {
  idle_.noteActivity(counters_.messagesSent + counters_.messagesReceived + out_.confirmed(), now);
  if (idle_.committed()) {
    // Nothing is in flight either way: closing loses nothing.
    if (Status st = idle_.expire(config_.timers.heartbeatTimeout, now); !st.ok())
      conn_->close(st.message());
    return;
  }
  if (!onDemand() || config_.timers.idleTimeout.count() == 0 || !conn_->established()) return;
  if (!conn_->remote() || !(conn_->remote()->flags & kHelloIdleClose)) return;
  if (!idle_.idleFor(config_.timers.idleTimeout, now) || out_.queuedBytes() > 0 || !quiet()) return;
  if (idle_.busy()) return;
  if (!conn_->openBatch(false) || conn_->batch().room() < kIdleCloseRecordSize) return;
  conn_->batch().addIdleClose(IdleClose::kRequest);
  idle_.asked(now);
  spdlog::debug("peer {}: no messages for {} ms: asking to close the connection", label(),
                config_.timers.idleTimeout.count());
}

}  // namespace rdmamsg::peer
