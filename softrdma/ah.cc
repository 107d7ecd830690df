// Address handles: ibv_create_ah, ibv_destroy_ah, and libibverbs' helpers
// that build an address from a received datagram (ibv_init_ah_from_wc,
// ibv_create_ah_from_wc), with the checks of a RoCE port (a GRH is required;
// port 1; a source GID index within the table).
//
// Ownership: an Ah is created by ibv_create_ah and deleted by
// ibv_destroy_ah; the set of live AHs lets a post name a destroyed AH
// without touching freed memory (EINVAL).
#include <arpa/inet.h>
#include <netinet/ip.h>

#include <cerrno>
#include <cstring>
#include <unordered_set>

#include "base.h"
#include "device.h"
#include "netdev.h"
#include "pd_mr.h"
#include "ud.h"
#include "wire.h"

namespace softrdma {

namespace {

std::mutex ahs_mu;
std::unordered_set<ibv_ah*>& liveAhs() {
  static auto* s = new std::unordered_set<ibv_ah*>();
  return *s;
}

void mapV4(const uint8_t* v4, uint8_t* gid) {
  memset(gid, 0, 16);
  gid[10] = gid[11] = 0xff;
  memcpy(gid + 12, v4, 4);
}

// libibverbs' get_grh_header_version: an IPv4 header (with a good
// checksum) in the second half of the GRH means RoCE v2 over IPv4.
int grhVersion(const uint8_t* g) {
  const uint8_t* ip = g + 20;
  if ((g[0] >> 4) != 6) return (ip[0] >> 4) == 4 ? 4 : -1;
  if ((ip[0] & 0x0f) != 5) return 6;
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2)
    sum += static_cast<uint32_t>(ip[i] << 8 | ip[i + 1]);
  while (sum >> 16)
    sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff ? 4 : 6;
}

}  // namespace

Ah* liveAh(ibv_ah* ah) {
  std::lock_guard lk(ahs_mu);
  return liveAhs().count(ah) != 0 ? reinterpret_cast<Ah*>(ah) : nullptr;
}

bool gidIsMulticast(const uint8_t* g) {
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (g[0] == 0xff) return true;
  return memcmp(g, kMapped, 12) == 0 && (g[12] & 0xf0) == 0xe0;
}

int gidIndex(const in6_addr& gid, int dev) {
  auto t = gidTable(dev);
  for (size_t i = 0; i < t.size(); i++)
    if (memcmp(&t[i], &gid, sizeof gid) == 0) return static_cast<int>(i);
  return -1;
}

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (pd == nullptr || attr == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (contextDead(pd->context)) {
    errno = EIO;
    return nullptr;
  }
  auto gids = gidTable(contextDevice(pd->context));
  // RoCE: an address is a GID (the kernel's rdma_check_ah_attr refuses an
  // AH without a GRH on an Ethernet port).
  if (attr->port_num != 1 || !attr->is_global || attr->grh.sgid_index >= gids.size()) {
    errno = EINVAL;
    return nullptr;
  }
  auto* a = new Ah();
  a->ah.context = pd->context;
  a->ah.pd = pd;
  a->attr = *attr;
  a->sgid = gids[attr->grh.sgid_index];
  a->multicast = gidIsMulticast(attr->grh.dgid.raw);
  in6_addr d;
  memcpy(&d, attr->grh.dgid.raw, sizeof d);
  a->reachable = false;  // a unicast address of this machine, on any device
  for (const in6_addr& g : hostGids())
    if (!a->multicast && memcmp(&g, &d, sizeof d) == 0) a->reachable = true;
  {
    std::lock_guard lk(ahs_mu);
    static uint32_t next_handle = 0;
    a->ah.handle = ++next_handle;
    liveAhs().insert(&a->ah);
  }
  toPd(pd)->users++;
  return &a->ah;
}

SOFTRDMA_API int ibv_destroy_ah(ibv_ah* ah) {
  {
    std::lock_guard lk(ahs_mu);
    if (ah == nullptr || liveAhs().erase(ah) == 0) return EINVAL;
  }
  toPd(ah->pd)->users--;
  delete reinterpret_cast<Ah*>(ah);
  return 0;
}

SOFTRDMA_API int ibv_init_ah_from_wc(ibv_context* ctx, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                                     ibv_ah_attr* ah_attr) {
  memset(ah_attr, 0, sizeof *ah_attr);
  const auto* g = reinterpret_cast<const uint8_t*>(grh);
  uint32_t vtf = ntohl(grh->version_tclass_flow);
  ah_attr->grh.flow_label = vtf & 0xFFFFF;
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  if (!(wc->wc_flags & IBV_WC_GRH)) return 0;
  ah_attr->is_global = 1;
  int version = grhVersion(g);
  in6_addr local{};
  if (version == 4) {
    const uint8_t* ip = g + 20;
    if ((ip[16] & 0xf0) == 0xe0) return setErr(EINVAL);  // no multicast GID in the table
    mapV4(ip + 16, local.s6_addr);
    mapV4(ip + 12, ah_attr->grh.dgid.raw);
    ah_attr->grh.hop_limit = ip[8];
    ah_attr->grh.traffic_class = ip[1];
  } else if (version == 6) {
    if (grh->dgid.raw[0] == 0xff) return setErr(EINVAL);
    if (grh->next_hdr != IPPROTO_UDP) return setErr(EPROTONOSUPPORT);  // not RoCE v2
    memcpy(&local, grh->dgid.raw, 16);
    ah_attr->grh.dgid = grh->sgid;
    ah_attr->grh.hop_limit = grh->hop_limit;
    ah_attr->grh.traffic_class = static_cast<uint8_t>((vtf >> 20) & 0xFF);
  } else {
    return setErr(EPROTONOSUPPORT);
  }
  int idx = gidIndex(local, contextDevice(ctx));
  if (idx < 0) return setErr(EINVAL);  // addressed to a GID this port does not have
  ah_attr->grh.sgid_index = static_cast<uint8_t>(idx);
  return 0;
}

SOFTRDMA_API ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  ibv_ah_attr a;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a) != 0) return nullptr;
  return ibv_create_ah(pd, &a);
}
