// IdleCloser: the idle-close agreement of one connection (idle_closer.h).
#include "daemon/peer/idle_closer.h"

namespace rdmamsg::peer {

void IdleCloser::reset(Clock::time_point now) {
  agreement_ = StateMachine<IdleAgreement>(IdleAgreement::kNone);
  in_.clear();
  out_.clear();
  lastActivity_ = now;
}

bool IdleCloser::agreedToClose() const {
  return agreement_.is(IdleAgreement::kAgreed) || agreement_.is(IdleAgreement::kAskedAndAgreed) ||
         agreement_.is(IdleAgreement::kClosing);
}

// A request is accepted when this node may agree; it then starts no
// message until the connection closes. On an accept of this node's
// request, it disconnects.
Result<IdleCloser::Decision> IdleCloser::handle(bool mayAgree, Clock::time_point now) {
  std::vector<IdleClose> in;
  in.swap(in_);
  for (IdleClose action : in) {
    switch (action) {
      case IdleClose::kRequest:
        if (mayAgree && !agreement_.is(IdleAgreement::kClosing)) {
          if (agreement_.is(IdleAgreement::kNone) || agreement_.is(IdleAgreement::kAsked)) {
            committedAt_ = now;
            set(agreement_.is(IdleAgreement::kNone) ? IdleAgreement::kAgreed
                                                    : IdleAgreement::kAskedAndAgreed);
          }
          out_.push_back(IdleClose::kAccept);
        } else {
          out_.push_back(IdleClose::kRefuse);
        }
        break;
      case IdleClose::kAccept:
        if (!askedByThisNode())
          return Status(Errc::protocol_error,
                        "idle close accepted without a request from this node");
        set(IdleAgreement::kClosing);
        return Decision::kClose;
      case IdleClose::kRefuse:
        if (!askedByThisNode())
          return Status(Errc::protocol_error,
                        "idle close refused without a request from this node");
        set(agreement_.is(IdleAgreement::kAsked) ? IdleAgreement::kNone : IdleAgreement::kAgreed);
        lastActivity_ = now;  // asks again after another idle_timeout
        break;
    }
  }
  return Decision::kGoOn;
}

void IdleCloser::written(size_t n) {
  out_.erase(out_.begin(), out_.begin() + static_cast<std::ptrdiff_t>(n));
}

void IdleCloser::noteActivity(uint64_t activity, Clock::time_point now) {
  if (activity == activitySeen_) return;
  activitySeen_ = activity;
  lastActivity_ = now;
}

Status IdleCloser::expire(std::chrono::milliseconds limit, Clock::time_point now) {
  if (!committed() || agreement_.is(IdleAgreement::kClosing) || now - committedAt_ <= limit)
    return Status();
  set(IdleAgreement::kClosing);
  return Status(Errc::timeout, "idle close not completed by the peer within heartbeat_timeout");
}

void IdleCloser::asked(Clock::time_point now) {
  set(IdleAgreement::kAsked);
  committedAt_ = now;
}

}  // namespace rdmamsg::peer
