// Memory windows, as rxe has them (the kernel's rxe_mw.c, rdma-core's rxe
// provider): type 1 windows bound by ibv_bind_mw, type 2 (2B) windows bound
// by an IBV_WR_BIND_MW work request (or ibv_wr_bind_mw), local invalidation
// (IBV_WR_LOCAL_INV, ibv_wr_local_inv) and remote invalidation by a SEND
// with invalidate; and the responder's checks when a request names a
// window's rkey.
//
// A window's rkey is (index << 8 | key). Indices of windows start at
// 0x10001, above every MR's (the MR table has 2^16 slots), so an rkey tells
// which table to look in, as rxe's rkey_is_mw does. The window's device
// state (key, bound range, access, MR, QP) is guarded by one process-wide
// lock: binds and invalidations run in the posting thread, remote accesses
// and remote invalidations on the progress thread. The `ibv_mw` the program
// holds is its own view, as in rxe: ibv_bind_mw moves its rkey to the new
// key when the bind is posted, a type 2 bind leaves it alone (the new rkey
// is the one in the work request), and a bind names the window by
// ibv_mw.rkey, which must be the window's current key (else the bind fails
// with IBV_WC_MW_BIND_ERR).
//
// Binds and local invalidations are executed when posted, in order with the
// requests before them (which are on the wire by then), and complete in
// order with them: a local operation's completion follows the completion of
// the request posted before it (at once when nothing is outstanding). A
// failing one completes with its error (IBV_WC_MW_BIND_ERR for a bind,
// IBV_WC_LOC_QP_OP_ERR for an invalidation) and the QP goes to error.
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base.h"
#include "context_ops.h"
#include "device.h"
#include "fork_hooks.h"
#include "mw.h"
#include "pd_mr.h"
#include "qp.h"

namespace softrdma {

namespace {

constexpr uint32_t kMinMwIndex = 0x10001;  // rxe's RXE_MIN_MW_INDEX
constexpr uint32_t kMaxMw = 0x1000;        // rxe's RXE_MAX_MW
// The access flags a window takes (rxe's RXE_ACCESS_SUPPORTED_MW).
constexpr int kMwAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                          IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND |
                          IBV_ACCESS_ZERO_BASED;

struct Mw {
  ibv_mw mw;  // the program's view; first, so ibv_mw* and Mw* convert
  Pd* pd = nullptr;
  uint32_t index = 0;
  // The device's state, under mwMutex().
  uint32_t rkey = 0;
  bool valid = false;  // type 1: from allocation on; type 2: while bound
  int access = 0;
  uint64_t addr = 0, length = 0;
  Mr* mr = nullptr;
  uint32_t qpn = 0;  // type 2: the QP that bound it
};

std::mutex& mwMutex() {
  static auto* m = new std::mutex();
  return *m;
}

struct MwTable {
  std::unordered_map<uint32_t, Mw*> by_index;
  uint32_t next = 0;   // the next slot to try
  uint8_t key = 0x5a;  // the next initial key byte
};

MwTable& table() {  // under mwMutex()
  static auto* t = new MwTable();
  return *t;
}

bool isMwKey(uint32_t rkey) {
  uint32_t index = rkey >> 8;
  return index >= kMinMwIndex && index < kMinMwIndex + kMaxMw;
}

Mw* findMw(uint32_t rkey) {  // under mwMutex()
  if (!isMwKey(rkey)) return nullptr;
  auto it = table().by_index.find(rkey >> 8);
  return it != table().by_index.end() && it->second->rkey == rkey ? it->second : nullptr;
}

void unbind(Mw& w) {  // under mwMutex()
  if (w.mr != nullptr) w.mr->mws--;
  w.mr = nullptr;
  w.qpn = 0;
  w.access = 0;
  w.addr = w.length = 0;
}

// The kernel's rxe_check_bind_mw: 0 or EINVAL.
int checkBind(const Qp& qp, const Mw& w, const Mr* mr, uint64_t addr, uint64_t len, int access) {
  if (w.mw.type == IBV_MW_TYPE_1) {
    if (!w.valid || (access & IBV_ACCESS_ZERO_BASED)) return EINVAL;
  } else {
    // Free, bound by a QP of the window's PD, to an MR and a range.
    if (w.valid || qp.pd != w.pd || mr == nullptr || len == 0) return EINVAL;
  }
  if (mr == nullptr) return 0;
  if (!(mr->access & IBV_ACCESS_MW_BIND)) return EINVAL;
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(mr->access & IBV_ACCESS_LOCAL_WRITE))
    return EINVAL;
  if (access & IBV_ACCESS_ZERO_BASED) return len <= mr->mr.length ? 0 : EINVAL;
  return mr->covers(addr, len) ? 0 : EINVAL;
}

// Executes a bind work request (the kernel's rxe_bind_mw): 0 or an error.
int bindMw(const Qp& qp, const ibv_send_wr& w) {
  const ibv_mw_bind_info& b = w.bind_mw.bind_info;
  if (w.bind_mw.mw == nullptr) return EINVAL;
  if (b.mw_access_flags & ~static_cast<unsigned>(kMwAccess)) return EOPNOTSUPP;
  std::lock_guard lk(mwMutex());
  Mw* mw = findMw(w.bind_mw.mw->rkey);
  if (mw == nullptr) return EINVAL;
  Mr* mr = nullptr;
  if (b.length > 0) {
    mr = b.mr != nullptr ? findMrByKey(b.mr->lkey) : nullptr;
    if (mr == nullptr) return EINVAL;
  }
  const int access = static_cast<int>(b.mw_access_flags);
  if (int rc = checkBind(qp, *mw, mr, b.addr, b.length, access); rc != 0) return rc;
  unbind(*mw);
  mw->rkey = (mw->rkey & ~0xffu) | (w.bind_mw.rkey & 0xff);
  mw->valid = true;
  mw->access = access;
  mw->addr = b.addr;
  mw->length = b.length;
  if (mr != nullptr) {
    mw->mr = mr;
    mr->mws++;
  }
  if (mw->mw.type == IBV_MW_TYPE_2) mw->qpn = qp.qp.qp_num;
  return 0;
}

// Invalidates a type 2 window (the kernel's rxe_invalidate_mw). An MR's key
// fails, as rxe's invalidation of a user MR does.
int invalidate(uint32_t rkey) {
  std::lock_guard lk(mwMutex());
  Mw* mw = findMw(rkey);
  if (mw == nullptr || !mw->valid || mw->mw.type != IBV_MW_TYPE_2) return EINVAL;
  unbind(*mw);
  mw->valid = false;
  return 0;
}

}  // namespace

void forkWindows(ForkStep s) {
  // The child keeps the windows: they are the parent's objects it shares,
  // as it shares the MRs.
  if (s == ForkStep::Prepare) {
    mwMutex().lock();
    forkPds(s);
    return;
  }
  forkPds(s);
  mwMutex().unlock();
}

void postLocalOp(Qp* qp, const ibv_send_wr& w, SendWqe& e) {
  e.psn = qp->sq.next_psn - 1;  // completes right after the request posted before it
  e.byte_len = 0;
  if (!qp->sq.halted) {
    const bool bind = w.opcode == IBV_WR_BIND_MW;
    if ((bind ? bindMw(*qp, w) : invalidate(w.invalidate_rkey)) != 0) {
      e.preset = bind ? IBV_WC_MW_BIND_ERR : IBV_WC_LOC_QP_OP_ERR;
      qp->sq.halted = true;
    }
  }
  qp->sq.wqes.push_back(e);
  if (qp->sq.wqes.size() == 1) qp->completeSendsUpTo(e.psn, IBV_WC_SUCCESS, false);
}

bool remoteInvalidate(uint32_t rkey) {
  return invalidate(rkey) == 0;
}

bool resolveRkey(const Qp& q, uint32_t rkey, uint64_t addr, uint64_t len, int need,
                 uint64_t* local) {
  *local = addr;
  if (!(q.attr.qp_access_flags & need)) return false;
  if (!isMwKey(rkey)) {
    Mr* mr = findMrByKey(rkey);
    return mr != nullptr && mr->pd == q.pd && (mr->access & need) && mr->covers(addr, len);
  }
  std::lock_guard lk(mwMutex());
  Mw* w = findMw(rkey);
  if (w == nullptr || !w->valid || w->pd != q.pd || w->length == 0 || w->mr == nullptr ||
      (w->access & need) != need || (w->mw.type == IBV_MW_TYPE_2 && w->qpn != q.qp.qp_num))
    return false;
  uint64_t start = (w->access & IBV_ACCESS_ZERO_BASED) ? 0 : w->addr;
  if (addr < start || len > w->length || addr - start > w->length - len) return false;
  *local = w->addr + (addr - start);
  return true;
}

}  // namespace softrdma

using namespace softrdma;

namespace {

ibv_mw* allocMwOp(ibv_pd* pd, ibv_mw_type type) {
  if (pd == nullptr || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) {
    errno = EINVAL;  // the kernel's ib_uverbs_alloc_mw
    return nullptr;
  }
  if (contextDead(pd->context)) {
    errno = EIO;
    return nullptr;
  }
  std::lock_guard lk(mwMutex());
  MwTable& t = table();
  if (t.by_index.size() >= kMaxMw) {
    errno = ENOMEM;
    return nullptr;
  }
  while (t.by_index.count(kMinMwIndex + t.next) != 0)
    t.next = (t.next + 1) % kMaxMw;
  auto* w = new Mw();
  w->index = kMinMwIndex + t.next;
  t.next = (t.next + 1) % kMaxMw;
  w->pd = toPd(pd);
  w->rkey = w->index << 8 | t.key;
  t.key = static_cast<uint8_t>(t.key * 5 + 1);
  w->valid = type == IBV_MW_TYPE_1;
  w->mw.context = pd->context;
  w->mw.pd = pd;
  w->mw.rkey = w->rkey;
  w->mw.handle = w->index;
  w->mw.type = type;
  t.by_index[w->index] = w;
  w->pd->users++;
  return &w->mw;
}

int deallocMwOp(ibv_mw* mw) {
  if (mw == nullptr) return EINVAL;
  auto* w = reinterpret_cast<Mw*>(mw);
  {
    std::lock_guard lk(mwMutex());
    table().by_index.erase(w->index);
    unbind(*w);
  }
  w->pd->users--;
  delete w;
  return 0;
}

// rxe's provider: a bind work request with the next key, posted; the
// program's ibv_mw takes the new key once it is posted.
int bindMwOp(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
  if (qp == nullptr || mw == nullptr || bind == nullptr) return EINVAL;
  if (bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED) return EINVAL;
  ibv_send_wr wr{};
  wr.wr_id = bind->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = bind->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = bind->bind_info;
  ibv_send_wr* bad = nullptr;
  int rc = postSend(reinterpret_cast<Qp*>(qp), &wr, &bad, false);
  if (rc == 0) mw->rkey = wr.bind_mw.rkey;
  return rc;
}

void wrBindMw(ibv_qp_ex* x, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  PendingWr& p = buildWr(x, IBV_WR_BIND_MW);
  p.wr.bind_mw.mw = mw;
  p.wr.bind_mw.rkey = rkey;
  if (info != nullptr) p.wr.bind_mw.bind_info = *info;
}

void wrLocalInv(ibv_qp_ex* x, uint32_t rkey) {
  buildWr(x, IBV_WR_LOCAL_INV).wr.invalidate_rkey = rkey;
}

void wrSendInv(ibv_qp_ex* x, uint32_t rkey) {
  buildWr(x, IBV_WR_SEND_WITH_INV).wr.invalidate_rkey = rkey;
}

}  // namespace

namespace softrdma {

void setMwOps(ibv_context* ctx) {
  ctx->ops.alloc_mw = allocMwOp;
  ctx->ops.dealloc_mw = deallocMwOp;
  ctx->ops.bind_mw = bindMwOp;
}

void setMwWrOps(Qp* qp, uint64_t flags) {
  ibv_qp_ex& x = qp->qpx;
  if (flags & IBV_QP_EX_WITH_BIND_MW) x.wr_bind_mw = wrBindMw;
  if (flags & IBV_QP_EX_WITH_LOCAL_INV) x.wr_local_inv = wrLocalInv;
  if (flags & IBV_QP_EX_WITH_SEND_WITH_INV) x.wr_send_inv = wrSendInv;
}

}  // namespace softrdma
