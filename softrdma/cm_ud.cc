// rdma_cm for UD ids (RDMA_PS_UDP, RDMA_PS_IPOIB): service ID resolution
// (SIDR) instead of a connection, and the QP attach of a multicast join, as the kernel's CM
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
#include <cstring>

#include "base.h"
#include "cm_id.h"
#include "cm_internal.h"
#include "conn.h"
#include "device.h"
#include "ud.h"
#include "wire.h"

namespace softrdma {

namespace {

constexpr size_t kQkeyOffset = 192;
constexpr uint8_t kSidrUnsupported = 1;  // IB_SIDR_UNSUPPORTED: nobody serves the port
constexpr uint8_t kSidrReject = 2;       // IB_SIDR_REJECT

}  // namespace

// The address handle of the id's route (ib_init_ah_attr_from_path).
ibv_ah_attr routeAh(CmId* id) {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.port_num = 1;
  ah.grh.dgid = id->id.route.addr.addr.ibaddr.dgid;
  in6_addr s;
  memcpy(&s, id->id.route.addr.addr.ibaddr.sgid.raw, sizeof s);
  int idx = gidIndex(s, contextDevice(id->id.verbs));
  ah.grh.sgid_index = static_cast<uint8_t>(idx < 0 ? 0 : idx);
  ah.grh.hop_limit = id->path.hop_limit != 0 ? id->path.hop_limit : 64;
  ah.grh.traffic_class = id->opts.tos_set ? id->opts.tos : 0;
  return ah;
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
  rdma_ud_param& ud = id->events.queued.back()->ev.param.ud;
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
