// Verbs: what the device tells about itself — its attributes (basic and
// extended), its port, its GID table and its P_Key.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base.h"
#include "context_ops.h"
#include "device.h"
#include "netdev.h"
#include "wire.h"

#undef ibv_query_port

namespace softrdma {

namespace {

// No IEEE OUI of its own: the value rxe reports (RXE_VENDOR_ID); a part id
// of 1, so that neither reads as "unset".
constexpr uint32_t kVendorId = 0xFFFFFF;
constexpr uint32_t kVendorPartId = 1;

}  // namespace

int queryPortOp(ibv_context* ctx, uint8_t port, ibv_port_attr* a, size_t len) {
  if (a == nullptr || port != 1) return EINVAL;
  if (contextDead(ctx)) return EIO;
  const int dev = contextDevice(ctx);
  bool active = portActive(dev);
  ibv_port_attr p{};
  p.state = active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  p.max_mtu = IBV_MTU_4096;
  p.active_mtu = IBV_MTU_4096;
  p.gid_tbl_len = static_cast<int>(gidTable(dev).size()) + 1;  // and one empty entry, as rxe's
  p.port_cap_flags = IBV_PORT_CM_SUP;
  p.max_msg_sz = kMaxFramePayload;
  p.pkey_tbl_len = 1;
  p.active_width = 2;             // 4x
  p.active_speed = 32;            // 25 Gb/s per lane (EDR)
  p.phys_state = active ? 5 : 2;  // LinkUp, or Polling (no carrier)
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  memcpy(a, &p, len < sizeof p ? len : sizeof p);
  return 0;
}

// verbs_context.query_device_ex (the inline ibv_query_device_ex, which has
// checked input->comp_mask). What rxe's kernel driver reports beyond
// ibv_query_device: the device capability flags again (64 bits), the port
// count, and no ODP, timestamps, TSO, RSS, packet pacing, tag matching, CQ
// moderation or device memory. Only attr_size bytes are written (the
// program's struct may be older than this one).
int queryDeviceExOp(ibv_context* ctx, const ibv_query_device_ex_input*, ibv_device_attr_ex* attr,
                    size_t attr_size) {
  if (attr == nullptr || attr_size < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex ex{};
  int rc = ibv_query_device(ctx, &ex.orig_attr);
  if (rc != 0) return rc;
  ex.device_cap_flags_ex = ex.orig_attr.device_cap_flags;
  ex.phys_port_cnt_ex = ex.orig_attr.phys_port_cnt;
  memcpy(attr, &ex, std::min(attr_size, sizeof ex));
  return 0;
}

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API int ibv_query_device(ibv_context* ctx, ibv_device_attr* a) {
  if (ctx == nullptr || a == nullptr) return EINVAL;
  if (contextDead(ctx)) return EIO;
  memset(a, 0, sizeof *a);
  snprintf(a->fw_ver, sizeof a->fw_ver, "softrdma %s", "0.1");
  a->node_guid = htobe64(nodeGuid(contextDevice(ctx)));
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = UINT64_MAX;
  a->page_size_cap = 0xfffff000;
  a->vendor_id = kVendorId;
  a->vendor_part_id = kVendorPartId;
  a->hw_ver = 1;
  a->max_qp = 1 << 16;
  a->max_qp_wr = kMaxQpWr;
  // Of rxe's flags, those softrdma lives up to (PORT_ACTIVE_EVENT: the
  // control channel's port-up; SYS_IMAGE_GUID: reported below), and
  // N_NOTIFY_CQ, which softrdma's arming honours; memory windows of type 1 and 2 (mw.cc).
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_N_NOTIFY_CQ |
                        IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |
                        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2A |
                        IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  a->max_sge = kMaxSge;
  a->max_sge_rd = kMaxSge;
  a->max_cq = 1 << 16;
  a->max_cqe = maxCqe();
  a->max_mr = 1 << 16;
  a->max_mw = 0x1000;  // rxe's (mw.cc)
  a->max_pd = 1 << 16;
  a->max_qp_rd_atom = kMaxRdAtom;
  a->max_qp_init_rd_atom = kMaxRdAtom;
  a->max_res_rd_atom = kMaxRdAtom * (1 << 16);
  a->atomic_cap = IBV_ATOMIC_HCA;  // as rxe: atomic against other atomics of the device
  a->max_ah = 0x7ffc;              // rxe's limits for address handles and multicast
  a->max_mcast_grp = 8192;
  a->max_mcast_qp_attach = 56;
  a->max_total_mcast_qp_attach = 0x70000;
  a->max_srq = 1 << 16;
  a->max_srq_wr = kMaxSrqWr;
  a->max_srq_sge = kMaxSge;
  a->max_pkeys = 1;
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
  return 0;
}

SOFTRDMA_API int ibv_query_port(ibv_context* ctx, uint8_t port, _compat_ibv_port_attr* a) {
  return queryPortOp(ctx, port, reinterpret_cast<ibv_port_attr*>(a), sizeof(ibv_port_attr));
}

// The GID table: the addresses of the device's gidTable(), then one empty entry (index
// gidTable().size()), as rxe's table has empty entries. As libibverbs
// answers for an empty entry, ibv_query_gid gives the zero GID and
// ibv_query_gid_type RoCE v1; ibv_query_gid_ex fails with ENODATA, and
// ibv_query_gid_table leaves it out. Beyond the table: errors.
SOFTRDMA_API int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  if (ctx == nullptr || gid == nullptr || port != 1 || contextDead(ctx)) return -1;
  auto t = gidTable(contextDevice(ctx));
  if (index < 0 || static_cast<size_t>(index) > t.size()) return -1;
  if (static_cast<size_t>(index) == t.size())
    memset(gid->raw, 0, 16);
  else
    memcpy(gid->raw, &t[index], 16);
  return 0;
}

SOFTRDMA_API int _ibv_query_gid_ex(ibv_context* ctx, uint32_t port, uint32_t index,
                                   ibv_gid_entry* entry, uint32_t, size_t) {
  if (ctx == nullptr || entry == nullptr || port != 1) return EINVAL;
  if (contextDead(ctx)) return EIO;
  auto t = gidTable(contextDevice(ctx));
  if (index > t.size()) return EINVAL;
  if (index == t.size()) return ENODATA;  // the empty entry
  memset(entry, 0, sizeof *entry);
  memcpy(entry->gid.raw, &t[index], 16);
  entry->gid_index = index;
  entry->port_num = port;
  entry->gid_type = IBV_GID_TYPE_ROCE_V2;
  entry->ndev_ifindex = interfaceIndex(contextDevice(ctx));
  return 0;
}

SOFTRDMA_API ssize_t _ibv_query_gid_table(ibv_context* ctx, ibv_gid_entry* entries,
                                          size_t max_entries, uint32_t, size_t) {
  if (ctx == nullptr || entries == nullptr) return -EINVAL;
  if (contextDead(ctx)) return -EIO;
  auto t = gidTable(contextDevice(ctx));
  if (max_entries < t.size()) return -EINVAL;  // ibv_query_gid_table.3: too small (valid entries)
  const size_t n = t.size();
  for (size_t i = 0; i < n; i++)
    _ibv_query_gid_ex(ctx, 1, static_cast<uint32_t>(i), &entries[i], 0, 0);
  return static_cast<ssize_t>(n);
}

// libibverbs' private helper (driver.h), which reads the GID type from
// sysfs; programs such as ibv_devinfo call it. Type 1 is RoCE v2
// (IBV_GID_TYPE_SYSFS_ROCE_V2), like every address of the table; the empty
// entry answers 0 (RoCE v1), as libibverbs does for an empty GID.
SOFTRDMA_API int ibv_query_gid_type(ibv_context* ctx, uint8_t port, unsigned int index, int* type) {
  if (ctx == nullptr || type == nullptr || port != 1) return EINVAL;
  if (contextDead(ctx)) return EIO;
  const size_t n = gidTable(contextDevice(ctx)).size();
  if (index > n) return EINVAL;
  *type = index == n ? 0 : 1;
  return 0;
}

SOFTRDMA_API int ibv_query_pkey(ibv_context* ctx, uint8_t port, int index, __be16* pkey) {
  if (ctx == nullptr || pkey == nullptr || port != 1 || index != 0) return -1;
  *pkey = htons(0xffff);
  return 0;
}

SOFTRDMA_API int ibv_get_pkey_index(ibv_context*, uint8_t port, __be16 pkey) {
  return (port == 1 && pkey == htons(0xffff)) ? 0 : -1;
}
