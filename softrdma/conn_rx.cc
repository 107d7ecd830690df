// The RC transport's receive side: whichever thread comes first (the
// progress thread on its epoll event, a program's thread polling a CQ of
// the connection's QP) services the connection; frames are parsed from a
// staging buffer and their payloads placed, large ones read straight into
// their destination. Requests and responses are executed in
// conn_responder.cc.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base.h"
#include "cm_id.h"
#include "conn.h"
#include "conn_detail.h"
#include "counters.h"
#include "fabric.h"
#include "qp.h"
#include "wire.h"

namespace softrdma {

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
        handoff.lost_why = strerror(err);  // glibc: a string that lives forever
        progress();
        return;
      }
    } else {
      onConnConnected(self, err);
      if (err != 0) return;
    }
    std::lock_guard lk(tx_mu);
    tx.want_out = true;  // registered with EPOLLOUT for the connect: drop it once flushed
    flushLocked();
    return;
  }
  if (events & EPOLLOUT) {
    std::lock_guard lk(tx_mu);
    flushLocked();
  }
  if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) handoff.hup_seen = true;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) progress();
}

void Conn::progress() {
  handoff.want = true;
  while (handoff.want) {
    bool idle = false;
    if (!handoff.busy.compare_exchange_strong(idle, true)) return;  // its holder goes round
    while (handoff.want.exchange(false))
      service();
    handoff.busy = false;
  }
}

void Conn::kick() {
  std::weak_ptr<Conn> w = weak_from_this();
  Fabric::get().post([w] {
    if (auto c = w.lock()) c->progress();
  });
}

bool Conn::readMore() {
  if (rx.rpos > 0) {
    memmove(rx.rbuf.data(), rx.rbuf.data() + rx.rpos, rx.rend - rx.rpos);
    rx.rend -= rx.rpos;
    rx.rpos = 0;
  }
  ssize_t n = read(fd, rx.rbuf.data() + rx.rend, rx.rbuf.size() - rx.rend);
  if (n > 0) {
    rx.rend += static_cast<size_t>(n);
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
  while (n > 0 && rx.dest_idx < rx.dest.size()) {
    iovec& d = rx.dest[rx.dest_idx];
    size_t k = std::min(n, d.iov_len);
    memcpy(d.iov_base, p, k);
    d.iov_base = static_cast<uint8_t*>(d.iov_base) + k;
    d.iov_len -= k;
    p += k;
    n -= k;
    if (d.iov_len == 0) rx.dest_idx++;
  }
}

bool Conn::takeHandedWork() {
  if (const char* why = handoff.lost_why.exchange(nullptr)) {
    onPeerGone(why);
    return false;
  }
  if (connecting) return false;  // nothing to read before the TCP connection is up
  if (eof || dead) return false;
  // A connection held for RNR or readiness reads nothing until it resumes;
  // a peer that went away meanwhile is noticed all the same.
  if (handoff.hup_seen.exchange(false) && rx.block != Block::None) {
    onPeerGone("connection closed by peer");
    return false;
  }
  if (handoff.rnr_due.exchange(false)) onRnrTimer();
  // A frame held because its QP was not bound or not ready (RESET, INIT) is
  // looked at again: this pass may come from the QP's binding or its move to
  // RTR (kick). If it still is not ready, handleHeader holds it again.
  if (rx.block == Block::NotReady) rx.block = Block::None;
  return true;
}

void Conn::service() {
  if (!takeHandedWork()) return;
  auto self = shared_from_this();
  std::shared_ptr<Qp> q = boundQp();
  size_t budget = kServiceBudget;
  while (!eof && rx.block == Block::None) {
    if (!rx.have_hdr) {
      if (rx.rend - rx.rpos < sizeof(FrameHeader)) {
        if (!readMore()) break;
        continue;
      }
      memcpy(&rx.hdr, rx.rbuf.data() + rx.rpos, sizeof rx.hdr);
      rx.rpos += sizeof rx.hdr;
      rx.have_hdr = true;
      rx.hdr_handled = false;
    }
    if (!rx.hdr_handled) {
      if (!handleHeader(q)) break;
      rx.hdr_handled = true;
      rx.remaining = rx.hdr.len;
    }
    while (rx.remaining > 0 && !eof) {
      size_t avail = rx.rend - rx.rpos;
      if (avail > 0) {
        size_t k = std::min(avail, rx.remaining);
        place(rx.rbuf.data() + rx.rpos, k);
        rx.rpos += k;
        rx.remaining -= k;
        continue;
      }
      if (rx.remaining >= kDirectRead && rx.dest_idx < rx.dest.size()) {
        iovec io[kMaxSge + 1];
        int k = 0;
        size_t want = rx.remaining;
        for (size_t i = rx.dest_idx; i < rx.dest.size() && want > 0 && k < 32; i++) {
          size_t l = std::min(rx.dest[i].iov_len, want);
          io[k++] = {rx.dest[i].iov_base, l};
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
        rx.remaining -= got;
        while (got > 0) {
          iovec& d = rx.dest[rx.dest_idx];
          size_t t = std::min(got, d.iov_len);
          d.iov_base = static_cast<uint8_t*>(d.iov_base) + t;
          d.iov_len -= t;
          got -= t;
          if (d.iov_len == 0) rx.dest_idx++;
        }
        continue;
      }
      if (!readMore()) break;
    }
    if (rx.remaining > 0 || eof) break;
    rx.have_hdr = false;
    finishFrame(q);
    count(t_inline ? Counter::RxInline : Counter::RxProgress);
    q = boundQp();
    size_t used = sizeof(FrameHeader) + rx.hdr.len;
    if (used >= budget) {
      kick();  // let other connections run; continue on the next turn
      break;
    }
    budget -= used;
  }
  flushAcks(q);
}

bool Conn::handleHeader(const std::shared_ptr<Qp>& q) {
  auto t = static_cast<FrameType>(rx.hdr.type);
  rx.dest.clear();
  rx.dest_idx = 0;
  rx.cur.kind = Pending::Discard;
  rx.cur.status = IBV_WC_SUCCESS;
  rx.cur.syndrome = Syndrome::None;
  if (rx.hdr.len > kMaxFramePayload) {
    fail("frame length out of range");
    return false;
  }
  switch (t) {
    case FrameType::Req:
    case FrameType::Rep:
    case FrameType::Rej:
    case FrameType::Attach:
      if (rx.hdr.len != sizeof(CmMessage)) {
        fail("bad CM message length");
        return false;
      }
      rx.cur.kind = Pending::Cm;
      rx.cur.cm.resize(sizeof(CmMessage));
      rx.dest.push_back({rx.cur.cm.data(), rx.cur.cm.size()});
      return true;
    case FrameType::Rtu:
    case FrameType::Dreq:
    case FrameType::Drep:
      if (rx.hdr.len != 0) {
        fail("bad CM message length");
        return false;
      }
      rx.cur.kind = Pending::Cm;
      rx.cur.cm.clear();
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
    rx.block = Block::NotReady;
    return false;
  }
  std::lock_guard lk(q->mu);
  if (q->destroyed) return true;
  return isRequest(t) ? handleRequest(*q) : handleResponse(*q);
}

}  // namespace softrdma
