// Tampering on the wire, for tests of what a program does with traffic an
// attacker on the fabric changed (docs/softrdma.md, "Tampering"). The
// control channel's `tamper` command arms one alteration of the next SEND
// a process posts on an RC queue pair (optionally only towards one IPv4
// address), carried out as an attacker who can inject into the connection
// would: every frame keeps the connection's packet sequence numbers in
// order, so the responder takes what arrives as the peer's.
//
//   flip      one bit of the SEND's payload flipped (its middle byte)
//   truncate  its payload cut by 8 bytes
//   replay    sent, then a copy of it injected as one more SEND
//   reorder   held back and sent after the next SEND (their payloads swap
//             places, the sequence numbers stay in order)
//   inject:HEX  a SEND of these bytes injected after it
//   off       disarms
//
// An injected SEND consumes a receive of the responder like any other, and
// completes on the requester without a completion entry.
#pragma once

#include <atomic>
#include <string>

#include "qp.h"
#include "wire.h"

namespace softrdma {

extern std::atomic<bool> g_tamperArmed;
inline bool tamperArmed() {
  return g_tamperArmed.load(std::memory_order_relaxed);
}

// The post path, for a SEND on an RC queue pair while armed (qp->mu held;
// `h` its frame header, its WQE already queued): carries out the
// alteration and returns true when the SEND is its target (it then sent,
// or holds, the SEND's frame), false to send it as usual.
bool tamperSend(Qp* qp, const ibv_send_wr& w, const FrameHeader& h);

// The control command: `tamper KIND [ADDR]` arms, `tamper status` answers
// the alterations carried out ("ok\nN\n"). "ok" or "error: ...".
std::string tamperCommand(const std::string& kind, const std::string& addr);

}  // namespace softrdma
