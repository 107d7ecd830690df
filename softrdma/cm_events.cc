// rdma_cm event channels and the getting and acknowledging of events.
//
// An event channel is an eventfd counting the queued events (semaphore mode), so
// that its fd is pollable, blocks, or fails with EAGAIN exactly like the
// kernel's ucma file. The events themselves wait in the channel's queue.
// Getting an event does what librdmacm does while handing it out (the
// active side's QP transitions and RTU on a REP, a join's QP attach). A
// synchronous id waits for its events here too (syncComplete). Channels
// themselves are made and freed in cm_id.cc.
#include <unistd.h>

#include <cerrno>

#include "base.h"
#include "cm_id.h"
#include "cm_internal.h"
#include "cq.h"
#include "fabric.h"
#include "wire.h"

namespace softrdma {

// librdmacm's ucma_complete: ack the previous event of a synchronous id, get
// the next one from its private channel, and turn a failure into errno.
int syncComplete(rdma_cm_id* id) {
  if (id->event != nullptr) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  if (rdma_get_cm_event(id->channel, &id->event) != 0) return -1;
  rdma_cm_event* e = id->event;
  if (e->status != 0) {
    if (e->event == RDMA_CM_EVENT_REJECTED) return setErr(ECONNREFUSED);
    return setErr(e->status < 0 ? -e->status : e->status);
  }
  switch (e->event) {
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
      return setErr(EHOSTUNREACH);
    case RDMA_CM_EVENT_REJECTED:
      return setErr(ECONNREFUSED);
    default:
      return 0;
  }
}

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API rdma_event_channel* rdma_create_event_channel(void) {
  Fabric::get();
  CmChannel* ch = newChannel(false);
  return ch != nullptr ? &ch->ch : nullptr;
}

SOFTRDMA_API void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel == nullptr) return;
  std::lock_guard lk(Fabric::get().cm_mu);
  freeChannel(toChannel(channel));
}

SOFTRDMA_API int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (channel == nullptr || event == nullptr) return setErr(EINVAL);
  Fabric& f = Fabric::get();
  CmChannel* ch = toChannel(channel);
  for (;;) {
    if (!takeToken(ch->ch.fd)) return -1;
    std::lock_guard lk(f.cm_mu);
    if (ch->queue.empty()) continue;
    CmEvent* e = ch->queue.front();
    ch->queue.pop_front();
    if (e->dead) {
      delete e;
      continue;
    }
    auto& q = e->subject->events.queued;
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (*it == e) {
        q.erase(it);
        break;
      }
    }
    e->owner->events.reported++;
    if (e->ev.event == RDMA_CM_EVENT_MULTICAST_JOIN) onJoinEvent(e);
    if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      e->owner->listening.queued_requests--;
      admitDeferred(e->owner.get());
    }
    if (e->rep) {
      // librdmacm moves the active side's QP to RTR and RTS and sends the
      // RTU while handing out the REP (ucma_process_conn_resp).
      CmId* id = e->subject.get();
      if (id->id.qp == nullptr) {
        e->ev.event = RDMA_CM_EVENT_CONNECT_RESPONSE;
      } else {
        int rc = cmModifyQp(id, IBV_QPS_RTR);
        if (rc == 0) rc = cmModifyQp(id, IBV_QPS_RTS);
        if (rc == 0 && id->state == CmState::RepRcvd) {
          sendCm(*id->conn, FrameType::Rtu, nullptr);
          setCmState(id, CmState::Established);
        } else if (rc != 0) {
          e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
          e->ev.status = -rc;
        }
      }
    }
    *event = &e->ev;
    return 0;
  }
}

SOFTRDMA_API int rdma_ack_cm_event(rdma_cm_event* event) {
  if (event == nullptr) return setErr(EINVAL);
  Fabric& f = Fabric::get();
  auto* e = reinterpret_cast<CmEvent*>(event);
  {
    std::lock_guard lk(f.cm_mu);
    e->owner->events.acked++;
  }
  f.cm_cv.notify_all();
  delete e;
  return 0;
}

SOFTRDMA_API int softrdma_hold_cm_events(rdma_event_channel* channel, int hold) {
  if (channel == nullptr) return setErr(EINVAL);
  std::lock_guard lk(Fabric::get().cm_mu);
  CmChannel* ch = toChannel(channel);
  const auto n = static_cast<int>(ch->held_tokens);
  ch->held = hold != 0;
  if (ch->held) return n;
  ch->held_tokens = 0;
  if (n > 0) {  // all at once: one wakeup for every held event
    uint64_t count = static_cast<uint64_t>(n);
    ssize_t w = write(ch->ch.fd, &count, sizeof count);
    (void)w;
  }
  return n;
}

SOFTRDMA_API int rdma_migrate_id(rdma_cm_id* rid, rdma_event_channel* channel) {
  Fabric& f = Fabric::get();
  std::unique_lock lk(f.cm_mu);
  auto id = liveId(rid);
  if (!id) return setErr(EINVAL);
  CmChannel* to = channel != nullptr ? toChannel(channel) : newChannel(true);
  if (to == nullptr) return -1;
  f.cm_cv.wait(lk, [&] { return id->events.acked >= id->events.reported; });
  CmChannel* from = id->channel;
  // Events not yet gotten follow the id; the old channel keeps a dead token.
  for (CmEvent*& slot : from->queue) {
    if (slot->owner != id) continue;
    CmEvent* e = slot;
    slot = new CmEvent();
    slot->dead = true;
    to->queue.push_back(e);
    signalChannel(to);
  }
  bool free_old = id->owns_channel;
  id->channel = to;
  id->id.channel = &to->ch;
  id->owns_channel = channel == nullptr;
  id->sync = channel == nullptr;
  if (free_old) freeChannel(from);
  return 0;
}
