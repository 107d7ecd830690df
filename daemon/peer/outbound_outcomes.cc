// The sending side of a peer (outbound.h): what becomes of the messages
// sent, confirmed, failed or past their deadline, told to their senders.
#include "daemon/peer/outbound.h"
#include "daemon/peer/outbound_flow.h"

#include <algorithm>

namespace rdmamsg::peer {

void Outbound::report(InFlight& m, Errc errc) {
  if (m.reported) return;
  m.reported = true;
  if (errc == Errc::ok) {
    if (runCount_ > 0 && m.session == runSession_ && m.msgId == runFirst_ + runCount_) {
      runCount_++;
      return;
    }
    if (runCount_ > 0) events_.delivered(runSession_, runFirst_, runCount_);
    runSession_ = m.session;
    runFirst_ = m.msgId;
    runCount_ = 1;
    return;
  }
  if (runCount_ > 0) {
    events_.delivered(runSession_, runFirst_, runCount_);
    runCount_ = 0;
  }
  const std::string& service = m.flow->service;
  Status st;
  if (errc == Errc::unknown_service && service == "$reply")
    st = Status(errc, "no request on " + peerName_ +
                          " waits for this reply (answered already, past its deadline, or its "
                          "requester left)");
  else if (errc == Errc::unknown_service)
    st = Status(errc, "no listener for service " + service + " on " + peerName_ +
                          " (none registered, or it went away before taking the message)");
  else if (errc == Errc::busy)
    st = Status(errc, "the listener of " + service + " on " + peerName_ + " does not keep up and " +
                          peerName_ + "'s receive_memory_limit is reached");
  else if (errc == Errc::too_large)
    st = Status(errc, "message to " + service + " is over the max_message_size of " + peerName_);
  else if (errc == Errc::timeout)
    st = Status(errc, timeoutText(service));
  else
    st = Status(errc, "delivery to " + service + " on " + peerName_ + " failed");
  events_.outcome(m.session, m.msgId, st);
}

std::string Outbound::timeoutText(const std::string& service, std::string_view notConnected) const {
  if (!notConnected.empty())
    return "not delivered to " + service + " on " + peerName_ + " within " +
           std::to_string(config_.timers.messageTimeout.count()) + " ms: no connection to " +
           peerName_ + " (" + std::string(notConnected) + ")";
  return "no delivery confirmation from " + peerName_ + " for service " + service + " within " +
         std::to_string(config_.timers.messageTimeout.count()) + " ms";
}

// The close reason's words are the protocol's (docs/protocol.md); what was
// named follows in parentheses.
Status Outbound::settle(uint64_t first, uint64_t last, Errc errc) {
  if (repeatsSettle_) {  // after a resume: what was settled already may come again
    if (last < baseSeq_) return Status();
    first = std::max(first, baseSeq_);
  }
  if (first < baseSeq_ || last >= baseSeq_ + inflight_.size() || first > last)
    return Status(Errc::protocol_error, "confirmation for a message not in flight (messages " +
                                            std::to_string(first) + " to " + std::to_string(last) +
                                            "; in flight from " + std::to_string(baseSeq_) + ", " +
                                            std::to_string(inflight_.size()) + ")");
  // The peer did not have those from resend_.next on: none of them is
  // confirmed before it went again.
  if (resending() && last >= resend_.next)
    return Status(Errc::protocol_error, "confirmation for a message not in flight (message " +
                                            std::to_string(last) + " is not sent again yet)");
  Clock::time_point now{};
  for (uint64_t seq = first; seq <= last; seq++) {
    InFlight& m = inflight_[seq - baseSeq_];
    if (m.done && repeatsSettle_) continue;
    if (m.done)
      return Status(Errc::protocol_error, "confirmation for a message not in flight (message " +
                                              std::to_string(seq) + " confirmed twice)");
    if (m.sentAt != Clock::time_point{} && errc == Errc::ok) {
      if (now == Clock::time_point{}) now = Clock::now();
      latency_.observe(now - m.sentAt);
    }
    m.done = true;
    unsettled_--;
    confirmed_++;
    m.flow->unconfirmed -= m.cost;
    makeReady(*m.flow);
    report(m, errc);
  }
  if (runCount_ > 0) {
    events_.delivered(runSession_, runFirst_, runCount_);
    runCount_ = 0;
  }
  while (!inflight_.empty() && inflight_.front().done) {
    inflight_.popFront();
    if (retain_ || !kept_.empty()) dropKept(baseSeq_);
    baseSeq_++;
  }
  return Status();
}

void Outbound::expire(std::string_view notConnected) {
  auto now = coarseNow();
  // Unconfirmed: told now; the window stays taken until the peer confirms.
  for (size_t i = 0; i < inflight_.size(); i++) {
    InFlight& m = inflight_[i];
    if (!m.done && !m.reported && m.deadline < now) {
      failed_++;
      report(m, Errc::timeout);
    }
  }
  // Queued and not started: in order of deadline within each flow.
  for (auto& [name, fp] : flows_) {
    Flow& f = *fp;
    while (f.queuedMessages > 0 && current_ != &f) {  // current_'s front is on the wire
      Queued q = f.front();
      if (q.deadline >= now) break;
      popFront(f);
      failed_++;
      events_.outcome(q.session, q.msgId,
                      Status(Errc::timeout, timeoutText(f.service, notConnected)));
    }
  }
  std::erase_if(ready_, [](Flow* f) {
    if (f->queuedMessages > 0) return false;
    f->ready = false;
    return true;
  });
  releaseIdleQueues();
  collectIdleFlows();
}

size_t Outbound::bufferBytes() const {
  size_t bytes = 0;
  for (const auto& [name, f] : flows_)
    bytes += f->queue.capacity();
  return bytes;
}

void Outbound::collectIdleFlows() {
  if (flows_.size() < 64) return;
  std::erase_if(flows_, [this](const auto& kv) {
    const Flow& f = *kv.second;
    bool idle =
        f.unconfirmed == 0 && f.queuedMessages == 0 && !f.ready && !f.paused && current_ != &f;
    if (idle && lastFlow_ == &f) lastFlow_ = nullptr;
    return idle;
  });
}

void Outbound::failAll(const Status& why) {
  for (size_t i = 0; i < inflight_.size(); i++) {
    InFlight& m = inflight_[i];
    if (!m.reported) {
      m.reported = true;
      failed_++;
      events_.outcome(m.session, m.msgId, why);
    }
  }
  inflight_.clear();
  unsettled_ = 0;
  baseSeq_ = nextSeq_;  // (a new session starts them at 1: reset())
  kept_.clear();
  keptFrom_ = nextSeq_;
  resend_ = {};
  std::vector<FlowKey> paused;
  for (auto& [name, fp] : flows_) {
    Flow& f = *fp;
    if (f.paused) paused.push_back(keyOf(f));
    f.paused = false;
    bool onWire = current_ == &f;  // its front has an in-flight entry, reported above
    while (f.queuedMessages > 0) {
      Queued q = f.front();
      popFront(f);
      if (!onWire) {
        failed_++;
        events_.outcome(q.session, q.msgId, why);
      }
      onWire = false;
    }
  }
  ready_.clear();
  current_ = nullptr;
  for (const FlowKey& key : paused)
    events_.queueDrained(key);
  flows_.clear();
  lastFlow_ = nullptr;
}

std::vector<OutFlowStats> Outbound::flowStats() const {
  std::vector<OutFlowStats> out;
  for (const auto& [name, f] : flows_)
    out.push_back({name, f->unconfirmed, f->queuedBytes, f->queuedMessages, f->paused});
  std::sort(out.begin(), out.end(),
            [](const OutFlowStats& a, const OutFlowStats& b) { return a.service < b.service; });
  return out;
}

}  // namespace rdmamsg::peer
