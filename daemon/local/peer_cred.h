// Who a local client is: its credentials, read from its socket when it
// connects (SO_PEERCRED, and SO_PEERGROUPS for its supplementary groups),
// as the local policy (config/local_policy.h) sees them.
#pragma once

#include "config/local_policy.h"
#include "daemon/local/local_handler.h"

namespace rdmamsg::local {

// The credentials of the process at the other end of `fd` (known = false
// when the kernel does not say).
PeerCred readPeerCred(int fd);
config::Identity identityOf(const PeerCred& c);

}  // namespace rdmamsg::local
