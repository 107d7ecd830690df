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
//
// This file: a connection's life (creation, its QP binding and its place in
// the CQs' rx epolls, loss); conn_tx.cc sends, conn_rx.cc receives and
// parses, conn_responder.cc executes requests and responses.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base.h"
#include "cm_id.h"
#include "conn.h"
#include "conn_detail.h"
#include "cq.h"
#include "device.h"
#include "fabric.h"
#include "fork_hooks.h"
#include "qp.h"

namespace softrdma {

namespace {

// Connections by their key in rx epolls (epoll_event.data.u64): a key
// outlives its connection, a pointer would not.
std::mutex g_keys_mu;
uint64_t g_next_key = 1;
std::unordered_map<uint64_t, std::weak_ptr<Conn>>& connKeys() {
  static auto* m = new std::unordered_map<uint64_t, std::weak_ptr<Conn>>();
  return *m;
}

}  // namespace

void forkTransport(ForkStep s) {
  if (s == ForkStep::Prepare) {
    forkCorruption(s);
    g_keys_mu.lock();
    return;
  }
  if (s == ForkStep::Child) abandon(connKeys());  // the parent's connections
  g_keys_mu.unlock();
  forkCorruption(s);
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

Conn::Conn(int sock, ConnRole r) : role(r) {
  fd = sock;
  rx.rbuf.resize(kRxBuffer);
  rx.dest.reserve(kMaxSge);
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

void Conn::fail(const char* why) {
  debugLog("connection fd %d: protocol error from peer: %s", fd, why);
  onPeerGone(why, true);
}

void Conn::sever(const char* why) {
  if (fd >= 0) shutdown(fd, SHUT_RDWR);  // the peer sees the connection end now
  handoff.lost_why = why;
  progress();
}

void Conn::onPeerGone(const char* why, bool garbage) {
  if (eof) return;
  eof = true;
  auto self = shared_from_this();
  debugLog("connection fd %d lost: %s", fd, why);
  {
    std::lock_guard lk(tx_mu);
    tx.closed = true;
    tx.txq.clear();
    tx.tbuf.clear();
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
      } else if (!q->sq.wqes.empty() && q->qp.state != IBV_QPS_ERR) {
        q->flushAll(IBV_WC_RETRY_EXC_ERR);
      }
    }
  }
  onConnLost(self, why);
}

}  // namespace softrdma
