// rdma_cm's address calls: binding an id to an address and port (the port
// rules among this process's ids: REUSEADDR, AFONLY), listening, and
// resolving an address and a route. rdma_cm port P on address A is TCP
// port P on A: a listening id owns a listening socket.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base.h"
#include "cm_id.h"
#include "cm_internal.h"
#include "device.h"
#include "fabric.h"
#include "netdev.h"

namespace softrdma {

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
    if (reuse && other->opts.reuseaddr) continue;
    const sockaddr* held = &other->id.route.addr.src_addr;
    if (id->opts.afonly == 1 && other->opts.afonly == 1 && held->sa_family != addr->sa_family)
      continue;
    if (isWildcard(addr) || isWildcard(held)) return EADDRNOTAVAIL;
    if (sameAddress(addr, held)) return EADDRINUSE;
  }
  return 0;
}

// Whether a present device's interface holds `addr` (the kernel's
// cma_acquire_dev_by_src_ip finds one).
static bool deviceHolds(const sockaddr* addr) {
  const int dev = deviceForAddress(addr);
  return dev >= 0 && Fabric::get().cmContext(dev) != nullptr;
}

// The device of a resolved source address for `id`: 0, or ETIMEDOUT when
// no neighbour answers on a port without link (ARP times out), or ENODEV
// when no device holds the address (one removed: the kernel's
// cma_acquire_dev_by_src_ip fails so).
static int acquireDevice(CmId* id, const sockaddr* src) {
  if (deviceHolds(src) && !portActive(deviceForAddress(src))) return ETIMEDOUT;
  return bindToDevice(id, src) ? 0 : ENODEV;
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
  if (id->opts.afonly < 0) id->opts.afonly = addr->sa_family == AF_INET ? 1 : bindV6Only();
  if (int e = checkPort(id, addr, id->opts.reuseaddr); e != 0) return setErr(e);
  int s = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (addr->sa_family == AF_INET6)
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &id->opts.afonly, sizeof id->opts.afonly);
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

}  // namespace softrdma

using namespace softrdma;

SOFTRDMA_API int rdma_bind_addr(rdma_cm_id* rid, sockaddr* addr) {
  std::lock_guard lk(Fabric::get().cm_mu);
  auto id = liveId(rid);
  if (removed(id)) return setErr(ENXIO);
  if (!id || !validAddr(addr) || id->state != CmState::Idle) return setErr(EINVAL);
  // A specific address needs the device that holds it (the kernel's
  // cma_acquire_dev_by_src_ip); a wildcard bind needs no device.
  if (!isWildcard(addr) && !deviceHolds(addr)) return setErr(ENODEV);
  if (bindSocket(id.get(), addr) != 0) return -1;
  if (!isWildcard(addr)) bindToDevice(id.get(), addr);
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
  if (id->opts.reuseaddr) {
    if (int e = checkPort(id.get(), &rid->route.addr.src_addr, false); e != 0) return setErr(e);
    id->opts.reuseaddr = false;
  }
  if (listen(id->listener->fd, SOMAXCONN) != 0) return -1;
  id->listening.backlog = backlog > 0 && backlog < 1024 ? backlog : 1024;
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
      if (!isWildcard(src) && !deviceHolds(src)) return setErr(ENODEV);
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
    // The route exists: the id takes the device of the source address, or
    // ADDR_ERROR, and the id is back to bound (the kernel's addr_handler).
    const sockaddr* s = reinterpret_cast<sockaddr*>(&local);
    if (id->listener) s = &id->id.route.addr.src_addr;
    sockaddr_storage src_now{};
    memcpy(&src_now, s, addrLen(s));
    if (!id->listener) reinterpret_cast<sockaddr_in*>(&src_now)->sin_port = 0;
    const auto* src_addr = reinterpret_cast<sockaddr*>(&src_now);
    if (int addr_err = acquireDevice(id.get(), src_addr); addr_err != 0) {
      setCmState(id.get(), CmState::AddrBound);
      queueEvent(id, RDMA_CM_EVENT_ADDR_ERROR, -addr_err);
    } else {
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
    p.traffic_class =
        id->opts.tos_set ? id->opts.tos : 0;  // RDMA_OPTION_ID_TOS; the kernel's default 0
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
