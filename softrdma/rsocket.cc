// An rsocket's connection (rsocket.h): the frames on its TCP socket, read by the progress thread
// and written by whichever thread sends, the handshake, and the rsocket table.
#include "rsocket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "base.h"
#include "fabric.h"
#include "rsocket_sys.h"

namespace softrdma::rs {

namespace {
std::mutex g_table_mu;
std::unordered_map<int, std::shared_ptr<RSocket>>& table() {
  static auto* t = new std::unordered_map<int, std::shared_ptr<RSocket>>();
  return *t;
}
}  // namespace

std::shared_ptr<RSocket> find(int fd) {
  std::lock_guard lk(g_table_mu);
  auto it = table().find(fd);
  return it == table().end() ? nullptr : it->second;
}

void insert(const std::shared_ptr<RSocket>& r) {
  std::lock_guard lk(g_table_mu);
  table()[r->fd] = r;
}

std::shared_ptr<RSocket> erase(int fd) {
  std::lock_guard lk(g_table_mu);
  auto it = table().find(fd);
  if (it == table().end()) return nullptr;
  auto r = std::move(it->second);
  table().erase(it);
  return r;
}

void waitFd(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  sys::poll(&p, 1, ms);
}

RSocket::RSocket(int sock, int fam) : family(fam) {
  fd = sock;
  evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int one = 1;
  sys::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

RSocket::~RSocket() {
  if (evfd >= 0) sys::close(evfd);
  if (fd >= 0) sys::close(fd);
  fd = -1;  // not closed again by ~Endpoint
}

bool RSocket::readable() const {
  switch (state) {
    case State::Listening:
      return !accept_queue.empty();
    case State::Failed:
      return true;
    case State::Connected:
      return rx.r_len > 0 || rx.rd_eof || rx.rd_shut || err != 0;
    default:
      return false;
  }
}

void RSocket::updateLevel() {
  bool want = readable() || conn_event;
  if (want == level || evfd < 0) return;
  level = want;
  uint64_t v = 1;
  ssize_t n = want ? sys::write(evfd, &v, sizeof v) : sys::read(evfd, &v, sizeof v);
  (void)n;
}

void watch(const std::shared_ptr<RSocket>& r) {
  uint32_t ev =
      r->state == State::Listening ? EPOLLIN | EPOLLET : EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  r->watched = true;
  Fabric::get().add(r, ev);
}

void RSocket::fail(int e) {
  if (state == State::Connecting || state == State::Accepting) {
    state = State::Failed;
    so_error = e == ECONNRESET ? ECONNREFUSED : e;
    conn_event = true;
  } else if (err == 0) {
    err = e;
    so_error = e;
  }
  tx.txq.clear();
  tx.off = 0;
  if (fd >= 0) sys::shutdown(fd, SHUT_RDWR);  // the peer sees the connection end
  debugLog("rsocket %d: connection failed: %s", fd, strerror(e));
}

void RSocket::startConnected() {
  state = State::Connected;
  rx.ring.assign(static_cast<size_t>(std::max(opts.rcvbuf, 1)), 0);
  iomap.remote_maps.assign(static_cast<size_t>(opts.iomap_size), RemoteMap{});
  conn_event = true;
}

// ------------------------------------------------------------------ send

void RSocket::queueFrame(RsType t, uint64_t offset, const void* payload, size_t len) {
  RsFrame h{static_cast<uint32_t>(len), t, {}, offset};
  size_t done = 0;
  if (!txBusy() && tcp_up) {
    iovec iov[2] = {{&h, sizeof h}, {const_cast<void*>(payload), len}};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = len > 0 ? 2 : 1;
    ssize_t n = sys::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      fail(errno == EPIPE ? ECONNRESET : errno);
      return;
    }
    done = n > 0 ? static_cast<size_t>(n) : 0;
    if (done == sizeof h + len) return;
  }
  if (tx.off > 0 && tx.off == tx.txq.size()) {
    tx.txq.clear();
    tx.off = 0;
  }
  const auto* hp = reinterpret_cast<const uint8_t*>(&h);
  const auto* pp = static_cast<const uint8_t*>(payload);
  if (done < sizeof h) tx.txq.insert(tx.txq.end(), hp + done, hp + sizeof h);
  size_t pdone = done > sizeof h ? done - sizeof h : 0;
  if (len > pdone) tx.txq.insert(tx.txq.end(), pp + pdone, pp + len);
}

void RSocket::flushTx() {
  while (tcp_up && txBusy() && err == 0) {
    iovec iov{tx.txq.data() + tx.off, tx.txq.size() - tx.off};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    ssize_t n = sys::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      tx.off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      fail(errno == EPIPE ? ECONNRESET : errno);
      return;
    }
  }
  if (txBusy()) return;
  tx.txq.clear();
  tx.off = 0;
  if (tx.wr_shut && !tx.fin_sent && tcp_up && err == 0) {
    sys::shutdown(fd, SHUT_WR);
    tx.fin_sent = true;
  }
}

// --------------------------------------------------------------- receive

size_t RSocket::takeData(uint8_t* dst, size_t len, bool peek) {
  size_t n = std::min(len, rx.r_len);
  size_t first = std::min(n, rx.ring.size() - rx.r_head);
  memcpy(dst, rx.ring.data() + rx.r_head, first);
  memcpy(dst + first, rx.ring.data(), n - first);
  if (peek || n == 0) return n;
  rx.r_head = (rx.r_head + n) % rx.ring.size();
  rx.r_len -= n;
  if (rx.r_len == 0) rx.r_head = 0;
  if (rx.paused) {  // the progress thread stopped reading: take over
    rx.paused = false;
    pumpRx();
  }
  return n;
}

namespace {

void pushRing(RSocket& r, const uint8_t* p, size_t n) {
  size_t tail = (r.rx.r_head + r.rx.r_len) % r.rx.ring.size();
  size_t first = std::min(n, r.rx.ring.size() - tail);
  memcpy(r.rx.ring.data() + tail, p, first);
  memcpy(r.rx.ring.data(), p + first, n - first);
  r.rx.r_len += n;
}

// The mapping that holds [offset, offset + len) for the peer's writes, or nullptr.
const LocalMap* writableMap(const RSocket& r, uint64_t offset, size_t len) {
  for (const auto& m : r.iomap.local_maps) {
    if (m.slot >= 0 && offset >= m.offset && offset - m.offset <= m.len &&
        len <= m.len - (offset - m.offset))
      return &m;
  }
  return nullptr;
}

bool headerValid(RSocket& r, const RsFrame& h) {
  if (r.state != State::Connected) return h.type == RsType::Hello && h.len == sizeof(Hello);
  switch (h.type) {
    case RsType::Data:
      return h.len > 0 && h.len <= kMaxTransfer;
    case RsType::IoMap:
      return h.len == sizeof(IoMapMsg);
    case RsType::IoWrite:
      // A write to memory the receiver did not map is a remote access error: the
      // connection breaks, as a QP goes to the error state.
      return h.len <= kMaxTransfer && writableMap(r, h.offset, h.len) != nullptr;
    default:
      return false;
  }
}

void onHello(RSocket& r, const Hello& h) {
  if (h.magic != kHelloMagic || h.version != kVersion) {
    r.fail(ECONNREFUSED);
    return;
  }
  r.iomap.peer_iomap_size = h.iomap_size;
  bool passive = r.state == State::Accepting;
  r.startConnected();
  if (passive) {
    Hello mine{kHelloMagic, kVersion, static_cast<uint16_t>(r.opts.iomap_size), {}};
    r.queueFrame(RsType::Hello, 0, &mine, sizeof mine);
    r.conn_event = false;
    r.enqueue = true;
  }
}

void finishFrame(RSocket& r) {
  if (r.rx.cur.type == RsType::Hello) {
    Hello h;
    memcpy(&h, r.rx.ctrl.data(), sizeof h);
    onHello(r, h);
  } else if (r.rx.cur.type == RsType::IoMap) {
    IoMapMsg m;
    memcpy(&m, r.rx.ctrl.data(), sizeof m);
    if (m.slot >= r.iomap.remote_maps.size()) {
      r.fail(ECONNRESET);
      return;
    }
    r.iomap.remote_maps[m.slot] = RemoteMap{true, m.offset, m.len};
  }
}

}  // namespace

// Parses the staged bytes. false: stop reading (the receive buffer is full, or an error).
bool RSocket::parse() {
  while (rx.st_begin < rx.st_end || (rx.have_hdr && rx.cur_left == 0)) {
    if (!rx.have_hdr) {
      if (rx.st_end - rx.st_begin < sizeof(RsFrame)) return true;
      memcpy(&rx.cur, rx.stage.data() + rx.st_begin, sizeof rx.cur);
      rx.st_begin += sizeof rx.cur;
      if (!headerValid(*this, rx.cur)) {
        fail(ECONNRESET);
        return false;
      }
      rx.have_hdr = true;
      rx.cur_left = rx.cur.len;
      rx.ctrl.clear();
    }
    const uint8_t* p = rx.stage.data() + rx.st_begin;
    size_t take = std::min(rx.st_end - rx.st_begin, rx.cur_left);
    if (rx.cur.type == RsType::Data) {
      if (!rx.rd_shut) {
        take = std::min(take, rx.ring.size() - rx.r_len);
        if (take == 0 && rx.cur_left > 0) {
          rx.paused = true;
          return false;
        }
        pushRing(*this, p, take);
      }
    } else if (rx.cur.type == RsType::IoWrite) {
      uint64_t at = rx.cur.offset + (rx.cur.len - rx.cur_left);
      const LocalMap* m = writableMap(*this, at, take);
      if (m == nullptr) {  // unmapped since the header arrived
        fail(ECONNRESET);
        return false;
      }
      memcpy(m->addr + (at - m->offset), p, take);
    } else {
      rx.ctrl.insert(rx.ctrl.end(), p, p + take);
    }
    rx.st_begin += take;
    rx.cur_left -= take;
    if (rx.cur_left == 0) {
      rx.have_hdr = false;
      finishFrame(*this);
      if (err != 0 || state == State::Failed) return false;
    }
  }
  return true;
}

void RSocket::onEof() {
  if (state != State::Connected) {
    fail(ECONNREFUSED);  // closed before the handshake: not an rsocket, or it went away
  } else if (rx.have_hdr || rx.st_end > rx.st_begin) {
    fail(ECONNRESET);  // in the middle of a frame
  } else {
    rx.rd_eof = true;
  }
}

void RSocket::pumpRx() {
  if (rx.stage.empty()) rx.stage.resize(kStage);
  for (;;) {
    if (state == State::Failed || err != 0 || rx.rd_eof || fd < 0) return;
    if (!parse()) return;
    if (rx.st_begin == rx.st_end) {
      rx.st_begin = rx.st_end = 0;
    } else if (rx.st_begin > 0) {
      memmove(rx.stage.data(), rx.stage.data() + rx.st_begin, rx.st_end - rx.st_begin);
      rx.st_end -= rx.st_begin;
      rx.st_begin = 0;
    }
    ssize_t n = sys::read(fd, rx.stage.data() + rx.st_end, rx.stage.size() - rx.st_end);
    if (n > 0) {
      rx.st_end += static_cast<size_t>(n);
    } else if (n == 0) {
      onEof();
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return;
    } else {
      fail(errno);
    }
  }
}

// ------------------------------------------------------- progress thread

void RSocket::acceptAll() {
  for (;;) {
    int s = sys::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN, or out of descriptors (the next connection brings a new edge)
    }
    auto c = std::make_shared<RSocket>(s, family);
    c->opts = opts;
    c->listener = weak_from_this();
    c->state = State::Accepting;
    c->passive = true;
    c->tcp_up = true;
    watch(c);
    armTimeout(c);
  }
}

void armTimeout(const std::shared_ptr<RSocket>& r) {
  auto& f = Fabric::get();
  f.schedule(Clock::now() + std::chrono::milliseconds(f.cm_timeout_ms),
             [w = std::weak_ptr<RSocket>(r)] {
               auto s = w.lock();
               if (!s) return;
               bool passive;
               {
                 std::lock_guard lk(s->mu);
                 if (s->state != State::Connecting && s->state != State::Accepting) return;
                 passive = s->state == State::Accepting;
                 s->fail(ETIMEDOUT);
                 s->updateLevel();
               }
               if (passive) closeSocket(s);
             });
}

void RSocket::onEvents(uint32_t events) {
  bool enq, drop;
  std::shared_ptr<RSocket> owner;
  {
    std::lock_guard lk(mu);
    if (state == State::Listening) {
      acceptAll();
      return;
    }
    if (state == State::Connecting && !tcp_up) {
      int e = 0;
      socklen_t l = sizeof e;
      sys::getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l);
      if (e != 0) {
        fail(e);
      } else if (events & (EPOLLOUT | EPOLLIN)) {
        tcp_up = true;
      }
    }
    if (events & EPOLLOUT) flushTx();
    pumpRx();
    if (tx.closing && (!txBusy() || err != 0 || state != State::Connected)) {
      finishClose();
      return;
    }
    enq = enqueue;
    enqueue = false;
    // A passive rsocket whose handshake failed is nobody's: it goes.
    drop = passive && state == State::Failed && !listener.expired();
    if (enq) owner = listener.lock();
    if (enq || drop) listener.reset();
    updateLevel();
  }
  if (enq) handOver(shared_from_this(), owner);
  if (drop) closeSocket(shared_from_this());
}

// A passive rsocket finished its handshake: it waits in its listener's queue for raccept.
void handOver(const std::shared_ptr<RSocket>& c, const std::shared_ptr<RSocket>& l) {
  bool queued = false;
  if (l) {
    std::lock_guard lk(l->mu);
    if (l->state == State::Listening && !l->tx.closing) {
      l->accept_queue.push_back(c);
      l->updateLevel();
      queued = true;
    }
  }
  if (!queued) closeSocket(c);
}

// mu held. The socket goes: the rest of the peer's data is read and dropped first (closing
// a TCP socket with unread data resets the connection), then the fd is closed.
void RSocket::finishClose() {
  if (fd >= 0 && state == State::Connected && err == 0) {
    uint8_t sink[4096];
    for (int i = 0; i < 64 && sys::read(fd, sink, sizeof sink) > 0; i++) {
    }
  }
  if (watched) Fabric::get().remove(shared_from_this());
  watched = false;
}

void closeSocket(const std::shared_ptr<RSocket>& r) {
  std::deque<std::shared_ptr<RSocket>> pending;
  {
    std::lock_guard lk(r->mu);
    if (r->tx.closing) return;
    r->tx.closing = true;
    pending.swap(r->accept_queue);
    r->iomap.local_maps.clear();
    if (r->state == State::Connected && r->err == 0) r->flushTx();
    if (!r->txBusy() || r->err != 0 || r->state != State::Connected) r->finishClose();
  }
  for (auto& c : pending)
    closeSocket(c);
}

}  // namespace softrdma::rs
