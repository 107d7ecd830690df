// Unreliable datagram queue pairs: posting sends, and the state machine's
// required attributes (ud.h).
//
// A post runs in three steps under the QP's tx_mu (so that one QP's
// datagrams leave and complete in posting order): the work requests are
// checked and their send-queue slots taken under the QP's lock; the
// datagrams are written without it (a receiver in this process needs that
// lock to take them); the completions are written under it again.
#include <cerrno>
#include <cstring>
#include <vector>

#include "counters.h"
#include "cq.h"
#include "pd_mr.h"
#include "qp.h"
#include "ud.h"

namespace softrdma {

namespace {

struct UdJob {
  SendWqe e;
  ibv_wc_status st;
  bool transmit;
  bool multicast;
  uint32_t dest;
  UdHeader h;
  const ibv_sge* sg;
  int num_sge;
};

// The checks of a UD or UC work request at post time (rxe's; a UD AH must
// be live, a UC message fit a datagram): EINVAL or 0.
int checkUdWr(const Qp& qp, const ibv_send_wr* w) {
  const bool uc = qp.qp.qp_type == IBV_QPT_UC;
  const bool send = w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM;
  const bool write = w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (!send && !(uc && write)) return EINVAL;
  if (w->num_sge < 0 || static_cast<uint32_t>(w->num_sge) > qp.cap.max_send_sge) return EINVAL;
  if (!uc && liveAh(w->wr.ud.ah) == nullptr) return EINVAL;
  uint64_t len = 0;
  for (int i = 0; i < w->num_sge; i++)
    len += w->sg_list[i].length;
  if ((w->send_flags & IBV_SEND_INLINE) && len > qp.cap.max_inline_data) return EINVAL;
  if (uc && len > kUcMaxMessage) return EINVAL;
  return 0;
}

bool sgesOk(const Qp& qp, const ibv_send_wr* w) {
  if (w->send_flags & IBV_SEND_INLINE) return true;
  for (int i = 0; i < w->num_sge; i++) {
    const ibv_sge& s = w->sg_list[i];
    if (s.length == 0) continue;
    Mr* mr = findMrByKey(s.lkey);
    if (mr == nullptr || mr->pd != qp.pd || !mr->covers(s.addr, s.length)) return false;
  }
  return true;
}

// `ah` is null for UC (the QP's own destination).
void fillHeader(const Qp& qp, const ibv_send_wr* w, const Ah* ah, uint64_t len, UdHeader& h) {
  h = UdHeader{};
  h.magic = kUdMagic;
  h.src_qpn = qp.qp.qp_num;
  h.opcode = static_cast<uint32_t>(w->opcode) | static_cast<uint32_t>(qp.qp.qp_type) << 16;
  h.with_imm = w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  h.imm = h.with_imm ? w->imm_data : 0;
  h.len = static_cast<uint32_t>(len);
  h.solicited = (w->send_flags & IBV_SEND_SOLICITED) != 0;
  h.netns = netnsId();
  if (ah == nullptr) {
    h.dest_qpn = qp.attr.dest_qp_num;
    h.raddr = w->wr.rdma.remote_addr;
    h.rkey = w->wr.rdma.rkey;
    return;
  }
  h.dest_qpn = w->wr.ud.remote_qpn & 0xffffff;
  h.qkey = w->wr.ud.remote_qkey;  // as rxe: the WR's qkey, whatever its high bit
  h.hop_limit = ah->attr.grh.hop_limit;
  h.traffic_class = ah->attr.grh.traffic_class;
  h.flow_label = ah->attr.grh.flow_label;
  memcpy(h.sgid, &ah->sgid, 16);
  memcpy(h.dgid, ah->attr.grh.dgid.raw, 16);
}

// Checks every WR and takes its slot (qp.mu held); fills `jobs`. A WR
// that fails its local checks moves the QP to error: the ones after it flush.
int reserve(Qp& qp, ibv_send_wr* wr, ibv_send_wr** bad, bool all_or_nothing,
            std::vector<UdJob>& jobs) {
  ibv_qp_state st = qp.qp.state;
  if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR) {
    *bad = wr;
    return EINVAL;
  }
  if (all_or_nothing) {
    uint32_t n = 0;
    for (ibv_send_wr* w = wr; w != nullptr; w = w->next, n++) {
      if (int rc = checkUdWr(qp, w); rc != 0) {
        *bad = w;
        return rc;
      }
    }
    if (n > qp.cap.max_send_wr - qp.sq.used) {
      *bad = wr;
      return ENOMEM;
    }
  }
  bool failed = st == IBV_QPS_ERR || st == IBV_QPS_SQE;
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
    int rc = checkUdWr(qp, w);
    if (rc == 0 && qp.sq.used >= qp.cap.max_send_wr) rc = ENOMEM;
    if (rc != 0) {
      *bad = w;
      return rc;
    }
    qp.sq.used++;
    UdJob j{};
    j.e.wr_id = w->wr_id;
    j.e.opcode = IBV_WC_SEND;
    j.e.signaled = qp.sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED);
    j.st = failed ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS;
    if (!failed && !sgesOk(qp, w)) {
      j.st = IBV_WC_LOC_PROT_ERR;
      failed = true;
    }
    const Ah* ah = qp.qp.qp_type == IBV_QPT_UD ? liveAh(w->wr.ud.ah) : nullptr;
    uint64_t len = 0;
    for (int i = 0; i < w->num_sge; i++)
      len += w->sg_list[i].length;
    // UD longer than the MTU: nothing leaves, and no error (C10-93.1.1).
    j.transmit = j.st == IBV_WC_SUCCESS &&
                 (ah == nullptr || (len <= kUdMtu && (ah->multicast || ah->reachable)));
    j.multicast = ah != nullptr && ah->multicast;
    if (j.transmit) fillHeader(qp, w, ah, len, j.h);
    j.dest = j.h.dest_qpn;
    if (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
      j.e.opcode = IBV_WC_RDMA_WRITE;
    j.sg = w->sg_list;
    j.num_sge = w->num_sge;
    jobs.push_back(j);
  }
  return 0;
}

// A send's completion (qp.mu held); unsignaled ones hold their slot until
// a later signaled completion, as on RC.
void complete(Qp& qp, const UdJob& j) {
  ibv_wc_status st = j.st;
  if (st == IBV_WC_SUCCESS && qp.qp.state == IBV_QPS_ERR) st = IBV_WC_WR_FLUSH_ERR;
  if (st == IBV_WC_SUCCESS && j.e.opcode == IBV_WC_SEND) count(Counter::RdmaSends);
  if (st == IBV_WC_LOC_PROT_ERR) qp.flushAll(IBV_WC_WR_FLUSH_ERR);
  if (!j.e.signaled && st == IBV_WC_SUCCESS) {
    qp.sq.unsignaled_done++;
    return;
  }
  ibv_wc wc{};
  wc.wr_id = j.e.wr_id;
  wc.status = st;
  wc.opcode = j.e.opcode;
  wc.qp_num = qp.qp.qp_num;
  if (!qp.destroyed) qp.scq->push(wc, false);
  uint32_t held = 1 + qp.sq.unsignaled_done;
  qp.sq.used -= std::min(qp.sq.used, held);
  qp.sq.unsignaled_done = 0;
}

}  // namespace

int udPostSend(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad, bool all_or_nothing) {
  std::lock_guard tx(qp->ud->tx_mu);
  static thread_local std::vector<UdJob> jobs;
  jobs.clear();
  int rc;
  {
    std::lock_guard lk(qp->mu);
    rc = reserve(*qp, wr, bad, all_or_nothing, jobs);
  }
  int fd = qp->ud->ep->fd;
  for (const UdJob& j : jobs) {
    if (!j.transmit) continue;
    if (j.multicast)
      mcSend(fd, j.h, j.sg, j.num_sge, nullptr);
    else
      udDeliver(fd, j.h, j.sg, j.num_sge, nullptr, j.dest);
  }
  std::lock_guard lk(qp->mu);
  for (const UdJob& j : jobs)
    complete(*qp, j);
  return rc;
}

// Required attributes of each UD and UC transition (IB spec 11.2.4.2; the
// kernel's qp_state_table): RESET→INIT needs the P_Key index, the port and
// the Q_Key (UD) or the access flags (UC); RTR needs nothing more (UD) or
// the path (UC); RTS the send PSN.
bool udTransitionOk(ibv_qp_type type, ibv_qp_state from, ibv_qp_state to, int mask) {
  auto has = [&](int m) { return (mask & m) == m; };
  const bool uc = type == IBV_QPT_UC;
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return true;
  switch (from) {
    case IBV_QPS_RESET:
      return to == IBV_QPS_INIT &&
             has(IBV_QP_PKEY_INDEX | IBV_QP_PORT | (uc ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY));
    case IBV_QPS_INIT:
      if (to == IBV_QPS_INIT) return true;
      return to == IBV_QPS_RTR &&
             (!uc || has(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN));
    case IBV_QPS_RTR:
      return to == IBV_QPS_RTS && has(IBV_QP_SQ_PSN);
    case IBV_QPS_RTS:
    case IBV_QPS_SQD:
      return to == IBV_QPS_RTS || to == IBV_QPS_SQD;
    case IBV_QPS_SQE:
      return to == IBV_QPS_RTS;
    default:
      return false;
  }
}

}  // namespace softrdma
