// The states of one connection (connection.h), and the edges between them:
//
// Active side:  idle → resolving-address → resolving-route → connecting → established
// Passive side: idle → accepting → established
// Both:         established → disconnecting → closed
//
// With a mesh secret, connecting and accepting go through authenticating
// before established. Any state before closed may go to disconnecting.
#pragma once

namespace rdmamsg::peer {

enum class ConnState {
  kIdle,
  kResolvingAddress,
  kResolvingRoute,
  kConnecting,
  kAccepting,
  kAuthenticating,
  kEstablished,
  kDisconnecting,
  kClosed,
};
const char* toString(ConnState s);
// Whether a connection may go from one state to the other.
bool allowedEdge(ConnState from, ConnState to);

}  // namespace rdmamsg::peer
