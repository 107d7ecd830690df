// A QP's state machine and its send completions: the transitions
// ibv_modify_qp allows, completing sends in order as the responder
// acknowledges them, and flushing everything when the QP goes to error.
#include <cerrno>
#include <cstring>

#include "base.h"
#include "conn.h"
#include "counters.h"
#include "cq.h"
#include "device.h"
#include "qp.h"
#include "ud.h"

namespace softrdma {

namespace {

bool psnLe(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b) <= 0;
}

}  // namespace

void Qp::setState(ibv_qp_state s) {
  qp.state = s;
  attr.qp_state = s;
  attr.cur_qp_state = s;
}

// The device counters a completion moves (counters.h).
static void countCompletion(ibv_wc_opcode op, ibv_wc_status st) {
  if (st == IBV_WC_SUCCESS && op == IBV_WC_SEND) count(Counter::RdmaSends);
  if (st == IBV_WC_RNR_RETRY_EXC_ERR) count(Counter::RnrRetryExceeded);
  if (st == IBV_WC_RETRY_EXC_ERR) count(Counter::RetryExceeded);
}

void Qp::sendCompletion(const SendWqe& w, ibv_wc_status st) {
  countCompletion(w.opcode, st);
  if (!w.injected && (w.signaled || st != IBV_WC_SUCCESS)) {
    ibv_wc wc{};
    wc.wr_id = w.wr_id;
    wc.status = st;
    wc.opcode = w.opcode;
    const bool fetched = w.opcode == IBV_WC_RDMA_READ || w.opcode == IBV_WC_COMP_SWAP ||
                         w.opcode == IBV_WC_FETCH_ADD;
    wc.byte_len = fetched ? w.byte_len : 0;
    wc.qp_num = qp.qp_num;
    if (!destroyed) scq->push(wc, false);
    sq.used -= 1 + sq.unsignaled_done;
    sq.unsignaled_done = 0;
  } else {
    sq.unsignaled_done++;
  }
}

void Qp::completeSendsUpTo(uint32_t psn, ibv_wc_status status_at_psn, bool psn_failed) {
  while (!sq.wqes.empty() && sq.wqes.front().preset == IBV_WC_SUCCESS &&
         psnLe(sq.wqes.front().psn, psn)) {
    SendWqe w = sq.wqes.front();
    sq.wqes.pop_front();
    if (psn_failed && w.psn == psn) {
      sendCompletion(w, status_at_psn);
      flushAll(IBV_WC_WR_FLUSH_ERR);
      return;
    }
    sendCompletion(w, IBV_WC_SUCCESS);
  }
  // A request that failed its local checks at post time completes, with
  // its error, once every request before it has.
  if (!sq.wqes.empty() && sq.wqes.front().preset != IBV_WC_SUCCESS) {
    SendWqe w = sq.wqes.front();
    sq.wqes.pop_front();
    sendCompletion(w, w.preset);
    flushAll(IBV_WC_WR_FLUSH_ERR);
  }
}

void Qp::flushAll(ibv_wc_status first_status) {
  setState(IBV_QPS_ERR);
  bool first = true;
  while (!sq.wqes.empty()) {
    SendWqe w = sq.wqes.front();
    sq.wqes.pop_front();
    sendCompletion(w, first ? first_status : IBV_WC_WR_FLUSH_ERR);
    first = false;
  }
  sq.used = 0;
  sq.unsignaled_done = 0;
  sq.halted = false;
  if (conn) conn->abortData();
  if (srq != nullptr) {
    raiseAsync(qp.context, IBV_EVENT_QP_LAST_WQE_REACHED, kAsyncQp, qp.qp_num);
    return;
  }
  RecvWqe r;
  const ibv_sge* sg;
  while (rq.pop(r, sg)) {
    ibv_wc wc{};
    wc.wr_id = r.wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qp.qp_num;
    if (!destroyed) rcq->push(wc, false);
  }
}

// Required attributes of each RC transition (IB spec 11.2.4.2; the kernel's
// ib_modify_qp_is_ok).
static bool transitionOk(ibv_qp_state from, ibv_qp_state to, int mask) {
  auto has = [&](int m) { return (mask & m) == m; };
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return true;
  switch (from) {
    case IBV_QPS_RESET:
      return to == IBV_QPS_INIT && has(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    case IBV_QPS_INIT:
      if (to == IBV_QPS_INIT) return true;
      return to == IBV_QPS_RTR &&
             has(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    case IBV_QPS_RTR:
      return to == IBV_QPS_RTS && has(IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT |
                                      IBV_QP_RNR_RETRY | IBV_QP_TIMEOUT);
    case IBV_QPS_RTS:
    case IBV_QPS_SQD:
      return to == IBV_QPS_RTS || to == IBV_QPS_SQD;
    case IBV_QPS_SQE:
      return to == IBV_QPS_RTS;
    default:
      return false;
  }
}

int Qp::modify(ibv_qp_attr* a, int mask) {
  ibv_qp_state from = qp.state;
  ibv_qp_state to = (mask & IBV_QP_STATE) ? a->qp_state : from;
  if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != from) return EINVAL;
  bool ok = qp.qp_type == IBV_QPT_RC ? transitionOk(from, to, mask)
                                     : udTransitionOk(qp.qp_type, from, to, mask);
  if (!ok) return EINVAL;
  if ((mask & IBV_QP_PORT) && a->port_num != 1) return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > kMaxRdAtom) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > kMaxRdAtom) return EINVAL;
  if ((mask & (IBV_QP_RETRY_CNT)) && a->retry_cnt > 7) return EINVAL;
  if ((mask & (IBV_QP_RNR_RETRY)) && a->rnr_retry > 7) return EINVAL;
  if (mask & IBV_QP_ACCESS_FLAGS) attr.qp_access_flags = a->qp_access_flags;
  if (mask & IBV_QP_PKEY_INDEX) attr.pkey_index = a->pkey_index;
  if (mask & IBV_QP_QKEY) attr.qkey = a->qkey;
  if (mask & IBV_QP_PORT) attr.port_num = a->port_num;
  if (mask & IBV_QP_AV) attr.ah_attr = a->ah_attr;
  if (mask & IBV_QP_PATH_MTU) attr.path_mtu = a->path_mtu;
  if (mask & IBV_QP_DEST_QPN) attr.dest_qp_num = a->dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) attr.rq_psn = a->rq_psn;
  if (mask & IBV_QP_SQ_PSN) attr.sq_psn = a->sq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) attr.max_dest_rd_atomic = a->max_dest_rd_atomic;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) attr.max_rd_atomic = a->max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) attr.min_rnr_timer = a->min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) attr.timeout = a->timeout;
  if (mask & IBV_QP_RETRY_CNT) attr.retry_cnt = a->retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) attr.rnr_retry = a->rnr_retry;
  if (mask & IBV_QP_CAP) return EINVAL;  // resizing queues is not supported (nor by most HCAs)
  if (to == from && to != IBV_QPS_ERR) return 0;
  switch (to) {
    case IBV_QPS_RESET:
      sq.wqes.clear();
      sq.used = sq.unsignaled_done = 0;
      sq.halted = false;
      rq.head = rq.count = 0;
      scq->clean(qp.qp_num);
      rcq->clean(qp.qp_num);
      setState(to);
      break;
    case IBV_QPS_ERR:
      flushAll(IBV_WC_WR_FLUSH_ERR);
      break;
    default:
      setState(to);
  }
  return 0;
}

// -------------------------------------------------------- data path ops

}  // namespace softrdma
