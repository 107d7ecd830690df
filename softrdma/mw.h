// Memory windows (mw.cc): what the send path and the responder ask of them.
#pragma once

#include <cstdint>

#include "base.h"
#include "qp.h"

namespace softrdma {

// The memory-window builders of an extended QP (ibv_wr_bind_mw, ...).
void setMwWrOps(Qp* qp, uint64_t send_ops_flags);
// Posts a bind or local invalidation (qp->mu held; `e` filled, its slot
// taken): executed now, completed in order with the requests before it.
void postLocalOp(Qp* qp, const ibv_send_wr& w, SendWqe& e);
// A SEND with invalidate's invalidation at the responder: false if the key
// names no bound type 2 window.
bool remoteInvalidate(uint32_t rkey);
// The responder's check of a remote access of `len` bytes at `addr` through
// `rkey` (an MR's or a memory window's) needing `need` (one access flag),
// with the QP's access flags and PD; `*local` gets the address the bytes are
// at (a zero-based window's offsets are translated).
bool resolveRkey(const Qp& q, uint32_t rkey, uint64_t addr, uint64_t len, int need,
                 uint64_t* local);

}  // namespace softrdma
