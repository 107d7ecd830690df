// The rsocket calls of <rdma/rsocket.h> that make, connect and end rsockets, and move data
// (rsocket.h describes the design). Errors are those of the corresponding socket calls, as
// rsocket(7) intends, and librdmacm's where rsocket(7) or librdmacm differ (noted).
#include <fcntl.h>
#include <netinet/in.h>
#include <rdma/rsocket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstring>

#include "base.h"
#include "rsocket.h"
#include "rsocket_sys.h"

using namespace softrdma;
using namespace softrdma::rs;

namespace {

using Lock = std::unique_lock<std::mutex>;

bool nonBlocking(const RSocket& r, int flags) {
  return (r.fd_flags & O_NONBLOCK) != 0 || (flags & MSG_DONTWAIT) != 0;
}

// Waits while a connect or the handshake is under way. 0, or the errno to fail with.
int waitConnected(RSocket& r, Lock& lk, bool nonblock) {
  while (r.state == State::Connecting || r.state == State::Accepting) {
    if (nonblock) return EAGAIN;  // librdmacm: EINPROGRESS becomes EAGAIN
    lk.unlock();
    waitFd(r.evfd, POLLIN, -1);
    lk.lock();
  }
  if (r.state != State::Connected) return ENOTCONN;
  if (r.conn_event) {
    r.conn_event = false;
    r.updateLevel();
  }
  return 0;
}

// Copies received data into `iov`. Holds lk; returns bytes, or -1 with errno.
ssize_t recvLocked(RSocket& r, Lock& lk, const iovec* iov, int iovcnt, int flags) {
  size_t want = 0;
  for (int i = 0; i < iovcnt; i++)
    want += iov[i].iov_len;
  if (want == 0) return 0;
  const bool nonblock = nonBlocking(r, flags), peek = (flags & MSG_PEEK) != 0;
  size_t got = 0;
  for (;;) {
    if (int e = waitConnected(r, lk, nonblock); e != 0) return got > 0 ? ssize_t(got) : setErr(e);
    if (r.rx.r_len > 0 && !r.rx.rd_shut) {
      size_t skip = peek ? 0 : got;  // a peek always starts at the first byte
      for (int i = 0; i < iovcnt && r.rx.r_len > 0; i++) {
        if (skip >= iov[i].iov_len) {
          skip -= iov[i].iov_len;
          continue;
        }
        auto* dst = static_cast<uint8_t*>(iov[i].iov_base) + skip;
        got += r.takeData(dst, iov[i].iov_len - skip, peek);
        skip = 0;
        if (peek) break;
      }
      r.updateLevel();
      if (peek || got == want || (flags & MSG_WAITALL) == 0) return ssize_t(got);
      continue;
    }
    if (r.rx.rd_shut || r.rx.rd_eof) return ssize_t(got);
    if (r.err != 0) return got > 0 ? ssize_t(got) : setErr(r.err);
    if (nonblock) return got > 0 ? ssize_t(got) : setErr(EAGAIN);
    lk.unlock();
    waitFd(r.evfd, POLLIN, -1);
    lk.lock();
  }
}

// The pieces of `iov` from byte `from`, at most `max` bytes, in `out` (at most n pieces).
int slice(const iovec* iov, int iovcnt, size_t from, size_t max, iovec* out, int n, size_t* len) {
  int k = 0;
  *len = 0;
  for (int i = 0; i < iovcnt && k < n && *len < max; i++) {
    if (from >= iov[i].iov_len) {
      from -= iov[i].iov_len;
      continue;
    }
    size_t take = std::min(iov[i].iov_len - from, max - *len);
    out[k++] = {static_cast<uint8_t*>(iov[i].iov_base) + from, take};
    *len += take;
    from = 0;
  }
  return k;
}

ssize_t sendLocked(RSocket& r, Lock& lk, const iovec* iov, int iovcnt, int flags) {
  size_t total = 0;
  for (int i = 0; i < iovcnt; i++)
    total += iov[i].iov_len;
  const bool nonblock = nonBlocking(r, flags);
  if (int e = waitConnected(r, lk, nonblock); e != 0) return setErr(e);
  if (r.err != 0) return setErr(r.err);
  if (r.tx.wr_shut) return setErr(EPIPE);
  size_t sent = 0;
  static thread_local std::vector<uint8_t> gather;
  while (sent < total) {
    r.flushTx();
    if (r.err != 0) return sent > 0 ? ssize_t(sent) : setErr(r.err);
    if (r.txBusy()) {  // a blocking send returns when everything is queued
      if (nonblock) return sent > 0 ? ssize_t(sent) : setErr(EAGAIN);
      lk.unlock();
      waitFd(r.fd, POLLOUT, -1);
      lk.lock();
      if (r.state != State::Connected || r.tx.closing)
        return sent > 0 ? ssize_t(sent) : setErr(ENOTCONN);
      continue;
    }
    iovec piece[16]{};
    size_t len;
    int k = slice(iov, iovcnt, sent, kMaxTransfer, piece, 16, &len);
    const void* p = piece[0].iov_base;
    if (k > 1) {  // one frame: the pieces are gathered
      gather.resize(kMaxTransfer);
      size_t off = 0;
      for (int i = 0; i < k; i++, off += piece[i - 1].iov_len)
        memcpy(gather.data() + off, piece[i].iov_base, piece[i].iov_len);
      p = gather.data();
    }
    r.queueFrame(RsType::Data, 0, p, len);
    sent += len;
  }
  return ssize_t(sent);
}

ssize_t recvv(int socket, const iovec* iov, int iovcnt, int flags) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt > 0 && iov == nullptr)) return setErr(EINVAL);
  Lock lk(r->mu);
  return recvLocked(*r, lk, iov, iovcnt, flags);
}

ssize_t sendv(int socket, const iovec* iov, int iovcnt, int flags) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt > 0 && iov == nullptr)) return setErr(EINVAL);
  Lock lk(r->mu);
  return sendLocked(*r, lk, iov, iovcnt, flags);
}

}  // namespace

SOFTRDMA_API int rsocket(int domain, int type, int protocol) {
  // librdmacm's checks. The type must be exactly SOCK_STREAM: softrdma's own sockets carry
  // SOCK_CLOEXEC, so librspreload's socket() gives them back to the C library.
  if ((domain != AF_INET && domain != AF_INET6) || type != SOCK_STREAM ||
      (protocol != 0 && protocol != IPPROTO_TCP))
    return setErr(EOPNOTSUPP);
  int s = sys::socket(domain, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  insert(std::make_shared<RSocket>(s, domain));
  return s;
}

SOFTRDMA_API int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  std::lock_guard lk(r->mu);
  if (r->state != State::Init) return setErr(EINVAL);
  if (sys::bind(r->fd, addr, addrlen) != 0) return -1;
  r->state = State::Bound;
  return 0;
}

SOFTRDMA_API int rlisten(int socket, int backlog) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  std::lock_guard lk(r->mu);
  if (r->state == State::Listening) return 0;
  if (r->state != State::Init && r->state != State::Bound) return setErr(EINVAL);
  if (sys::listen(r->fd, backlog) != 0) return -1;
  r->state = State::Listening;
  watch(r);
  return 0;
}

SOFTRDMA_API int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  std::shared_ptr<RSocket> c;
  {
    Lock lk(r->mu);
    for (;;) {
      if (r->state != State::Listening) return setErr(EINVAL);
      if (!r->accept_queue.empty()) break;
      if (r->fd_flags & O_NONBLOCK) return setErr(EAGAIN);
      lk.unlock();
      waitFd(r->evfd, POLLIN, -1);
      lk.lock();
    }
    c = std::move(r->accept_queue.front());
    r->accept_queue.pop_front();
    r->updateLevel();
  }
  insert(c);
  if (addr != nullptr && addrlen != nullptr) sys::getpeername(c->fd, addr, addrlen);
  return c->fd;
}

SOFTRDMA_API int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  Lock lk(r->mu);
  switch (r->state) {
    case State::Init:
    case State::Bound:
      break;
    case State::Connecting:
      return setErr(EALREADY);
    case State::Connected:
      return setErr(EISCONN);
    case State::Failed:
      return setErr(ENOTCONN);  // librdmacm: a failed rsocket cannot connect again
    default:
      return setErr(EINVAL);
  }
  if (sys::connect(r->fd, addr, addrlen) == 0) {
    r->tcp_up = true;
  } else if (errno != EINPROGRESS) {
    return -1;
  }
  r->state = State::Connecting;
  Hello h{kHelloMagic, kVersion, static_cast<uint16_t>(r->opts.iomap_size), {}};
  r->queueFrame(RsType::Hello, 0, &h, sizeof h);
  watch(r);
  armTimeout(r);
  if (r->fd_flags & O_NONBLOCK) return setErr(EINPROGRESS);
  waitConnected(*r, lk, false);
  if (r->state == State::Connected) return 0;
  int e = r->so_error != 0 ? r->so_error : ECONNREFUSED;
  r->so_error = 0;
  return setErr(e);
}

SOFTRDMA_API int rshutdown(int socket, int how) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return setErr(EINVAL);
  std::lock_guard lk(r->mu);
  if (r->state != State::Connected) return setErr(ENOTCONN);
  if (how != SHUT_WR) {
    r->rx.rd_shut = true;
    r->rx.r_head = r->rx.r_len = 0;
  }
  if (how != SHUT_RD) {
    r->tx.wr_shut = true;
    r->flushTx();  // the FIN follows what is queued
  }
  r->updateLevel();
  return 0;
}

SOFTRDMA_API int rclose(int socket) {
  auto r = erase(socket);
  if (!r) return setErr(EBADF);
  closeSocket(r);
  return 0;
}

SOFTRDMA_API ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  iovec iov{buf, len};
  return recvv(socket, &iov, 1, flags);
}

SOFTRDMA_API ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr,
                               socklen_t* addrlen) {
  ssize_t n = rrecv(socket, buf, len, flags);
  if (n >= 0 && src_addr != nullptr && addrlen != nullptr) {
    int saved = errno;
    if (auto r = find(socket)) sys::getpeername(r->fd, src_addr, addrlen);
    errno = saved;
  }
  return n;
}

SOFTRDMA_API ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  if (msg == nullptr) return setErr(EFAULT);
  if (msg->msg_control != nullptr && msg->msg_controllen > 0) return setErr(EOPNOTSUPP);
  msg->msg_flags = 0;
  return recvv(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

SOFTRDMA_API ssize_t rread(int socket, void* buf, size_t count) {
  return rrecv(socket, buf, count, 0);
}

SOFTRDMA_API ssize_t rreadv(int socket, const iovec* iov, int iovcnt) {
  return recvv(socket, iov, iovcnt, 0);
}

SOFTRDMA_API ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  iovec iov{const_cast<void*>(buf), len};
  return sendv(socket, &iov, 1, flags);
}

SOFTRDMA_API ssize_t rsendto(int socket, const void* buf, size_t len, int flags,
                             const sockaddr* dest_addr, socklen_t addrlen) {
  if (!find(socket)) return setErr(EBADF);
  if (dest_addr != nullptr || addrlen != 0) return setErr(EISCONN);
  return rsend(socket, buf, len, flags);
}

SOFTRDMA_API ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  if (msg == nullptr) return setErr(EFAULT);
  if (msg->msg_control != nullptr && msg->msg_controllen > 0) return setErr(EOPNOTSUPP);
  if (msg->msg_name != nullptr && msg->msg_namelen > 0) return setErr(EISCONN);
  return sendv(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

SOFTRDMA_API ssize_t rwrite(int socket, const void* buf, size_t count) {
  return rsend(socket, buf, count, 0);
}

SOFTRDMA_API ssize_t rwritev(int socket, const iovec* iov, int iovcnt) {
  return sendv(socket, iov, iovcnt, 0);
}

SOFTRDMA_API int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  return sys::getpeername(r->fd, addr, addrlen);
}

SOFTRDMA_API int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  return sys::getsockname(r->fd, addr, addrlen);
}

SOFTRDMA_API int rfcntl(int socket, int cmd, ...) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  std::lock_guard lk(r->mu);
  if (cmd == F_GETFL) return r->fd_flags;
  if (cmd != F_SETFL) return setErr(EOPNOTSUPP);  // librdmacm: only F_GETFL and F_SETFL
  va_list ap;
  va_start(ap, cmd);
  r->fd_flags = va_arg(ap, int);
  va_end(ap);
  return 0;
}
