// A connection's states (conn_state.h).
#include "daemon/peer/conn_state.h"

namespace rdmamsg::peer {

const char* toString(ConnState s) {
  switch (s) {
    case ConnState::kIdle:
      return "idle";
    case ConnState::kResolvingAddress:
      return "resolving-address";
    case ConnState::kResolvingRoute:
      return "resolving-route";
    case ConnState::kConnecting:
      return "connecting";
    case ConnState::kAccepting:
      return "accepting";
    case ConnState::kAuthenticating:
      return "authenticating";
    case ConnState::kEstablished:
      return "established";
    case ConnState::kDisconnecting:
      return "disconnecting";
    case ConnState::kClosed:
      return "closed";
  }
  return "?";
}

bool allowedEdge(ConnState from, ConnState to) {
  switch (from) {
    case ConnState::kIdle:
      return to == ConnState::kResolvingAddress || to == ConnState::kAccepting ||
             to == ConnState::kDisconnecting;
    case ConnState::kResolvingAddress:
      return to == ConnState::kResolvingRoute || to == ConnState::kDisconnecting;
    case ConnState::kResolvingRoute:
      return to == ConnState::kConnecting || to == ConnState::kDisconnecting;
    case ConnState::kConnecting:
    case ConnState::kAccepting:
      return to == ConnState::kAuthenticating || to == ConnState::kEstablished ||
             to == ConnState::kDisconnecting;
    case ConnState::kAuthenticating:
      return to == ConnState::kEstablished || to == ConnState::kDisconnecting;
    case ConnState::kEstablished:
      return to == ConnState::kDisconnecting;
    case ConnState::kDisconnecting:
      return to == ConnState::kClosed;
    case ConnState::kClosed:
      return false;
  }
  return false;
}

}  // namespace rdmamsg::peer
