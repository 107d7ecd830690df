// rdma_cm for UD ids (RDMA_PS_UDP, RDMA_PS_IPOIB): service ID resolution
// (SIDR) instead of a connection, and multicast joins, as the kernel's CM
// does them on RoCE (cma.c: cma_resolve_ib_udp, cma_sidr_rep_handler,
// cma_iboe_join_multicast) and librdmacm presents them (param.ud).
//
// SIDR rides the same TCP connection as a connection's handshake, and ends
// with it: the REQ carries up to 180 bytes of private data and the active
// QP's number; the REP carries the passive QP's number, its Q_Key (in
// private_data[192..195], beyond the 136 bytes a SIDR REP may carry) and a
// status in `reason` (0 success, 1 no such service, 2 rejected). The
// passive side reports nothing after its rdma_accept; the active side gets
// ESTABLISHED with param.ud (the AH to reach the passive QP, its number and
// Q_Key), or UNREACHABLE with the SIDR status.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "cm_internal.h"
#include "ud.h"

namespace softrdma {

namespace {

constexpr size_t kQkeyOffset = 192;
constexpr uint8_t kSidrUnsupported = 1;  // IB_SIDR_UNSUPPORTED: nobody serves the port
constexpr uint8_t kSidrReject = 2;       // IB_SIDR_REJECT

// The address handle of the id's route (ib_init_ah_attr_from_path).
ibv_ah_attr routeAh(CmId* id) {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.port_num = 1;
  ah.grh.dgid = id->id.route.addr.addr.ibaddr.dgid;
  in6_addr s;
  memcpy(&s, id->id.route.addr.addr.ibaddr.sgid.raw, sizeof s);
  int idx = gidIndex(s);
  ah.grh.sgid_index = static_cast<uint8_t>(idx < 0 ? 0 : idx);
  ah.grh.hop_limit = id->path.hop_limit != 0 ? id->path.hop_limit : 64;
  ah.grh.traffic_class = id->tos_set ? id->tos : 0;
  return ah;
}

// The multicast GID of a group address (cma_iboe_set_mgid), or false if it
// is not a multicast address.
bool mgidOf(const sockaddr* a, ibv_gid& g) {
  memset(&g, 0, sizeof g);
  if (a->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a);
    g.raw[10] = g.raw[11] = 0xff;
    memcpy(&g.raw[12], &in->sin_addr, 4);
  } else if (a->sa_family == AF_INET6) {
    memcpy(g.raw, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
  } else {
    return false;
  }
  return gidIsMulticast(g.raw);
}

bool sameGroup(const sockaddr_storage& a, const sockaddr* b) {
  ibv_gid x, y;
  return a.ss_family == b->sa_family && mgidOf(reinterpret_cast<const sockaddr*>(&a), x) &&
         mgidOf(b, y) && memcmp(&x, &y, sizeof x) == 0;
}

}  // namespace

int udInitQpAttr(CmId* id, ibv_qp_attr* a, int* mask) {
  (void)id;
  switch (a->qp_state) {
    case IBV_QPS_INIT:
      a->pkey_index = 0;
      a->port_num = 1;
      a->qkey = RDMA_UDP_QKEY;  // cma_set_qkey's for the UDP port space
      *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
      return 0;
    case IBV_QPS_RTR:
    case IBV_QPS_ERR:
    case IBV_QPS_RESET:
      *mask = IBV_QP_STATE;
      return 0;
    case IBV_QPS_RTS:
      a->sq_psn = 0;
      *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      return 0;
    default:
      return EINVAL;
  }
}

int udAccept(const std::shared_ptr<CmId>& id, const rdma_conn_param* param) {
  if (param != nullptr && param->private_data_len > kSidrRepPrivateData) return EINVAL;
  uint32_t qpn = id->id.qp != nullptr ? id->id.qp->qp_num : param->qp_num;
  CmMessage m = makeMessage(qpn, param);
  uint32_t qkey = RDMA_UDP_QKEY;
  memcpy(&m.private_data[kQkeyOffset], &qkey, sizeof qkey);
  std::shared_ptr<Conn> c = id->conn;
  if (!c->eof) sendCm(*c, FrameType::Rep, &m);
  setCmState(id.get(), CmState::Established);  // SIDR: nothing follows on this side
  c->id.reset();
  id->conn.reset();
  closeConn(c);
  return 0;
}

int udReject(const std::shared_ptr<CmId>& id, const void* pdata, uint8_t len) {
  if (len > kSidrRepPrivateData) return EINVAL;
  CmMessage m = makeMessage(0, nullptr);
  m.reason = kSidrReject;
  m.private_data_len = len;
  if (len > 0) memcpy(m.private_data, pdata, len);
  std::shared_ptr<Conn> c = id->conn;
  if (!c->eof) sendCm(*c, FrameType::Rep, &m);
  c->id.reset();
  id->conn.reset();
  closeConn(c);
  setCmState(id.get(), CmState::Disconnected);
  return 0;
}

void onSidrRep(const std::shared_ptr<CmId>& id, const std::shared_ptr<Conn>& c, FrameType t,
               const CmMessage& m) {
  if (id->state != CmState::Connect) return;
  id->timer_gen++;
  c->id.reset();
  id->conn.reset();
  closeConn(c);
  uint8_t status = t == FrameType::Rej ? kSidrUnsupported : m.reason;
  size_t len = std::min<size_t>(m.private_data_len, kSidrRepPrivateData);
  if (status != 0) {
    setCmState(id.get(), CmState::Disconnected);
    queueEvent(id, RDMA_CM_EVENT_UNREACHABLE, status, m.private_data, len, kSidrRepPrivateData);
    return;
  }
  setCmState(id.get(), CmState::Established);
  queueEvent(id, RDMA_CM_EVENT_ESTABLISHED, 0, m.private_data, len, kSidrRepPrivateData);
  rdma_ud_param& ud = id->queued.back()->ev.param.ud;
  ud.ah_attr = routeAh(id.get());
  ud.qp_num = m.qpn;
  memcpy(&ud.qkey, &m.private_data[kQkeyOffset], sizeof ud.qkey);
}

void onJoinEvent(CmEvent* e) {
  CmId* id = e->subject.get();
  const rdma_ud_param& ud = e->ev.param.ud;
  if (id->id.qp == nullptr) return;
  for (const CmId::Join& j : id->joins) {
    if (memcmp(&j.mgid, &ud.ah_attr.grh.dgid, sizeof j.mgid) != 0 || j.send_only) continue;
    int rc = ibv_attach_mcast(id->id.qp, &ud.ah_attr.grh.dgid, ud.ah_attr.dlid);
    if (rc != 0) {
      e->ev.event = RDMA_CM_EVENT_MULTICAST_ERROR;
      e->ev.status = -rc;
    }
    return;
  }
}

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API int rdma_join_multicast_ex(rdma_cm_id* rid, rdma_cm_join_mc_attr_ex* attr,
                                        void* context) {
  if (attr == nullptr) return setErr(EINVAL);
  if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED) return setErr(ENOTSUP);
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
      !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
      attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED || attr->addr == nullptr)
    return setErr(EINVAL);
  {
    std::lock_guard lk(Fabric::get().cm_mu);
    auto id = rid != nullptr ? idRef(rid) : nullptr;
    if (!id || id->destroyed) return setErr(EINVAL);
    if (id->state == CmState::DeviceRemoval) return setErr(ENXIO);
    CmId::Join j{};
    if ((id->state != CmState::AddrBound && id->state != CmState::AddrResolved) ||
        rid->verbs == nullptr || !isUdId(id.get()) || !mgidOf(attr->addr, j.mgid))
      return setErr(EINVAL);
    memcpy(&j.addr, attr->addr, addrLen(attr->addr));
    j.send_only = attr->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
    id->joins.push_back(j);
    queueEvent(id, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
    rdma_ud_param& ud = id->queued.back()->ev.param.ud;
    ud.private_data = context;  // librdmacm hands the join's context back here
    ud.ah_attr = routeAh(id.get());
    ud.ah_attr.grh.dgid = j.mgid;
    ud.qp_num = kMulticastQpn;
    ud.qkey = RDMA_UDP_QKEY;
    if (!id->sync) return 0;
  }
  return syncComplete(rid);
}

SOFTRDMA_API int rdma_join_multicast(rdma_cm_id* rid, sockaddr* addr, void* context) {
  rdma_cm_join_mc_attr_ex a{};
  a.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  a.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
  a.addr = addr;
  return rdma_join_multicast_ex(rid, &a, context);
}

SOFTRDMA_API int rdma_leave_multicast(rdma_cm_id* rid, sockaddr* addr) {
  if (addr == nullptr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
    return setErr(EINVAL);
  std::lock_guard lk(Fabric::get().cm_mu);
  auto id = rid != nullptr ? idRef(rid) : nullptr;
  if (!id || id->destroyed) return setErr(EINVAL);
  for (auto it = id->joins.begin(); it != id->joins.end(); ++it) {
    if (!sameGroup(it->addr, addr)) continue;
    if (rid->qp != nullptr && !it->send_only) ibv_detach_mcast(rid->qp, &it->mgid, 0);
    id->joins.erase(it);
    return 0;
  }
  return setErr(EADDRNOTAVAIL);
}
