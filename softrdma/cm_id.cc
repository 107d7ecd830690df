// rdma_cm's identifiers and what every rdma_cm file does with them: the
// id table, addresses, CM messages on a connection, states, and queueing
// events on an id's channel. Callers hold Fabric::cm_mu unless a comment
// says otherwise.
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "base.h"
#include "cm_id.h"
#include "cm_internal.h"
#include "conn.h"
#include "cq.h"
#include "device.h"
#include "fabric.h"
#include "netdev.h"
#include "pd_mr.h"
#include "wire.h"

namespace softrdma {

std::unordered_map<rdma_cm_id*, std::shared_ptr<CmId>>& idTable() {
  static auto* t = new std::unordered_map<rdma_cm_id*, std::shared_ptr<CmId>>();
  return *t;
}

std::unordered_map<const CmId*, BoundHw>& boundHwTable() {
  static auto* t = new std::unordered_map<const CmId*, BoundHw>();
  return *t;
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void setTos(int fd, int family, uint8_t tos) {
  int v = tos;
  if (family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &v, sizeof v);
  setsockopt(fd, IPPROTO_IP, IP_TOS, &v, sizeof v);  // also for IPv4 on a dual-stack socket
}

// An IPv4-mapped IPv6 address (an IPv4 peer of a dual-stack listener)
// becomes the IPv4 address the kernel's CM reports for it.
void unmapV4(sockaddr_storage& a) {
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&a);
  if (a.ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) return;
  sockaddr_in a4{};
  a4.sin_family = AF_INET;
  a4.sin_port = a6->sin6_port;
  memcpy(&a4.sin_addr, &a6->sin6_addr.s6_addr[12], 4);
  memset(&a, 0, sizeof a);
  memcpy(&a, &a4, sizeof a4);
}

socklen_t addrLen(const sockaddr* a) {
  return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

void toGid(const sockaddr* a, ibv_gid& g) {
  memset(&g, 0, sizeof g);
  if (a->sa_family == AF_INET) {
    g.raw[10] = g.raw[11] = 0xff;
    memcpy(&g.raw[12], &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
  } else if (a->sa_family == AF_INET6) {
    memcpy(g.raw, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
  }
}

void setAddrs(CmId* id, const sockaddr* src, const sockaddr* dst) {
  rdma_addr& a = id->id.route.addr;
  if (src != nullptr) memcpy(&a.src_storage, src, addrLen(src));
  if (dst != nullptr) memcpy(&a.dst_storage, dst, addrLen(dst));
  toGid(&a.src_addr, a.addr.ibaddr.sgid);
  toGid(&a.dst_addr, a.addr.ibaddr.dgid);
  a.addr.ibaddr.pkey = htons(0xffff);
}

bool bindToDevice(CmId* id, const sockaddr* src) {
  const int dev = deviceForAddress(src);
  if (dev < 0) return false;  // no device over the interface that holds it
  Fabric& f = Fabric::get();
  Context* c = f.cmContext(dev);
  Pd* pd = f.cmPd(dev);
  if (c == nullptr || pd == nullptr || pd->pd.context != c->ctx()) return false;  // no device
  id->id.verbs = c->ctx();
  id->id.port_num = 1;
  id->id.pd = &pd->pd;
  if (std::string hw = interfaceHwAddr(dev); !hw.empty())
    boundHwTable()[id] = BoundHw{interfaceIndex(dev), std::move(hw)};
  else
    boundHwTable().erase(id);  // one device over every address: no interface
  return true;
}

CmMessage makeMessage(uint32_t qpn, const rdma_conn_param* p) {
  CmMessage m{};
  m.magic = kCmMagic;
  m.qpn = qpn;
  m.responder_resources = p ? p->responder_resources : 1;
  m.initiator_depth = p ? p->initiator_depth : 1;
  m.retry_count = p ? (p->retry_count & 7) : 7;
  m.rnr_retry_count = p ? (p->rnr_retry_count & 7) : 7;
  m.flow_control = p ? p->flow_control : 1;
  m.srq = p ? p->srq : 0;
  if (p != nullptr && p->private_data != nullptr && p->private_data_len > 0) {
    m.private_data_len = p->private_data_len;
    memcpy(m.private_data, p->private_data, p->private_data_len);
  }
  return m;
}

void sendCm(Conn& c, FrameType t, const CmMessage* m) {
  c.sendFrame(t, 0, 0, m, m != nullptr ? sizeof *m : 0);
}

void scheduleTimewait(const std::shared_ptr<CmId>& id) {
  std::weak_ptr<CmId> w = id;
  auto when = Clock::now() + std::chrono::milliseconds(Fabric::get().timewait_ms);
  Fabric::get().schedule(when, [w] {
    auto i = w.lock();
    if (!i) return;
    std::lock_guard lk(Fabric::get().cm_mu);
    if (!i->destroyed && i->state == CmState::Disconnected)
      queueEvent(i, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
  });
}

void closeConn(const std::shared_ptr<Conn>& c) {
  if (!c) return;
  c->shutdownAfterFlush();
}

// The QP of `id` moves to error (librdmacm's ucma_modify_qp_err).
void qpToError(CmId* id) {
  if (id->id.qp != nullptr) cmModifyQp(id, IBV_QPS_ERR);
}

CmId* toCmId(rdma_cm_id* id) {
  return reinterpret_cast<CmId*>(id);
}

std::shared_ptr<CmId> idRef(rdma_cm_id* id) {
  auto it = idTable().find(id);
  return it != idTable().end() ? it->second : nullptr;
}

const char* toString(CmState s) {
  switch (s) {
    case CmState::Idle:
      return "idle";
    case CmState::AddrBound:
      return "addr-bound";
    case CmState::AddrQuery:
      return "addr-query";
    case CmState::AddrResolved:
      return "addr-resolved";
    case CmState::RouteQuery:
      return "route-query";
    case CmState::RouteResolved:
      return "route-resolved";
    case CmState::Listen:
      return "listen";
    case CmState::Connect:
      return "connect";
    case CmState::ReqRcvd:
      return "req-rcvd";
    case CmState::Accepted:
      return "accepted";
    case CmState::RepRcvd:
      return "rep-rcvd";
    case CmState::Established:
      return "established";
    case CmState::DisconnectSent:
      return "disconnect-sent";
    case CmState::DreqRcvd:
      return "dreq-rcvd";
    case CmState::Disconnected:
      return "disconnected";
    case CmState::DeviceRemoval:
      return "device-removal";
    case CmState::Destroying:
      return "destroying";
  }
  return "?";
}

void setCmState(CmId* id, CmState s) {
  debugLog("cm id %p: %s -> %s", static_cast<void*>(id), toString(id->state), toString(s));
  id->state = s;
}

void signalChannel(CmChannel* ch) {
  if (ch->held)
    ch->held_tokens++;
  else
    signalToken(ch->ch.fd);
}

void queueEvent(const std::shared_ptr<CmId>& subject, rdma_cm_event_type type, int status,
                const void* pdata, size_t pdata_len, size_t pdata_size,
                const std::shared_ptr<CmId>& owner, bool rep) {
  // After DEVICE_REMOVAL the kernel destroys its side of the id: nothing more.
  if (subject->destroyed || subject->state == CmState::DeviceRemoval) return;
  auto* e = new CmEvent();
  e->subject = subject;
  e->owner = owner ? owner : subject;
  e->rep = rep;
  e->ev.id = &subject->id;
  e->ev.listen_id = subject->listen_parent != nullptr && type == RDMA_CM_EVENT_CONNECT_REQUEST
                        ? &subject->listen_parent->id
                        : nullptr;
  e->ev.event = type;
  e->ev.status = status;
  if (pdata_size > 0) {
    if (pdata != nullptr && pdata_len > 0) memcpy(e->pdata, pdata, pdata_len);
    e->ev.param.conn.private_data = e->pdata;
    e->ev.param.conn.private_data_len = static_cast<uint8_t>(pdata_size);
  }
  CmChannel* ch = e->owner->channel;
  ch->queue.push_back(e);
  subject->events.queued.push_back(e);
  signalChannel(ch);
  debugLog("cm id %p: queued %s status %d", static_cast<void*>(subject.get()), rdma_event_str(type),
           status);
}

void fillConnParam(rdma_conn_param& p, const CmMessage& m) {
  p.responder_resources = m.responder_resources;
  p.initiator_depth = m.initiator_depth;
  p.flow_control = m.flow_control;
  p.retry_count = m.retry_count;
  p.rnr_retry_count = m.rnr_retry_count;
  p.srq = m.srq;
  p.qp_num = m.qpn;
}

// Validates an id argument (cm_mu held): a pointer softrdma handed out and
// that has not been destroyed.
std::shared_ptr<CmId> liveId(rdma_cm_id* id) {
  if (id == nullptr) return nullptr;
  auto p = idRef(id);
  return p && !p->destroyed ? p : nullptr;
}

// Calls on an id after its DEVICE_REMOVAL: the kernel has closed its side
// of the id (ucma_close_id), so every command fails with ENXIO.
bool removed(const std::shared_ptr<CmId>& id) {
  return id && id->state == CmState::DeviceRemoval;
}

CmChannel* newChannel(bool sync) {
  int fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  if (fd < 0) return nullptr;
  auto* ch = new CmChannel();
  ch->ch.fd = fd;
  ch->sync = sync;
  return ch;
}

void freeChannel(CmChannel* ch) {
  for (CmEvent* e : ch->queue)
    delete e;
  close(ch->ch.fd);
  delete ch;
}

CmChannel* toChannel(rdma_event_channel* ch) {
  return reinterpret_cast<CmChannel*>(ch);
}

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE:
      return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED:
      return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED:
      return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED:
      return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN:
      return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR:
      return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE:
      return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
    default:
      return "UNKNOWN EVENT";
  }
}
