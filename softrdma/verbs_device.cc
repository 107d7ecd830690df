// Verbs: the device, its contexts, ports and GIDs, protection domains,
// memory regions and asynchronous events.
//
// softrdma presents one RoCE-like device, "softrdma0", with one Ethernet
// port whose GID table holds the IPv4-mapped addresses of the machine's
// interfaces (as rxe does).
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "internal.h"
#include "registry.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_query_port

namespace softrdma {

namespace {

ibv_device* newDevice() {
  auto* d = static_cast<ibv_device*>(calloc(1, sizeof(ibv_device)));
  d->node_type = IBV_NODE_CA;
  d->transport_type = IBV_TRANSPORT_IB;
  snprintf(d->name, sizeof d->name, "softrdma0");
  snprintf(d->dev_name, sizeof d->dev_name, "uverbs0");
  snprintf(d->dev_path, sizeof d->dev_path, "/sys/class/infiniband_verbs/uverbs0");
  snprintf(d->ibdev_path, sizeof d->ibdev_path, "/sys/class/infiniband/softrdma0");
  return d;
}

// The device and the contexts open on it. Devices of earlier generations
// are kept (never freed): the contexts opened on them point at them.
struct DeviceState {
  std::mutex mu;
  ibv_device* dev = newDevice();  // nullptr while absent
  std::vector<ibv_device*> old;
  std::vector<Context*> contexts;
  std::atomic<bool> port_active{true};
};

DeviceState& device() {
  static auto* d = new DeviceState();
  return *d;
}

constexpr uint64_t kNodeGuid = 0x02005e00536f6674ULL;  // "...Soft"
// No IEEE OUI of its own: the value rxe reports (RXE_VENDOR_ID); a part id
// of 1, so that neither reads as "unset".
constexpr uint32_t kVendorId = 0xFFFFFF;
constexpr uint32_t kVendorPartId = 1;

}  // namespace

std::vector<in6_addr> gidTable() {
  std::vector<in6_addr> gids;
  auto add = [&](in_addr a) {
    in6_addr g{};
    g.s6_addr[10] = 0xff;
    g.s6_addr[11] = 0xff;
    memcpy(&g.s6_addr[12], &a, 4);
    gids.push_back(g);
  };
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET)
        add(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr);
    }
    freeifaddrs(ifs);
  }
  if (gids.empty()) add(in_addr{htonl(INADDR_LOOPBACK)});
  // Loopback addresses first, so that GID index 0 is 127.0.0.1 wherever lo is up.
  std::stable_partition(gids.begin(), gids.end(),
                        [](const in6_addr& g) { return g.s6_addr[12] == 127; });
  return gids;
}

namespace {

int queryPortImpl(ibv_context* ctx, uint8_t port, ibv_port_attr* a, size_t len) {
  if (a == nullptr || port != 1) return EINVAL;
  if (contextDead(ctx)) return EIO;
  bool active = portActive();
  ibv_port_attr p{};
  p.state = active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  p.max_mtu = IBV_MTU_4096;
  p.active_mtu = IBV_MTU_4096;
  p.gid_tbl_len = static_cast<int>(gidTable().size()) + 1;  // and one empty entry, as rxe's
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

// Asynchronous events travel through the context's async pipe as records
// naming the object by handle, so that a record outliving its object is
// skipped rather than dereferenced.
struct AsyncRecord {
  uint32_t type;
  uint32_t kind;  // AsyncKind
  uint64_t handle;
};

}  // namespace

ibv_device* currentDevice() {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  return d.dev;
}

bool portActive() {
  return device().port_active.load();
}

void detachDevice() {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  if (d.dev != nullptr) d.old.push_back(d.dev);
  d.dev = nullptr;
  for (Context* c : d.contexts) {
    if (c->dead.exchange(true)) continue;  // lost an earlier generation
    raiseAsync(c->ctx(), IBV_EVENT_DEVICE_FATAL, kAsyncDevice, 0);
  }
}

void attachDevice() {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  if (d.dev != nullptr) return;
  d.dev = newDevice();
  d.port_active = true;
}

int setPortState(bool active) {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  if (d.dev == nullptr) return -1;
  return d.port_active.exchange(active) != active ? 1 : 0;
}

void raiseOnContexts(ibv_event_type type, uint32_t kind) {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  for (Context* c : d.contexts)
    raiseAsync(c->ctx(), type, kind, 0);
}

Context* toContext(ibv_context* c) {
  return reinterpret_cast<Context*>(reinterpret_cast<uint8_t*>(c) -
                                    offsetof(Context, vctx.context));
}

Registry<Mr>& mrs() {
  static auto* r = new Registry<Mr>();
  return *r;
}

void forkDevice(ForkStep s) {
  DeviceState& d = device();
  switch (s) {
    case ForkStep::Prepare:
      d.mu.lock();
      mrs().lockForFork();
      return;
    case ForkStep::Child:
      // The parent's contexts stay usable by the child (their async pipe is
      // shared, as the uverbs file is), but device events and removals in
      // the child reach only the contexts it opens itself.
      abandon(d.contexts);
      [[fallthrough]];
    case ForkStep::Parent:
      mrs().unlockAfterFork();
      d.mu.unlock();
      return;
  }
}

Mr* findMrByKey(uint32_t key) {
  return mrs().find(key >> 8, key);
}

bool Mr::covers(uint64_t addr, uint64_t len) const {
  uint64_t start = reinterpret_cast<uint64_t>(mr.addr);
  return addr >= start && len <= mr.length && addr - start <= mr.length - len;
}

Context* Fabric::cmContext() {
  std::lock_guard lk(mu_);
  return cmContextLocked();
}

Context* Fabric::cmContextLocked() {
  if (cm_ctx_ != nullptr && cm_ctx_->dead) {
    retired_.push_back({cm_ctx_, cm_pd_});
    cm_ctx_ = nullptr;
    cm_pd_ = nullptr;
  }
  if (cm_ctx_ == nullptr) {
    ibv_context* c = ibv_open_device(currentDevice());
    if (c == nullptr) return nullptr;  // no device
    ibv_pd* pd = ibv_alloc_pd(c);
    if (pd == nullptr) {  // removed meanwhile
      ibv_close_device(c);
      return nullptr;
    }
    cm_ctx_ = toContext(c);
    cm_pd_ = reinterpret_cast<Pd*>(pd);
  }
  return cm_ctx_;
}

Pd* Fabric::cmPd() {
  std::lock_guard lk(mu_);
  return cmContextLocked() != nullptr ? cm_pd_ : nullptr;
}

std::vector<Fabric::Retired> Fabric::takeRetired() {
  std::lock_guard lk(mu_);
  std::vector<Retired> r;
  r.swap(retired_);
  return r;
}

void Fabric::keepRetired(const std::vector<Retired>& r) {
  std::lock_guard lk(mu_);
  retired_.insert(retired_.end(), r.begin(), r.end());
}

void raiseAsync(ibv_context* ctx, ibv_event_type type, uint32_t kind, uint64_t handle) {
  // After DEVICE_FATAL a disassociated context reports nothing more.
  if (contextDead(ctx) && type != IBV_EVENT_DEVICE_FATAL) return;
  AsyncRecord r{static_cast<uint32_t>(type), kind, handle};
  ssize_t n = write(toContext(ctx)->async_wfd, &r, sizeof r);
  (void)n;
}

int pollCqOp(ibv_cq* cq, int n, ibv_wc* wc);
int reqNotifyCqOp(ibv_cq* cq, int solicited_only);
int postSendOp(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int postRecvOp(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int postSrqRecvOp(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
Cq* findCq(uint32_t id);
Srq* findSrq(uint32_t id);

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API ibv_device** ibv_get_device_list(int* num) {
  Fabric::get();  // start the progress thread (and the control channel)
  auto** list = static_cast<ibv_device**>(calloc(2, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  list[0] = currentDevice();  // nullptr while the device is absent: an empty list
  if (num != nullptr) *num = list[0] != nullptr ? 1 : 0;
  return list;
}

SOFTRDMA_API void ibv_free_device_list(ibv_device** list) {
  free(list);
}

SOFTRDMA_API const char* ibv_get_device_name(ibv_device* dev) {
  return dev != nullptr ? dev->name : nullptr;
}

SOFTRDMA_API __be64 ibv_get_device_guid(ibv_device*) {
  return htobe64(kNodeGuid);
}

SOFTRDMA_API int ibv_get_device_index(ibv_device* dev) {
  return dev != nullptr && dev == currentDevice() ? 0 : -1;
}

SOFTRDMA_API ibv_context* ibv_open_device(ibv_device* dev) {
  if (dev == nullptr || dev != currentDevice()) {
    errno = ENODEV;
    return nullptr;
  }
  return openContext(dev, -1);
}

ibv_context* softrdma::openContext(ibv_device* dev, int cmd_fd) {
  auto* c = new Context();
  memset(&c->vctx, 0, sizeof c->vctx);
  c->vctx.sz = sizeof(verbs_context);
  c->vctx.query_port = queryPortImpl;
  c->vctx.query_device_ex = queryDeviceExOp;
  c->vctx.create_cq_ex = createCqExOp;
  c->vctx.create_qp_ex = createQpExOp;
  ibv_context* ctx = c->ctx();
  ctx->device = dev;
  ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
  ctx->num_comp_vectors = 1;
  // The uverbs file's stand-in: a real fd of the context's own, which
  // programs may dup or poll, and which names the context to
  // ibv_import_device (import.cc): an unbound Unix socket, whose inode is
  // its own.
  const bool imported = cmd_fd >= 0;
  ctx->cmd_fd = imported ? cmd_fd : socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (ctx->cmd_fd < 0) {
    delete c;
    return nullptr;
  }
  ctx->ops.poll_cq = pollCqOp;
  ctx->ops.req_notify_cq = reqNotifyCqOp;
  ctx->ops.post_send = postSendOp;
  ctx->ops.post_recv = postRecvOp;
  ctx->ops.post_srq_recv = postSrqRecvOp;
  setMwOps(ctx);
  pthread_mutex_init(&ctx->mutex, nullptr);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    if (!imported) close(ctx->cmd_fd);
    delete c;
    return nullptr;
  }
  fcntl(p[1], F_SETFL, O_NONBLOCK);
  ctx->async_fd = p[0];
  c->async_wfd = p[1];
  Fabric::get();  // start the progress thread
  DeviceState& d = device();
  {
    std::lock_guard lk(d.mu);
    if (d.dev == dev) {
      d.contexts.push_back(c);
      return ctx;
    }
  }
  close(p[0]);  // removed meanwhile
  close(p[1]);
  if (!imported) close(ctx->cmd_fd);
  pthread_mutex_destroy(&ctx->mutex);
  delete c;
  errno = ENODEV;
  return nullptr;
}

Context* softrdma::findContextByFd(int fd) {
  struct stat s {};
  if (fstat(fd, &s) != 0) return nullptr;
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  for (Context* c : d.contexts) {
    struct stat t {};
    if (c->origin == nullptr && fstat(c->ctx()->cmd_fd, &t) == 0 && t.st_dev == s.st_dev &&
        t.st_ino == s.st_ino)
      return c;
  }
  return nullptr;
}

SOFTRDMA_API int ibv_close_device(ibv_context* ctx) {
  if (ctx == nullptr) return setErr(EINVAL);
  Context* c = toContext(ctx);
  {
    DeviceState& d = device();
    std::lock_guard lk(d.mu);
    std::erase(d.contexts, c);
    // Objects the program left on the context (perftest leaves a CQ): the
    // kernel destroys them when the uverbs file closes, and libibverbs'
    // ibv_close_device always returns 0. softrdma keeps their memory, and
    // the context's, since the program may still hold pointers into it.
    if (c->users.load() != 0) {
      static auto* kept = new std::vector<Context*>();
      kept->push_back(c);
      return 0;
    }
  }
  close(ctx->async_fd);
  close(c->async_wfd);
  close(ctx->cmd_fd);
  pthread_mutex_destroy(&ctx->mutex);
  delete c;
  return 0;
}

SOFTRDMA_API int ibv_query_device(ibv_context* ctx, ibv_device_attr* a) {
  if (ctx == nullptr || a == nullptr) return EINVAL;
  if (contextDead(ctx)) return EIO;
  memset(a, 0, sizeof *a);
  snprintf(a->fw_ver, sizeof a->fw_ver, "softrdma %s", "0.1");
  a->node_guid = htobe64(kNodeGuid);
  a->sys_image_guid = htobe64(kNodeGuid);
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

namespace softrdma {

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

SOFTRDMA_API int ibv_query_port(ibv_context* ctx, uint8_t port, _compat_ibv_port_attr* a) {
  return queryPortImpl(ctx, port, reinterpret_cast<ibv_port_attr*>(a), sizeof(ibv_port_attr));
}

// The GID table: the addresses of gidTable(), then one empty entry (index
// gidTable().size()), as rxe's table has empty entries. As libibverbs
// answers for an empty entry, ibv_query_gid gives the zero GID and
// ibv_query_gid_type RoCE v1; ibv_query_gid_ex fails with ENODATA, and
// ibv_query_gid_table leaves it out. Beyond the table: errors.
SOFTRDMA_API int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  if (ctx == nullptr || gid == nullptr || port != 1 || contextDead(ctx)) return -1;
  auto t = gidTable();
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
  auto t = gidTable();
  if (index > t.size()) return EINVAL;
  if (index == t.size()) return ENODATA;  // the empty entry
  memset(entry, 0, sizeof *entry);
  memcpy(entry->gid.raw, &t[index], 16);
  entry->gid_index = index;
  entry->port_num = port;
  entry->gid_type = IBV_GID_TYPE_ROCE_V2;
  entry->ndev_ifindex = 1;
  return 0;
}

SOFTRDMA_API ssize_t _ibv_query_gid_table(ibv_context* ctx, ibv_gid_entry* entries,
                                          size_t max_entries, uint32_t, size_t) {
  if (ctx == nullptr || entries == nullptr) return -EINVAL;
  if (contextDead(ctx)) return -EIO;
  auto t = gidTable();
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
  const size_t n = gidTable().size();
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

SOFTRDMA_API ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  if (ctx == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (contextDead(ctx)) {
    errno = EIO;
    return nullptr;
  }
  static std::atomic<uint32_t> handles{1};
  auto* p = new Pd();
  p->pd.context = ctx;
  p->pd.handle = handles++;
  toContext(ctx)->users++;
  notePd(p);
  return &p->pd;
}

SOFTRDMA_API int ibv_dealloc_pd(ibv_pd* pd) {
  if (pd == nullptr) return EINVAL;
  auto* p = reinterpret_cast<Pd*>(pd);
  if (p->base != nullptr) return EINVAL;  // imported: ibv_unimport_pd (import.cc)
  if (p->users.load() != 0 || p->views.load() != 0) return EBUSY;
  forgetPd(p);
  toContext(pd->context)->users--;
  delete p;
  return 0;
}

static ibv_mr* regMr(ibv_pd* pd, void* addr, size_t len, uint64_t iova, unsigned access) {
  if (pd == nullptr || (addr == nullptr && len != 0)) {
    errno = EINVAL;
    return nullptr;
  }
  if (contextDead(pd->context)) {
    errno = EIO;
    return nullptr;
  }
  // Remote write or atomic access requires local write (ibv_reg_mr.3).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* m = new Mr();
  m->pd = toPd(pd);
  m->access = static_cast<int>(access);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = len;
  (void)iova;  // remote addresses are virtual addresses (iova == addr)
  uint32_t key = mrs().insert(m);
  if (key == 0) {
    delete m;
    errno = ENOMEM;
    return nullptr;
  }
  m->mr.handle = key;
  m->mr.lkey = key;
  m->mr.rkey = key;
  m->pd.load()->users++;
  return &m->mr;
}

SOFTRDMA_API ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  return regMr(pd, addr, len, reinterpret_cast<uint64_t>(addr), static_cast<unsigned>(access));
}

SOFTRDMA_API ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t len, uint64_t iova,
                                     int access) {
  if (iova != reinterpret_cast<uint64_t>(addr)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return regMr(pd, addr, len, iova, static_cast<unsigned>(access));
}

SOFTRDMA_API ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t len, uint64_t iova,
                                      unsigned access) {
  if (iova != reinterpret_cast<uint64_t>(addr)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return regMr(pd, addr, len, iova, access);
}

SOFTRDMA_API int ibv_dereg_mr(ibv_mr* mr) {
  if (mr == nullptr) return EINVAL;
  auto* m = reinterpret_cast<Mr*>(mr);
  if (m->mws.load() > 0) return EINVAL;    // windows are bound to it (rxe, IBA 10.6.7.2.6)
  if (m->shown != nullptr) return EINVAL;  // imported: ibv_unimport_mr (import.cc)
  if (m->views.load() > 0) return EBUSY;
  mrs().erase(mr->lkey >> 8, m);
  m->pd.load()->users--;
  delete m;
  return 0;
}

SOFTRDMA_API int ibv_get_async_event(ibv_context* ctx, ibv_async_event* event) {
  if (ctx == nullptr || event == nullptr) return setErr(EINVAL);
  for (;;) {
    AsyncRecord r;
    ssize_t n = read(ctx->async_fd, &r, sizeof r);
    if (n != static_cast<ssize_t>(sizeof r)) return -1;
    event->event_type = static_cast<ibv_event_type>(r.type);
    if (r.kind == kAsyncCq) {
      Cq* cq = findCq(static_cast<uint32_t>(r.handle));
      if (cq == nullptr) continue;
      event->element.cq = &cq->cq;
    } else if (r.kind == kAsyncQp) {
      auto qp = findQpByNum(static_cast<uint32_t>(r.handle));
      if (!qp) continue;
      event->element.qp = &qp->qp;
    } else if (r.kind == kAsyncSrq) {
      Srq* s = findSrq(static_cast<uint32_t>(r.handle));
      if (s == nullptr) continue;
      event->element.srq = &s->srq;
    } else {
      // libibverbs copies the kernel's element into port_num for port and
      // device events: the port for PORT_*, 0 for DEVICE_FATAL.
      event->element.port_num = r.kind == kAsyncPort ? 1 : 0;
    }
    return 0;
  }
}

SOFTRDMA_API void ibv_ack_async_event(ibv_async_event*) {}
