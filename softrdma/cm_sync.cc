// rdma_cm: the endpoint calls built on synchronous identifiers
// (rdma_getaddrinfo, rdma_create_ep, rdma_get_request), id options, and the
// small informational calls. The top of the rdma_cm files: it calls the
// public calls of cm_api.cc, cm_addr.cc and cm_events.cc, none calls it.
#include <arpa/inet.h>
#include <infiniband/sa.h>
#include <netdb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base.h"
#include "cm_id.h"
#include "cm_internal.h"
#include "device.h"
#include "fabric.h"

using namespace softrdma;

static sockaddr* copyAddr(const sockaddr* a, socklen_t* len) {
  *len = addrLen(a);
  auto* c = static_cast<sockaddr*>(calloc(1, sizeof(sockaddr_storage)));
  if (c != nullptr) memcpy(c, a, *len);
  return c;
}

// rdma_getaddrinfo without node and service: the answer is made of the
// hints alone (their flags, family, QP type, port space and addresses), as
// librdmacm's. pyverbs' AddrInfo(src=...) asks this way.
static int addrinfoFromHints(const rdma_addrinfo& hints, rdma_addrinfo** res) {
  auto* r = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (r == nullptr) return setErr(ENOMEM);
  r->ai_flags = hints.ai_flags;
  r->ai_family = hints.ai_family;
  r->ai_qp_type = hints.ai_qp_type;
  r->ai_port_space = hints.ai_port_space;
  if (hints.ai_dst_addr != nullptr && hints.ai_dst_len != 0)
    r->ai_dst_addr = copyAddr(hints.ai_dst_addr, &r->ai_dst_len);
  if (hints.ai_src_addr != nullptr && hints.ai_src_len != 0)
    r->ai_src_addr = copyAddr(hints.ai_src_addr, &r->ai_src_len);
  *res = r;
  return 0;
}

SOFTRDMA_API int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                                  rdma_addrinfo** res) {
  if (res == nullptr || (node == nullptr && service == nullptr && hints == nullptr))
    return setErr(EINVAL);
  if (node == nullptr && service == nullptr) return addrinfoFromHints(*hints, res);
  bool passive = hints != nullptr && (hints->ai_flags & RAI_PASSIVE);
  addrinfo h{};
  h.ai_family = hints != nullptr && hints->ai_family != 0 ? hints->ai_family : AF_UNSPEC;
  h.ai_socktype = SOCK_STREAM;
  if (passive) h.ai_flags |= AI_PASSIVE;
  if (hints != nullptr && (hints->ai_flags & RAI_NUMERICHOST)) h.ai_flags |= AI_NUMERICHOST;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(node, service, &h, &list);
  if (rc != 0) {
    errno = rc == EAI_SYSTEM ? errno : EADDRNOTAVAIL;
    return rc;
  }
  // Prefer IPv4, as the RoCE GIDs softrdma reports are IPv4-mapped.
  addrinfo* pick = list;
  for (addrinfo* i = list; i != nullptr; i = i->ai_next) {
    if (i->ai_family == AF_INET) {
      pick = i;
      break;
    }
  }
  auto* r = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (r == nullptr) {
    freeaddrinfo(list);
    return setErr(ENOMEM);
  }
  r->ai_flags = hints != nullptr ? hints->ai_flags : 0;
  r->ai_family = pick->ai_family;
  r->ai_port_space =
      hints != nullptr && hints->ai_port_space != 0 ? hints->ai_port_space : RDMA_PS_TCP;
  r->ai_qp_type = r->ai_port_space == RDMA_PS_UDP || r->ai_port_space == RDMA_PS_IPOIB ? IBV_QPT_UD
                                                                                       : IBV_QPT_RC;
  if (hints != nullptr && hints->ai_qp_type != 0) r->ai_qp_type = hints->ai_qp_type;
  if (passive) {
    r->ai_src_addr = copyAddr(pick->ai_addr, &r->ai_src_len);
  } else {
    r->ai_dst_addr = copyAddr(pick->ai_addr, &r->ai_dst_len);
    if (hints != nullptr && hints->ai_src_addr != nullptr)
      r->ai_src_addr = copyAddr(hints->ai_src_addr, &r->ai_src_len);
  }
  freeaddrinfo(list);
  *res = r;
  return 0;
}

SOFTRDMA_API void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res != nullptr) {
    rdma_addrinfo* next = res->ai_next;
    free(res->ai_src_addr);
    free(res->ai_dst_addr);
    free(res->ai_src_canonname);
    free(res->ai_dst_canonname);
    free(res->ai_route);
    free(res->ai_connect);
    free(res);
    res = next;
  }
}

SOFTRDMA_API int rdma_create_ep(rdma_cm_id** out, rdma_addrinfo* res, ibv_pd* pd,
                                ibv_qp_init_attr* qp_init_attr) {
  if (out == nullptr || res == nullptr) return setErr(EINVAL);
  rdma_cm_id* id;
  auto ps = static_cast<rdma_port_space>(res->ai_port_space ? res->ai_port_space : RDMA_PS_TCP);
  if (qp_init_attr != nullptr)
    qp_init_attr->qp_type =
        static_cast<ibv_qp_type>(res->ai_qp_type ? res->ai_qp_type : IBV_QPT_RC);
  if (rdma_create_id(nullptr, &id, nullptr, ps) != 0) return -1;
  int rc;
  if (res->ai_flags & RAI_PASSIVE) {
    rc = res->ai_src_addr != nullptr ? rdma_bind_addr(id, res->ai_src_addr) : setErr(EINVAL);
    if (rc == 0 && qp_init_attr != nullptr) {
      std::lock_guard lk(Fabric::get().cm_mu);
      auto cid = idRef(id);
      cid->qp_setup.ep_qp_attr = std::make_unique<ibv_qp_init_attr>(*qp_init_attr);
      cid->qp_setup.ep_pd = pd;
    }
  } else {
    rc = rdma_resolve_addr(id, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (rc == 0) rc = rdma_resolve_route(id, 2000);
    if (rc == 0 && qp_init_attr != nullptr) rc = rdma_create_qp(id, pd, qp_init_attr);
  }
  if (rc != 0) {
    int e = errno;
    rdma_destroy_ep(id);
    return setErr(e);
  }
  *out = id;
  return 0;
}

SOFTRDMA_API void rdma_destroy_ep(rdma_cm_id* id) {
  if (id == nullptr) return;
  if (id->qp != nullptr) rdma_destroy_qp(id);
  if (id->event != nullptr) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  rdma_destroy_id(id);
}

SOFTRDMA_API int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** out) {
  if (listen == nullptr || out == nullptr) return setErr(EINVAL);
  std::shared_ptr<CmId> lid;
  {
    std::lock_guard lk(Fabric::get().cm_mu);
    lid = idRef(listen);
  }
  if (!lid || !lid->sync) return setErr(EINVAL);
  if (listen->event != nullptr) {
    rdma_ack_cm_event(listen->event);
    listen->event = nullptr;
  }
  rdma_cm_event* e;
  if (rdma_get_cm_event(listen->channel, &e) != 0) return -1;
  int err = 0;
  if (e->event == RDMA_CM_EVENT_REJECTED)
    err = ECONNREFUSED;
  else if (e->status != 0)
    err = -e->status;
  else if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST)
    err = EINVAL;
  if (err == 0 && lid->qp_setup.ep_qp_attr) {
    ibv_qp_init_attr a = *lid->qp_setup.ep_qp_attr;
    if (rdma_create_qp(e->id, lid->qp_setup.ep_pd, &a) != 0) err = errno;
  }
  if (err != 0) {
    rdma_ack_cm_event(e);
    return setErr(err);
  }
  *out = e->id;
  e->id->event = e;
  return 0;
}

SOFTRDMA_API __be16 rdma_get_src_port(rdma_cm_id* id) {
  return id == nullptr ? 0 : reinterpret_cast<sockaddr_in*>(&id->route.addr.src_addr)->sin_port;
}

SOFTRDMA_API __be16 rdma_get_dst_port(rdma_cm_id* id) {
  return id == nullptr ? 0 : reinterpret_cast<sockaddr_in*>(&id->route.addr.dst_addr)->sin_port;
}

SOFTRDMA_API ibv_context** rdma_get_devices(int* num) {
  const int n = deviceCount();
  auto** list = static_cast<ibv_context**>(calloc(n + 1, sizeof(ibv_context*)));
  if (list == nullptr) return nullptr;
  int listed = 0;
  for (int i = 0; i < n; i++) {
    Context* c = Fabric::get().cmContext(i);  // none while the device is absent
    if (c != nullptr) list[listed++] = c->ctx();
  }
  if (num != nullptr) *num = listed;
  return list;
}

SOFTRDMA_API void rdma_free_devices(ibv_context** list) {
  free(list);
}

// RDMA_OPTION_ID options, as the kernel's ucma_set_option_id takes them
// (cm_mu held): a wrong length is EINVAL, an unknown option ENOSYS.
static int setIdOption(CmId* id, int optname, const void* optval, size_t optlen) {
  switch (optname) {
    case RDMA_OPTION_ID_TOS:
      if (optlen != sizeof(uint8_t)) return EINVAL;
      id->opts.tos = *static_cast<const uint8_t*>(optval);
      id->opts.tos_set = true;
      return 0;
    case RDMA_OPTION_ID_REUSEADDR: {
      if (optlen != sizeof(int)) return EINVAL;
      bool reuse = *static_cast<const int*>(optval) != 0;
      // rdma_set_reuseaddr: before binding, or (to allow reuse) before listening.
      if (!((reuse && id->state != CmState::Listen) || id->state == CmState::Idle)) return EINVAL;
      id->opts.reuseaddr = reuse;
      return 0;
    }
    case RDMA_OPTION_ID_AFONLY:
      if (optlen != sizeof(int)) return EINVAL;
      if (id->state != CmState::Idle) return EINVAL;  // rdma_set_afonly: before binding
      id->opts.afonly = *static_cast<const int*>(optval) != 0 ? 1 : 0;
      return 0;
    case RDMA_OPTION_ID_ACK_TIMEOUT:  // the QP's local ACK timeout, set at RTS
      if (optlen != sizeof(uint8_t)) return EINVAL;
      id->opts.ack_timeout = *static_cast<const uint8_t*>(optval) & 31;  // a 5-bit field
      return 0;
    default:
      return ENOSYS;
  }
}

// RDMA_OPTION_IB_PATH (the kernel's ucma_set_ib_path): the route given by
// the program instead of rdma_resolve_route. The array must hold a primary,
// bidirectional GMP record; the id must have resolved its address; the
// route becomes that record and ROUTE_RESOLVED follows (cm_mu held).
static int setIbPath(const std::shared_ptr<CmId>& id, const void* optval, size_t optlen) {
  if (optlen == 0 || optlen % sizeof(ibv_path_data) != 0) return EINVAL;
  constexpr uint32_t kPrimary =
      IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
  const auto* data = static_cast<const ibv_path_data*>(optval);
  const ibv_path_data* found = nullptr;
  for (size_t i = 0; i < optlen / sizeof(ibv_path_data) && found == nullptr; i++)
    if (data[i].flags == kPrimary) found = &data[i];
  if (found == nullptr || id->id.verbs == nullptr || id->state != CmState::AddrResolved)
    return EINVAL;
  const ibv_path_record& r = found->path;
  ibv_sa_path_rec& p = id->path;
  memset(&p, 0, sizeof p);
  p.dgid = r.dgid;
  p.sgid = r.sgid;
  p.dlid = r.dlid;
  p.slid = r.slid;
  p.flow_label = htonl((ntohl(r.flowlabel_hoplimit) >> 8) & 0xfffff);
  p.hop_limit = static_cast<uint8_t>(ntohl(r.flowlabel_hoplimit) & 0xff);
  p.traffic_class = r.tclass;
  p.reversible = (r.reversible_numpath & 0x80) != 0;
  p.numb_path = 1;
  p.pkey = r.pkey;
  p.sl = static_cast<uint8_t>(ntohs(r.qosclass_sl) & 0xf);
  p.mtu_selector = r.mtu >> 6;
  p.mtu = r.mtu & 0x3f;
  p.rate_selector = r.rate >> 6;
  p.rate = r.rate & 0x3f;
  p.packet_life_time_selector = r.packetlifetime >> 6;
  p.packet_life_time = r.packetlifetime & 0x3f;
  p.preference = r.preference;
  id->id.route.path_rec = &p;
  id->id.route.num_paths = 1;
  setCmState(id.get(), CmState::RouteResolved);
  queueEvent(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  return 0;
}

// Every option is honoured or refused as the kernel's ucma_set_option does
// (docs/softrdma-reference.md, rdma_cm): unknown levels and names are ENOSYS.
SOFTRDMA_API int rdma_set_option(rdma_cm_id* rid, int level, int optname, void* optval,
                                 size_t optlen) {
  if (rid == nullptr) return setErr(EINVAL);
  if (optval == nullptr && optlen > 0) return setErr(EFAULT);  // the kernel cannot copy it
  std::lock_guard lk(Fabric::get().cm_mu);
  auto id = idRef(rid);
  if (!id || id->destroyed) return setErr(EINVAL);
  int rc;
  if (level == RDMA_OPTION_ID)
    rc = setIdOption(id.get(), optname, optval, optlen);
  else if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH)
    rc = setIbPath(id, optval, optlen);
  else
    rc = ENOSYS;
  return rc == 0 ? 0 : setErr(rc);
}

SOFTRDMA_API int rdma_notify(rdma_cm_id* id, ibv_event_type) {
  return id == nullptr ? setErr(EINVAL) : 0;
}

SOFTRDMA_API int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (id == nullptr || attr == nullptr || id->verbs == nullptr) return setErr(EINVAL);
  ibv_srq* srq = ibv_create_srq(pd != nullptr ? pd : id->pd, attr);
  if (srq == nullptr) return -1;
  id->srq = srq;
  return 0;
}

SOFTRDMA_API int rdma_create_srq_ex(rdma_cm_id*, ibv_srq_init_attr_ex*) {
  return setErr(EOPNOTSUPP);
}

SOFTRDMA_API void rdma_destroy_srq(rdma_cm_id* id) {
  if (id == nullptr || id->srq == nullptr) return;
  ibv_destroy_srq(id->srq);
  id->srq = nullptr;
}

SOFTRDMA_API int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) {
  return setErr(EOPNOTSUPP);
}
SOFTRDMA_API int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) {
  return setErr(EOPNOTSUPP);
}
