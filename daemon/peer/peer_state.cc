// The states of a peer and of its idle-close agreement (peer_state.h).
#include "daemon/peer/peer_state.h"

namespace rdmamsg::peer {

bool allowedEdge(PeerState from, PeerState to) {
  switch (from) {
    case PeerState::kIdle:
      return to == PeerState::kConnecting || to == PeerState::kStopped;
    // → idle: connect on demand, with nothing to send (a failed dial, a lost
    // or idle-closed connection, a backoff that found the queue empty).
    case PeerState::kConnecting:  // connecting → connecting: a new connection replaces the attempt
      return to == PeerState::kConnecting || to == PeerState::kEstablished ||
             to == PeerState::kBackoff || to == PeerState::kStopping || to == PeerState::kIdle;
    case PeerState::kEstablished:
      return to == PeerState::kConnecting || to == PeerState::kBackoff ||
             to == PeerState::kStopping || to == PeerState::kIdle;
    case PeerState::kBackoff:
      return to == PeerState::kConnecting || to == PeerState::kStopped || to == PeerState::kIdle;
    case PeerState::kStopping:
      return to == PeerState::kStopped;
    case PeerState::kStopped:  // for good (a peer configured again is a new object)
      return false;
  }
  return false;
}

const char* toString(PeerState s) {
  switch (s) {
    case PeerState::kIdle:
      return "idle";
    case PeerState::kConnecting:
      return "connecting";
    case PeerState::kEstablished:
      return "established";
    case PeerState::kBackoff:
      return "disconnected";
    case PeerState::kStopping:
      return "stopping";
    case PeerState::kStopped:
      return "stopped";
  }
  return "?";
}

const char* toString(IdleAgreement s) {
  switch (s) {
    case IdleAgreement::kNone:
      return "none";
    case IdleAgreement::kAsked:
      return "asked";
    case IdleAgreement::kAgreed:
      return "agreed";
    case IdleAgreement::kAskedAndAgreed:
      return "asked-and-agreed";
    case IdleAgreement::kClosing:
      return "closing";
  }
  return "?";
}

bool allowedEdge(IdleAgreement from, IdleAgreement to) {
  switch (from) {
    case IdleAgreement::kNone:
      return to == IdleAgreement::kAsked || to == IdleAgreement::kAgreed;
    case IdleAgreement::kAsked:
      return to == IdleAgreement::kNone || to == IdleAgreement::kAskedAndAgreed ||
             to == IdleAgreement::kClosing;
    case IdleAgreement::kAgreed:
      return to == IdleAgreement::kClosing;
    case IdleAgreement::kAskedAndAgreed:
      return to == IdleAgreement::kAgreed || to == IdleAgreement::kClosing;
    case IdleAgreement::kClosing:
      return false;
  }
  return false;
}

}  // namespace rdmamsg::peer
