// Unreliable connected (UC) queue pairs: the receive side. UC messages use
// the UD datagram transport (ud.h): each message is one datagram to the
// socket of the QP's destination (attr.dest_qp_num), sent and completed at
// once by ud_send.cc, with no acknowledgement and no retry.
//
// As rxe's responder does for UC, whatever cannot be placed is dropped
// silently and nothing reaches the sender: a QP not in RTR or RTS, a SEND
// (or WRITE with immediate) without a receive WQE, a message longer than
// the receive, an RDMA WRITE to memory that its rkey, the MR's or the QP's
// access flags do not allow. A SEND fills the receive WQE without a GRH.
#include <cstring>

#include "counters.h"
#include "cq.h"
#include "pd_mr.h"
#include "qp.h"
#include "ud.h"

namespace softrdma {

namespace {

bool takeRecv(Qp& q, RecvWqe& w, const ibv_sge*& sg, uint64_t need) {
  RecvQueue* rq = &q.rq;
  std::unique_lock<std::mutex> sl;
  if (q.srq != nullptr) {
    sl = std::unique_lock(q.srq->mu);
    rq = &q.srq->rq;
  }
  if (!rq->peek(w, sg)) return false;
  uint64_t room = 0;
  for (uint32_t i = 0; i < w.num_sge; i++)
    room += sg[i].length;
  if (room < need) return false;  // class D: dropped, the WQE stays
  rq->pop(w, sg);
  return true;
}

bool writeAllowed(const Qp& q, const UdHeader& h) {
  if (!(q.attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE)) return false;
  if (h.len == 0) return true;
  Mr* mr = findMrByKey(h.rkey);
  return mr != nullptr && mr->pd == q.pd && (mr->access & IBV_ACCESS_REMOTE_WRITE) &&
         mr->covers(h.raddr, h.len);
}

bool scatter(const RecvWqe& w, const ibv_sge* sg, const uint8_t* p, uint32_t len) {
  for (uint32_t i = 0; i < w.num_sge && len > 0; i++) {
    if (sg[i].length == 0) continue;
    Mr* mr = findMrByKey(sg[i].lkey);
    if (mr == nullptr || !(mr->access & IBV_ACCESS_LOCAL_WRITE) ||
        !mr->covers(sg[i].addr, sg[i].length))
      return false;
    uint32_t k = std::min(len, sg[i].length);
    memcpy(reinterpret_cast<void*>(sg[i].addr), p, k);
    p += k;
    len -= k;
  }
  return true;
}

}  // namespace

void ucReceive(Qp& q, const UdHeader& h, const uint8_t* payload) {
  ibv_qp_state st = q.qp.state;
  if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) return;
  if (h.opcode >> 16 != IBV_QPT_UC || h.dest_qpn != q.qp.qp_num || h.netns != netnsId()) return;
  count(Counter::UdAccepted);
  const auto op = static_cast<ibv_wr_opcode>(h.opcode & 0xffff);
  const bool write = op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM;
  RecvWqe w{};
  const ibv_sge* sg = nullptr;
  const bool consumes = op != IBV_WR_RDMA_WRITE;
  if (write && !writeAllowed(q, h)) return;
  if (consumes && !takeRecv(q, w, sg, write ? 0 : h.len)) return;
  ibv_wc wc{};
  wc.wr_id = w.wr_id;
  wc.qp_num = q.qp.qp_num;
  wc.src_qp = h.src_qpn;
  wc.byte_len = h.len;
  wc.opcode = write ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
  if (write) {
    if (h.len > 0) memcpy(reinterpret_cast<void*>(h.raddr), payload, h.len);
  } else if (!scatter(w, sg, payload, h.len)) {
    wc.status = IBV_WC_LOC_QP_OP_ERR;  // a malformed WQE: class A, the QP goes to error
    q.rcq->push(wc, h.solicited != 0);
    q.flushAll(IBV_WC_WR_FLUSH_ERR);
    return;
  }
  if (!consumes) return;
  if (h.with_imm) {
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.imm_data = h.imm;
  }
  count(Counter::RdmaRecvs);
  q.rcq->push(wc, h.solicited != 0);
}

}  // namespace softrdma
