// RC atomics: IBV_WR_ATOMIC_FETCH_AND_ADD and IBV_WR_ATOMIC_CMP_AND_SWP, as
// rxe executes them.
//
// The requester sends the remote address and key in the frame header and
// the two operands as its 16-byte payload (AtomicArgs, wire.h); the WQE
// keeps its local SGEs, like a READ's. The responder checks the request
// when its header arrives (responder resources, the key, the MR's and the
// QP's IBV_ACCESS_REMOTE_ATOMIC, the 8-byte range, the alignment) and
// executes it once the operands are in, on the thread receiving it (the
// progress thread, or a program's thread making progress inline), through
// std::atomic_ref, so it is atomic against other atomics, whichever thread
// executes them, and against the program's own atomic operations on the
// same 8 bytes. The
// ATOMIC_RESP carries the original value, which the requester places in
// its local SGEs, and acknowledges every earlier request, as a READ's
// response does.
#include <atomic>
#include <cstring>

#include "conn.h"
#include "mw.h"
#include "qp.h"
#include "wire.h"

namespace softrdma {

namespace {

constexpr uint64_t kAtomicSize = sizeof(uint64_t);

bool isAtomicCompletion(ibv_wc_opcode op) {
  return op == IBV_WC_COMP_SWAP || op == IBV_WC_FETCH_ADD;
}

// Why the responder refuses the atomic in hdr, or Syndrome::None (rxe's
// order: resources, then the key and range, then the alignment). `*local`
// gets the address of the 8 bytes (an MR's or a memory window's rkey).
Syndrome refusal(const Qp& q, const FrameHeader& hdr, uint64_t* local) {
  if (q.attr.max_dest_rd_atomic == 0) return Syndrome::RemoteInvalidRequest;
  if (!resolveRkey(q, hdr.rkey, hdr.raddr, kAtomicSize, IBV_ACCESS_REMOTE_ATOMIC, local))
    return Syndrome::RemoteAccess;
  if (*local % kAtomicSize != 0) return Syndrome::RemoteInvalidRequest;
  return Syndrome::None;
}

}  // namespace

// The header of an atomic request (this side is the responder). q.mu held.
bool Conn::atomicRequest(Qp& q) {
  if (rx.hdr.len != sizeof(AtomicArgs)) {
    fail("atomic request of the wrong length");
    return false;
  }
  uint64_t local = 0;
  if (Syndrome s = refusal(q, rx.hdr, &local); s != Syndrome::None) {
    rx.cur.kind = Pending::Nak;  // the operands are read and dropped
    rx.cur.syndrome = s;
    return true;
  }
  rx.cur.kind = Pending::Atomic;
  rx.dest.push_back({&rx.cur.atomic, sizeof rx.cur.atomic});
  return true;
}

// The operands are in: the atomic is executed and answered. q.mu held.
void Conn::executeAtomic(Qp& q) {
  // Checked again: the MR may have been deregistered since the header came.
  uint64_t local = 0;
  if (Syndrome s = refusal(q, rx.hdr, &local); s != Syndrome::None) {
    flushAcksLocked(&q);
    sendFrame(FrameType::Nak, rx.hdr.psn, static_cast<uint16_t>(s));
    responder.discard_requests = true;
    return;
  }
  std::atomic_ref<uint64_t> target(*reinterpret_cast<uint64_t*>(local));
  uint64_t original = rx.cur.atomic.compare_add;
  if (static_cast<FrameType>(rx.hdr.type) == FrameType::FetchAdd)
    original = target.fetch_add(rx.cur.atomic.compare_add);
  else
    target.compare_exchange_strong(original, rx.cur.atomic.swap);  // original: what was there
  responder.ack_pending = false;  // the response acknowledges every earlier request too
  sendFrame(FrameType::AtomicResp, rx.hdr.psn, 0, &original, sizeof original);
}

// The response to this side's atomic: the original value goes into the
// request's local SGEs. q.mu held.
bool Conn::atomicResponse(Qp& q) {
  // Everything before the atomic is acknowledged by its response.
  q.completeSendsUpTo(rx.hdr.psn - 1, IBV_WC_SUCCESS, false);
  if (q.sq.wqes.empty() || q.sq.wqes.front().psn != rx.hdr.psn ||
      !isAtomicCompletion(q.sq.wqes.front().opcode) || rx.hdr.len != kAtomicSize) {
    if (q.qp.state == IBV_QPS_ERR) return true;  // flushed meanwhile: discard
    fail("unexpected atomic response");
    return false;
  }
  const SendWqe& w = q.sq.wqes.front();
  uint64_t want = kAtomicSize;
  for (uint32_t i = 0; i < w.num_sge && want > 0; i++) {
    const ibv_sge& s = q.sq.sges[w.sge_off + i];
    const uint64_t n = std::min<uint64_t>(s.length, want);
    if (n > 0) rx.dest.push_back({reinterpret_cast<void*>(s.addr), n});
    want -= n;
  }
  rx.cur.kind = Pending::ReadResp;  // completed like a READ when the value is in
  return true;
}

// What rdma-core's rxe provider checks when ibv_post_send posts an atomic
// (a local buffer of 8 bytes or more, an aligned remote address). Its
// ibv_wr_* builders check neither: the responder refuses a misaligned one.
bool atomicWrValid(const ibv_send_wr& w, uint64_t len, bool wr_api) {
  if ((w.send_flags & IBV_SEND_INLINE) != 0) return false;
  return wr_api || (len >= kAtomicSize && w.wr.atomic.remote_addr % kAtomicSize == 0);
}

int addAtomicFrame(FrameHeader& h, AtomicArgs& args, Conn::TxIov* iov, int niov, const Qp& qp,
                   const ibv_send_wr& w, const SendWqe& e) {
  h = FrameHeader{};
  h.type = static_cast<uint8_t>(w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? FrameType::FetchAdd
                                                                        : FrameType::CmpSwap);
  h.flags = (w.send_flags & IBV_SEND_SOLICITED) ? kFlagSolicited : 0;
  if (e.signaled) h.flags |= kFlagAckNow;
  h.rnr_retry = qp.attr.rnr_retry;
  h.psn = e.psn;
  h.len = sizeof(AtomicArgs);
  h.rkey = w.wr.atomic.rkey;
  h.raddr = w.wr.atomic.remote_addr;
  args.compare_add = w.wr.atomic.compare_add;
  args.swap = w.wr.atomic.swap;
  iov[niov++] = {&h, sizeof h, false, true, true};
  iov[niov++] = {&args, sizeof args, false, false, true};
  return niov;
}

}  // namespace softrdma
