// rdma_cm's connection handshake, with the event sequences of IB/RoCE
// (softrdma-notes.md C.2).
//
// This file is the connection engine: the listening side, the CM frames of
// the handshake and disconnection arriving on a connection, and a
// connection's loss. cm_id.cc holds the ids' shared helpers, cm_events.cc
// the event channels, cm_api.cc and cm_addr.cc the public calls.
//
// rdma_cm port P on address A is TCP port P on A: a listening id owns a
// listening socket; each connection is one TCP connection that first
// carries REQ / REP (or REJ) / RTU and then the QP's traffic.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_map>

#include "base.h"
#include "cm_id.h"
#include "cm_internal.h"
#include "conn.h"
#include "device.h"
#include "fabric.h"
#include "fork_hooks.h"
#include "manual_qp.h"
#include "netdev.h"
#include "qp.h"
#include "wire.h"

namespace softrdma {

namespace {
constexpr uint32_t kEvIn = EPOLLIN | EPOLLRDHUP | EPOLLET;
}  // namespace

// Connections accepted or requested without a QP on the id, waiting for the
// program to move its own QP to RTR (keyed by the remote QP number).
std::unordered_map<uint32_t, std::weak_ptr<Conn>>& pendingBinds() {
  static auto* t = new std::unordered_map<uint32_t, std::weak_ptr<Conn>>();
  return *t;
}

void forkCm(ForkStep s) {
  if (s != ForkStep::Child) return;
  abandon(idTable());  // the parent's ids: every rdma_cm call on them fails with EINVAL
  abandon(pendingBinds());
}

struct Listener : Endpoint {
  std::weak_ptr<CmId> id;
  void onEvents(uint32_t) override;
};

void bindPendingConn(const std::shared_ptr<Qp>& qp) {
  std::shared_ptr<Conn> conn;
  {
    std::lock_guard lk(qp->mu);
    conn = qp->conn;
  }
  if (conn) {
    conn->kick();
    return;
  }
  {
    std::lock_guard lk(Fabric::get().cm_mu);
    auto it = pendingBinds().find(qp->attr.dest_qp_num);
    if (it != pendingBinds().end()) {
      conn = it->second.lock();
      pendingBinds().erase(it);
    }
  }
  if (!conn) {
    manualConnect(qp);  // no rdma_cm connection: the ibv_rc_pingpong way
    return;
  }
  {
    std::lock_guard ql(qp->mu);
    qp->conn = conn;
  }
  conn->bindQp(qp);
}

// Attaches `id`'s connection to its QP (rdma_connect / rdma_accept), or
// leaves it for the program's own QP (no QP on the id).
void attachQp(CmId* id) {
  if (id->id.qp == nullptr) {
    if (id->params.remote_qpn != 0 && !id->conn->boundQp())
      pendingBinds()[id->params.remote_qpn] = id->conn;
    return;
  }
  auto qp = qpRef(id->id.qp);
  if (!qp) return;
  {
    std::lock_guard lk(qp->mu);
    qp->conn = id->conn;
  }
  id->conn->bindQp(qp);
}

// ------------------------------------------------------------ listening

void Listener::onEvents(uint32_t) {
  for (;;) {
    int s = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN, or out of descriptors: try again on the next edge
    }
    setNoDelay(s);
    auto c = std::make_shared<Conn>(s, ConnRole::Passive);
    {
      std::lock_guard lk(Fabric::get().cm_mu);
      c->listener_id = id;
    }
    Fabric::get().add(c, kEvIn);
    // A peer that never completes the handshake does not hold a socket forever.
    std::weak_ptr<Conn> w = c;
    Fabric& f = Fabric::get();
    f.schedule(Clock::now() + std::chrono::milliseconds(f.cm_timeout_ms), [w] {
      auto conn = w.lock();
      if (!conn) return;
      bool orphan;
      {
        std::lock_guard lk(Fabric::get().cm_mu);
        orphan = conn->id.expired();
      }
      if (orphan && !conn->eof) conn->fail("no connection request in time");
    });
  }
}

std::shared_ptr<Endpoint> makeListener(int fd, const std::shared_ptr<CmId>& id) {
  auto l = std::make_shared<Listener>();
  l->fd = fd;
  l->id = id;
  return l;
}

void listenerStart(CmId* id) {
  Fabric::get().add(id->listener, EPOLLIN);
}

// ------------------------------------------------------ incoming frames

void onReq(const std::shared_ptr<Conn>& c, const CmMessage& m) {
  auto listener = c->listener_id.lock();
  // No device, or no link, to receive the REQ: it goes unanswered, which the
  // active side reports as UNREACHABLE (-ETIMEDOUT) when the connection drops.
  auto drop = [&](const char* why) {
    debugLog("connection request dropped: %s", why);
    closeConn(c);
  };
  if (listener && listener->state == CmState::DeviceRemoval) return drop("listener removed");
  // The device is the one holding the address the REQ came to.
  if (const int dev = deviceOfSocket(c->fd); dev >= 0 && !portActive(dev))
    return drop("the port is down");
  const bool ud = listener && isUdId(listener.get());
  const size_t pdata_max = ud ? kSidrReqPrivateData : kConnectPrivateData;
  if (!listener || listener->destroyed || listener->state != CmState::Listen ||
      m.private_data_len > pdata_max) {
    debugLog("connection request rejected: %s",
             m.private_data_len > pdata_max ? "private data too long" : "nobody listens");
    CmMessage rej = makeMessage(0, nullptr);
    rej.reason = kRejInvalidServiceId;
    sendCm(*c, FrameType::Rej, &rej);
    closeConn(c);
    return;
  }
  if (listener->listening.queued_requests >= listener->listening.backlog) {
    c->deferred_req = m;  // like a REQ the CM retries until the backlog has room
    listener->listening.deferred.push_back(c);
    return;
  }
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  getsockname(c->fd, reinterpret_cast<sockaddr*>(&local), &ll);
  getpeername(c->fd, reinterpret_cast<sockaddr*>(&peer), &pl);
  unmapV4(local);
  unmapV4(peer);
  auto id = std::make_shared<CmId>();
  if (!bindToDevice(id.get(), reinterpret_cast<sockaddr*>(&local)))
    return drop("no device holds the address");
  id->self = id;
  id->sync = listener->sync;
  if (listener->sync) {
    id->channel = newChannel(true);
    id->owns_channel = true;
  } else {
    id->channel = listener->channel;
  }
  id->id.channel = &id->channel->ch;
  id->id.context = listener->id.context;
  id->id.ps = listener->id.ps;
  id->id.qp_type = listener->id.qp_type;
  id->listen_parent = listener.get();
  setAddrs(id.get(), reinterpret_cast<sockaddr*>(&local), reinterpret_cast<sockaddr*>(&peer));
  if (listener->opts.tos_set) {  // the listener's TOS: its connections' and their path's
    id->opts.tos_set = true;
    id->opts.tos = listener->opts.tos;
    setTos(c->fd, local.ss_family, listener->opts.tos);
  }
  id->path.traffic_class = id->opts.tos;
  id->params.remote_qpn = m.qpn;
  c->remote_qpn = m.qpn;
  if (!ud) pendingBinds()[m.qpn] = c;  // for a QP the program moves itself (no QP on the id)
  id->params.remote_rnr_retry = m.rnr_retry_count;
  id->params.remote_retry = m.retry_count;
  id->params.responder_resources = m.responder_resources;
  id->params.initiator_depth = m.initiator_depth;
  id->conn = c;
  c->id = id;
  setCmState(id.get(), CmState::ReqRcvd);
  idTable()[&id->id] = id;
  listener->listening.queued_requests++;
  queueEvent(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, m.private_data, m.private_data_len, pdata_max,
             listener);
  if (!ud) fillConnParam(id->events.queued.back()->ev.param.conn, m);
}

// A listener whose backlog has room again admits deferred requests (cm_mu).
void admitDeferred(CmId* listener) {
  while (!listener->listening.deferred.empty() &&
         listener->listening.queued_requests < listener->listening.backlog) {
    auto c = listener->listening.deferred.front().lock();
    listener->listening.deferred.erase(listener->listening.deferred.begin());
    if (!c || c->eof) continue;
    onReq(c, c->deferred_req);
  }
}

void onCmFrame(const std::shared_ptr<Conn>& c, FrameType t, const CmMessage& m) {
  if (t == FrameType::Attach) {
    manualAttach(c, m);
    return;
  }
  std::lock_guard lk(Fabric::get().cm_mu);
  if (t == FrameType::Req) {
    if (c->role != ConnRole::Passive || !c->id.expired()) {
      c->fail("unexpected REQ");
      return;
    }
    onReq(c, m);
    return;
  }
  auto id = c->id.lock();
  if (!id || id->destroyed) return;
  if (isUdId(id.get()) && (t == FrameType::Rep || t == FrameType::Rej)) {
    onSidrRep(id, c, t, m);
    return;
  }
  switch (t) {
    case FrameType::Rep:
      if (id->state != CmState::Connect || m.private_data_len > kAcceptPrivateData) break;
      id->params.remote_qpn = m.qpn;
      c->remote_qpn = m.qpn;
      id->params.remote_rnr_retry = m.rnr_retry_count;
      id->params.responder_resources = m.responder_resources;
      id->params.initiator_depth = m.initiator_depth;
      id->timer_gen++;
      setCmState(id.get(), CmState::RepRcvd);
      if (id->id.qp == nullptr) pendingBinds()[m.qpn] = c;
      queueEvent(id, RDMA_CM_EVENT_ESTABLISHED, 0, m.private_data, m.private_data_len,
                 kAcceptPrivateData, nullptr, true);
      fillConnParam(id->events.queued.back()->ev.param.conn, m);
      return;
    case FrameType::Rej:
      if (id->state != CmState::Connect) break;
      id->timer_gen++;
      setCmState(id.get(), CmState::Disconnected);
      qpToError(id.get());
      queueEvent(id, RDMA_CM_EVENT_REJECTED, m.reason, m.private_data, m.private_data_len,
                 kRejectPrivateData);
      closeConn(c);
      return;
    case FrameType::Rtu:
      if (id->state != CmState::Accepted) break;
      setCmState(id.get(), CmState::Established);
      queueEvent(id, RDMA_CM_EVENT_ESTABLISHED, 0);
      return;
    case FrameType::Dreq:
      if (id->state == CmState::DisconnectSent) {  // both sides disconnected at once
        sendCm(*c, FrameType::Drep, nullptr);
        setCmState(id.get(), CmState::Disconnected);
        id->timer_gen++;
        queueEvent(id, RDMA_CM_EVENT_DISCONNECTED, 0);
        scheduleTimewait(id);
        closeConn(c);
        return;
      }
      if (id->state != CmState::Established && id->state != CmState::RepRcvd &&
          id->state != CmState::Accepted)
        break;
      setCmState(id.get(), CmState::DreqRcvd);
      queueEvent(id, RDMA_CM_EVENT_DISCONNECTED, 0);
      return;
    case FrameType::Drep:
      if (id->state != CmState::DisconnectSent) break;
      id->timer_gen++;
      setCmState(id.get(), CmState::Disconnected);
      queueEvent(id, RDMA_CM_EVENT_DISCONNECTED, 0);
      scheduleTimewait(id);
      closeConn(c);
      return;
    default:
      break;
  }
  debugLog("cm id %p: ignoring CM frame %d in state %s", static_cast<void*>(id.get()),
           static_cast<int>(t), toString(id->state));
}

void onConnConnected(const std::shared_ptr<Conn>& c, int err) {
  std::lock_guard lk(Fabric::get().cm_mu);
  auto id = c->id.lock();
  if (!id || id->destroyed || id->state != CmState::Connect) return;
  if (err == 0) return;
  debugLog("cm id %p: connection to the peer failed: %s", static_cast<void*>(id.get()),
           strerror(err));
  id->timer_gen++;
  setCmState(id.get(), CmState::Disconnected);
  qpToError(id.get());
  if (err == ECONNREFUSED && isUdId(id.get()))  // SIDR: the REP says "unsupported"
    queueEvent(id, RDMA_CM_EVENT_UNREACHABLE, 1);
  else if (err == ECONNREFUSED)  // nobody listens: the CM rejects with "invalid service ID"
    queueEvent(id, RDMA_CM_EVENT_REJECTED, kRejInvalidServiceId, nullptr, 0, kRejectPrivateData);
  else
    queueEvent(id, RDMA_CM_EVENT_UNREACHABLE, -err);
  Fabric::get().remove(c);
}

void removeCmDevice() {
  Fabric& f = Fabric::get();
  std::lock_guard lk(f.cm_mu);
  for (int i = 0; i < deviceCount(); i++)
    f.cmContext(i);  // retires librdmacm's context of the removed device
  pendingBinds().clear();
  // Ids bound to the removed device get DEVICE_REMOVAL, and the kernel
  // forgets them (ucma_close_id): no further events, calls fail with ENXIO.
  // Ids without a device (idle, or bound to a wildcard address) are not
  // concerned: a wildcard listener listens on the device when it returns.
  for (auto& [rid, id] : idTable()) {
    if (id->destroyed || id->state == CmState::DeviceRemoval || !contextDead(rid->verbs)) continue;
    queueEvent(id, RDMA_CM_EVENT_DEVICE_REMOVAL, 0);
    setCmState(id.get(), CmState::DeviceRemoval);
    id->timer_gen++;
    id->listening.deferred.clear();  // their connections are severed with the rest
  }
}

// The kernel's cma_netdev_callback / cma_netdev_change: every id whose
// bound interface is the one that changed and whose recorded hardware
// address differs from its new one gets ADDR_CHANGE, listeners and
// connections alike (cma_work_handler skips ids being destroyed or removed).
// Nothing else changes: the recorded address stays (the kernel does not
// update src_dev_addr), connections carry on, the program decides.
void changeCmAddress(unsigned ifindex, const std::string& hw) {
  std::lock_guard lk(Fabric::get().cm_mu);
  const auto& bound = boundHwTable();
  for (auto& [rid, id] : idTable()) {
    auto b = bound.find(id.get());
    if (b == bound.end() || b->second.ifindex != ifindex || b->second.hw == hw) continue;
    queueEvent(id, RDMA_CM_EVENT_ADDR_CHANGE, 0);  // none after destroy or DEVICE_REMOVAL
  }
}

void onConnLost(const std::shared_ptr<Conn>& c, const char* why) {
  std::lock_guard lk(Fabric::get().cm_mu);
  auto id = c->id.lock();
  if (!id || id->destroyed) return;
  debugLog("cm id %p: connection lost in state %s: %s", static_cast<void*>(id.get()),
           toString(id->state), why);
  switch (id->state) {
    case CmState::Connect:
      id->timer_gen++;
      setCmState(id.get(), CmState::Disconnected);
      qpToError(id.get());
      queueEvent(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      break;
    case CmState::ReqRcvd:
      id->peer_gone = true;  // reported when the program accepts
      break;
    case CmState::Accepted:
      setCmState(id.get(), CmState::Disconnected);
      queueEvent(id, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
      break;
    case CmState::RepRcvd:
    case CmState::Established:
      // The peer vanished without a DREQ: report it as one.
      setCmState(id.get(), CmState::DreqRcvd);
      id->peer_gone = true;
      queueEvent(id, RDMA_CM_EVENT_DISCONNECTED, 0);
      break;
    case CmState::DisconnectSent:
      id->timer_gen++;
      setCmState(id.get(), CmState::Disconnected);
      queueEvent(id, RDMA_CM_EVENT_DISCONNECTED, 0);
      scheduleTimewait(id);
      break;
    default:
      break;
  }
}

}  // namespace softrdma
