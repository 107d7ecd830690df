// Verbs: completion channels and completion queues.
//
// A completion channel is an eventfd counting queued records (the CQ's
// handle), as the kernel's uverbs event file queues events:
// ibv_get_cq_event blocks, or fails with EAGAIN when the program made the fd
// nonblocking, and the fd is pollable. A CQ raises one event per ibv_req_notify_cq, for the first
// eligible completion added after arming (one-shot arming).
//
// Inline progress: a thread that polls an empty CQ, or gets its channel's
// events, first receives what waits in the sockets of the CQ's connections
// itself (Cq::progress, conn.cc), as a NIC would have delivered it
// without a hand-off to the progress thread. The channel's fd and events are
// unchanged by it: records are still written only when an armed CQ gets an
// eligible completion, by whichever thread adds it.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base.h"
#include "context_ops.h"
#include "cq.h"
#include "device.h"
#include "fork_hooks.h"
#include "registry.h"

namespace softrdma {

static Registry<Cq>& cqs() {
  static auto* r = new Registry<Cq>();
  return *r;
}

namespace {
std::atomic<uint64_t> g_fork_gen{0};
}

uint64_t forkGeneration() {
  return g_fork_gen.load(std::memory_order_relaxed);
}

void forkCqs(ForkStep s) {
  if (s == ForkStep::Prepare) {
    cqs().lockForFork();
    return;
  }
  if (s == ForkStep::Child) g_fork_gen++;  // the parent's CQs make no progress here
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

namespace {

int takeCompletions(Cq* cq, int n, ibv_wc* wc) {
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

}  // namespace

int pollCqOp(ibv_cq* c, int n, ibv_wc* wc) {
  auto* cq = reinterpret_cast<Cq*>(c);
  if (n < 0 || (n > 0 && wc == nullptr)) return -EINVAL;
  int got = takeCompletions(cq, n, wc);
  // Empty: receive what is waiting for this CQ, then look again.
  if (got == 0 && n > 0 && cq->progress()) got = takeCompletions(cq, n, wc);
  return got;
}

int Cq::takeCurrent() {
  std::lock_guard lk(mu);
  if (overrun) return EOVERFLOW;
  if (count == 0) return ENOENT;
  current = ring[head];
  head = (head + 1) % ring.size();
  count--;
  cqx.status = current.status;
  cqx.wr_id = current.wr_id;
  return 0;
}

namespace {

// The work-completion fields rxe's provider offers (RXE_SUP_WC_FLAGS); the
// others (timestamps, VLAN, flow tag) are refused with EOPNOTSUPP.
constexpr uint64_t kSupportedWcFlags =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS;

Cq* toCq(ibv_cq_ex* c) {
  return reinterpret_cast<Cq*>(c);
}

int startPoll(ibv_cq_ex* c, ibv_poll_cq_attr* attr) {
  if (attr != nullptr && attr->comp_mask != 0) return EINVAL;
  Cq* cq = toCq(c);
  if (!cq->single_threaded) cq->poll_mu.lock();
  int rc = cq->takeCurrent();
  if (rc == ENOENT && cq->progress()) rc = cq->takeCurrent();  // as ibv_poll_cq
  if (rc != 0 && !cq->single_threaded) cq->poll_mu.unlock();   // no end_poll follows an error
  return rc;
}

int nextPoll(ibv_cq_ex* c) {
  return toCq(c)->takeCurrent();
}

void endPoll(ibv_cq_ex* c) {
  Cq* cq = toCq(c);
  if (!cq->single_threaded) cq->poll_mu.unlock();
}

ibv_wc_opcode readOpcode(ibv_cq_ex* c) {
  return toCq(c)->current.opcode;
}
uint32_t readVendorErr(ibv_cq_ex* c) {
  return toCq(c)->current.vendor_err;
}
uint32_t readByteLen(ibv_cq_ex* c) {
  return toCq(c)->current.byte_len;
}
__be32 readImmData(ibv_cq_ex* c) {
  return toCq(c)->current.imm_data;
}
uint32_t readQpNum(ibv_cq_ex* c) {
  return toCq(c)->current.qp_num;
}
uint32_t readSrcQp(ibv_cq_ex* c) {
  return toCq(c)->current.src_qp;
}
unsigned int readWcFlags(ibv_cq_ex* c) {
  return toCq(c)->current.wc_flags;
}
uint32_t readSlid(ibv_cq_ex* c) {
  return toCq(c)->current.slid;
}
uint8_t readSl(ibv_cq_ex* c) {
  return toCq(c)->current.sl;
}
uint8_t readDlidPathBits(ibv_cq_ex* c) {
  return toCq(c)->current.dlid_path_bits;
}

}  // namespace

// verbs_context.create_cq_ex (the inline ibv_create_cq_ex). What rxe takes:
// its wc_flags; IBV_CQ_INIT_ATTR_MASK_FLAGS with SINGLE_THREADED (a hint:
// no locking between start_poll and end_poll) but not IGNORE_OVERRUN, which
// rxe's kernel driver refuses; IBV_CQ_INIT_ATTR_MASK_PD, whose parent domain
// rxe ignores. The read_* accessors of fields not asked for stay NULL.
ibv_cq_ex* createCqExOp(ibv_context* ctx, ibv_cq_init_attr_ex* a) {
  if (ctx == nullptr || a == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  const bool with_flags = (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) != 0;
  if ((a->comp_mask &
       ~static_cast<uint32_t>(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) ||
      (a->wc_flags & ~kSupportedWcFlags) ||
      (with_flags && (a->flags & ~static_cast<uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED)))) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  ibv_cq* c = ibv_create_cq(ctx, static_cast<int>(a->cqe), a->cq_context, a->channel,
                            static_cast<int>(a->comp_vector));
  if (c == nullptr) return nullptr;
  Cq* cq = reinterpret_cast<Cq*>(c);
  cq->single_threaded = with_flags && (a->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
  ibv_cq_ex& x = cq->cqx;
  x.start_poll = startPoll;
  x.next_poll = nextPoll;
  x.end_poll = endPoll;
  x.read_opcode = readOpcode;
  x.read_vendor_err = readVendorErr;
  x.read_wc_flags = readWcFlags;
  if (a->wc_flags & IBV_WC_EX_WITH_BYTE_LEN) x.read_byte_len = readByteLen;
  if (a->wc_flags & IBV_WC_EX_WITH_IMM) x.read_imm_data = readImmData;
  if (a->wc_flags & IBV_WC_EX_WITH_QP_NUM) x.read_qp_num = readQpNum;
  if (a->wc_flags & IBV_WC_EX_WITH_SRC_QP) x.read_src_qp = readSrcQp;
  if (a->wc_flags & IBV_WC_EX_WITH_SLID) x.read_slid = readSlid;
  if (a->wc_flags & IBV_WC_EX_WITH_SL) x.read_sl = readSl;
  if (a->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS) x.read_dlid_path_bits = readDlidPathBits;
  return &cq->cqx;
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
  cq->fork_gen = forkGeneration();
  cq->rx_epfd = epoll_create1(EPOLL_CLOEXEC);
  if (cq->rx_epfd < 0) {  // errno: out of descriptors
    delete cq;
    return nullptr;
  }
  cq->id = cqs().insert(cq);
  if (cq->id == 0) {
    close(cq->rx_epfd);
    delete cq;
    errno = ENOMEM;
    return nullptr;
  }
  cq->cq.handle = cq->id;
  if (cq->channel != nullptr) {
    cq->channel->cqs++;
    channel->refcnt++;
    std::lock_guard ll(cq->channel->list_mu);
    cq->channel->cq_list.push_back(cq);
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
    {
      std::lock_guard ll(cq->channel->list_mu);  // no ibv_get_cq_event is using it now
      auto& l = cq->channel->cq_list;
      l.erase(std::remove(l.begin(), l.end(), cq), l.end());
    }
    cq->channel->cqs--;
    c->channel->refcnt--;
  }
  close(cq->rx_epfd);
  toContext(c->context)->users--;
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->mutex);
  delete cq;
  return 0;
}

SOFTRDMA_API int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (channel == nullptr || cq == nullptr || cq_context == nullptr) return setErr(EINVAL);
  auto* ch = reinterpret_cast<CompChannel*>(channel);
  {
    // What waits for the channel's CQs is received first, so that an
    // event it raises is returned now. One thread at a time.
    std::unique_lock ll(ch->list_mu, std::try_to_lock);
    if (ll.owns_lock())
      for (Cq* c : ch->cq_list)
        c->progress();
  }
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
