// Verbs: extended queue pairs (ibv_create_qp_ex) and the ibv_wr_* post API.
//
// The inline ibv_wr_* functions of <infiniband/verbs.h> call through the
// function pointers of struct ibv_qp_ex, which ibv_qp_to_qp_ex returns for a
// QP made by ibv_create_qp_ex. As in rxe, only the builders asked for in
// send_ops_flags are set: on RC QPs rxe's set less IBV_QP_EX_WITH_ATOMIC_WRITE,
// which is refused at creation with EOPNOTSUPP (the memory-window builders
// are in mw.cc). The atomic builders check nothing, as rxe's:
// a misaligned remote address fails at the responder (atomics.cc).
//
// Between ibv_wr_start and ibv_wr_complete the QP's wr_mu is held (the
// provider's critical section) and the work requests are collected in the
// QP's batch, inline data copied at once. ibv_wr_complete posts the batch
// through the same path as ibv_post_send, all or nothing: an error found by a
// builder, a setter or the checks of posting aborts the whole batch.
// Errors are rxe's: ENOSPC for a full queue, too many SGEs or too much inline
// data; EINVAL for the rest (a QP not in RTS, a setter without a builder).
#include <cerrno>
#include <cstring>

#include "base.h"
#include "context_ops.h"
#include "mw.h"
#include "qp.h"

namespace softrdma {

namespace {

constexpr uint32_t kQpInitMaskSupported =
    IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
constexpr uint64_t kRcSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                                IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                                IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV |
                                IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;
constexpr uint64_t kUdSendOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;  // rxe's
// rxe's UC operations less memory windows and invalidation.
constexpr uint64_t kUcSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

uint64_t sendOpsOf(ibv_qp_type t) {
  if (t == IBV_QPT_UD) return kUdSendOps;
  return t == IBV_QPT_UC ? kUcSendOps : kRcSendOps;
}
// The flags a work request of this API takes from wr_flags (inline data
// comes through the inline setters).
constexpr unsigned kWrFlags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_FENCE;

Qp* toQp(ibv_qp_ex* x) {
  return reinterpret_cast<Qp*>(x);
}

void fail(WrBatch& b, int err) {
  if (b.err == 0) b.err = err;
}

PendingWr& build(ibv_qp_ex* x, ibv_wr_opcode op) {
  WrBatch& b = toQp(x)->batch;
  PendingWr p{};
  p.wr.wr_id = x->wr_id;
  p.wr.opcode = op;
  p.wr.send_flags = x->wr_flags & kWrFlags;
  b.wrs.push_back(p);
  return b.wrs.back();
}

// The work request a setter applies to: the last one built.
PendingWr* last(Qp* qp) {
  WrBatch& b = qp->batch;
  if (b.wrs.empty()) {
    fail(b, EINVAL);
    return nullptr;
  }
  return &b.wrs.back();
}

void wrSend(ibv_qp_ex* x) {
  build(x, IBV_WR_SEND);
}

void wrSendImm(ibv_qp_ex* x, __be32 imm) {
  build(x, IBV_WR_SEND_WITH_IMM).wr.imm_data = imm;
}

void wrRdmaWrite(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr) {
  PendingWr& p = build(x, IBV_WR_RDMA_WRITE);
  p.wr.wr.rdma.remote_addr = remote_addr;
  p.wr.wr.rdma.rkey = rkey;
}

void wrRdmaWriteImm(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr, __be32 imm) {
  PendingWr& p = build(x, IBV_WR_RDMA_WRITE_WITH_IMM);
  p.wr.wr.rdma.remote_addr = remote_addr;
  p.wr.wr.rdma.rkey = rkey;
  p.wr.imm_data = imm;
}

void wrRdmaRead(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr) {
  PendingWr& p = build(x, IBV_WR_RDMA_READ);
  p.wr.wr.rdma.remote_addr = remote_addr;
  p.wr.wr.rdma.rkey = rkey;
}

void wrAtomicCmpSwp(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
                    uint64_t swap) {
  PendingWr& p = build(x, IBV_WR_ATOMIC_CMP_AND_SWP);
  p.wr.wr.atomic.remote_addr = remote_addr;
  p.wr.wr.atomic.rkey = rkey;
  p.wr.wr.atomic.compare_add = compare;
  p.wr.wr.atomic.swap = swap;
}

void wrAtomicFetchAdd(ibv_qp_ex* x, uint32_t rkey, uint64_t remote_addr, uint64_t add) {
  PendingWr& p = build(x, IBV_WR_ATOMIC_FETCH_AND_ADD);
  p.wr.wr.atomic.remote_addr = remote_addr;
  p.wr.wr.atomic.rkey = rkey;
  p.wr.wr.atomic.compare_add = add;
}

// UD: the destination of the last work request built.
void wrSetUdAddr(ibv_qp_ex* x, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  PendingWr* p = last(toQp(x));
  if (p == nullptr) return;
  p->wr.wr.ud.ah = ah;
  p->wr.wr.ud.remote_qpn = remote_qpn;
  p->wr.wr.ud.remote_qkey = remote_qkey;
}

void wrSetSge(ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t length) {
  Qp* qp = toQp(x);
  PendingWr* p = last(qp);
  if (p == nullptr) return;
  p->inline_data = false;
  p->num_sge = 0;
  if (length == 0) return;  // no data (as rxe: the SGE is not recorded)
  p->sge_off = static_cast<uint32_t>(qp->batch.sges.size());
  p->num_sge = 1;
  qp->batch.sges.push_back({addr, length, lkey});
}

void wrSetSgeList(ibv_qp_ex* x, size_t num_sge, const ibv_sge* sg_list) {
  Qp* qp = toQp(x);
  PendingWr* p = last(qp);
  if (p == nullptr) return;
  if (num_sge > qp->cap.max_send_sge) return fail(qp->batch, ENOSPC);
  p->inline_data = false;
  p->sge_off = static_cast<uint32_t>(qp->batch.sges.size());
  p->num_sge = static_cast<uint32_t>(num_sge);
  qp->batch.sges.insert(qp->batch.sges.end(), sg_list, sg_list + num_sge);
}

void wrSetInlineDataList(ibv_qp_ex* x, size_t num_buf, const ibv_data_buf* bufs) {
  Qp* qp = toQp(x);
  PendingWr* p = last(qp);
  if (p == nullptr) return;
  size_t total = 0;
  for (size_t i = 0; i < num_buf; i++)
    total += bufs[i].length;
  if (total > qp->cap.max_inline_data) return fail(qp->batch, ENOSPC);
  std::vector<uint8_t>& data = qp->batch.inline_data;
  p->inline_data = true;
  p->num_sge = 0;
  p->inline_off = static_cast<uint32_t>(data.size());
  p->inline_len = static_cast<uint32_t>(total);
  for (size_t i = 0; i < num_buf; i++) {
    const auto* from = static_cast<const uint8_t*>(bufs[i].addr);
    data.insert(data.end(), from, from + bufs[i].length);  // the caller may reuse it at once
  }
}

void wrSetInlineData(ibv_qp_ex* x, void* addr, size_t length) {
  ibv_data_buf buf{addr, length};
  wrSetInlineDataList(x, 1, &buf);
}

void wrStart(ibv_qp_ex* x) {
  Qp* qp = toQp(x);
  qp->wr_mu.lock();
  qp->batch.clear();
}

int wrComplete(ibv_qp_ex* x) {
  Qp* qp = toQp(x);
  WrBatch& b = qp->batch;
  int rc = b.err;
  if (rc == 0 && !b.wrs.empty()) {
    // Inline data goes as one SGE into the batch's copy, posted with
    // IBV_SEND_INLINE: the post copies it again before returning.
    for (PendingWr& p : b.wrs) {
      if (!p.inline_data || p.inline_len == 0) continue;
      p.sge_off = static_cast<uint32_t>(b.sges.size());
      p.num_sge = 1;
      p.wr.send_flags |= IBV_SEND_INLINE;
      b.sges.push_back({reinterpret_cast<uint64_t>(&b.inline_data[p.inline_off]), p.inline_len, 0});
    }
    for (size_t i = 0; i < b.wrs.size(); i++) {
      PendingWr& p = b.wrs[i];
      p.wr.sg_list = p.num_sge > 0 ? &b.sges[p.sge_off] : nullptr;
      p.wr.num_sge = static_cast<int>(p.num_sge);
      p.wr.next = i + 1 < b.wrs.size() ? &b.wrs[i + 1].wr : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    rc = postSend(qp, &b.wrs[0].wr, &bad, true);
    if (rc == ENOMEM) rc = ENOSPC;  // the send queue is full: rxe's error
  }
  b.clear();
  qp->wr_mu.unlock();
  return rc;
}

void wrAbort(ibv_qp_ex* x) {
  Qp* qp = toQp(x);
  qp->batch.clear();
  qp->wr_mu.unlock();
}

}  // namespace

PendingWr& buildWr(ibv_qp_ex* x, ibv_wr_opcode op) {
  return build(x, op);
}

void setWrOps(Qp* qp, uint64_t flags) {
  ibv_qp_ex& x = qp->qpx;
  if (flags & IBV_QP_EX_WITH_SEND) x.wr_send = wrSend;
  if (flags & IBV_QP_EX_WITH_SEND_WITH_IMM) x.wr_send_imm = wrSendImm;
  if (flags & IBV_QP_EX_WITH_RDMA_WRITE) x.wr_rdma_write = wrRdmaWrite;
  if (flags & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) x.wr_rdma_write_imm = wrRdmaWriteImm;
  if (flags & IBV_QP_EX_WITH_RDMA_READ) x.wr_rdma_read = wrRdmaRead;
  if (flags & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) x.wr_atomic_cmp_swp = wrAtomicCmpSwp;
  if (flags & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) x.wr_atomic_fetch_add = wrAtomicFetchAdd;
  if (qp->qp.qp_type == IBV_QPT_UD) x.wr_set_ud_addr = wrSetUdAddr;
  setMwWrOps(qp, flags);
  x.wr_set_sge = wrSetSge;
  x.wr_set_sge_list = wrSetSgeList;
  x.wr_set_inline_data = wrSetInlineData;
  x.wr_set_inline_data_list = wrSetInlineDataList;
  x.wr_start = wrStart;
  x.wr_complete = wrComplete;
  x.wr_abort = wrAbort;
}

// verbs_context.create_qp_ex. The inline ibv_create_qp_ex calls
// ibv_create_qp itself when comp_mask is only IBV_QP_INIT_ATTR_PD.
ibv_qp* createQpExOp(ibv_context* ctx, ibv_qp_init_attr_ex* ax) {
  if (ctx == nullptr || ax == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  // What rxe's provider refuses (check_qp_init_attr), and the QP types
  // softrdma does not emulate.
  const uint64_t ops = sendOpsOf(ax->qp_type);
  if ((ax->comp_mask & ~kQpInitMaskSupported) ||
      ((ax->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ax->create_flags != 0) ||
      (ax->qp_type != IBV_QPT_RC && ax->qp_type != IBV_QPT_UD && ax->qp_type != IBV_QPT_UC) ||
      ((ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (ax->send_ops_flags & ~ops))) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (!(ax->comp_mask & IBV_QP_INIT_ATTR_PD) || ax->pd == nullptr || ax->pd->context != ctx) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_qp_init_attr a{};
  a.qp_context = ax->qp_context;
  a.send_cq = ax->send_cq;
  a.recv_cq = ax->recv_cq;
  a.srq = ax->srq;
  a.cap = ax->cap;
  a.qp_type = ax->qp_type;
  a.sq_sig_all = ax->sq_sig_all;
  ibv_qp* q = ibv_create_qp(ax->pd, &a);
  if (q == nullptr) return nullptr;
  ax->cap = a.cap;
  Qp* qp = reinterpret_cast<Qp*>(q);
  qp->extended = true;
  setWrOps(qp, (ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? ax->send_ops_flags : 0);
  return q;
}

}  // namespace softrdma

using namespace softrdma;

// libibverbs' ibv_qp_to_qp_ex: the extended view of a QP made by
// ibv_create_qp_ex, NULL for one made by ibv_create_qp.
SOFTRDMA_API ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* q) {
  if (q == nullptr) return nullptr;
  Qp* qp = reinterpret_cast<Qp*>(q);
  return qp->extended ? &qp->qpx : nullptr;
}
