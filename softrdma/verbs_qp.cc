// Verbs: queue pairs (RC) and shared receive queues.
//
// The send side: ibv_post_send validates every work request as a device
// would (state, queue depth, SGE count, inline size, lkeys), numbers it with
// a PSN and hands the frame to the QP's connection, which writes it to the
// socket at once (the doorbell). A send completes when the responder
// acknowledges it, in posting order. The receive side lives in transport.cc.
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "counters.h"
#include "internal.h"
#include "registry.h"
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

Registry<Srq>& srqs() {
  static auto* r = new Registry<Srq>();
  return *r;
}

bool psnLe(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b) <= 0;
}

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

// The send queue's capabilities as rxe grants them: a send WQE holds
// max_send_sge entries of 16 bytes or max_inline_data bytes, whichever is
// larger, and both are granted at that size (at least one SGE). So a QP
// asked for one SGE and no inline data may send 16 bytes inline.
void grantSendCap(ibv_qp_cap& c) {
  uint32_t wqe = std::max(std::max(c.max_send_sge, 1u) * 16, c.max_inline_data);
  c.max_send_sge = std::min(wqe / 16, kMaxSge);
  c.max_inline_data = wqe;
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
      srqs().lockForFork();
      return;
    case ForkStep::Child:
      abandon(qpTable());  // the parent's QPs: unknown to the child's verbs
      nextQpn() = randomQpnBase();
      [[fallthrough]];
    case ForkStep::Parent:
      srqs().unlockAfterFork();
      qps_mu.unlock();
      return;
  }
}

Srq* findSrq(uint32_t id) {
  return srqs().find(id >> 8, id);
}

// ------------------------------------------------------------ RecvQueue

void RecvQueue::init(uint32_t wr, uint32_t sge) {
  max_wr = wr;
  max_sge = sge;
  ring.assign(wr, RecvWqe{});
  sges.assign(static_cast<size_t>(wr) * (sge ? sge : 1), ibv_sge{});
}

int RecvQueue::post(ibv_recv_wr* wr, ibv_recv_wr** bad) {
  for (ibv_recv_wr* w = wr; w != nullptr; w = w->next) {
    if (w->num_sge < 0 || static_cast<uint32_t>(w->num_sge) > max_sge) {
      *bad = w;
      return EINVAL;
    }
    if (count == max_wr) {
      *bad = w;
      return ENOMEM;
    }
    size_t slot = (head + count) % max_wr;
    RecvWqe& e = ring[slot];
    e.wr_id = w->wr_id;
    e.num_sge = static_cast<uint32_t>(w->num_sge);
    e.sge_off = static_cast<uint32_t>(slot * (max_sge ? max_sge : 1));
    if (w->num_sge > 0) memcpy(&sges[e.sge_off], w->sg_list, sizeof(ibv_sge) * w->num_sge);
    count++;
  }
  return 0;
}

bool RecvQueue::peek(RecvWqe& out, const ibv_sge*& sg) const {
  if (count == 0) return false;
  out = ring[head];
  sg = &sges[out.sge_off];
  return true;
}

bool RecvQueue::pop(RecvWqe& out, const ibv_sge*& sg) {
  if (count == 0) return false;
  out = ring[head];
  sg = &sges[out.sge_off];
  head = (head + 1) % max_wr;
  count--;
  return true;
}

// -------------------------------------------------------------- Qp core

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
  if (w.signaled || st != IBV_WC_SUCCESS) {
    ibv_wc wc{};
    wc.wr_id = w.wr_id;
    wc.status = st;
    wc.opcode = w.opcode;
    const bool fetched = w.opcode == IBV_WC_RDMA_READ || w.opcode == IBV_WC_COMP_SWAP ||
                         w.opcode == IBV_WC_FETCH_ADD;
    wc.byte_len = fetched ? w.byte_len : 0;
    wc.qp_num = qp.qp_num;
    if (!destroyed) scq->push(wc, false);
    sq_used -= 1 + unsignaled_done;
    unsignaled_done = 0;
  } else {
    unsignaled_done++;
  }
}

void Qp::completeSendsUpTo(uint32_t psn, ibv_wc_status status_at_psn, bool psn_failed) {
  while (!sq.empty() && sq.front().preset == IBV_WC_SUCCESS && psnLe(sq.front().psn, psn)) {
    SendWqe w = sq.front();
    sq.pop_front();
    if (psn_failed && w.psn == psn) {
      sendCompletion(w, status_at_psn);
      flushAll(IBV_WC_WR_FLUSH_ERR);
      return;
    }
    sendCompletion(w, IBV_WC_SUCCESS);
  }
  // A request that failed its local checks at post time completes, with
  // its error, once every request before it has.
  if (!sq.empty() && sq.front().preset != IBV_WC_SUCCESS) {
    SendWqe w = sq.front();
    sq.pop_front();
    sendCompletion(w, w.preset);
    flushAll(IBV_WC_WR_FLUSH_ERR);
  }
}

void Qp::flushAll(ibv_wc_status first_status) {
  setState(IBV_QPS_ERR);
  bool first = true;
  while (!sq.empty()) {
    SendWqe w = sq.front();
    sq.pop_front();
    sendCompletion(w, first ? first_status : IBV_WC_WR_FLUSH_ERR);
    first = false;
  }
  sq_used = 0;
  unsignaled_done = 0;
  sq_halted = false;
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
      sq.clear();
      sq_used = unsignaled_done = 0;
      sq_halted = false;
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
  if (n > qp.cap.max_send_wr - qp.sq_used) {
    *bad = wr;
    return ENOMEM;
  }
  return 0;
}

// A READ's (or an atomic's) local SGEs, kept for its response.
[[gnu::cold, gnu::noinline]] void keepReadSges(Qp* qp, const ibv_send_wr& w, SendWqe& e) {
  e.num_sge = static_cast<uint32_t>(w.num_sge);
  e.sge_off = qp->sq_slot * qp->cap.max_send_sge;
  qp->sq_slot = (qp->sq_slot + 1) % qp->cap.max_send_wr;
  if (w.num_sge > 0) memcpy(&qp->sq_sges[e.sge_off], w.sg_list, sizeof(ibv_sge) * w.num_sge);
}

// A request held back behind a failed one (or failed itself): completed
// with its error when it reaches the head of the queue.
[[gnu::cold, gnu::noinline]] void holdBack(Qp* qp, const SendWqe& e) {
  if (qp->sq.size() == 1) qp->completeSendsUpTo(e.psn - 1, IBV_WC_SUCCESS, false);
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
    if (qp->sq_used >= qp->cap.max_send_wr) return reject(w, ENOMEM);
    SendWqe e{};
    fillWqe(e, qp, *w, len);
    qp->sq_used++;
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
    e.psn = qp->next_psn++;
    if (fetching) keepReadSges(qp, *w, e);
    qp->sq.push_back(e);
    if (e.preset != IBV_WC_SUCCESS) qp->sq_halted = true;
    if (qp->sq_halted) {
      holdBack(qp, e);
      continue;  // not transmitted; later requests will be flushed
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
  qp->sq_sges.resize(static_cast<size_t>(qp->cap.max_send_wr) * qp->cap.max_send_sge);
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

SOFTRDMA_API ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* a) {
  if (pd == nullptr || a == nullptr || a->attr.max_wr == 0 || a->attr.max_wr > kMaxSrqWr ||
      a->attr.max_sge > kMaxSge) {
    errno = EINVAL;
    return nullptr;
  }
  if (contextDead(pd->context)) {
    errno = EIO;
    return nullptr;
  }
  auto* s = new Srq();
  s->srq.context = pd->context;
  s->srq.srq_context = a->srq_context;
  s->srq.pd = pd;
  pthread_mutex_init(&s->srq.mutex, nullptr);
  pthread_cond_init(&s->srq.cond, nullptr);
  s->rq.init(a->attr.max_wr, a->attr.max_sge ? a->attr.max_sge : 1);
  s->srq.handle = srqs().insert(s);
  toPd(pd)->users++;
  return &s->srq;
}

SOFTRDMA_API int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* a, int mask) {
  if (srq == nullptr || a == nullptr) return EINVAL;
  if (contextDead(srq->context)) return EIO;
  auto* s = reinterpret_cast<Srq*>(srq);
  std::lock_guard lk(s->mu);
  if (mask & IBV_SRQ_MAX_WR) {
    if (a->max_wr == 0 || a->max_wr > kMaxSrqWr || a->max_wr < s->rq.count) return EINVAL;
    RecvQueue nq;
    nq.init(a->max_wr, s->rq.max_sge);
    RecvWqe r;
    const ibv_sge* sg;
    while (s->rq.pop(r, sg)) {
      ibv_recv_wr w{};
      w.wr_id = r.wr_id;
      w.num_sge = static_cast<int>(r.num_sge);
      w.sg_list = const_cast<ibv_sge*>(sg);
      ibv_recv_wr* bad;
      nq.post(&w, &bad);
    }
    s->rq = std::move(nq);
  }
  if (mask & IBV_SRQ_LIMIT) {
    if (a->srq_limit > s->rq.max_wr) return EINVAL;
    s->limit = a->srq_limit;
  }
  return 0;
}

SOFTRDMA_API int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* a) {
  if (srq == nullptr || a == nullptr) return EINVAL;
  if (contextDead(srq->context)) return EIO;
  auto* s = reinterpret_cast<Srq*>(srq);
  std::lock_guard lk(s->mu);
  a->max_wr = s->rq.max_wr;
  a->max_sge = s->rq.max_sge;
  a->srq_limit = s->limit;
  return 0;
}

SOFTRDMA_API int ibv_destroy_srq(ibv_srq* srq) {
  if (srq == nullptr) return EINVAL;
  auto* s = reinterpret_cast<Srq*>(srq);
  if (s->qps.load() != 0) return EBUSY;
  srqs().erase(srq->handle >> 8, s);
  toPd(srq->pd)->users--;
  delete s;
  return 0;
}
