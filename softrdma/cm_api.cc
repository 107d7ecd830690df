// rdma_cm's public calls on event channels and identifiers: create and
// destroy, bind, listen, resolve, connect, accept, reject, disconnect, and
// getting and acknowledging events. Errors follow librdmacm: -1 with errno.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cm_internal.h"
#include "counters.h"
#include "softrdma/testing.h"

#undef ibv_reg_mr

namespace softrdma {

CmChannel* newChannel(bool sync) {
  int fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  if (fd < 0) return nullptr;
  auto* ch = new CmChannel();
  ch->ch.fd = fd;
  ch->sync = sync;
  return ch;
}

static void freeChannel(CmChannel* ch) {
  for (CmEvent* e : ch->queue)
    delete e;
  close(ch->ch.fd);
  delete ch;
}

static CmChannel* toChannel(rdma_event_channel* ch) {
  return reinterpret_cast<CmChannel*>(ch);
}

// Validates an id argument (cm_mu held): a pointer softrdma handed out and
// that has not been destroyed.
static std::shared_ptr<CmId> liveId(rdma_cm_id* id) {
  if (id == nullptr) return nullptr;
  auto p = idRef(id);
  return p && !p->destroyed ? p : nullptr;
}

// Calls on an id after its DEVICE_REMOVAL: the kernel has closed its side
// of the id (ucma_close_id), so every command fails with ENXIO.
static bool removed(const std::shared_ptr<CmId>& id) {
  return id && id->state == CmState::DeviceRemoval;
}

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

static bool validAddr(const sockaddr* a) {
  return a != nullptr && (a->sa_family == AF_INET || a->sa_family == AF_INET6);
}

static bool isWildcard(const sockaddr* a) {
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == htonl(INADDR_ANY);
  return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
}

static uint16_t portOf(const sockaddr* a) {
  return ntohs(a->sa_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(a)->sin_port
                                       : reinterpret_cast<const sockaddr_in6*>(a)->sin6_port);
}

static bool sameAddress(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  return IN6_ARE_ADDR_EQUAL(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                            &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr);
}

// rdma_cm's port rules (the kernel's cma_check_port) among this process's
// ids: another id holding the port conflicts unless both allow reuse (a
// listener no longer does); ids of different families do not meet when both
// are AF-only; a wildcard meets every address of the port (EADDRNOTAVAIL),
// the same address is EADDRINUSE. Other processes' ids are seen only
// through TCP: their listening ports. 0 or an errno value (cm_mu held).
static int checkPort(const CmId* id, const sockaddr* addr, bool reuse) {
  const uint16_t port = portOf(addr);
  if (port == 0) return 0;  // a free port is chosen
  for (auto& [rid, other] : idTable()) {
    if (other.get() == id || other->destroyed || other->bound_port != port) continue;
    if (reuse && other->reuseaddr) continue;
    const sockaddr* held = &other->id.route.addr.src_addr;
    if (id->afonly == 1 && other->afonly == 1 && held->sa_family != addr->sa_family) continue;
    if (isWildcard(addr) || isWildcard(held)) return EADDRNOTAVAIL;
    if (sameAddress(addr, held)) return EADDRINUSE;
  }
  return 0;
}

// The kernel's default for IPv6 ids that did not set RDMA_OPTION_ID_AFONLY.
static int bindV6Only() {
  FILE* f = fopen("/proc/sys/net/ipv6/bindv6only", "r");
  int v = 0;
  if (f != nullptr) {
    if (fscanf(f, "%d", &v) != 1) v = 0;
    fclose(f);
  }
  return v != 0 ? 1 : 0;
}

// Opens the TCP socket that stands for `id`'s bound address. The socket
// always has SO_REUSEADDR (a listener must rebind while its old connections
// linger in TIME_WAIT; rdma_cm ports have no TIME_WAIT): the port rules are
// checkPort's.
static int bindSocket(CmId* id, const sockaddr* addr) {
  if (id->afonly < 0) id->afonly = addr->sa_family == AF_INET ? 1 : bindV6Only();
  if (int e = checkPort(id, addr, id->reuseaddr); e != 0) return setErr(e);
  int s = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (addr->sa_family == AF_INET6)
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &id->afonly, sizeof id->afonly);
  if (bind(s, addr, addrLen(addr)) != 0) {
    int e = errno;
    close(s);
    return setErr(e);
  }
  sockaddr_storage local{};
  socklen_t l = sizeof local;
  getsockname(s, reinterpret_cast<sockaddr*>(&local), &l);
  setAddrs(id, reinterpret_cast<sockaddr*>(&local), nullptr);
  id->bound_port = portOf(reinterpret_cast<sockaddr*>(&local));
  id->listener = makeListener(s, id->self.lock());
  return 0;
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
  f.cm_cv.wait(lk, [&] { return id->events_acked >= id->events_reported; });
  id->destroyed = true;
  setCmState(id.get(), CmState::Destroying);
  for (CmEvent* e : id->queued)
    e->dead = true;  // still queued in the kernel: discarded
  // A listener's undelivered connection requests (their subjects are the
  // new ids, their owner the listener) go with it.
  for (CmEvent* e : id->channel->queue) {
    if (e->owner == id && e->subject != id && !e->dead) {
      e->dead = true;
      for (CmEvent* q : e->subject->queued)
        q->dead = true;  // e.g. its DEVICE_REMOVAL
      e->subject->queued.clear();
      e->subject->destroyed = true;
      closeConn(e->subject->conn);
      idTable().erase(&e->subject->id);
    }
  }
  id->queued.clear();
  if (id->listener) {
    // The port is free when rdma_destroy_id returns, as with the kernel's CM
    // (perftest listens on one id, destroys it and listens on the same port
    // with another): the socket stops listening now, though the progress
    // thread closes it only after its current turn.
    shutdown(id->listener->fd, SHUT_RDWR);
    Fabric::get().remove(id->listener);
  }
  for (auto& w : id->deferred)
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
  idTable().erase(rid);
  releaseRetiredContexts();
  return 0;
}

SOFTRDMA_API int rdma_bind_addr(rdma_cm_id* rid, sockaddr* addr) {
  std::lock_guard lk(Fabric::get().cm_mu);
  auto id = liveId(rid);
  if (removed(id)) return setErr(ENXIO);
  if (!id || !validAddr(addr) || id->state != CmState::Idle) return setErr(EINVAL);
  // A specific address needs the device that holds it (the kernel's
  // cma_acquire_dev_by_src_ip); a wildcard bind needs no device.
  if (!isWildcard(addr) && Fabric::get().cmContext() == nullptr) return setErr(ENODEV);
  if (bindSocket(id.get(), addr) != 0) return -1;
  if (!isWildcard(addr)) bindToDevice(id.get());
  setCmState(id.get(), CmState::AddrBound);
  return 0;
}

SOFTRDMA_API int rdma_listen(rdma_cm_id* rid, int backlog) {
  std::lock_guard lk(Fabric::get().cm_mu);
  auto id = liveId(rid);
  if (removed(id)) return setErr(ENXIO);
  if (!id || id->state != CmState::AddrBound || !id->listener) return setErr(EINVAL);
  // A listener holds its port alone (the kernel's rdma_listen checks the
  // port again, without reuse, and then no longer shares it).
  if (id->reuseaddr) {
    if (int e = checkPort(id.get(), &rid->route.addr.src_addr, false); e != 0) return setErr(e);
    id->reuseaddr = false;
  }
  if (listen(id->listener->fd, SOMAXCONN) != 0) return -1;
  id->backlog = backlog > 0 && backlog < 1024 ? backlog : 1024;
  setCmState(id.get(), CmState::Listen);
  listenerStart(id.get());
  return 0;
}

SOFTRDMA_API int rdma_resolve_addr(rdma_cm_id* rid, sockaddr* src, sockaddr* dst, int) {
  {
    std::lock_guard lk(Fabric::get().cm_mu);
    auto id = liveId(rid);
    if (removed(id)) return setErr(ENXIO);
    if (!id || !validAddr(dst) || (src != nullptr && !validAddr(src)) ||
        (id->state != CmState::Idle && id->state != CmState::AddrBound))
      return setErr(EINVAL);
    if (src != nullptr && id->state == CmState::Idle) {
      if (!isWildcard(src) && Fabric::get().cmContext() == nullptr) return setErr(ENODEV);
      if (bindSocket(id.get(), src) != 0) return -1;
      setCmState(id.get(), CmState::AddrBound);
    }
    // Route lookup, as the kernel does for the source address: a connected
    // UDP socket sends nothing and reports the source the route would use.
    int u = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int err = u < 0 ? errno : 0;
    sockaddr_storage dst_copy{};
    memcpy(&dst_copy, dst, addrLen(dst));
    auto* d = reinterpret_cast<sockaddr*>(&dst_copy);
    if (d->sa_family == AF_INET && reinterpret_cast<sockaddr_in*>(d)->sin_port == 0)
      reinterpret_cast<sockaddr_in*>(d)->sin_port = htons(9);  // only for the lookup
    // From a bound source, the lookup is made from that address (the
    // kernel's rdma_resolve_ip routes from the source too).
    if (err == 0 && id->listener) {
      sockaddr_storage from{};
      memcpy(&from, &id->id.route.addr.src_storage, addrLen(&id->id.route.addr.src_addr));
      reinterpret_cast<sockaddr_in*>(&from)->sin_port = 0;  // same offset for IPv6
      if (from.ss_family == d->sa_family &&
          bind(u, reinterpret_cast<sockaddr*>(&from), addrLen(d)) != 0)
        err = errno;
    }
    if (err == 0 && connect(u, d, addrLen(d)) != 0) err = errno;
    sockaddr_storage local{};
    socklen_t ll = sizeof local;
    if (err == 0) getsockname(u, reinterpret_cast<sockaddr*>(&local), &ll);
    if (u >= 0) close(u);
    if (err == 0 && isWildcard(dst)) err = EADDRNOTAVAIL;
    if (err != 0) return setErr(err);  // no route: the kernel fails the call itself
    setCmState(id.get(), CmState::AddrQuery);
    // The route exists, but no device holds the source address (the device
    // was removed: cma_acquire_dev_by_src_ip fails with ENODEV), or no
    // neighbour answers on a port without link (ARP times out): ADDR_ERROR,
    // and the id is back to bound (the kernel's addr_handler).
    int addr_err = 0;
    if (!portActive() && Fabric::get().cmContext() != nullptr)
      addr_err = ETIMEDOUT;
    else if (!bindToDevice(id.get()))
      addr_err = ENODEV;
    if (addr_err != 0) {
      setCmState(id.get(), CmState::AddrBound);
      queueEvent(id, RDMA_CM_EVENT_ADDR_ERROR, -addr_err);
    } else {
      const sockaddr* s = reinterpret_cast<sockaddr*>(&local);
      if (id->listener) s = &id->id.route.addr.src_addr;
      sockaddr_storage src_now{};
      memcpy(&src_now, s, addrLen(s));
      if (!id->listener) reinterpret_cast<sockaddr_in*>(&src_now)->sin_port = 0;
      setAddrs(id.get(), reinterpret_cast<sockaddr*>(&src_now), dst);
      setCmState(id.get(), CmState::AddrResolved);
      queueEvent(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    }
    if (!id->sync) return 0;
  }
  return syncComplete(rid);
}

SOFTRDMA_API int rdma_resolve_route(rdma_cm_id* rid, int) {
  {
    std::lock_guard lk(Fabric::get().cm_mu);
    auto id = liveId(rid);
    if (removed(id)) return setErr(ENXIO);
    if (!id || id->state != CmState::AddrResolved) return setErr(EINVAL);
    ibv_sa_path_rec& p = id->path;
    memset(&p, 0, sizeof p);
    p.sgid = id->id.route.addr.addr.ibaddr.sgid;
    p.dgid = id->id.route.addr.addr.ibaddr.dgid;
    p.pkey = htons(0xffff);
    p.mtu = IBV_MTU_4096;
    p.hop_limit = 64;
    p.traffic_class = id->tos_set ? id->tos : 0;  // RDMA_OPTION_ID_TOS; the kernel's default 0
    p.reversible = 1;
    p.numb_path = 1;
    id->id.route.path_rec = &p;
    id->id.route.num_paths = 1;
    setCmState(id.get(), CmState::RouteResolved);
    queueEvent(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    if (!id->sync) return 0;
  }
  return syncComplete(rid);
}

// librdmacm's rdma_create_qp_ex: the id's PD unless one is given, a send and
// a receive CQ (each with its own channel) when none are, and an extended QP
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
  id->cm_created_cqs = own_cqs;
  id->qp_created_by_cm = true;
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
  if (id && id->cm_created_cqs) {
    ibv_destroy_cq(rid->send_cq);
    ibv_destroy_cq(rid->recv_cq);
    ibv_destroy_comp_channel(rid->send_cq_channel);
    ibv_destroy_comp_channel(rid->recv_cq_channel);
    rid->send_cq = rid->recv_cq = nullptr;
    rid->send_cq_channel = rid->recv_cq_channel = nullptr;
    id->cm_created_cqs = false;
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
    if (id->tos_set) setTos(s, dst->sa_family, id->tos);
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
    if (portActive()) {
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
    auto& q = e->subject->queued;
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (*it == e) {
        q.erase(it);
        break;
      }
    }
    e->owner->events_reported++;
    if (e->ev.event == RDMA_CM_EVENT_MULTICAST_JOIN) onJoinEvent(e);
    if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      e->owner->queued_requests--;
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
    e->owner->events_acked++;
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
  f.cm_cv.wait(lk, [&] { return id->events_acked >= id->events_reported; });
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
