// The RC transport's transmit side: any thread appends frames under tx_mu
// and writes them at once when nothing is queued (a doorbell); what the
// socket does not take is queued — small pieces copied, large send buffers
// referenced — and flushed by the progress thread on EPOLLOUT. Coalesced
// ACKs ride on the next frame or go out on a timer.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base.h"
#include "conn.h"
#include "conn_detail.h"
#include "fabric.h"
#include "wire.h"

namespace softrdma {

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
  if (tx.closed) return;
  FrameHeader ack{};
  TxIov withAck[257];
  if (tx.ack_owed && n > 0 && v[0].header &&
      static_cast<const FrameHeader*>(v[0].p)->type == static_cast<uint8_t>(FrameType::Ack)) {
    tx.ack_owed = false;                // ACKs are cumulative: this one covers what is owed
  } else if (tx.ack_owed && n < 257) {  // the coalesced ACK rides in front of this frame
    tx.ack_owed = false;
    ack.type = static_cast<uint8_t>(FrameType::Ack);
    ack.psn = tx.owed_psn;
    withAck[0] = {&ack, sizeof ack, false, true, false};
    std::copy(v, v + n, withAck + 1);
    v = withAck;
    n++;
  }
  size_t skip = 0;
  if (tx.txq.empty() && !connecting) {
    iovec io[256];
    int k = 0;
    for (int i = 0; i < n && k < 256; i++)
      io[k++] = {const_cast<void*>(v[i].p), v[i].len};
    ssize_t w = sendIov(fd, io, k);
    if (w < 0) {
      if (errno != EAGAIN) {
        tx.closed = true;  // the receive side sees the reset and reports it
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
      tx.txq.push_back({p, 0, len, start, v[i].request});
      continue;
    }
    size_t off = tx.tbuf.size();
    tx.tbuf.insert(tx.tbuf.end(), p, p + len);
    if (!start && !tx.txq.empty() && tx.txq.back().ext == nullptr &&
        tx.txq.back().off + tx.txq.back().len == off)
      tx.txq.back().len += len;
    else
      tx.txq.push_back({nullptr, off, len, start, v[i].request});
  }
  if (!tx.txq.empty() && !tx.want_out && !connecting) {
    tx.want_out = true;
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
  while (!tx.txq.empty() && !tx.closed) {
    iovec io[64];
    int k = 0;
    for (auto it = tx.txq.begin(); it != tx.txq.end() && k < 64; ++it)
      io[k++] = {const_cast<uint8_t*>(it->ext ? it->ext : tx.tbuf.data() + it->off), it->len};
    ssize_t w = sendIov(fd, io, k);
    if (w < 0) {
      if (errno == EAGAIN) return;
      tx.closed = true;
      break;
    }
    auto left = static_cast<size_t>(w);
    while (left > 0) {
      Seg& s = tx.txq.front();
      if (left >= s.len) {
        left -= s.len;
        tx.txq.pop_front();
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
  tx.txq.clear();
  tx.tbuf.clear();
  if (tx.want_out) {
    tx.want_out = false;
    Fabric::get().modify(this, kEvIn);
  }
  if (tx.close_after_flush) shutdown(fd, SHUT_WR);
}

// Drops the already-sent prefix of tbuf once it dominates, so a connection
// that never fully drains does not grow without bound.
void Conn::compactLocked() {
  size_t first = SIZE_MAX;
  for (const Seg& s : tx.txq) {
    if (s.ext == nullptr) {
      first = s.off;
      break;
    }
  }
  if (first == SIZE_MAX) first = tx.tbuf.size();
  if (first < (1u << 20) || first < tx.tbuf.size() / 2) return;
  tx.tbuf.erase(tx.tbuf.begin(), tx.tbuf.begin() + static_cast<std::ptrdiff_t>(first));
  for (Seg& s : tx.txq)
    if (s.ext == nullptr) s.off -= first;
}

void Conn::oweAck(uint32_t psn) {
  {
    std::lock_guard lk(tx_mu);  // a leaf: the timer is scheduled after it is released
    if (tx.closed) return;
    tx.ack_owed = true;
    tx.owed_psn = psn;
    if (tx.ack_timer) return;
    tx.ack_timer = true;
  }
  std::weak_ptr<Conn> w = weak_from_this();
  Fabric::get().schedule(Clock::now() + kAckDelay, [w] {
    if (auto c = w.lock()) c->sendOwedAck();
  });
}

void Conn::sendOwedAck() {
  std::lock_guard lk(tx_mu);
  tx.ack_timer = false;
  if (tx.ack_owed) sendvLocked(nullptr, 0);  // the owed ACK alone
}

void Conn::shutdownAfterFlush() {
  std::lock_guard lk(tx_mu);
  if (tx.ack_owed) sendvLocked(nullptr, 0);
  tx.close_after_flush = true;
  if (tx.txq.empty()) shutdown(fd, SHUT_WR);
}

void Conn::abortData() {
  std::lock_guard lk(tx_mu);
  std::deque<Seg> keep;
  std::vector<uint8_t> buf;
  bool keepFrame = true;
  for (size_t i = 0; i < tx.txq.size(); i++) {
    const Seg& s = tx.txq[i];
    // The frame partly on the wire is finished; whole requests not yet begun
    // are never sent; responses (ACK, NAK, READ data) still go out.
    if (s.frame_start) keepFrame = i == 0 || !s.request;
    if (!keepFrame) continue;
    const uint8_t* p = s.ext ? s.ext : tx.tbuf.data() + s.off;
    keep.push_back({nullptr, buf.size(), s.len, s.frame_start, s.request});
    buf.insert(buf.end(), p, p + s.len);
  }
  tx.txq.swap(keep);
  tx.tbuf.swap(buf);
}

}  // namespace softrdma
