// Verbs: handing a context's asynchronous events to the program. Objects
// raise them through raiseAsync (device.cc) as records naming the object by
// handle; ibv_get_async_event resolves the handle to the CQ, QP or SRQ, and
// skips a record whose object is gone. Above the CQ and QP code, which only
// raise events.
#include <unistd.h>

#include <cerrno>

#include "base.h"
#include "cq.h"
#include "device.h"
#include "qp.h"

using namespace softrdma;

SOFTRDMA_API int ibv_get_async_event(ibv_context* ctx, ibv_async_event* event) {
  if (ctx == nullptr || event == nullptr) return setErr(EINVAL);
  for (;;) {
    AsyncRecord r;
    ssize_t n = read(ctx->async_fd, &r, sizeof r);
    if (n != static_cast<ssize_t>(sizeof r)) return -1;
    event->event_type = static_cast<ibv_event_type>(r.type);
    if (r.kind == kAsyncCq) {
      Cq* cq = findCq(static_cast<uint32_t>(r.handle));
      if (cq == nullptr) continue;
      event->element.cq = &cq->cq;
    } else if (r.kind == kAsyncQp) {
      auto qp = findQpByNum(static_cast<uint32_t>(r.handle));
      if (!qp) continue;
      event->element.qp = &qp->qp;
    } else if (r.kind == kAsyncSrq) {
      Srq* s = findSrq(static_cast<uint32_t>(r.handle));
      if (s == nullptr) continue;
      event->element.srq = &s->srq;
    } else {
      // libibverbs copies the kernel's element into port_num for port and
      // device events: the port for PORT_*, 0 for DEVICE_FATAL.
      event->element.port_num = r.kind == kAsyncPort ? 1 : 0;
    }
    return 0;
  }
}

SOFTRDMA_API void ibv_ack_async_event(ibv_async_event*) {}
