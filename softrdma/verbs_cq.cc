// Verbs: completion channels and completion queues.
//
// A completion channel is an eventfd counting queued records (the CQ's
// handle), as the kernel's uverbs event file queues events:
// ibv_get_cq_event blocks, or fails with EAGAIN when the program made the fd
// nonblocking, and the fd is pollable. A CQ raises one event per ibv_req_notify_cq, for the first
// eligible completion added after arming (one-shot arming).
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "internal.h"
#include "registry.h"

namespace softrdma {

static Registry<Cq>& cqs() {
  static auto* r = new Registry<Cq>();
  return *r;
}

void forkCqs(ForkStep s) {
  if (s == ForkStep::Prepare)
    cqs().lockForFork();
  else
    cqs().unlockAfterFork();
}

Cq* findCq(uint32_t id) {
  return cqs().find(id >> 8, id);
}

void Cq::push(const ibv_wc& wc, bool solicited) {
  bool notify = false;
  {
    std::lock_guard lk(mu);
    if (overrun) return;
    if (count == ring.size()) {
      // CQ overrun: the CQ is unusable from now on (ibv_poll_cq.3).
      overrun = true;
      raiseAsync(cq.context, IBV_EVENT_CQ_ERR, kAsyncCq, id);
      return;
    }
    ring[(head + count) % ring.size()] = wc;
    count++;
    if (armed && (!solicited_only || solicited || wc.status != IBV_WC_SUCCESS)) {
      armed = false;
      notify = channel != nullptr;
    }
  }
  if (notify) {  // outside the CQ lock: the program's poller is not held up by the write
    {
      std::lock_guard cl(channel->mu);
      channel->records.push_back(id);
    }
    signalToken(channel->ch.fd);
  }
}

void Cq::clean(uint32_t qp_num) {
  std::lock_guard lk(mu);
  size_t kept = 0;
  for (size_t i = 0; i < count; i++) {
    const ibv_wc& wc = ring[(head + i) % ring.size()];
    if (wc.qp_num != qp_num) ring[(head + kept++) % ring.size()] = wc;
  }
  count = kept;
}

int pollCqOp(ibv_cq* c, int n, ibv_wc* wc) {
  auto* cq = reinterpret_cast<Cq*>(c);
  if (n < 0 || (n > 0 && wc == nullptr)) return -EINVAL;
  std::lock_guard lk(cq->mu);
  if (cq->overrun) return -EOVERFLOW;
  int got = 0;
  while (got < n && cq->count > 0) {
    wc[got++] = cq->ring[cq->head];
    cq->head = (cq->head + 1) % cq->ring.size();
    cq->count--;
  }
  return got;
}

int reqNotifyCqOp(ibv_cq* c, int solicited_only) {
  auto* cq = reinterpret_cast<Cq*>(c);
  std::lock_guard lk(cq->mu);
  if (cq->armed && !cq->solicited_only) return 0;  // already armed for every completion
  cq->armed = true;
  cq->solicited_only = solicited_only != 0;
  return 0;
}

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  if (ctx == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (contextDead(ctx)) {
    errno = EIO;
    return nullptr;
  }
  int fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  if (fd < 0) return nullptr;
  auto* ch = new CompChannel();
  ch->ch.context = ctx;
  ch->ch.fd = fd;
  ch->ch.refcnt = 0;
  toContext(ctx)->users++;
  return &ch->ch;
}

SOFTRDMA_API int ibv_destroy_comp_channel(ibv_comp_channel* c) {
  if (c == nullptr) return EINVAL;
  auto* ch = reinterpret_cast<CompChannel*>(c);
  if (ch->cqs.load() != 0) return EBUSY;  // libibverbs returns the errno value itself
  toContext(c->context)->users--;
  close(ch->ch.fd);
  delete ch;
  return 0;
}

SOFTRDMA_API ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context,
                                   ibv_comp_channel* channel, int comp_vector) {
  if (ctx == nullptr || cqe < 1 || cqe > maxCqe() || comp_vector < 0 ||
      comp_vector >= ctx->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  if (contextDead(ctx)) {
    errno = EIO;
    return nullptr;
  }
  auto* cq = new Cq();
  cq->cq.context = ctx;
  cq->cq.channel = channel;
  cq->cq.cq_context = cq_context;
  cq->cq.cqe = cqe;
  pthread_mutex_init(&cq->cq.mutex, nullptr);
  pthread_cond_init(&cq->cq.cond, nullptr);
  cq->ring.resize(static_cast<size_t>(cqe));
  cq->channel = reinterpret_cast<CompChannel*>(channel);
  cq->id = cqs().insert(cq);
  if (cq->id == 0) {
    delete cq;
    errno = ENOMEM;
    return nullptr;
  }
  cq->cq.handle = cq->id;
  if (cq->channel != nullptr) {
    cq->channel->cqs++;
    channel->refcnt++;
  }
  toContext(ctx)->users++;
  return &cq->cq;
}

SOFTRDMA_API int ibv_resize_cq(ibv_cq* c, int cqe) {
  if (c == nullptr || cqe < 1 || cqe > maxCqe()) return EINVAL;
  if (contextDead(c->context)) return EIO;
  auto* cq = reinterpret_cast<Cq*>(c);
  std::lock_guard lk(cq->mu);
  if (static_cast<size_t>(cqe) < cq->count) return EINVAL;
  std::vector<ibv_wc> ring(static_cast<size_t>(cqe));
  for (size_t i = 0; i < cq->count; i++)
    ring[i] = cq->ring[(cq->head + i) % cq->ring.size()];
  cq->ring.swap(ring);
  cq->head = 0;
  c->cqe = cqe;
  return 0;
}

SOFTRDMA_API int ibv_destroy_cq(ibv_cq* c) {
  if (c == nullptr) return EINVAL;
  auto* cq = reinterpret_cast<Cq*>(c);
  if (cq->qps.load() != 0) return EBUSY;
  // Every event returned by ibv_get_cq_event must have been acked.
  pthread_mutex_lock(&c->mutex);
  while (c->comp_events_completed != cq->events_reported)
    pthread_cond_wait(&c->cond, &c->mutex);
  pthread_mutex_unlock(&c->mutex);
  cqs().erase(cq->id >> 8, cq);
  if (cq->channel != nullptr) {
    cq->channel->cqs--;
    c->channel->refcnt--;
  }
  toContext(c->context)->users--;
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->mutex);
  delete cq;
  return 0;
}

SOFTRDMA_API int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (channel == nullptr || cq == nullptr || cq_context == nullptr) return setErr(EINVAL);
  auto* ch = reinterpret_cast<CompChannel*>(channel);
  for (;;) {
    if (!takeToken(channel->fd)) return -1;
    uint32_t rec;
    {
      std::lock_guard lk(ch->mu);
      if (ch->records.empty()) continue;
      rec = ch->records.front();
      ch->records.pop_front();
    }
    Cq* c = findCq(rec);
    if (c == nullptr) continue;  // its CQ is gone
    pthread_mutex_lock(&c->cq.mutex);
    c->events_reported++;
    pthread_mutex_unlock(&c->cq.mutex);
    *cq = &c->cq;
    *cq_context = c->cq.cq_context;
    return 0;
  }
}

SOFTRDMA_API void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (cq == nullptr) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}
