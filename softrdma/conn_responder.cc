// The RC transport's execution of what arrives: requests (SEND, WRITE,
// READ, atomics) checked and placed as a responder does — a SEND that finds
// no receive WQE is held (RNR), retried every min_rnr_timer and NAKed once
// the requester's rnr_retry count is exhausted (7 = forever) — responses and
// NAKs completing the requester's work, and the ACKs owed for them. Data for
// a QP that is not yet RTR is held, never dropped.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "base.h"
#include "cm_id.h"
#include "conn.h"
#include "conn_detail.h"
#include "counters.h"
#include "cq.h"
#include "device.h"
#include "fabric.h"
#include "fork_hooks.h"
#include "mw.h"
#include "pd_mr.h"
#include "qp.h"
#include "softrdma/testing.h"
#include "wire.h"

namespace softrdma {

namespace {

// IB spec table 45 (min RNR NAK timer field), in microseconds.
const uint32_t kRnrMicros[32] = {655360, 10,    20,    30,     40,     60,     80,     120,
                                 160,    240,   320,   480,    640,    960,    1280,   1920,
                                 2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
                                 40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};

ibv_wc_status nakStatus(Syndrome s) {
  switch (s) {
    case Syndrome::RnrRetryExceeded:
      return IBV_WC_RNR_RETRY_EXC_ERR;
    case Syndrome::RemoteAccess:
      return IBV_WC_REM_ACCESS_ERR;
    case Syndrome::RemoteInvalidRequest:
      return IBV_WC_REM_INV_REQ_ERR;
    default:
      return IBV_WC_REM_OP_ERR;
  }
}

// softrdma_corrupt_next_recv: the next successful receive completion lies.
std::mutex g_corrupt_mu;
bool g_corrupt = false;
ibv_wc_opcode g_corrupt_opcode = IBV_WC_RECV;
uint32_t g_corrupt_len = 0;

}  // namespace

void forkCorruption(ForkStep s) {
  if (s == ForkStep::Prepare) {
    g_corrupt_mu.lock();
    return;
  }
  if (s == ForkStep::Child) g_corrupt = false;
  g_corrupt_mu.unlock();
}

void applyTestCorruption(ibv_wc& wc) {
  std::lock_guard lk(g_corrupt_mu);
  if (!g_corrupt) return;
  g_corrupt = false;
  wc.opcode = g_corrupt_opcode;
  if (g_corrupt_len != SOFTRDMA_KEEP_BYTE_LEN) wc.byte_len = g_corrupt_len;
}

namespace {

// The next receive of q's queue (or its shared one, firing an armed limit).
[[gnu::always_inline]] inline bool popReceive(Qp& q, RecvWqe& wqe, const ibv_sge*& sg) {
  if (q.srq == nullptr) return q.rq.pop(wqe, sg);
  std::lock_guard sl(q.srq->mu);
  const bool got = q.srq->rq.pop(wqe, sg);
  if (got && q.srq->limit > 0 && q.srq->rq.count < q.srq->limit) {
    q.srq->limit = 0;  // one-shot, like the hardware's armed limit
    raiseAsync(q.qp.context, IBV_EVENT_SRQ_LIMIT_REACHED, kAsyncSrq, q.srq->srq.handle);
  }
  return got;
}

}  // namespace

// Remote access (RDMA WRITE, WRITE with immediate, READ): checks the key,
// the PD, both access flags and the range. True when the frame needs nothing
// more (a READ, a plain WRITE, or a NAK); false for a WRITE with immediate,
// which also consumes a receive.
bool Conn::remoteAccess(Qp& q, FrameType t) {
  const bool read = t == FrameType::ReadReq;
  const uint64_t len = read ? rx.hdr.imm : rx.hdr.len;
  const int need = read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
  if (read && q.attr.max_dest_rd_atomic == 0) {  // no responder resources (rxe)
    rx.cur.kind = Pending::Nak;
    rx.cur.syndrome = Syndrome::RemoteInvalidRequest;
    return true;
  }
  // An MR's or a memory window's (mw.cc); a window's offsets become addresses.
  uint64_t local = rx.hdr.raddr;
  if (len > 0 && !resolveRkey(q, rx.hdr.rkey, rx.hdr.raddr, len, need, &local)) {
    rx.cur.kind = Pending::Nak;
    rx.cur.syndrome = Syndrome::RemoteAccess;
    return true;
  }
  rx.hdr.raddr = local;
  if (read) {
    rx.cur.kind = Pending::ReadReq;
    return true;
  }
  if (len > 0) rx.dest.push_back({reinterpret_cast<void*>(rx.hdr.raddr), len});
  rx.cur.kind = Pending::Write;
  return t == FrameType::Write;
}

// RNR: no receive is posted. The frame waits; a timer retries it.
[[gnu::cold, gnu::noinline]] void Conn::waitForReceive(Qp& q) {
  rx.dest.clear();
  rx.block = Block::Rnr;
  if (responder.rnr_timer) return;
  responder.rnr_timer = true;
  q.rnr_events++;
  count(Counter::SendRnr);
  std::weak_ptr<Conn> w = weak_from_this();
  auto delay = std::chrono::microseconds(kRnrMicros[q.attr.min_rnr_timer & 31]);
  Fabric::get().schedule(Clock::now() + delay, [w] {
    if (auto c = w.lock()) {
      c->handoff.rnr_due = true;
      c->progress();
    }
  });
}

// A SEND's payload goes into the receive's buffers, each checked.
[[gnu::always_inline]] inline void Conn::targetReceive(Qp& q, const RecvWqe& wqe,
                                                       const ibv_sge* sg) {
  uint64_t room = 0;
  bool prot_ok = true;
  for (uint32_t i = 0; i < wqe.num_sge; i++) {
    if (sg[i].length == 0) continue;
    Mr* mr = findMrByKey(sg[i].lkey);
    if (mr == nullptr || mr->pd != q.pd || !(mr->access & IBV_ACCESS_LOCAL_WRITE) ||
        !mr->covers(sg[i].addr, sg[i].length))
      prot_ok = false;
    room += sg[i].length;
    rx.dest.push_back({reinterpret_cast<void*>(sg[i].addr), sg[i].length});
  }
  if (!prot_ok) {
    rx.cur.status = IBV_WC_LOC_PROT_ERR;
    rx.cur.syndrome = Syndrome::RemoteOperation;
  } else if (rx.hdr.len > room) {
    rx.cur.status = IBV_WC_LOC_LEN_ERR;
    rx.cur.syndrome = Syndrome::RemoteInvalidRequest;
  }
  if (rx.cur.status != IBV_WC_SUCCESS) rx.dest.clear();
}

// A request from the peer's send queue (this side is the responder). q.mu held.
bool Conn::handleRequest(Qp& q) {
  auto t = static_cast<FrameType>(rx.hdr.type);
  ibv_qp_state st = q.qp.state;
  if (st == IBV_QPS_RESET || st == IBV_QPS_INIT) {
    rx.block = Block::NotReady;
    return false;
  }
  if (st == IBV_QPS_ERR || responder.discard_requests) return true;
  if (rx.hdr.psn != responder.rx_psn) {
    fail("request out of sequence");
    return false;
  }
  if (t == FrameType::ReadReq && rx.hdr.len != 0) {
    fail("READ request with payload");
    return false;
  }
  if (t == FrameType::FetchAdd || t == FrameType::CmpSwap) return atomicRequest(q);
  if (t == FrameType::Write || t == FrameType::WriteImm || t == FrameType::ReadReq)
    if (remoteAccess(q, t)) return true;
  // SEND, SEND with immediate and WRITE with immediate consume a receive.
  RecvWqe wqe;
  const ibv_sge* sg = nullptr;
  if (!popReceive(q, wqe, sg)) {
    waitForReceive(q);
    return false;
  }
  responder.rnr_tries = 0;
  rx.cur.wqe = wqe;
  rx.cur.byte_len = rx.hdr.len;
  if (rx.cur.kind == Pending::Write) {  // WRITE with immediate: data already targeted
    rx.cur.kind = Pending::Recv;
    return true;
  }
  rx.cur.kind = Pending::Recv;
  targetReceive(q, wqe, sg);
  return true;
}

// A response to this side's requests. q.mu held.
bool Conn::handleResponse(Qp& q) {
  auto t = static_cast<FrameType>(rx.hdr.type);
  if (t == FrameType::AtomicResp) return atomicResponse(q);
  if (t != FrameType::ReadResp) {
    if (rx.hdr.len != 0) {
      fail("ACK/NAK with payload");
      return false;
    }
    rx.cur.kind = Pending::Control;
    return true;
  }
  // Everything before the READ is acknowledged by its response.
  q.completeSendsUpTo(rx.hdr.psn - 1, IBV_WC_SUCCESS, false);
  if (q.sq.wqes.empty() || q.sq.wqes.front().psn != rx.hdr.psn ||
      q.sq.wqes.front().opcode != IBV_WC_RDMA_READ || q.sq.wqes.front().byte_len != rx.hdr.len) {
    if (q.qp.state == IBV_QPS_ERR) return true;  // flushed meanwhile: discard
    fail("unexpected READ response");
    return false;
  }
  const SendWqe& w = q.sq.wqes.front();
  for (uint32_t i = 0; i < w.num_sge; i++) {
    const ibv_sge& s = q.sq.sges[w.sge_off + i];
    if (s.length > 0) rx.dest.push_back({reinterpret_cast<void*>(s.addr), s.length});
  }
  rx.cur.kind = Pending::ReadResp;
  return true;
}

void Conn::finishFrame(const std::shared_ptr<Qp>& q) {
  auto t = static_cast<FrameType>(rx.hdr.type);
  if (rx.cur.kind == Pending::Cm) {
    CmMessage m{};
    if (!rx.cur.cm.empty()) {
      memcpy(&m, rx.cur.cm.data(), sizeof m);
      if (m.magic != kCmMagic || m.private_data_len > sizeof m.private_data) {
        fail("bad CM message");
        return;
      }
    }
    onCmFrame(shared_from_this(), t, m);
    return;
  }
  if (!q || rx.cur.kind == Pending::Discard) {
    if (isRequest(t)) responder.rx_psn++;
    return;
  }
  std::lock_guard lk(q->mu);
  if (q->destroyed) return;
  if (rx.cur.kind == Pending::Control) {
    if (t == FrameType::Ack)
      q->completeSendsUpTo(rx.hdr.psn, IBV_WC_SUCCESS, false);
    else
      q->completeSendsUpTo(rx.hdr.psn, nakStatus(static_cast<Syndrome>(rx.hdr.syndrome)), true);
    return;
  }
  if (rx.cur.kind == Pending::ReadResp) {
    q->completeSendsUpTo(rx.hdr.psn, IBV_WC_SUCCESS, false);
    return;
  }
  finishRequest(*q);
}

// The payload of a request has been placed. q.mu held.
void Conn::finishRequest(Qp& q) {
  auto t = static_cast<FrameType>(rx.hdr.type);
  responder.rx_psn++;
  if (rx.cur.kind == Pending::Nak) {
    flushAcksLocked(&q);
    sendFrame(FrameType::Nak, rx.hdr.psn, static_cast<uint16_t>(rx.cur.syndrome));
    responder.discard_requests = true;
    return;
  }
  if (rx.cur.kind == Pending::Atomic) {
    executeAtomic(q);
    return;
  }
  if (rx.cur.kind == Pending::ReadReq) {
    // The response acknowledges every earlier request too.
    responder.ack_pending = false;
    FrameHeader h{};
    h.type = static_cast<uint8_t>(FrameType::ReadResp);
    h.psn = rx.hdr.psn;
    h.len = rx.hdr.imm;
    TxIov v[2] = {{&h, sizeof h, false, true, false},
                  {reinterpret_cast<void*>(rx.hdr.raddr), rx.hdr.imm, false, false, false}};
    sendv(v, rx.hdr.imm > 0 ? 2 : 1);
    return;
  }
  if (rx.cur.kind == Pending::Recv) {
    ibv_wc wc{};
    wc.wr_id = rx.cur.wqe.wr_id;
    wc.status = rx.cur.status;
    wc.opcode = t == FrameType::WriteImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
    wc.byte_len = rx.cur.byte_len;
    wc.qp_num = q.qp.qp_num;
    wc.src_qp = remote_qpn;
    if (t == FrameType::SendImm || t == FrameType::WriteImm) {
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = rx.hdr.imm;
    }
    if (t == FrameType::SendInv) {  // the window is invalidated before the CQE (mw.cc)
      wc.wc_flags = IBV_WC_WITH_INV;
      wc.invalidated_rkey = rx.hdr.rkey;
      if (rx.cur.status == IBV_WC_SUCCESS && !remoteInvalidate(rx.hdr.rkey)) {
        wc.status = rx.cur.status = IBV_WC_REM_INV_REQ_ERR;
        rx.cur.syndrome = Syndrome::RemoteInvalidRequest;
      }
    }
    if (rx.cur.status != IBV_WC_SUCCESS) {
      flushAcksLocked(&q);
      q.rcq->push(wc, (rx.hdr.flags & kFlagSolicited) != 0);
      sendFrame(FrameType::Nak, rx.hdr.psn, static_cast<uint16_t>(rx.cur.syndrome));
      responder.discard_requests = true;
      q.flushAll(IBV_WC_WR_FLUSH_ERR);
      return;
    }
    count(Counter::RdmaRecvs);
    applyTestCorruption(wc);
    responder.pending_cqes.emplace_back(wc, (rx.hdr.flags & kFlagSolicited) != 0);
  }
  responder.ack_pending = true;
  if (rx.hdr.flags & kFlagAckNow) responder.ack_now = true;
  responder.acked_psn = rx.hdr.psn;
}

void Conn::flushAcksLocked(Qp* q) {
  if (responder.ack_pending && !eof) {
    if (responder.ack_now) {
      sendFrame(FrameType::Ack, responder.acked_psn);  // covers any owed ACK too
    } else {
      oweAck(responder.acked_psn);
    }
  }
  responder.ack_pending = responder.ack_now = false;
  if (q != nullptr && !q->destroyed)
    for (const auto& [wc, solicited] : responder.pending_cqes)
      q->rcq->push(wc, solicited);
  responder.pending_cqes.clear();
}

void Conn::flushAcks(const std::shared_ptr<Qp>& q) {
  if (responder.pending_cqes.empty() || !q) {
    responder.pending_cqes.clear();
    flushAcksLocked(nullptr);
    return;
  }
  std::lock_guard lk(q->mu);
  flushAcksLocked(q.get());
}

void Conn::onRnrTimer() {
  responder.rnr_timer = false;
  if (rx.block != Block::Rnr || eof) return;
  responder.rnr_tries++;
  if (rx.hdr.rnr_retry != 7 && responder.rnr_tries > rx.hdr.rnr_retry) {
    // The requester has exhausted its RNR retries: its request fails.
    rx.block = Block::None;
    responder.rnr_tries = 0;
    rx.hdr_handled = true;
    rx.remaining = rx.hdr.len;
    rx.dest.clear();
    rx.dest_idx = 0;
    rx.cur.kind = Pending::Nak;
    rx.cur.syndrome = Syndrome::RnrRetryExceeded;
    return;
  }
  rx.block = Block::None;
}

}  // namespace softrdma

SOFTRDMA_API void softrdma_corrupt_next_recv(ibv_wc_opcode opcode, uint32_t byte_len) {
  using namespace softrdma;
  std::lock_guard lk(g_corrupt_mu);
  g_corrupt = true;
  g_corrupt_opcode = opcode;
  g_corrupt_len = byte_len;
}
