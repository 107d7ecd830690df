// The states of a peer (peer.h) and of its idle-close agreement, and the
// edges between them. Each has one checked transition (Peer::setState,
// IdleCloser's StateMachine); these say which edges are allowed.
//
// Peer: idle → connecting → established → connecting (reconnect) | backoff |
// idle (on demand, nothing to send) | stopping → stopped (for good: a peer
// configured again is a new object).
#pragma once

namespace rdmamsg::peer {

enum class PeerState { kIdle, kConnecting, kEstablished, kBackoff, kStopping, kStopped };
const char* toString(PeerState s);
// Whether a peer may go from one state to the other.
bool allowedEdge(PeerState from, PeerState to);

// Closing an idle connection by agreement (IdleClose records), while
// established: this node asked and awaits the answer, agreed to the peer's
// request, or both (both asked at once); closing — its request was
// accepted, or the agreement was not completed within heartbeat_timeout.
// Back to none with every new connection.
//
//   none → asked → none (refused)          asked → asked-and-agreed → agreed (refused)
//   none → agreed → closing                asked, asked-and-agreed → closing
enum class IdleAgreement { kNone, kAsked, kAgreed, kAskedAndAgreed, kClosing };
const char* toString(IdleAgreement s);
bool allowedEdge(IdleAgreement from, IdleAgreement to);

}  // namespace rdmamsg::peer
