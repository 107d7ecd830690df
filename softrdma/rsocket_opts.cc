// rsetsockopt and rgetsockopt: the SOL_RDMA options of rsocket(7), kept on the rsocket (they
// size nothing softrdma allocates but the receive buffer and the iomap table), SO_ERROR,
// SO_RCVBUF/SO_SNDBUF and TCP_NODELAY as librdmacm reports them, and every other SOL_SOCKET,
// IPPROTO_TCP, IPPROTO_IP and IPPROTO_IPV6 option passed to the rsocket's TCP socket.
#include <endian.h>
#include <infiniband/sa.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base.h"
#include "rsocket.h"
#include "rsocket_sys.h"

using namespace softrdma;
using namespace softrdma::rs;

namespace {

constexpr int kQpMaxSize = 0xFFFE;  // librdmacm's bound on RDMA_SQSIZE, RDMA_RQSIZE, RDMA_INLINE

// RDMA_IOMAPSIZE travels in 8 bits: up to 128 exactly, above in multiples of 256 (librdmacm's
// scale; the value read back is the rounded one).
int roundIomapSize(int v) {
  if (v <= 128) return std::max(v, 0);
  int scaled = 128 | (std::min(v, 0x7FFF) >> 8);
  return (scaled & ~128) << 8;
}

int setRdma(RSocket& r, int name, const void* val, socklen_t len) {
  if (r.state != State::Init && r.state != State::Bound && r.state != State::Listening)
    return setErr(EINVAL);  // only before connecting, as librdmacm
  if (name == RDMA_ROUTE) {
    if (len == 0) return setErr(EINVAL);
    const auto* p = static_cast<const uint8_t*>(val);
    r.opts.route.assign(p, p + len);
    return 0;
  }
  if (len < sizeof(int)) return setErr(EINVAL);
  int v;
  memcpy(&v, val, sizeof v);
  unsigned u = static_cast<unsigned>(v);
  switch (name) {
    case RDMA_SQSIZE:
      r.opts.sqsize = static_cast<int>(std::min(u, unsigned(kQpMaxSize)));
      return 0;
    case RDMA_RQSIZE:
      r.opts.rqsize = static_cast<int>(std::min(u, unsigned(kQpMaxSize)));
      return 0;
    case RDMA_INLINE:
      r.opts.inline_size = static_cast<int>(std::min(u, unsigned(kQpMaxSize)));
      return 0;
    case RDMA_IOMAPSIZE:
      r.opts.iomap_size = roundIomapSize(v);
      return 0;
    default:
      return setErr(EOPNOTSUPP);
  }
}

// The path of a connected rsocket, as RoCE reports it: one record between the two GIDs.
ibv_path_data pathOf(const RSocket& r) {
  ibv_path_data d{};
  d.flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
  auto gid = [](int fd, bool peer, ibv_gid* g) {
    sockaddr_storage ss{};
    socklen_t l = sizeof ss;
    if ((peer ? sys::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &l)
              : sys::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &l)) != 0)
      return;
    if (ss.ss_family == AF_INET6) {
      memcpy(g->raw, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, 16);
    } else {
      g->raw[10] = g->raw[11] = 0xff;
      memcpy(g->raw + 12, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, 4);
    }
  };
  gid(r.fd, true, &d.path.dgid);
  gid(r.fd, false, &d.path.sgid);
  d.path.flowlabel_hoplimit = htobe32(64);
  d.path.reversible_numpath = 0x80 | 1;
  d.path.pkey = htobe16(0xffff);
  d.path.mtu = IBV_MTU_4096 | 2 << 6;
  d.path.rate = IBV_RATE_10_GBPS | 2 << 6;
  d.path.packetlifetime = 14 | 2 << 6;
  return d;
}

int getRdma(RSocket& r, int name, void* val, socklen_t* len) {
  if (name == RDMA_ROUTE) {
    size_t n = r.opts.route.empty() ? sizeof(ibv_path_data) : r.opts.route.size();
    if (*len < n) return setErr(EINVAL);
    if (!r.opts.route.empty()) {
      memcpy(val, r.opts.route.data(), n);
    } else if (r.state == State::Connected) {
      ibv_path_data d = pathOf(r);
      memcpy(val, &d, n);
    } else {
      n = 0;  // no path yet
    }
    *len = static_cast<socklen_t>(n);
    return 0;
  }
  int v;
  switch (name) {
    case RDMA_SQSIZE:
      v = r.opts.sqsize;
      break;
    case RDMA_RQSIZE:
      v = r.opts.rqsize;
      break;
    case RDMA_INLINE:
      v = r.opts.inline_size;
      break;
    case RDMA_IOMAPSIZE:
      v = r.opts.iomap_size;
      break;
    default:
      return setErr(EOPNOTSUPP);
  }
  if (*len < sizeof(int)) return setErr(EINVAL);
  memcpy(val, &v, sizeof v);
  *len = sizeof v;
  return 0;
}

int putInt(int v, void* val, socklen_t* len) {
  if (*len < sizeof(int)) return setErr(EINVAL);
  memcpy(val, &v, sizeof v);
  *len = sizeof v;
  return 0;
}

}  // namespace

SOFTRDMA_API int rsetsockopt(int socket, int level, int optname, const void* optval,
                             socklen_t optlen) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  if (optval == nullptr && optlen > 0) return setErr(EFAULT);
  std::lock_guard lk(r->mu);
  if (level == SOL_RDMA) return setRdma(*r, optname, optval, optlen);
  int v = 0;
  if (optlen >= sizeof(int)) memcpy(&v, optval, sizeof v);
  bool before = r->state != State::Connected && r->state != State::Accepting;
  if (level == IPPROTO_TCP && optname == TCP_NODELAY) {
    if (optlen < sizeof(int)) return setErr(EINVAL);
    r->opts.nodelay = v != 0;  // the TCP socket keeps TCP_NODELAY: rsockets have no Nagle
    return 0;
  }
  if (sys::setsockopt(r->fd, level, optname, optval, optlen) != 0) return -1;
  // Kernel and librdmacm alike keep twice the value asked.
  if (level == SOL_SOCKET && optname == SO_RCVBUF && before) r->opts.rcvbuf = std::max(2 * v, 2048);
  if (level == SOL_SOCKET && optname == SO_SNDBUF && before) r->opts.sndbuf = std::max(2 * v, 2048);
  return 0;
}

SOFTRDMA_API int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  if (optval == nullptr || optlen == nullptr) return setErr(EFAULT);
  std::lock_guard lk(r->mu);
  if (level == SOL_RDMA) return getRdma(*r, optname, optval, optlen);
  if (level == SOL_SOCKET && optname == SO_ERROR) {
    int e = r->so_error;
    r->so_error = 0;
    return putInt(e, optval, optlen);
  }
  if (level == SOL_SOCKET && optname == SO_RCVBUF) return putInt(r->opts.rcvbuf, optval, optlen);
  if (level == SOL_SOCKET && optname == SO_SNDBUF) return putInt(r->opts.sndbuf, optval, optlen);
  if (level == IPPROTO_TCP && optname == TCP_NODELAY)
    return putInt(r->opts.nodelay ? 1 : 0, optval, optlen);
  return sys::getsockopt(r->fd, level, optname, optval, optlen);
}
