// IdleCloser: the idle-close agreement of a peer's current connection
// (IdleClose records, docs/protocol.md, "Idle close"). A connection on
// demand that carried no message either way for idle_timeout, with nothing
// pending on either side, is closed by agreement: one side asks, the other
// accepts (then the asker disconnects) or refuses. From asking or agreeing
// until the connection closes, this node starts no message.
//
// Its state is one StateMachine<IdleAgreement> (peer_state.h), new for every
// connection. It holds the peer's requests and answers until the peer's
// service step handles them, the answers owed, when this node committed
// and when the connection last carried a message. What it cannot know —
// whether the peer may agree now, the connection to close or write on — the
// Peer tells it and does.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/state_machine.h"
#include "common/status.h"
#include "daemon/peer/peer_state.h"
#include "daemon/peer/protocol.h"

namespace rdmamsg::peer {

class IdleCloser {
 public:
  using Clock = std::chrono::steady_clock;

  explicit IdleCloser(std::string who) : who_(std::move(who)) {}

  // A new connection (or none): a new agreement, nothing received or owed,
  // idle from `now`.
  void reset(Clock::time_point now);
  IdleAgreement state() const { return agreement_.get(); }
  // This node asked or agreed: it starts no message.
  bool committed() const { return !agreement_.is(IdleAgreement::kNone); }
  // The connection closes by agreement (this node agreed, or its request
  // was accepted, or the agreement expired): nothing was in flight either way.
  bool agreedToClose() const;

  // A record received; handled by handle() after the batches are read.
  void received(IdleClose record) { in_.push_back(record); }
  bool hasReceived() const { return !in_.empty(); }
  // Whether anything is received or owed: no request is made meanwhile.
  bool busy() const { return !in_.empty() || !out_.empty(); }
  // What the peer's requests and answers decide: go on, or close the
  // connection now by agreement (the peer accepted this node's request;
  // the close reason is kClosedByAgreement).
  enum class Decision : uint8_t { kGoOn, kClose };
  static constexpr const char* kClosedByAgreement = "idle-closed";
  // The peer's requests and answers, in order. `mayAgree`: this node
  // connects on demand and has nothing queued or pending either way.
  // protocol_error for an answer without a request from this node: the
  // connection closes with it.
  Result<Decision> handle(bool mayAgree, Clock::time_point now);
  // The answers owed, to write in order; written() drops the first `n`.
  const std::vector<IdleClose>& answers() const { return out_; }
  void written(size_t n);

  // The tick: `activity` counts the messages either way so far; a change
  // means the connection is not idle.
  void noteActivity(uint64_t activity, Clock::time_point now);
  bool idleFor(std::chrono::milliseconds t, Clock::time_point now) const {
    return now - lastActivity_ >= t;
  }
  // A commitment not completed within `limit`: timeout, and the connection
  // closes with it (nothing is in flight either way); ok otherwise.
  Status expire(std::chrono::milliseconds limit, Clock::time_point now);
  // This node wrote its request.
  void asked(Clock::time_point now);

 private:
  void set(IdleAgreement to) { agreement_.set(to, who_); }
  bool askedByThisNode() const {
    return agreement_.is(IdleAgreement::kAsked) || agreement_.is(IdleAgreement::kAskedAndAgreed);
  }

  std::string who_;  // names the machine in transition reports
  StateMachine<IdleAgreement> agreement_{IdleAgreement::kNone};
  std::vector<IdleClose> in_, out_;  // received, to handle / answers to write
  Clock::time_point committedAt_;
  Clock::time_point lastActivity_;  // last message either way (seen by a tick)
  uint64_t activitySeen_ = 0;       // messages counted at that tick
};

}  // namespace rdmamsg::peer
