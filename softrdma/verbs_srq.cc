// Verbs: shared receive queues — their handle table (for async events) and
// the calls that create, modify, query and destroy one.
#include <cerrno>

#include "base.h"
#include "device.h"
#include "fork_hooks.h"
#include "pd_mr.h"
#include "qp.h"
#include "registry.h"

namespace softrdma {

namespace {

Registry<Srq>& srqs() {
  static auto* r = new Registry<Srq>();
  return *r;
}

}  // namespace

// fork: the SRQ table's lock, right after the QP table's (fork.cc).
void forkSrqs(ForkStep s) {
  if (s == ForkStep::Prepare)
    srqs().lockForFork();
  else
    srqs().unlockAfterFork();
}

Srq* findSrq(uint32_t id) {
  return srqs().find(id >> 8, id);
}

}  // namespace softrdma

using namespace softrdma;

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
