// rdma_cm multicast joins for UD ids (rdma_join_multicast,
// rdma_leave_multicast), as the kernel's CM does them on RoCE
// (cma_iboe_join_multicast): the join is reported at once, and the id's QP
// is attached to the group when the MULTICAST_JOIN event is gotten
// (onJoinEvent, cm_ud.cc).
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "base.h"
#include "cm_id.h"
#include "cm_internal.h"
#include "fabric.h"
#include "ud.h"
#include "wire.h"

namespace softrdma {

namespace {

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
    rdma_ud_param& ud = id->events.queued.back()->ev.param.ud;
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
