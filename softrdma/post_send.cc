// The send path: ibv_post_send validates every work request as a device
// would (state, queue depth, SGE count, inline size, lkeys), numbers it with
// a PSN and hands the frame to the QP's connection, which writes it to the
// socket at once (the doorbell). A send completes when the responder
// acknowledges it, in posting order (qp.cc). Also the receive posts.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base.h"
#include "conn.h"
#include "context_ops.h"
#include "mw.h"
#include "pd_mr.h"
#include "qp.h"
#include "tamper.h"
#include "ud.h"
#include "wire.h"

namespace softrdma {

namespace {

ibv_wc_opcode wcOpcode(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return IBV_WC_FETCH_ADD;
    case IBV_WR_LOCAL_INV:
      return IBV_WC_LOCAL_INV;
    case IBV_WR_BIND_MW:
      return IBV_WC_BIND_MW;
    default:
      return IBV_WC_SEND;
  }
}

FrameType frameType(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_SEND_WITH_IMM:
      return FrameType::SendImm;
    case IBV_WR_RDMA_WRITE:
      return FrameType::Write;
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return FrameType::WriteImm;
    case IBV_WR_RDMA_READ:
      return FrameType::ReadReq;
    case IBV_WR_SEND_WITH_INV:
      return FrameType::SendInv;
    default:
      return FrameType::Send;
  }
}

// Local protection: every non-empty SGE must lie in an MR of the QP's PD.
bool sgesValid(const Qp* qp, const ibv_sge* sg, int n, bool need_write) {
  for (int i = 0; i < n; i++) {
    if (sg[i].length == 0) continue;
    Mr* mr = findMrByKey(sg[i].lkey);
    if (mr == nullptr || mr->pd != qp->pd || !mr->covers(sg[i].addr, sg[i].length)) return false;
    if (need_write && !(mr->access & IBV_ACCESS_LOCAL_WRITE)) return false;
  }
  return true;
}

}  // namespace

namespace {

// RDMA_WRITE (0) … ATOMIC_FETCH_AND_ADD (6), then the memory-window
// operations (mw.cc): LOCAL_INV (7), BIND_MW (8), SEND_WITH_INV (9).
bool opcodeSupported(ibv_wr_opcode op) {
  static_assert(IBV_WR_RDMA_WRITE == 0 && IBV_WR_RDMA_WRITE_WITH_IMM == 1 && IBV_WR_SEND == 2 &&
                IBV_WR_SEND_WITH_IMM == 3 && IBV_WR_RDMA_READ == 4 &&
                IBV_WR_ATOMIC_CMP_AND_SWP == 5 && IBV_WR_ATOMIC_FETCH_AND_ADD == 6 &&
                IBV_WR_LOCAL_INV == 7 && IBV_WR_BIND_MW == 8 && IBV_WR_SEND_WITH_INV == 9);
  return static_cast<unsigned>(op) <= IBV_WR_SEND_WITH_INV;
}

// READ and the atomics fetch into their SGEs.
bool fetches(ibv_wr_opcode op) {
  return op >= IBV_WR_RDMA_READ && op <= IBV_WR_ATOMIC_FETCH_AND_ADD;
}

bool isAtomic(ibv_wr_opcode op) {
  return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

// The checks a device makes of each work request when it is posted
// (the queue's room apart): EINVAL or 0. qp.mu held. `wr_api`: built with
// the ibv_wr_* API, whose builders check less (atomics.cc).
int checkWr(const Qp& qp, const ibv_send_wr* w, bool wr_api) {
  bool inl = (w->send_flags & IBV_SEND_INLINE) != 0;
  if (!opcodeSupported(w->opcode)) return EINVAL;
  if (w->num_sge < 0 || static_cast<uint32_t>(w->num_sge) > qp.cap.max_send_sge ||
      (inl && w->opcode == IBV_WR_RDMA_READ))
    return EINVAL;
  uint64_t len = 0;
  for (int i = 0; i < w->num_sge; i++)
    len += w->sg_list[i].length;
  if ((inl && len > qp.cap.max_inline_data) || len > kMaxFramePayload) return EINVAL;
  if (isAtomic(w->opcode) && !atomicWrValid(*w, len, wr_api)) return EINVAL;
  // A bind carries no data (rxe's provider; imm_data is the same field as
  // invalidate_rkey, which a bind has no use for).
  if (w->opcode == IBV_WR_BIND_MW && (w->num_sge != 0 || w->imm_data != 0)) return EINVAL;
  return 0;
}

}  // namespace

int postSendOp(ibv_qp* q, ibv_send_wr* wr, ibv_send_wr** bad) {
  return postSend(reinterpret_cast<Qp*>(q), wr, bad, false);
}

namespace {

// postSend is the doorbell of every send: its common path (one request,
// SEND or WRITE, checked, queued, framed) stays in the one function below,
// and what is rare is a cold helper that keeps it out of the way. The
// always-inline helpers are steps of that path, named, and compiled as if
// they were written in place.
constexpr int kBatch = 64;  // frames per write to the connection

// All or nothing (the ibv_wr_* API): every request checked, and room for
// all of them, before any is posted.
[[gnu::cold, gnu::noinline]] int checkAll(const Qp& qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  uint32_t n = 0;
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next, n++) {
    if (int rc = checkWr(qp, w, true); rc != 0) {
      *bad = w;
      return rc;
    }
  }
  if (n > qp.cap.max_send_wr - qp.sq.used) {
    *bad = wr;
    return ENOMEM;
  }
  return 0;
}

// A READ's (or an atomic's) local SGEs, kept for its response.
[[gnu::cold, gnu::noinline]] void keepReadSges(Qp* qp, const ibv_send_wr& w, SendWqe& e) {
  e.num_sge = static_cast<uint32_t>(w.num_sge);
  e.sge_off = qp->sq.slot * qp->cap.max_send_sge;
  qp->sq.slot = (qp->sq.slot + 1) % qp->cap.max_send_wr;
  if (w.num_sge > 0) memcpy(&qp->sq.sges[e.sge_off], w.sg_list, sizeof(ibv_sge) * w.num_sge);
}

// A request held back behind a failed one (or failed itself): completed
// with its error when it reaches the head of the queue.
[[gnu::cold, gnu::noinline]] void holdBack(Qp* qp, const SendWqe& e) {
  if (qp->sq.wqes.size() == 1) qp->completeSendsUpTo(e.psn - 1, IBV_WC_SUCCESS, false);
}

// Inline data is copied into the slot of frame nhdr of buf, since the
// program may reuse its buffer at once. Returns the copy.
[[gnu::noinline]] uint8_t* copyInline(std::vector<uint8_t>& buf, int nhdr, const ibv_send_wr& w) {
  if (buf.empty()) buf.resize(static_cast<size_t>(kBatch) * kMaxInline);
  uint8_t* start = &buf[static_cast<size_t>(nhdr) * kMaxInline];
  uint8_t* p = start;
  for (int i = 0; i < w.num_sge; i++) {
    memcpy(p, reinterpret_cast<void*>(w.sg_list[i].addr), w.sg_list[i].length);
    p += w.sg_list[i].length;
  }
  return start;
}

[[gnu::always_inline]] inline void fillWqe(SendWqe& e, const Qp* qp, const ibv_send_wr& w,
                                           uint64_t len) {
  e.wr_id = w.wr_id;
  e.opcode = wcOpcode(w.opcode);
  e.byte_len = static_cast<uint32_t>(len);
  e.signaled = qp->sq_sig_all || (w.send_flags & IBV_SEND_SIGNALED);
  e.preset = IBV_WC_SUCCESS;
}

[[gnu::always_inline]] inline void fillHeader(FrameHeader& h, const Qp* qp, const ibv_send_wr& w,
                                              const SendWqe& e, uint64_t len) {
  const bool is_read = w.opcode == IBV_WR_RDMA_READ;
  h = FrameHeader{};
  h.type = static_cast<uint8_t>(frameType(w.opcode));
  h.flags = (w.send_flags & IBV_SEND_SOLICITED) ? kFlagSolicited : 0;
  if (e.signaled) h.flags |= kFlagAckNow;
  h.rnr_retry = qp->attr.rnr_retry;
  h.psn = e.psn;
  if (w.opcode == IBV_WR_SEND_WITH_IMM || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
    h.imm = w.imm_data;
  if (w.opcode == IBV_WR_SEND_WITH_INV) h.rkey = w.invalidate_rkey;
  if (w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM || is_read) {
    h.raddr = w.wr.rdma.remote_addr;
    h.rkey = w.wr.rdma.rkey;
  }
  if (is_read) {
    h.imm = static_cast<uint32_t>(len);  // requested length; no payload
  } else {
    h.len = static_cast<uint32_t>(len);
  }
}

// The payload's pieces after the header of frame nhdr: a copy of inline
// data (in inl_buf), or the program's own buffers. Returns the new count.
[[gnu::always_inline]] inline int addPayload(Conn::TxIov* iov, int niov, const ibv_send_wr& w,
                                             uint64_t len, std::vector<uint8_t>& inl_buf,
                                             int nhdr) {
  if ((w.send_flags & IBV_SEND_INLINE) != 0) {
    iov[niov++] = {copyInline(inl_buf, nhdr, w), static_cast<size_t>(len), false, false, true};
    return niov;
  }
  for (int i = 0; i < w.num_sge; i++) {
    if (w.sg_list[i].length == 0) continue;
    iov[niov++] = {reinterpret_cast<void*>(w.sg_list[i].addr), w.sg_list[i].length, true, false,
                   true};
  }
  return niov;
}

}  // namespace

int postSend(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad, bool all_or_nothing) {
  if (qp->qp.qp_type != IBV_QPT_RC) return udPostSend(qp, wr, bad, all_or_nothing);
  std::unique_lock lk(qp->mu);
  ibv_qp_state st = qp->qp.state;
  if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR) {
    *bad = wr;
    return EINVAL;
  }
  if (all_or_nothing)
    if (int rc = checkAll(*qp, wr, bad); rc != 0) return rc;
  Conn::TxIov iov[kBatch * 2 + kMaxSge];
  FrameHeader hdrs[kBatch];
  AtomicArgs args[kBatch];  // the operands of atomic requests
  // Inline payloads of this call, until the connection has taken them (the
  // QP's lock is released before that): the calling thread's own buffer.
  static thread_local std::vector<uint8_t> inl_buf;
  int niov = 0, nhdr = 0;
  auto flush = [&] {
    if (niov > 0 && qp->conn) qp->conn->sendv(iov, niov);
    niov = nhdr = 0;
  };
  auto reject = [&](ibv_send_wr* w, int err) {
    flush();
    *bad = w;
    return err;
  };
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
    if (int rc = checkWr(*qp, w, all_or_nothing); rc != 0) return reject(w, rc);
    uint64_t len = 0;
    for (int i = 0; i < w->num_sge; i++)
      len += w->sg_list[i].length;
    if (qp->sq.used >= qp->cap.max_send_wr) return reject(w, ENOMEM);
    SendWqe e{};
    fillWqe(e, qp, *w, len);
    qp->sq.used++;
    if (st == IBV_QPS_ERR || st == IBV_QPS_SQE) {
      qp->sendCompletion(e, IBV_WC_WR_FLUSH_ERR);
      continue;
    }
    if (w->opcode == IBV_WR_BIND_MW || w->opcode == IBV_WR_LOCAL_INV) {
      postLocalOp(qp, *w, e);
      continue;
    }
    const bool fetching = fetches(w->opcode);
    if ((w->send_flags & IBV_SEND_INLINE) == 0 && !sgesValid(qp, w->sg_list, w->num_sge, fetching))
      e.preset = IBV_WC_LOC_PROT_ERR;
    if (qp->transport_lost || !qp->conn) e.preset = IBV_WC_RETRY_EXC_ERR;
    e.psn = qp->sq.next_psn++;
    if (fetching) keepReadSges(qp, *w, e);
    qp->sq.wqes.push_back(e);
    if (e.preset != IBV_WC_SUCCESS) qp->sq.halted = true;
    if (qp->sq.halted) {
      holdBack(qp, e);
      continue;  // not transmitted; later requests will be flushed
    }
    if (tamperArmed() && w->opcode == IBV_WR_SEND && (w->send_flags & IBV_SEND_INLINE) == 0)
        [[unlikely]] {
      flush();  // the frames before it go first
      FrameHeader h;
      fillHeader(h, qp, *w, e, len);
      if (tamperSend(qp, *w, h)) continue;
    }
    if (nhdr == kBatch || niov + 2 + w->num_sge > static_cast<int>(std::size(iov))) flush();
    if (isAtomic(w->opcode)) {
      niov = addAtomicFrame(hdrs[nhdr], args[nhdr], iov, niov, *qp, *w, e);
      nhdr++;
      continue;
    }
    fillHeader(hdrs[nhdr], qp, *w, e, len);
    iov[niov++] = {&hdrs[nhdr], sizeof(FrameHeader), false, true, true};
    if (!fetching && len > 0) niov = addPayload(iov, niov, *w, len, inl_buf, nhdr);
    nhdr++;
  }
  if (niov > 0 && qp->conn) {
    // Hand over to the connection's lock before releasing the QP's: frames
    // reach the socket in PSN order, and the progress thread (which takes
    // the QP lock for every acknowledgement) is not held up by the write.
    std::shared_ptr<Conn> conn = qp->conn;
    std::lock_guard tl(conn->tx_mu);
    lk.unlock();
    conn->sendvLocked(iov, niov);
  }
  return 0;
}

int postRecvOp(ibv_qp* q, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  auto* qp = reinterpret_cast<Qp*>(q);
  if (qp->srq != nullptr) {
    *bad = wr;
    return EINVAL;
  }
  std::lock_guard lk(qp->mu);
  if (qp->qp.state == IBV_QPS_RESET) {
    *bad = wr;
    return EINVAL;
  }
  int rc = qp->rq.post(wr, bad);
  if (qp->qp.state == IBV_QPS_ERR) qp->flushAll(IBV_WC_WR_FLUSH_ERR);
  return rc;
}

int postSrqRecvOp(ibv_srq* s, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  auto* srq = reinterpret_cast<Srq*>(s);
  std::lock_guard lk(srq->mu);
  return srq->rq.post(wr, bad);
}

}  // namespace softrdma
