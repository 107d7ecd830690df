// riomap, riounmap and riowrite (rsocket(7)): direct placement into a window the receiver
// registered. A riomap with PROT_WRITE takes one of the slots the peer allows
// (the peer's RDMA_IOMAPSIZE, carried in its Hello) and announces the window in an IoMap frame;
// riowrite sends IoWrite frames on the same stream, so the data lands before anything sent after
// it is received, and the receiver's progress thread writes it into the window at once.
#include <fcntl.h>
#include <sys/mman.h>

#include <rdma/rsocket.h>

#include <algorithm>
#include <cerrno>

#include "base.h"
#include "rsocket.h"

using namespace softrdma;
using namespace softrdma::rs;

namespace {

using Lock = std::unique_lock<std::mutex>;

int freeSlot(const RSocket& r) {
  for (int s = 0; s < r.iomap.peer_iomap_size; s++) {
    bool used = std::any_of(r.iomap.local_maps.begin(), r.iomap.local_maps.end(),
                            [s](const LocalMap& m) { return m.slot == s; });
    if (!used) return s;
  }
  return -1;
}

// The peer's window that holds `offset`, or nullptr.
const RemoteMap* remoteWindow(const RSocket& r, uint64_t offset) {
  for (const auto& m : r.iomap.remote_maps) {
    if (m.valid && offset >= m.offset && offset - m.offset < m.len) return &m;
  }
  return nullptr;
}

// The next piece of a riowrite at `offset`: how many bytes fit in the peer's window (0: none).
size_t windowRoom(const RSocket& r, uint64_t offset, size_t left) {
  const RemoteMap* m = remoteWindow(r, offset);
  if (m == nullptr) return 0;
  return static_cast<size_t>(std::min<uint64_t>({left, kMaxTransfer, m->offset + m->len - offset}));
}

}  // namespace

SOFTRDMA_API off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  (void)flags;  // librdmacm ignores them too
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  if ((prot & ~PROT_WRITE) != 0 || buf == nullptr || len == 0) return setErr(EINVAL);
  std::lock_guard lk(r->mu);
  // librdmacm registers the buffer on the connection's PD, which exists once connected.
  if (r->state != State::Connected || r->tx.closing) return setErr(EINVAL);
  int slot = -1;
  if (prot & PROT_WRITE) {
    slot = freeSlot(*r);
    if (slot < 0) return setErr(ENOMEM);  // every slot the peer allows is taken
  }
  if (offset == -1) offset = static_cast<off_t>(reinterpret_cast<uintptr_t>(buf));
  r->iomap.local_maps.push_back(
      LocalMap{static_cast<uint8_t*>(buf), len, static_cast<uint64_t>(offset), slot});
  if (slot >= 0) {
    IoMapMsg m{static_cast<uint32_t>(slot), 0, static_cast<uint64_t>(offset), len};
    r->queueFrame(RsType::IoMap, 0, &m, sizeof m);
  }
  return offset;
}

SOFTRDMA_API int riounmap(int socket, void* buf, size_t len) {
  auto r = find(socket);
  if (!r) return setErr(EBADF);
  std::lock_guard lk(r->mu);
  auto it = std::find_if(r->iomap.local_maps.begin(), r->iomap.local_maps.end(),
                         [&](const LocalMap& m) { return m.addr == buf && m.len == len; });
  if (it == r->iomap.local_maps.end()) return setErr(EINVAL);
  r->iomap.local_maps.erase(
      it);  // the peer is not told: its later writes there break the connection
  return 0;
}

SOFTRDMA_API size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  auto r = find(socket);
  if (!r) return static_cast<size_t>(setErr(EBADF));
  Lock lk(r->mu);
  const bool nonblock = (r->fd_flags & O_NONBLOCK) != 0 || (flags & MSG_DONTWAIT) != 0;
  while (r->state == State::Connecting) {
    if (nonblock) return static_cast<size_t>(setErr(EAGAIN));
    lk.unlock();
    waitFd(r->evfd, POLLIN, -1);
    lk.lock();
  }
  if (r->state != State::Connected) return static_cast<size_t>(setErr(ENOTCONN));
  if (r->err != 0) return static_cast<size_t>(setErr(r->err));
  if (r->tx.wr_shut) return static_cast<size_t>(setErr(EPIPE));
  const auto* p = static_cast<const uint8_t*>(buf);
  auto at = static_cast<uint64_t>(offset);
  size_t sent = 0;
  while (sent < count) {
    r->flushTx();
    if (r->err != 0) return sent > 0 ? sent : static_cast<size_t>(setErr(r->err));
    if (r->txBusy()) {
      if (nonblock) return sent > 0 ? sent : static_cast<size_t>(setErr(EAGAIN));
      lk.unlock();
      waitFd(r->fd, POLLOUT, -1);
      lk.lock();
      if (r->state != State::Connected || r->tx.closing)
        return sent > 0 ? sent : static_cast<size_t>(setErr(ENOTCONN));
      continue;
    }
    // As librdmacm: a write stops where no window the peer announced holds the offset (0 bytes
    // if none holds the first one).
    size_t n = windowRoom(*r, at + sent, count - sent);
    if (n == 0) break;
    r->queueFrame(RsType::IoWrite, at + sent, p + sent, n);
    sent += n;
  }
  return sent;
}
