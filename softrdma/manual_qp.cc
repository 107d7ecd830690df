// QPs connected without rdma_cm: the program exchanges GIDs and QP numbers
// itself (ibv_rc_pingpong, perftest) and moves its QP to RTR with the
// peer's GID and QP number. softrdma then connects the two QPs over TCP:
//
// - each process that has such a QP listens on the IP of the QP's source
//   GID and publishes "IP PORT" under /dev/shm/softrdma-UID/qp-QPN;
// - the QP with the lower number dials the peer's published endpoint and
//   sends an Attach frame naming both QPs; the other side binds the
//   accepted connection to its QP;
// - until then the QP's requests wait in a placeholder connection, as a
//   NIC would retry them; if no connection forms within the transport
//   timeout they fail with IBV_WC_RETRY_EXC_ERR.
//
// A QP moved to RESET drops its connection (its peer sees it end) and
// numbers its requests from 0 again; back in RTR it connects anew, the same
// way. An Attach that arrives for a QP still holding its old connection (the
// peer was reset and came back first) is parked until the QP has been reset
// and reaches RTR.
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "base.h"
#include "conn.h"
#include "device.h"
#include "fabric.h"
#include "fork_hooks.h"
#include "manual_qp.h"
#include "qp.h"
#include "wire.h"

namespace softrdma {

namespace {

constexpr auto kAttachTimeout = std::chrono::seconds(10);
constexpr auto kRetryEvery = std::chrono::milliseconds(5);

std::string registryDir() {
  return "/dev/shm/softrdma-" + std::to_string(getuid());
}
std::string registryFile(uint32_t qpn) {
  return registryDir() + "/qp-" + std::to_string(qpn);
}

struct ManualListener : Endpoint {
  void onEvents(uint32_t) override {
    for (;;) {
      int s = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (s < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      int one = 1;
      setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto c = std::make_shared<Conn>(s, ConnRole::Passive);
      c->manual = true;
      Fabric::get().add(c, EPOLLIN | EPOLLRDHUP | EPOLLET);
    }
  }
  uint16_t port = 0;
};

std::mutex mu;
std::map<in_addr_t, std::shared_ptr<ManualListener>>& listeners() {
  static auto* m = new std::map<in_addr_t, std::shared_ptr<ManualListener>>();
  return *m;
}

// Attached connections waiting for their QP to be reset and reach RTR, by
// the QP's number (mu).
std::map<uint32_t, std::shared_ptr<Conn>>& parked() {
  static auto* m = new std::map<uint32_t, std::shared_ptr<Conn>>();
  return *m;
}

// The parked connection from `remote` for `qpn`, taken out; or nullptr.
std::shared_ptr<Conn> unpark(uint32_t qpn, uint32_t remote) {
  std::lock_guard lk(mu);
  auto it = parked().find(qpn);
  if (it == parked().end()) return nullptr;
  std::shared_ptr<Conn> c = std::move(it->second);
  parked().erase(it);
  return c->remote_qpn == remote && !c->dead ? c : nullptr;
}

}  // namespace

void forkManual(ForkStep s) {
  if (s == ForkStep::Prepare) {
    mu.lock();
    return;
  }
  if (s == ForkStep::Child) {
    abandon(listeners());  // their sockets are the parent's
    abandon(parked());
  }
  mu.unlock();
}

namespace {

// The listener for `ip`, created on first use; nullptr on failure.
ManualListener* listenerFor(in_addr ip) {
  std::lock_guard lk(mu);
  auto& l = listeners()[ip.s_addr];
  if (l) return l.get();
  int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = ip;
  socklen_t al = sizeof a;
  if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(s, 128) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &al) != 0) {
    if (s >= 0) close(s);
    listeners().erase(ip.s_addr);
    return nullptr;
  }
  l = std::make_shared<ManualListener>();
  l->fd = s;
  l->port = ntohs(a.sin_port);
  Fabric::get().add(l, EPOLLIN);
  return l.get();
}

in_addr ipOfGid(const ibv_gid& g) {
  in_addr a{};
  memcpy(&a, &g.raw[12], 4);
  return a;
}

void failTransport(const std::shared_ptr<Qp>& qp, const char* why) {
  debugLog("QP %u: %s", qp->qp.qp_num, why);
  std::lock_guard lk(qp->mu);
  qp->transport_lost = true;
  if (!qp->sq.wqes.empty() && qp->qp.state != IBV_QPS_ERR) qp->flushAll(IBV_WC_RETRY_EXC_ERR);
}

// Dials the peer QP's published endpoint, retrying until it appears.
void dial(std::weak_ptr<Qp> wqp, std::shared_ptr<Conn> c, in_addr src, in_addr dst,
          Clock::time_point deadline) {
  auto qp = wqp.lock();
  if (!qp || qp->destroyed || contextDead(qp->qp.context)) return;
  {
    std::lock_guard lk(qp->mu);
    if (qp->conn != c) return;  // the QP was reset meanwhile
  }
  uint32_t dest = qp->attr.dest_qp_num;
  FILE* f = fopen(registryFile(dest).c_str(), "r");
  unsigned port = 0;
  char ip[64] = {};
  bool found = f != nullptr && fscanf(f, "%63s %u", ip, &port) == 2;
  if (f != nullptr) fclose(f);
  if (!found) {
    if (Clock::now() > deadline) return failTransport(qp, "peer QP never appeared");
    Fabric::get().schedule(Clock::now() + kRetryEvery,
                           [wqp, c, src, dst, deadline] { dial(wqp, c, src, dst, deadline); });
    return;
  }
  int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in from{}, to{};
  from.sin_family = to.sin_family = AF_INET;
  from.sin_addr = src;
  to.sin_addr = dst;
  to.sin_port = htons(static_cast<uint16_t>(port));
  if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
    if (s >= 0) close(s);
    return failTransport(qp, "cannot bind the source address");
  }
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int rc = connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to);
  if (rc != 0 && errno != EINPROGRESS) {
    close(s);
    return failTransport(qp, "cannot reach the peer QP");
  }
  // The Attach frame goes first, ahead of any request already queued.
  {
    std::lock_guard lk(c->tx_mu);
    c->fd = s;
    FrameHeader h{};
    h.type = static_cast<uint8_t>(FrameType::Attach);
    h.len = sizeof(CmMessage);
    CmMessage m{};
    m.magic = kCmMagic;
    m.qpn = qp->qp.qp_num;
    m.private_data_len = 4;
    memcpy(m.private_data, &dest, 4);
    std::vector<uint8_t> frame(sizeof h + sizeof m);
    memcpy(frame.data(), &h, sizeof h);
    memcpy(frame.data() + sizeof h, &m, sizeof m);
    std::vector<uint8_t> rest(c->tx.tbuf);
    c->tx.tbuf = frame;
    for (auto& seg : c->tx.txq)
      if (seg.ext == nullptr) seg.off += frame.size();
    c->tx.tbuf.insert(c->tx.tbuf.end(), rest.begin(), rest.end());
    c->tx.txq.push_front({nullptr, 0, frame.size(), true, false});
  }
  Fabric::get().add(c, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
  // Bound while it had no socket: now its CQs' pollers can receive from it.
  std::lock_guard lk(c->qp_mu);
  c->watchFrom(c->qp);
}

}  // namespace

void manualConnect(const std::shared_ptr<Qp>& qp) {
  ibv_qp_attr a;
  {
    std::lock_guard lk(qp->mu);
    a = qp->attr;
  }
  auto gids = gidTable(contextDevice(qp->qp.context));
  uint8_t sgid = a.ah_attr.grh.sgid_index;
  in_addr src = sgid < gids.size() ? ipOfGid(*reinterpret_cast<const ibv_gid*>(&gids[sgid]))
                                   : in_addr{htonl(INADDR_LOOPBACK)};
  in_addr dst = a.ah_attr.is_global ? ipOfGid(a.ah_attr.grh.dgid) : in_addr{htonl(INADDR_LOOPBACK)};
  if (auto c = unpark(qp->qp.qp_num, a.dest_qp_num)) {  // the peer came back first
    {
      std::lock_guard lk(qp->mu);
      qp->conn = c;
    }
    c->bindQp(qp);
    return;
  }
  ManualListener* l = listenerFor(src);
  if (l == nullptr) return failTransport(qp, "cannot listen on the source GID's address");
  // Requests wait in a placeholder until the connection forms. It is in
  // place before the QP is published: an Attach may follow at once.
  auto c = std::make_shared<Conn>(-1, ConnRole::Active);
  c->manual = true;
  c->connecting = true;
  c->remote_qpn = a.dest_qp_num;
  {
    std::lock_guard lk(qp->mu);
    if (qp->conn) return;  // the peer's Attach came first
    qp->conn = c;
  }
  c->bindQp(qp);
  mkdir(registryDir().c_str(), 0700);
  std::string tmp = registryFile(qp->qp.qp_num) + ".tmp";
  if (FILE* f = fopen(tmp.c_str(), "w")) {
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &src, ip, sizeof ip);
    fprintf(f, "%s %u\n", ip, l->port);
    fclose(f);
    rename(tmp.c_str(), registryFile(qp->qp.qp_num).c_str());
  }
  auto deadline = Clock::now() + kAttachTimeout;
  std::weak_ptr<Qp> wqp = qp;
  if (qp->qp.qp_num < a.dest_qp_num) {
    Fabric::get().post([wqp, c, src, dst, deadline] { dial(wqp, c, src, dst, deadline); });
  } else {
    Fabric::get().schedule(deadline, [wqp, c] {
      auto q = wqp.lock();
      if (!q || c->fd >= 0) return;
      {
        std::lock_guard lk(q->mu);
        if (q->conn != c) return;  // reset meanwhile
      }
      failTransport(q, "the peer QP never connected");
    });
  }
}

void manualAttach(const std::shared_ptr<Conn>& c, const CmMessage& m) {
  uint32_t dest = 0;
  if (m.private_data_len == 4) memcpy(&dest, m.private_data, 4);
  auto qp = findQpByNum(dest);
  if (!c->manual || !qp || qp->destroyed || contextDead(qp->qp.context) ||
      qp->attr.dest_qp_num != m.qpn) {
    c->fail("Attach names no waiting QP");
    return;
  }
  {
    std::lock_guard ql(qp->mu);
    std::shared_ptr<Conn> placeholder = qp->conn;
    if (placeholder && placeholder->fd >= 0) {
      // The QP still holds the connection its peer dropped when it was
      // reset: this one waits until the QP is reset too and reaches RTR.
      c->remote_qpn = m.qpn;
      std::lock_guard lk(mu);
      parked()[dest] = c;
      return;
    }
    if (placeholder) {
      // Move the requests that waited to the real connection, in order.
      std::lock_guard pl(placeholder->tx_mu);
      std::lock_guard cl(c->tx_mu);
      for (const auto& seg : placeholder->tx.txq) {
        Conn::TxIov v{seg.ext ? seg.ext : placeholder->tx.tbuf.data() + seg.off, seg.len,
                      seg.ext != nullptr, seg.frame_start, seg.request};
        c->sendvLocked(&v, 1);
      }
      placeholder->tx.txq.clear();
      placeholder->tx.closed = true;
    }
    c->remote_qpn = m.qpn;
    qp->conn = c;
  }
  c->bindQp(qp);
}

void manualForget(uint32_t qpn) {
  unlink(registryFile(qpn).c_str());
  std::lock_guard lk(mu);
  parked().erase(qpn);
}

void manualReset(const std::shared_ptr<Qp>& qp) {
  std::shared_ptr<Conn> c;
  {
    std::lock_guard lk(qp->mu);
    if (!qp->conn || !qp->conn->manual) return;  // rdma_cm's connections stay
    c = std::move(qp->conn);
    qp->transport_lost = false;
    qp->sq.next_psn = 0;  // a new connection: both directions count from 0
  }
  c->bindQp(nullptr);
  Fabric::get().post([c] { c->sever("the QP was reset"); });
}

}  // namespace softrdma
