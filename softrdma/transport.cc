// The RC transport over one TCP connection: what a NIC does on the wire.
//
// Transmit: any thread appends frames under tx_mu and writes them at once
// when nothing is queued (a doorbell); what the socket does not take is
// queued — small pieces copied, large send buffers referenced (they belong
// to the provider until their completion) — and flushed by the progress
// thread on EPOLLOUT.
//
// Receive (edge-triggered: read until EAGAIN) by whichever thread comes
// first: the progress thread on its epoll event, or a program's thread that
// polls a CQ of the connection's QP (or gets its channel's events) and finds
// the socket ready in that CQ's rx epoll (inline progress, Cq::progress).
// Conn::progress lets one thread at a time service a connection; a thread
// that finds it busy leaves the work to the one at it. Frames are parsed
// from a staging buffer; payloads are copied — or, when large,
// read directly — into their destination (a receive WQE's buffers, an MR for
// RDMA WRITE, the local buffers of an RDMA READ). A SEND that finds no
// receive WQE is held (RNR): the responder retries every min_rnr_timer and
// NAKs the requester once its rnr_retry count is exhausted (7 = forever).
// Data for a QP that is not yet RTR is held, never dropped.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "counters.h"
#include "internal.h"
#include "softrdma/testing.h"

namespace softrdma {

namespace {

constexpr size_t kRxBuffer = 256 * 1024;
constexpr size_t kDirectRead = 64 * 1024;  // read straight into the destination above this
constexpr size_t kReferenceAbove = 16 * 1024;
constexpr size_t kServiceBudget = 8 * 1024 * 1024;
constexpr uint32_t kEvIn = EPOLLIN | EPOLLRDHUP | EPOLLET;
// The longest an ACK for unsignaled requests waits for a frame to ride on.
// The requester cannot observe it (only signaled WRs complete, and their
// ACKs go at once), so this only bounds how long its send queue keeps the
// entries.
constexpr auto kAckDelay = std::chrono::microseconds(500);

// IB spec table 45 (min RNR NAK timer field), in microseconds.
const uint32_t kRnrMicros[32] = {655360, 10,    20,    30,     40,     60,     80,     120,
                                 160,    240,   320,   480,    640,    960,    1280,   1920,
                                 2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
                                 40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};

ibv_wc_status nakStatus(Syndrome s) {
  switch (s) {
    case Syndrome::RnrRetryExceeded:
      return IBV_WC_RNR_RETRY_EXC_ERR;
    case Syndrome::RemoteAccess:
      return IBV_WC_REM_ACCESS_ERR;
    case Syndrome::RemoteInvalidRequest:
      return IBV_WC_REM_INV_REQ_ERR;
    default:
      return IBV_WC_REM_OP_ERR;
  }
}

// Connections by their key in rx epolls (epoll_event.data.u64): a key
// outlives its connection, a pointer would not.
std::mutex g_keys_mu;
uint64_t g_next_key = 1;
std::unordered_map<uint64_t, std::weak_ptr<Conn>>& connKeys() {
  static auto* m = new std::unordered_map<uint64_t, std::weak_ptr<Conn>>();
  return *m;
}

// The calling thread is making progress inside ibv_poll_cq or
// ibv_get_cq_event (counted as rx_inline, not rx_progress).
thread_local bool t_inline = false;

// softrdma_corrupt_next_recv: the next successful receive completion lies.
std::mutex g_corrupt_mu;
bool g_corrupt = false;
ibv_wc_opcode g_corrupt_opcode = IBV_WC_RECV;
uint32_t g_corrupt_len = 0;

}  // namespace

void forkTransport(ForkStep s) {
  if (s == ForkStep::Prepare) {
    g_corrupt_mu.lock();
    g_keys_mu.lock();
    return;
  }
  if (s == ForkStep::Child) {
    g_corrupt = false;
    abandon(connKeys());  // the parent's connections
  }
  g_keys_mu.unlock();
  g_corrupt_mu.unlock();
}

std::shared_ptr<Conn> connByKey(uint64_t key) {
  std::lock_guard lk(g_keys_mu);
  auto it = connKeys().find(key);
  return it == connKeys().end() ? nullptr : it->second.lock();
}

bool Cq::progress() {
  if (rx_epfd < 0 || fork_gen != forkGeneration()) return false;
  epoll_event evs[32];
  bool any = false;
  for (int round = 0; round < 8; round++) {  // bounded: the rest waits for the next call
    int n = epoll_wait(rx_epfd, evs, 32, 0);
    if (n <= 0) break;
    any = true;
    t_inline = true;
    for (int i = 0; i < n; i++)
      if (auto c = connByKey(evs[i].data.u64); c && !c->dead) c->progress();
    t_inline = false;
    if (n < 32) break;
  }
  return any;
}

namespace {

void applyTestCorruption(ibv_wc& wc) {
  std::lock_guard lk(g_corrupt_mu);
  if (!g_corrupt) return;
  g_corrupt = false;
  wc.opcode = g_corrupt_opcode;
  if (g_corrupt_len != SOFTRDMA_KEEP_BYTE_LEN) wc.byte_len = g_corrupt_len;
}

bool isRequest(FrameType t) {
  return t == FrameType::Send || t == FrameType::SendImm || t == FrameType::SendInv ||
         t == FrameType::Write || t == FrameType::WriteImm || t == FrameType::ReadReq ||
         t == FrameType::FetchAdd || t == FrameType::CmpSwap;
}

}  // namespace

Conn::Conn(int sock, ConnRole r) : role(r) {
  fd = sock;
  rbuf.resize(kRxBuffer);
  dest.reserve(kMaxSge);
}

Conn::~Conn() {
  if (rx_key == 0) return;
  std::lock_guard lk(g_keys_mu);
  connKeys().erase(rx_key);
}

void Conn::bindQp(const std::shared_ptr<Qp>& q) {
  {
    std::lock_guard lk(qp_mu);
    qp = q;
    if (q) qp_was_bound = true;
    watchFrom(q);
  }
  if (q) kick();
}

// The socket joins the rx epolls of q's CQs (and leaves those of CQs it no
// longer completes on), so that their pollers can receive from it.
void Conn::watchFrom(const std::shared_ptr<Qp>& q) {
  std::vector<int> want;
  if (q && fd >= 0 && !dead) {
    for (Cq* c : {q->rcq, q->scq})
      if (c != nullptr && c->rx_epfd >= 0 && c->fork_gen == forkGeneration() &&
          std::find(want.begin(), want.end(), c->rx_epfd) == want.end())
        want.push_back(c->rx_epfd);
  }
  for (int e : rx_epfds)
    if (std::find(want.begin(), want.end(), e) == want.end())
      epoll_ctl(e, EPOLL_CTL_DEL, fd, nullptr);
  for (int e : want) {
    if (std::find(rx_epfds.begin(), rx_epfds.end(), e) != rx_epfds.end()) continue;
    if (rx_key == 0) {
      std::lock_guard lk(g_keys_mu);
      rx_key = g_next_key++;
      connKeys()[rx_key] = weak_from_this();
    }
    epoll_event ev{};
    ev.events = kEvIn;
    ev.data.u64 = rx_key;
    epoll_ctl(e, EPOLL_CTL_ADD, fd, &ev);
  }
  rx_epfds.swap(want);
}

std::shared_ptr<Qp> Conn::boundQp() {
  std::lock_guard lk(qp_mu);
  return qp;
}

// ------------------------------------------------------------- transmit

static ssize_t sendIov(int fd, iovec* io, int n) {
  msghdr m{};
  m.msg_iov = io;
  m.msg_iovlen = static_cast<size_t>(n);
  for (;;) {
    ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w >= 0 || errno != EINTR) return w;
  }
}

void Conn::sendv(const TxIov* v, int n) {
  std::lock_guard lk(tx_mu);
  sendvLocked(v, n);
}

void Conn::sendvLocked(const TxIov* v, int n) {
  if (tx_closed) return;
  FrameHeader ack{};
  TxIov withAck[257];
  if (ack_owed && n > 0 && v[0].header &&
      static_cast<const FrameHeader*>(v[0].p)->type == static_cast<uint8_t>(FrameType::Ack)) {
    ack_owed = false;                // ACKs are cumulative: this one covers what is owed
  } else if (ack_owed && n < 257) {  // the coalesced ACK rides in front of this frame
    ack_owed = false;
    ack.type = static_cast<uint8_t>(FrameType::Ack);
    ack.psn = owed_psn;
    withAck[0] = {&ack, sizeof ack, false, true, false};
    std::copy(v, v + n, withAck + 1);
    v = withAck;
    n++;
  }
  size_t skip = 0;
  if (txq.empty() && !connecting) {
    iovec io[256];
    int k = 0;
    for (int i = 0; i < n && k < 256; i++)
      io[k++] = {const_cast<void*>(v[i].p), v[i].len};
    ssize_t w = sendIov(fd, io, k);
    if (w < 0) {
      if (errno != EAGAIN) {
        tx_closed = true;  // the receive side sees the reset and reports it
        return;
      }
      w = 0;
    }
    skip = static_cast<size_t>(w);
  }
  for (int i = 0; i < n; i++) {
    if (skip >= v[i].len) {
      skip -= v[i].len;
      continue;
    }
    const auto* p = static_cast<const uint8_t*>(v[i].p) + skip;
    size_t len = v[i].len - skip;
    bool start = skip == 0 && v[i].header;
    skip = 0;
    if (v[i].stable && len >= kReferenceAbove) {
      txq.push_back({p, 0, len, start, v[i].request});
      continue;
    }
    size_t off = tbuf.size();
    tbuf.insert(tbuf.end(), p, p + len);
    if (!start && !txq.empty() && txq.back().ext == nullptr &&
        txq.back().off + txq.back().len == off)
      txq.back().len += len;
    else
      txq.push_back({nullptr, off, len, start, v[i].request});
  }
  if (!txq.empty() && !want_out && !connecting) {
    want_out = true;
    Fabric::get().modify(this, kEvIn | EPOLLOUT);
  }
}

void Conn::sendFrame(FrameType t, uint32_t psn, uint16_t syndrome, const void* payload,
                     uint32_t len) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(t);
  h.psn = psn;
  h.syndrome = syndrome;
  h.len = len;
  TxIov v[2] = {{&h, sizeof h, false, true, false}, {payload, len, false, false, false}};
  sendv(v, len > 0 ? 2 : 1);
}

void Conn::flushLocked() {
  while (!txq.empty() && !tx_closed) {
    iovec io[64];
    int k = 0;
    for (auto it = txq.begin(); it != txq.end() && k < 64; ++it)
      io[k++] = {const_cast<uint8_t*>(it->ext ? it->ext : tbuf.data() + it->off), it->len};
    ssize_t w = sendIov(fd, io, k);
    if (w < 0) {
      if (errno == EAGAIN) return;
      tx_closed = true;
      break;
    }
    auto left = static_cast<size_t>(w);
    while (left > 0) {
      Seg& s = txq.front();
      if (left >= s.len) {
        left -= s.len;
        txq.pop_front();
        continue;
      }
      if (s.ext)
        s.ext += left;
      else
        s.off += left;
      s.len -= left;
      s.frame_start = false;
      left = 0;
    }
    compactLocked();
  }
  txq.clear();
  tbuf.clear();
  if (want_out) {
    want_out = false;
    Fabric::get().modify(this, kEvIn);
  }
  if (close_after_flush) shutdown(fd, SHUT_WR);
}

// Drops the already-sent prefix of tbuf once it dominates, so a connection
// that never fully drains does not grow without bound.
void Conn::compactLocked() {
  size_t first = SIZE_MAX;
  for (const Seg& s : txq) {
    if (s.ext == nullptr) {
      first = s.off;
      break;
    }
  }
  if (first == SIZE_MAX) first = tbuf.size();
  if (first < (1u << 20) || first < tbuf.size() / 2) return;
  tbuf.erase(tbuf.begin(), tbuf.begin() + static_cast<std::ptrdiff_t>(first));
  for (Seg& s : txq)
    if (s.ext == nullptr) s.off -= first;
}

void Conn::oweAck(uint32_t psn) {
  {
    std::lock_guard lk(tx_mu);  // a leaf: the timer is scheduled after it is released
    if (tx_closed) return;
    ack_owed = true;
    owed_psn = psn;
    if (ack_timer) return;
    ack_timer = true;
  }
  std::weak_ptr<Conn> w = weak_from_this();
  Fabric::get().schedule(Clock::now() + kAckDelay, [w] {
    if (auto c = w.lock()) c->sendOwedAck();
  });
}

void Conn::sendOwedAck() {
  std::lock_guard lk(tx_mu);
  ack_timer = false;
  if (ack_owed) sendvLocked(nullptr, 0);  // the owed ACK alone
}

void Conn::shutdownAfterFlush() {
  std::lock_guard lk(tx_mu);
  if (ack_owed) sendvLocked(nullptr, 0);
  close_after_flush = true;
  if (txq.empty()) shutdown(fd, SHUT_WR);
}

void Conn::abortData() {
  std::lock_guard lk(tx_mu);
  std::deque<Seg> keep;
  std::vector<uint8_t> buf;
  bool keepFrame = true;
  for (size_t i = 0; i < txq.size(); i++) {
    const Seg& s = txq[i];
    // The frame partly on the wire is finished; whole requests not yet begun
    // are never sent; responses (ACK, NAK, READ data) still go out.
    if (s.frame_start) keepFrame = i == 0 || !s.request;
    if (!keepFrame) continue;
    const uint8_t* p = s.ext ? s.ext : tbuf.data() + s.off;
    keep.push_back({nullptr, buf.size(), s.len, s.frame_start, s.request});
    buf.insert(buf.end(), p, p + s.len);
  }
  txq.swap(keep);
  tbuf.swap(buf);
}

// -------------------------------------------------------------- receive

void Conn::onEvents(uint32_t events) {
  auto self = shared_from_this();
  if (connecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    connecting = false;
    if (manual) {
      if (err != 0) {
        lost_why = strerror(err);  // glibc: a string that lives forever
        progress();
        return;
      }
    } else {
      onConnConnected(self, err);
      if (err != 0) return;
    }
    std::lock_guard lk(tx_mu);
    want_out = true;  // registered with EPOLLOUT for the connect: drop it once flushed
    flushLocked();
    return;
  }
  if (events & EPOLLOUT) {
    std::lock_guard lk(tx_mu);
    flushLocked();
  }
  if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) hup_seen = true;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) progress();
}

void Conn::progress() {
  rx_want = true;
  while (rx_want) {
    bool idle = false;
    if (!rx_busy.compare_exchange_strong(idle, true)) return;  // its holder goes round
    while (rx_want.exchange(false))
      service();
    rx_busy = false;
  }
}

void Conn::kick() {
  std::weak_ptr<Conn> w = weak_from_this();
  Fabric::get().post([w] {
    if (auto c = w.lock()) c->progress();
  });
}

bool Conn::readMore() {
  if (rpos > 0) {
    memmove(rbuf.data(), rbuf.data() + rpos, rend - rpos);
    rend -= rpos;
    rpos = 0;
  }
  ssize_t n = read(fd, rbuf.data() + rend, rbuf.size() - rend);
  if (n > 0) {
    rend += static_cast<size_t>(n);
    return true;
  }
  if (n == 0) {
    onPeerGone("connection closed by peer");
  } else if (errno != EAGAIN && errno != EINTR) {
    onPeerGone(strerror(errno));
  }
  return false;
}

void Conn::place(const uint8_t* p, size_t n) {
  while (n > 0 && dest_idx < dest.size()) {
    iovec& d = dest[dest_idx];
    size_t k = std::min(n, d.iov_len);
    memcpy(d.iov_base, p, k);
    d.iov_base = static_cast<uint8_t*>(d.iov_base) + k;
    d.iov_len -= k;
    p += k;
    n -= k;
    if (d.iov_len == 0) dest_idx++;
  }
}

bool Conn::takeHandedWork() {
  if (const char* why = lost_why.exchange(nullptr)) {
    onPeerGone(why);
    return false;
  }
  if (connecting) return false;  // nothing to read before the TCP connection is up
  if (eof || dead) return false;
  // A connection held for RNR or readiness reads nothing until it resumes;
  // a peer that went away meanwhile is noticed all the same.
  if (hup_seen.exchange(false) && block != Block::None) {
    onPeerGone("connection closed by peer");
    return false;
  }
  if (rnr_due.exchange(false)) onRnrTimer();
  // A frame held because its QP was not bound or not ready (RESET, INIT) is
  // looked at again: this pass may come from the QP's binding or its move to
  // RTR (kick). If it still is not ready, handleHeader holds it again.
  if (block == Block::NotReady) block = Block::None;
  return true;
}

void Conn::service() {
  if (!takeHandedWork()) return;
  auto self = shared_from_this();
  std::shared_ptr<Qp> q = boundQp();
  size_t budget = kServiceBudget;
  while (!eof && block == Block::None) {
    if (!have_hdr) {
      if (rend - rpos < sizeof(FrameHeader)) {
        if (!readMore()) break;
        continue;
      }
      memcpy(&hdr, rbuf.data() + rpos, sizeof hdr);
      rpos += sizeof hdr;
      have_hdr = true;
      hdr_handled = false;
    }
    if (!hdr_handled) {
      if (!handleHeader(q)) break;
      hdr_handled = true;
      remaining = hdr.len;
    }
    while (remaining > 0 && !eof) {
      size_t avail = rend - rpos;
      if (avail > 0) {
        size_t k = std::min(avail, remaining);
        place(rbuf.data() + rpos, k);
        rpos += k;
        remaining -= k;
        continue;
      }
      if (remaining >= kDirectRead && dest_idx < dest.size()) {
        iovec io[kMaxSge + 1];
        int k = 0;
        size_t want = remaining;
        for (size_t i = dest_idx; i < dest.size() && want > 0 && k < 32; i++) {
          size_t l = std::min(dest[i].iov_len, want);
          io[k++] = {dest[i].iov_base, l};
          want -= l;
        }
        ssize_t n = readv(fd, io, k);
        if (n <= 0) {
          if (n == 0)
            onPeerGone("connection closed by peer");
          else if (errno != EAGAIN && errno != EINTR)
            onPeerGone(strerror(errno));
          if (n < 0 && errno == EINTR) continue;
          return;
        }
        auto got = static_cast<size_t>(n);
        remaining -= got;
        while (got > 0) {
          iovec& d = dest[dest_idx];
          size_t t = std::min(got, d.iov_len);
          d.iov_base = static_cast<uint8_t*>(d.iov_base) + t;
          d.iov_len -= t;
          got -= t;
          if (d.iov_len == 0) dest_idx++;
        }
        continue;
      }
      if (!readMore()) break;
    }
    if (remaining > 0 || eof) break;
    have_hdr = false;
    finishFrame(q);
    count(t_inline ? Counter::RxInline : Counter::RxProgress);
    q = boundQp();
    size_t used = sizeof(FrameHeader) + hdr.len;
    if (used >= budget) {
      kick();  // let other connections run; continue on the next turn
      break;
    }
    budget -= used;
  }
  flushAcks(q);
}

bool Conn::handleHeader(const std::shared_ptr<Qp>& q) {
  auto t = static_cast<FrameType>(hdr.type);
  dest.clear();
  dest_idx = 0;
  cur.kind = Pending::Discard;
  cur.status = IBV_WC_SUCCESS;
  cur.syndrome = Syndrome::None;
  if (hdr.len > kMaxFramePayload) {
    fail("frame length out of range");
    return false;
  }
  switch (t) {
    case FrameType::Req:
    case FrameType::Rep:
    case FrameType::Rej:
    case FrameType::Attach:
      if (hdr.len != sizeof(CmMessage)) {
        fail("bad CM message length");
        return false;
      }
      cur.kind = Pending::Cm;
      cur.cm.resize(sizeof(CmMessage));
      dest.push_back({cur.cm.data(), cur.cm.size()});
      return true;
    case FrameType::Rtu:
    case FrameType::Dreq:
    case FrameType::Drep:
      if (hdr.len != 0) {
        fail("bad CM message length");
        return false;
      }
      cur.kind = Pending::Cm;
      cur.cm.clear();
      return true;
    case FrameType::Ack:
    case FrameType::Nak:
    case FrameType::ReadResp:
    case FrameType::Send:
    case FrameType::SendImm:
    case FrameType::SendInv:
    case FrameType::Write:
    case FrameType::WriteImm:
    case FrameType::ReadReq:
    case FrameType::FetchAdd:
    case FrameType::CmpSwap:
    case FrameType::AtomicResp:
      break;
    default:
      fail("unknown frame type");
      return false;
  }
  if (!q) {
    bool gone;
    {
      std::lock_guard lk(qp_mu);
      gone = qp_was_bound;
    }
    if (gone) return true;  // the QP was destroyed: discard
    block = Block::NotReady;
    return false;
  }
  std::lock_guard lk(q->mu);
  if (q->destroyed) return true;
  return isRequest(t) ? handleRequest(*q) : handleResponse(*q);
}

namespace {

// The next receive of q's queue (or its shared one, firing an armed limit).
[[gnu::always_inline]] inline bool popReceive(Qp& q, RecvWqe& wqe, const ibv_sge*& sg) {
  if (q.srq == nullptr) return q.rq.pop(wqe, sg);
  std::lock_guard sl(q.srq->mu);
  const bool got = q.srq->rq.pop(wqe, sg);
  if (got && q.srq->limit > 0 && q.srq->rq.count < q.srq->limit) {
    q.srq->limit = 0;  // one-shot, like the hardware's armed limit
    raiseAsync(q.qp.context, IBV_EVENT_SRQ_LIMIT_REACHED, kAsyncSrq, q.srq->srq.handle);
  }
  return got;
}

}  // namespace

// Remote access (RDMA WRITE, WRITE with immediate, READ): checks the key,
// the PD, both access flags and the range. True when the frame needs nothing
// more (a READ, a plain WRITE, or a NAK); false for a WRITE with immediate,
// which also consumes a receive.
bool Conn::remoteAccess(Qp& q, FrameType t) {
  const bool read = t == FrameType::ReadReq;
  const uint64_t len = read ? hdr.imm : hdr.len;
  const int need = read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
  if (read && q.attr.max_dest_rd_atomic == 0) {  // no responder resources (rxe)
    cur.kind = Pending::Nak;
    cur.syndrome = Syndrome::RemoteInvalidRequest;
    return true;
  }
  // An MR's or a memory window's (mw.cc); a window's offsets become addresses.
  uint64_t local = hdr.raddr;
  if (len > 0 && !resolveRkey(q, hdr.rkey, hdr.raddr, len, need, &local)) {
    cur.kind = Pending::Nak;
    cur.syndrome = Syndrome::RemoteAccess;
    return true;
  }
  hdr.raddr = local;
  if (read) {
    cur.kind = Pending::ReadReq;
    return true;
  }
  if (len > 0) dest.push_back({reinterpret_cast<void*>(hdr.raddr), len});
  cur.kind = Pending::Write;
  return t == FrameType::Write;
}

// RNR: no receive is posted. The frame waits; a timer retries it.
[[gnu::cold, gnu::noinline]] void Conn::waitForReceive(Qp& q) {
  dest.clear();
  block = Block::Rnr;
  if (rnr_timer) return;
  rnr_timer = true;
  q.rnr_events++;
  count(Counter::SendRnr);
  std::weak_ptr<Conn> w = weak_from_this();
  auto delay = std::chrono::microseconds(kRnrMicros[q.attr.min_rnr_timer & 31]);
  Fabric::get().schedule(Clock::now() + delay, [w] {
    if (auto c = w.lock()) {
      c->rnr_due = true;
      c->progress();
    }
  });
}

// A SEND's payload goes into the receive's buffers, each checked.
[[gnu::always_inline]] inline void Conn::targetReceive(Qp& q, const RecvWqe& wqe,
                                                       const ibv_sge* sg) {
  uint64_t room = 0;
  bool prot_ok = true;
  for (uint32_t i = 0; i < wqe.num_sge; i++) {
    if (sg[i].length == 0) continue;
    Mr* mr = findMrByKey(sg[i].lkey);
    if (mr == nullptr || mr->pd != q.pd || !(mr->access & IBV_ACCESS_LOCAL_WRITE) ||
        !mr->covers(sg[i].addr, sg[i].length))
      prot_ok = false;
    room += sg[i].length;
    dest.push_back({reinterpret_cast<void*>(sg[i].addr), sg[i].length});
  }
  if (!prot_ok) {
    cur.status = IBV_WC_LOC_PROT_ERR;
    cur.syndrome = Syndrome::RemoteOperation;
  } else if (hdr.len > room) {
    cur.status = IBV_WC_LOC_LEN_ERR;
    cur.syndrome = Syndrome::RemoteInvalidRequest;
  }
  if (cur.status != IBV_WC_SUCCESS) dest.clear();
}

// A request from the peer's send queue (this side is the responder). q.mu held.
bool Conn::handleRequest(Qp& q) {
  auto t = static_cast<FrameType>(hdr.type);
  ibv_qp_state st = q.qp.state;
  if (st == IBV_QPS_RESET || st == IBV_QPS_INIT) {
    block = Block::NotReady;
    return false;
  }
  if (st == IBV_QPS_ERR || discard_requests) return true;
  if (hdr.psn != rx_psn) {
    fail("request out of sequence");
    return false;
  }
  if (t == FrameType::ReadReq && hdr.len != 0) {
    fail("READ request with payload");
    return false;
  }
  if (t == FrameType::FetchAdd || t == FrameType::CmpSwap) return atomicRequest(q);
  if (t == FrameType::Write || t == FrameType::WriteImm || t == FrameType::ReadReq)
    if (remoteAccess(q, t)) return true;
  // SEND, SEND with immediate and WRITE with immediate consume a receive.
  RecvWqe wqe;
  const ibv_sge* sg = nullptr;
  if (!popReceive(q, wqe, sg)) {
    waitForReceive(q);
    return false;
  }
  rnr_tries = 0;
  cur.wqe = wqe;
  cur.byte_len = hdr.len;
  if (cur.kind == Pending::Write) {  // WRITE with immediate: data already targeted
    cur.kind = Pending::Recv;
    return true;
  }
  cur.kind = Pending::Recv;
  targetReceive(q, wqe, sg);
  return true;
}

// A response to this side's requests. q.mu held.
bool Conn::handleResponse(Qp& q) {
  auto t = static_cast<FrameType>(hdr.type);
  if (t == FrameType::AtomicResp) return atomicResponse(q);
  if (t != FrameType::ReadResp) {
    if (hdr.len != 0) {
      fail("ACK/NAK with payload");
      return false;
    }
    cur.kind = Pending::Control;
    return true;
  }
  // Everything before the READ is acknowledged by its response.
  q.completeSendsUpTo(hdr.psn - 1, IBV_WC_SUCCESS, false);
  if (q.sq.empty() || q.sq.front().psn != hdr.psn || q.sq.front().opcode != IBV_WC_RDMA_READ ||
      q.sq.front().byte_len != hdr.len) {
    if (q.qp.state == IBV_QPS_ERR) return true;  // flushed meanwhile: discard
    fail("unexpected READ response");
    return false;
  }
  const SendWqe& w = q.sq.front();
  for (uint32_t i = 0; i < w.num_sge; i++) {
    const ibv_sge& s = q.sq_sges[w.sge_off + i];
    if (s.length > 0) dest.push_back({reinterpret_cast<void*>(s.addr), s.length});
  }
  cur.kind = Pending::ReadResp;
  return true;
}

void Conn::finishFrame(const std::shared_ptr<Qp>& q) {
  auto t = static_cast<FrameType>(hdr.type);
  if (cur.kind == Pending::Cm) {
    CmMessage m{};
    if (!cur.cm.empty()) {
      memcpy(&m, cur.cm.data(), sizeof m);
      if (m.magic != kCmMagic || m.private_data_len > sizeof m.private_data) {
        fail("bad CM message");
        return;
      }
    }
    onCmFrame(shared_from_this(), t, m);
    return;
  }
  if (!q || cur.kind == Pending::Discard) {
    if (isRequest(t)) rx_psn++;
    return;
  }
  std::lock_guard lk(q->mu);
  if (q->destroyed) return;
  if (cur.kind == Pending::Control) {
    if (t == FrameType::Ack)
      q->completeSendsUpTo(hdr.psn, IBV_WC_SUCCESS, false);
    else
      q->completeSendsUpTo(hdr.psn, nakStatus(static_cast<Syndrome>(hdr.syndrome)), true);
    return;
  }
  if (cur.kind == Pending::ReadResp) {
    q->completeSendsUpTo(hdr.psn, IBV_WC_SUCCESS, false);
    return;
  }
  finishRequest(*q);
}

// The payload of a request has been placed. q.mu held.
void Conn::finishRequest(Qp& q) {
  auto t = static_cast<FrameType>(hdr.type);
  rx_psn++;
  if (cur.kind == Pending::Nak) {
    flushAcksLocked(&q);
    sendFrame(FrameType::Nak, hdr.psn, static_cast<uint16_t>(cur.syndrome));
    discard_requests = true;
    return;
  }
  if (cur.kind == Pending::Atomic) {
    executeAtomic(q);
    return;
  }
  if (cur.kind == Pending::ReadReq) {
    // The response acknowledges every earlier request too.
    ack_pending = false;
    FrameHeader h{};
    h.type = static_cast<uint8_t>(FrameType::ReadResp);
    h.psn = hdr.psn;
    h.len = hdr.imm;
    TxIov v[2] = {{&h, sizeof h, false, true, false},
                  {reinterpret_cast<void*>(hdr.raddr), hdr.imm, false, false, false}};
    sendv(v, hdr.imm > 0 ? 2 : 1);
    return;
  }
  if (cur.kind == Pending::Recv) {
    ibv_wc wc{};
    wc.wr_id = cur.wqe.wr_id;
    wc.status = cur.status;
    wc.opcode = t == FrameType::WriteImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
    wc.byte_len = cur.byte_len;
    wc.qp_num = q.qp.qp_num;
    wc.src_qp = remote_qpn;
    if (t == FrameType::SendImm || t == FrameType::WriteImm) {
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = hdr.imm;
    }
    if (t == FrameType::SendInv) {  // the window is invalidated before the CQE (mw.cc)
      wc.wc_flags = IBV_WC_WITH_INV;
      wc.invalidated_rkey = hdr.rkey;
      if (cur.status == IBV_WC_SUCCESS && !remoteInvalidate(hdr.rkey)) {
        wc.status = cur.status = IBV_WC_REM_INV_REQ_ERR;
        cur.syndrome = Syndrome::RemoteInvalidRequest;
      }
    }
    if (cur.status != IBV_WC_SUCCESS) {
      flushAcksLocked(&q);
      q.rcq->push(wc, (hdr.flags & kFlagSolicited) != 0);
      sendFrame(FrameType::Nak, hdr.psn, static_cast<uint16_t>(cur.syndrome));
      discard_requests = true;
      q.flushAll(IBV_WC_WR_FLUSH_ERR);
      return;
    }
    count(Counter::RdmaRecvs);
    applyTestCorruption(wc);
    pending_cqes.emplace_back(wc, (hdr.flags & kFlagSolicited) != 0);
  }
  ack_pending = true;
  if (hdr.flags & kFlagAckNow) ack_now = true;
  acked_psn = hdr.psn;
}

void Conn::flushAcksLocked(Qp* q) {
  if (ack_pending && !eof) {
    if (ack_now) {
      sendFrame(FrameType::Ack, acked_psn);  // covers any owed ACK too
    } else {
      oweAck(acked_psn);
    }
  }
  ack_pending = ack_now = false;
  if (q != nullptr && !q->destroyed)
    for (const auto& [wc, solicited] : pending_cqes)
      q->rcq->push(wc, solicited);
  pending_cqes.clear();
}

void Conn::flushAcks(const std::shared_ptr<Qp>& q) {
  if (pending_cqes.empty() || !q) {
    pending_cqes.clear();
    flushAcksLocked(nullptr);
    return;
  }
  std::lock_guard lk(q->mu);
  flushAcksLocked(q.get());
}

void Conn::onRnrTimer() {
  rnr_timer = false;
  if (block != Block::Rnr || eof) return;
  rnr_tries++;
  if (hdr.rnr_retry != 7 && rnr_tries > hdr.rnr_retry) {
    // The requester has exhausted its RNR retries: its request fails.
    block = Block::None;
    rnr_tries = 0;
    hdr_handled = true;
    remaining = hdr.len;
    dest.clear();
    dest_idx = 0;
    cur.kind = Pending::Nak;
    cur.syndrome = Syndrome::RnrRetryExceeded;
    return;
  }
  block = Block::None;
}

void Conn::fail(const char* why) {
  debugLog("connection fd %d: protocol error from peer: %s", fd, why);
  onPeerGone(why, true);
}

void Conn::sever(const char* why) {
  if (fd >= 0) shutdown(fd, SHUT_RDWR);  // the peer sees the connection end now
  lost_why = why;
  progress();
}

void Conn::onPeerGone(const char* why, bool garbage) {
  if (eof) return;
  eof = true;
  auto self = shared_from_this();
  debugLog("connection fd %d lost: %s", fd, why);
  {
    std::lock_guard lk(tx_mu);
    tx_closed = true;
    txq.clear();
    tbuf.clear();
  }
  Fabric::get().remove(self);
  if (auto q = boundQp()) {
    std::lock_guard lk(q->mu);
    q->transport_lost = true;
    if (!q->destroyed) {
      // Outstanding requests can no longer be acknowledged: the transport
      // retries are exhausted at once. Garbage on the wire is fatal too.
      if (garbage && q->qp.state != IBV_QPS_ERR && q->qp.state != IBV_QPS_RESET) {
        q->flushAll(IBV_WC_WR_FLUSH_ERR);
        raiseAsync(q->qp.context, IBV_EVENT_QP_FATAL, kAsyncQp, q->qp.qp_num);
      } else if (!q->sq.empty() && q->qp.state != IBV_QPS_ERR) {
        q->flushAll(IBV_WC_RETRY_EXC_ERR);
      }
    }
  }
  onConnLost(self, why);
}

}  // namespace softrdma

SOFTRDMA_API void softrdma_corrupt_next_recv(ibv_wc_opcode opcode, uint32_t byte_len) {
  using namespace softrdma;
  std::lock_guard lk(g_corrupt_mu);
  g_corrupt = true;
  g_corrupt_opcode = opcode;
  g_corrupt_len = byte_len;
}
