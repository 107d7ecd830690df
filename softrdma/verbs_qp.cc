// Verbs: queue pairs — the process's QP table and QP numbers, and the
// calls that create, modify, query and destroy a QP. What a QP does lives
// in qp.cc (its state and completions) and post_send.cc (the send path);
// the receive side in conn_rx.cc and conn_responder.cc.
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base.h"
#include "conn.h"
#include "cq.h"
#include "device.h"
#include "fork_hooks.h"
#include "manual_qp.h"
#include "pd_mr.h"
#include "qp.h"
#include "ud.h"

namespace softrdma {

void bindPendingConn(const std::shared_ptr<Qp>& qp);

namespace {

std::mutex qps_mu;
std::unordered_map<uint32_t, std::shared_ptr<Qp>>& qpTable() {
  static auto* t = new std::unordered_map<uint32_t, std::shared_ptr<Qp>>();
  return *t;
}

// QP numbers start at a random point in each process (and again in a forked
// child), so that processes on one machine rarely share one.
uint32_t randomQpnBase() {
  uint32_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r)
    r = static_cast<uint32_t>(getpid()) * 2654435761u;
  return r & 0xffff00;
}

std::atomic<uint32_t>& nextQpn() {
  static std::atomic<uint32_t> next{randomQpnBase()};
  return next;
}

uint32_t allocQpn() {
  for (;;) {
    uint32_t n = nextQpn()++ & 0xffffff;
    if (n > 1) return n;
  }
}

// The send queue's capabilities as rxe grants them: a send WQE holds
// max_send_sge entries of 16 bytes or max_inline_data bytes, whichever is
// larger, and both are granted at that size (at least one SGE). So a QP
// asked for one SGE and no inline data may send 16 bytes inline.
void grantSendCap(ibv_qp_cap& c) {
  uint32_t wqe = std::max(std::max(c.max_send_sge, 1u) * 16, c.max_inline_data);
  c.max_send_sge = std::min(wqe / 16, kMaxSge);
  c.max_inline_data = wqe;
}

}  // namespace

std::shared_ptr<Qp> qpRef(ibv_qp* q) {
  std::lock_guard lk(qps_mu);
  auto it = qpTable().find(q->qp_num);
  return it != qpTable().end() && &it->second->qp == q ? it->second : nullptr;
}

std::shared_ptr<Qp> findQpByNum(uint32_t qpn) {
  std::lock_guard lk(qps_mu);
  auto it = qpTable().find(qpn);
  return it != qpTable().end() ? it->second : nullptr;
}

std::vector<std::shared_ptr<Qp>> allQps() {
  std::lock_guard lk(qps_mu);
  std::vector<std::shared_ptr<Qp>> v;
  v.reserve(qpTable().size());
  for (auto& [n, q] : qpTable())
    v.push_back(q);
  return v;
}

void forkQps(ForkStep s) {
  switch (s) {
    case ForkStep::Prepare:
      qps_mu.lock();
      return;
    case ForkStep::Child:
      abandon(qpTable());  // the parent's QPs: unknown to the child's verbs
      nextQpn() = randomQpnBase();
      [[fallthrough]];
    case ForkStep::Parent:
      qps_mu.unlock();
      return;
  }
}

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* a) {
  if (pd == nullptr || a == nullptr || a->send_cq == nullptr || a->recv_cq == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UD && a->qp_type != IBV_QPT_UC) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (contextDead(pd->context)) {
    errno = EIO;
    return nullptr;
  }
  ibv_qp_cap c = a->cap;  // becomes what is granted
  if (c.max_send_wr > kMaxQpWr || c.max_recv_wr > kMaxQpWr || c.max_send_sge > kMaxSge ||
      c.max_recv_sge > kMaxSge || c.max_inline_data > kMaxInline) {
    errno = EINVAL;
    return nullptr;
  }
  if (a->srq == nullptr) c.max_recv_wr = c.max_recv_wr ? c.max_recv_wr : 1;
  c.max_send_wr = c.max_send_wr ? c.max_send_wr : 1;
  grantSendCap(c);
  auto qp = std::make_shared<Qp>();
  qp->self = qp;
  qp->qp.context = pd->context;
  qp->qp.qp_context = a->qp_context;
  qp->qp.pd = pd;
  qp->qp.send_cq = a->send_cq;
  qp->qp.recv_cq = a->recv_cq;
  qp->qp.srq = a->srq;
  qp->qp.qp_num = allocQpn();
  qp->qp.qp_type = a->qp_type;
  qp->qp.state = IBV_QPS_RESET;
  pthread_mutex_init(&qp->qp.mutex, nullptr);
  pthread_cond_init(&qp->qp.cond, nullptr);
  qp->cap = c;  // granted, and written back to the caller
  qp->sq_sig_all = a->sq_sig_all != 0;
  qp->scq = reinterpret_cast<Cq*>(a->send_cq);
  qp->rcq = reinterpret_cast<Cq*>(a->recv_cq);
  qp->srq = reinterpret_cast<Srq*>(a->srq);
  qp->pd = toPd(pd);
  qp->sq.sges.resize(static_cast<size_t>(qp->cap.max_send_wr) * qp->cap.max_send_sge);
  if (qp->srq == nullptr) qp->rq.init(c.max_recv_wr, c.max_recv_sge);
  qp->setState(IBV_QPS_RESET);
  if (a->qp_type != IBV_QPT_RC) {
    if (int e = udOpen(qp); e != 0) {
      errno = e;
      return nullptr;
    }
  }
  {
    // Checked again where removal looks for QPs (allQps): a QP is either
    // flushed by the removal or never created.
    std::lock_guard lk(qps_mu);
    if (contextDead(pd->context)) {
      if (qp->ud) udClose(*qp);
      errno = EIO;
      return nullptr;
    }
    qpTable()[qp->qp.qp_num] = qp;
  }
  qp->scq->qps++;
  qp->rcq->qps++;
  if (qp->srq != nullptr) qp->srq->qps++;
  qp->pd->users++;
  a->cap = c;
  return &qp->qp;
}

SOFTRDMA_API int ibv_modify_qp(ibv_qp* q, ibv_qp_attr* a, int mask) {
  if (q == nullptr || a == nullptr) return EINVAL;
  if (contextDead(q->context)) return EIO;
  auto qp = qpRef(q);
  if (!qp) return EINVAL;
  int rc;
  bool to_rtr, to_err, to_reset;
  std::shared_ptr<Conn> conn;
  {
    std::lock_guard lk(qp->mu);
    ibv_qp_state from = qp->qp.state;
    rc = qp->modify(a, mask);
    to_rtr = rc == 0 && from != IBV_QPS_RTR && qp->qp.state == IBV_QPS_RTR;
    to_err = rc == 0 && qp->qp.state == IBV_QPS_ERR;
    to_reset = rc == 0 && from != IBV_QPS_RESET && qp->qp.state == IBV_QPS_RESET;
    conn = qp->conn;
  }
  if (to_rtr && qp->qp.qp_type == IBV_QPT_RC) bindPendingConn(qp);
  if (to_err && conn) conn->kick();  // held requests are now discarded
  if (to_reset && conn) manualReset(qp);
  return rc;
}

SOFTRDMA_API int ibv_query_qp(ibv_qp* q, ibv_qp_attr* a, int, ibv_qp_init_attr* init) {
  if (q == nullptr || a == nullptr) return EINVAL;
  if (contextDead(q->context)) return EIO;
  auto* qp = reinterpret_cast<Qp*>(q);
  std::lock_guard lk(qp->mu);
  *a = qp->attr;
  a->qp_state = qp->qp.state;
  a->cur_qp_state = qp->qp.state;
  a->cap = qp->cap;
  if (init != nullptr) {
    memset(init, 0, sizeof *init);
    init->qp_context = q->qp_context;
    init->send_cq = q->send_cq;
    init->recv_cq = q->recv_cq;
    init->srq = q->srq;
    init->cap = qp->cap;
    init->qp_type = q->qp_type;
    init->sq_sig_all = qp->sq_sig_all;
  }
  return 0;
}

SOFTRDMA_API int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) {
  return 1;
}

SOFTRDMA_API int ibv_destroy_qp(ibv_qp* q) {
  if (q == nullptr) return EINVAL;
  auto qp = qpRef(q);
  if (!qp) return EINVAL;
  std::shared_ptr<Conn> conn;
  {
    std::lock_guard lk(qp->mu);
    qp->destroyed = true;
    conn = std::move(qp->conn);
    qp->scq->clean(q->qp_num);
    qp->rcq->clean(q->qp_num);
    qp->scq->qps--;
    qp->rcq->qps--;
    if (qp->srq != nullptr) qp->srq->qps--;
    qp->pd->users--;
  }
  if (conn) conn->bindQp(nullptr);
  if (qp->ud) udClose(*qp);
  manualForget(q->qp_num);
  std::lock_guard lk(qps_mu);
  qpTable().erase(q->qp_num);
  return 0;
}
