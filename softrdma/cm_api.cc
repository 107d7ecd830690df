// rdma_cm's public calls on identifiers and their connections: create and
// destroy, the QP an id makes, connect, accept, reject, establish and
// disconnect (addresses: cm_addr.cc; events: cm_events.cc). Errors follow
// librdmacm: -1 with errno.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base.h"
#include "cm_id.h"
#include "cm_internal.h"
#include "conn.h"
#include "context_ops.h"
#include "counters.h"
#include "device.h"
#include "fabric.h"
#include "pd_mr.h"
#include "qp.h"
#include "softrdma/testing.h"
#include "wire.h"

#undef ibv_reg_mr

namespace softrdma {

// librdmacm closes the context of a removed device once no id uses it
// (cm_mu held).
static void releaseRetiredContexts() {
  Fabric& f = Fabric::get();
  auto retired = f.takeRetired();
  std::vector<Fabric::Retired> keep;
  for (auto& r : retired) {
    bool used = false;
    for (auto& [rid, id] : idTable())
      if (rid->verbs == r.ctx->ctx()) used = true;
    if (!used && r.pd != nullptr && ibv_dealloc_pd(&r.pd->pd) == 0) r.pd = nullptr;
    if (used || r.pd != nullptr || ibv_close_device(r.ctx->ctx()) != 0)
      keep.push_back(r);  // still in use by the program: tried again later
  }
  f.keepRetired(keep);
}

// Runs `expire` (cm_mu held) if `id` is still in `state` when the CM's
// timeout passes; a later state change or timer supersedes it.
static void scheduleCmTimeout(const std::shared_ptr<CmId>& id, CmState state,
                              void (*expire)(const std::shared_ptr<CmId>&)) {
  Fabric& f = Fabric::get();
  uint64_t gen = ++id->timer_gen;
  std::weak_ptr<CmId> wid = id;
  f.schedule(Clock::now() + std::chrono::milliseconds(f.cm_timeout_ms), [wid, gen, state, expire] {
    auto i = wid.lock();
    if (!i) return;
    std::lock_guard lk(Fabric::get().cm_mu);
    if (i->destroyed || i->timer_gen != gen || i->state != state) return;
    expire(i);
  });
}

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context,
                                rdma_port_space ps) {
  if (out == nullptr) return setErr(EINVAL);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_IB && ps != RDMA_PS_UDP && ps != RDMA_PS_IPOIB)
    return setErr(EINVAL);
  Fabric& f = Fabric::get();
  auto id = std::make_shared<CmId>();
  id->self = id;
  if (channel == nullptr) {
    id->channel = newChannel(true);
    if (id->channel == nullptr) return -1;
    id->owns_channel = true;
    id->sync = true;
  } else {
    id->channel = toChannel(channel);
  }
  id->id.channel = &id->channel->ch;
  id->id.context = context;
  id->id.ps = ps;
  id->id.qp_type = ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
  std::lock_guard lk(f.cm_mu);
  idTable()[&id->id] = id;
  *out = &id->id;
  return 0;
}

SOFTRDMA_API int rdma_destroy_id(rdma_cm_id* rid) {
  Fabric& f = Fabric::get();
  {
    std::lock_guard lk(f.cm_mu);
    if (!liveId(rid)) return setErr(EINVAL);
  }
  // The event a synchronous call kept for the id is acknowledged here.
  if (rid->event != nullptr) {
    rdma_ack_cm_event(rid->event);
    rid->event = nullptr;
  }
  std::unique_lock lk(f.cm_mu);
  auto id = liveId(rid);
  if (!id) return setErr(EINVAL);
  // Every event handed out for this id must have been acknowledged.
  f.cm_cv.wait(lk, [&] { return id->events.acked >= id->events.reported; });
  id->destroyed = true;
  setCmState(id.get(), CmState::Destroying);
  for (CmEvent* e : id->events.queued)
    e->dead = true;  // still queued in the kernel: discarded
  // A listener's undelivered connection requests (their subjects are the
  // new ids, their owner the listener) go with it.
  for (CmEvent* e : id->channel->queue) {
    if (e->owner == id && e->subject != id && !e->dead) {
      e->dead = true;
      for (CmEvent* q : e->subject->events.queued)
        q->dead = true;  // e.g. its DEVICE_REMOVAL
      e->subject->events.queued.clear();
      e->subject->destroyed = true;
      closeConn(e->subject->conn);
      boundHwTable().erase(e->subject.get());
      idTable().erase(&e->subject->id);
    }
  }
  id->events.queued.clear();
  if (id->listener) {
    // The port is free when rdma_destroy_id returns, as with the kernel's CM
    // (perftest listens on one id, destroys it and listens on the same port
    // with another): the socket stops listening now, though the progress
    // thread closes it only after its current turn.
    shutdown(id->listener->fd, SHUT_RDWR);
    Fabric::get().remove(id->listener);
  }
  for (auto& w : id->listening.deferred)
    if (auto c = w.lock()) closeConn(c);
  if (auto c = id->conn) {
    // Destroying a connected id disconnects it (the kernel sends DREQ/DREP).
    if (id->state != CmState::Disconnected) {
      if (!c->eof) sendCm(*c, FrameType::Dreq, nullptr);
    }
    c->id.reset();
    closeConn(c);
    id->conn.reset();
  }
  if (id->owns_channel) freeChannel(id->channel);
  boundHwTable().erase(id.get());
  idTable().erase(rid);
  releaseRetiredContexts();
  return 0;
}

// when the attributes ask for one (ibv_create_qp_ex's own dispatch).
SOFTRDMA_API int rdma_create_qp_ex(rdma_cm_id* rid, ibv_qp_init_attr_ex* ax) {
  if (ax == nullptr) return setErr(EINVAL);
  std::shared_ptr<CmId> id;
  {
    std::lock_guard lk(Fabric::get().cm_mu);
    id = liveId(rid);
  }
  if (!id || rid->verbs == nullptr || rid->qp != nullptr) return setErr(EINVAL);
  ibv_qp_init_attr_ex a = *ax;
  if (!(a.comp_mask & IBV_QP_INIT_ATTR_PD) || a.pd == nullptr) {
    a.comp_mask |= IBV_QP_INIT_ATTR_PD;
    a.pd = rid->pd;
  }
  if (a.pd == nullptr || a.pd->context != rid->verbs) return setErr(EINVAL);
  bool own_cqs = false;
  if (a.send_cq == nullptr || a.recv_cq == nullptr) {
    // librdmacm creates CQs, each with its own channel, whose context is the id.
    rid->recv_cq_channel = ibv_create_comp_channel(rid->verbs);
    rid->send_cq_channel = ibv_create_comp_channel(rid->verbs);
    int rs = static_cast<int>(a.cap.max_recv_wr ? a.cap.max_recv_wr : 1);
    int ss = static_cast<int>(a.cap.max_send_wr ? a.cap.max_send_wr : 1);
    rid->recv_cq = ibv_create_cq(rid->verbs, rs, rid, rid->recv_cq_channel, 0);
    rid->send_cq = ibv_create_cq(rid->verbs, ss, rid, rid->send_cq_channel, 0);
    if (rid->recv_cq == nullptr || rid->send_cq == nullptr) {
      int e = errno;
      if (rid->recv_cq) ibv_destroy_cq(rid->recv_cq);
      if (rid->send_cq) ibv_destroy_cq(rid->send_cq);
      ibv_destroy_comp_channel(rid->recv_cq_channel);
      ibv_destroy_comp_channel(rid->send_cq_channel);
      rid->recv_cq = rid->send_cq = nullptr;
      rid->recv_cq_channel = rid->send_cq_channel = nullptr;
      return setErr(e);
    }
    a.send_cq = rid->send_cq;
    a.recv_cq = rid->recv_cq;
    own_cqs = true;
  }
  if (a.srq == nullptr) a.srq = rid->srq;
  ibv_qp* qp = a.comp_mask == IBV_QP_INIT_ATTR_PD
                   ? ibv_create_qp(a.pd, reinterpret_cast<ibv_qp_init_attr*>(&a))
                   : createQpExOp(rid->verbs, &a);
  if (qp == nullptr) {
    int e = errno;
    if (own_cqs) {
      ibv_destroy_cq(rid->recv_cq);
      ibv_destroy_cq(rid->send_cq);
      ibv_destroy_comp_channel(rid->recv_cq_channel);
      ibv_destroy_comp_channel(rid->send_cq_channel);
      rid->recv_cq = rid->send_cq = nullptr;
      rid->recv_cq_channel = rid->send_cq_channel = nullptr;
    }
    return setErr(e);
  }
  *ax = a;  // as librdmacm: the PD, the CQs and the granted capabilities
  std::lock_guard lk(Fabric::get().cm_mu);
  rid->qp = qp;
  rid->pd = a.pd;
  id->qp_setup.cm_created_cqs = own_cqs;
  id->qp_setup.qp_created_by_cm = true;
  int rc = cmModifyQp(id.get(), IBV_QPS_INIT);
  if (rc == 0 && isUdId(id.get())) {  // librdmacm's ucma_init_ud_qp: ready at once
    rc = cmModifyQp(id.get(), IBV_QPS_RTR);
    if (rc == 0) rc = cmModifyQp(id.get(), IBV_QPS_RTS);
  }
  if (rc != 0) return setErr(rc);
  return 0;
}

SOFTRDMA_API int rdma_create_qp(rdma_cm_id* rid, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (attr == nullptr) return setErr(EINVAL);
  // librdmacm copies the attributes into an ibv_qp_init_attr_ex (whose
  // beginning has the same layout) and back.
  ibv_qp_init_attr_ex ax{};
  memcpy(&ax, attr, sizeof *attr);
  ax.comp_mask = IBV_QP_INIT_ATTR_PD;
  ax.pd = pd;
  int rc = rdma_create_qp_ex(rid, &ax);
  memcpy(attr, &ax, sizeof *attr);
  return rc;
}

SOFTRDMA_API void rdma_destroy_qp(rdma_cm_id* rid) {
  if (rid == nullptr || rid->qp == nullptr) return;
  std::shared_ptr<CmId> id;
  {
    std::lock_guard lk(Fabric::get().cm_mu);
    id = idRef(rid);
  }
  ibv_destroy_qp(rid->qp);
  rid->qp = nullptr;
  if (id && id->qp_setup.cm_created_cqs) {
    ibv_destroy_cq(rid->send_cq);
    ibv_destroy_cq(rid->recv_cq);
    ibv_destroy_comp_channel(rid->send_cq_channel);
    ibv_destroy_comp_channel(rid->recv_cq_channel);
    rid->send_cq = rid->recv_cq = nullptr;
    rid->send_cq_channel = rid->recv_cq_channel = nullptr;
    id->qp_setup.cm_created_cqs = false;
  }
}

static bool validConnParam(const rdma_conn_param* p, size_t max_pdata) {
  if (p == nullptr) return true;
  if (p->private_data_len > max_pdata) return false;
  if (p->private_data_len > 0 && p->private_data == nullptr) return false;
  return p->responder_resources <= kMaxRdAtom && p->initiator_depth <= kMaxRdAtom;
}

// Counts a connect or accept whose QP has no receive posted (counters.h).
static void countIfNoReceive(ibv_qp* q) {
  auto qp = q != nullptr ? qpRef(q) : nullptr;
  if (!qp) return;
  std::lock_guard ql(qp->mu);
  size_t posted = qp->rq.count;
  if (qp->srq != nullptr) {
    std::lock_guard sl(qp->srq->mu);
    posted = qp->srq->rq.count;
  }
  if (posted == 0) count(Counter::ConnectWithoutRecv);
}

SOFTRDMA_API int rdma_connect(rdma_cm_id* rid, rdma_conn_param* param) {
  Fabric& f = Fabric::get();
  {
    std::lock_guard lk(f.cm_mu);
    auto id = liveId(rid);
    if (removed(id)) return setErr(ENXIO);
    if (!id || id->state != CmState::RouteResolved) return setErr(EINVAL);
    if (!validConnParam(param, isUdId(id.get()) ? kSidrReqPrivateData : kConnectPrivateData))
      return setErr(EINVAL);
    if (rid->qp == nullptr && param == nullptr) return setErr(EINVAL);
    const sockaddr* dst = &rid->route.addr.dst_addr;
    int s;
    if (id->listener) {  // connect from the bound address
      s = dup(id->listener->fd);
      Fabric::get().remove(id->listener);
      id->listener.reset();
    } else {
      s = socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (s >= 0) {
        sockaddr_storage src{};
        memcpy(&src, &rid->route.addr.src_storage, addrLen(&rid->route.addr.src_addr));
        if (bind(s, reinterpret_cast<sockaddr*>(&src), addrLen(dst)) != 0) {
          close(s);
          return -1;
        }
      }
    }
    if (s < 0) return -1;
    setNoDelay(s);
    if (id->opts.tos_set) setTos(s, dst->sa_family, id->opts.tos);
    auto c = std::make_shared<Conn>(s, ConnRole::Active);
    c->connecting = true;
    c->id = id;
    id->conn = c;
    uint32_t qpn = rid->qp != nullptr ? rid->qp->qp_num : param->qp_num;
    CmMessage m = makeMessage(qpn, param);
    sendCm(*c, FrameType::Req, &m);  // queued until the TCP connection is up
    countIfNoReceive(rid->qp);
    if (!isUdId(id.get())) attachQp(id.get());  // SIDR: the QP has no connection
    setCmState(id.get(), CmState::Connect);
    int err;
    if (portActive(contextDevice(rid->verbs))) {
      int rc = connect(s, dst, addrLen(dst));
      err = rc == 0 || errno == EINPROGRESS ? 0 : errno;
      f.add(c, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
    } else {
      err = ETIMEDOUT;  // the REQ cannot leave a port without link: no answer
    }
    if (err != 0) {
      std::weak_ptr<Conn> w = c;
      f.post([w, err] {
        if (auto cc = w.lock()) onConnConnected(cc, err);
      });
    }
    scheduleCmTimeout(id, CmState::Connect, [](const std::shared_ptr<CmId>& i) {
      setCmState(i.get(), CmState::Disconnected);
      qpToError(i.get());
      queueEvent(i, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      if (i->conn) Fabric::get().remove(i->conn);
    });
    if (!id->sync) return 0;
  }
  return syncComplete(rid);
}

SOFTRDMA_API int rdma_accept(rdma_cm_id* rid, rdma_conn_param* param) {
  {
    std::lock_guard lk(Fabric::get().cm_mu);
    auto id = liveId(rid);
    if (removed(id)) return setErr(ENXIO);
    if (!id || id->state != CmState::ReqRcvd) return setErr(EINVAL);
    if (rid->qp == nullptr && param == nullptr) return setErr(EINVAL);
    if (isUdId(id.get())) {
      int rc = udAccept(id, param);
      return rc == 0 ? 0 : setErr(rc);  // librdmacm does not wait for UD ids
    }
    if (!validConnParam(param, kAcceptPrivateData)) return setErr(EINVAL);
    if (rid->qp != nullptr) {
      int rc = cmModifyQp(id.get(), IBV_QPS_RTR);
      if (rc == 0) rc = cmModifyQp(id.get(), IBV_QPS_RTS);
      if (rc != 0) return setErr(rc);
    }
    countIfNoReceive(rid->qp);
    attachQp(id.get());
    uint32_t qpn = rid->qp != nullptr ? rid->qp->qp_num : param->qp_num;
    CmMessage m = makeMessage(qpn, param);
    setCmState(id.get(), CmState::Accepted);
    if (id->peer_gone || id->conn->eof) {
      setCmState(id.get(), CmState::Disconnected);
      queueEvent(id, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
    } else {
      sendCm(*id->conn, FrameType::Rep, &m);
    }
    if (!id->sync) return 0;
  }
  return syncComplete(rid);
}

static int reject(rdma_cm_id* rid, const void* pdata, uint8_t len, int reason) {
  std::lock_guard lk(Fabric::get().cm_mu);
  auto id = liveId(rid);
  if (removed(id)) return setErr(ENXIO);
  if (!id || id->state != CmState::ReqRcvd || len > kRejectPrivateData ||
      (len > 0 && pdata == nullptr))
    return setErr(EINVAL);
  if (isUdId(id.get())) {
    int rc = udReject(id, pdata, len);
    return rc == 0 ? 0 : setErr(rc);
  }
  CmMessage m = makeMessage(0, nullptr);
  m.reason = static_cast<uint8_t>(reason);
  m.private_data_len = len;
  if (len > 0) memcpy(m.private_data, pdata, len);
  if (!id->conn->eof) sendCm(*id->conn, FrameType::Rej, &m);
  closeConn(id->conn);
  setCmState(id.get(), CmState::Disconnected);
  return 0;
}

SOFTRDMA_API int rdma_reject(rdma_cm_id* id, const void* pdata, uint8_t len) {
  return reject(id, pdata, len, kRejConsumerDefined);
}

SOFTRDMA_API int rdma_reject_ece(rdma_cm_id* id, const void* pdata, uint8_t len) {
  return reject(id, pdata, len, 35);  // IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED
}

SOFTRDMA_API int rdma_establish(rdma_cm_id* rid) {
  std::lock_guard lk(Fabric::get().cm_mu);
  auto id = liveId(rid);
  if (removed(id)) return setErr(ENXIO);
  if (!id || id->state != CmState::RepRcvd || rid->qp != nullptr) return setErr(EINVAL);
  sendCm(*id->conn, FrameType::Rtu, nullptr);
  setCmState(id.get(), CmState::Established);
  return 0;
}

SOFTRDMA_API int rdma_disconnect(rdma_cm_id* rid) {
  std::lock_guard lk(Fabric::get().cm_mu);
  auto id = liveId(rid);
  // librdmacm first moves the QP to ERR, which fails with EIO on a removed
  // device; without a QP the kernel refuses the closed id.
  if (removed(id)) return setErr(rid->qp != nullptr ? EIO : ENXIO);
  if (!id || !id->conn) return setErr(EINVAL);
  qpToError(id.get());  // flushes every outstanding work request
  switch (id->state) {
    case CmState::Established:
    case CmState::RepRcvd:
    case CmState::Accepted:
      if (id->conn->eof) {
        setCmState(id.get(), CmState::Disconnected);
        queueEvent(id, RDMA_CM_EVENT_DISCONNECTED, 0);
        scheduleTimewait(id);
        break;
      }
      sendCm(*id->conn, FrameType::Dreq, nullptr);
      setCmState(id.get(), CmState::DisconnectSent);
      scheduleCmTimeout(id, CmState::DisconnectSent, [](const std::shared_ptr<CmId>& i) {
        setCmState(i.get(), CmState::Disconnected);
        queueEvent(i, RDMA_CM_EVENT_DISCONNECTED, -ETIMEDOUT);
        scheduleTimewait(i);
        closeConn(i->conn);
      });
      break;
    case CmState::DreqRcvd:
      if (!id->conn->eof) sendCm(*id->conn, FrameType::Drep, nullptr);
      setCmState(id.get(), CmState::Disconnected);
      scheduleTimewait(id);
      closeConn(id->conn);
      break;
    case CmState::Connect:
    case CmState::ReqRcvd:
      closeConn(id->conn);
      setCmState(id.get(), CmState::Disconnected);
      break;
    default:
      break;  // already disconnected
  }
  return 0;
}
