// Unreliable datagram queue pairs: the datagram transport (ud.h).
//
// Send: ibv_post_send checks each work request as rxe does, writes one
// datagram per request to the destination QP's socket (or to every QP of a
// multicast group) in the calling thread, and completes it at once: a UD
// send completes when it has left, whether anyone receives it or not. A
// message longer than the port's MTU emits nothing and completes
// successfully (IB spec C10-93.1.1, rxe). A receiver whose socket queue is
// full holds the sender for at most kSendWait, as a lossless fabric's pause
// frames would, and then the datagram is dropped.
//
// Receive (progress thread): a datagram for a QP in RTR or RTS whose qkey
// matches takes the next receive WQE; the first 40 bytes of its scatter list
// get the GRH (RoCE v2 over IPv4: 20 zero bytes, then the IPv4 header), the
// payload follows. Anything else is dropped silently: no QP, a QP not ready,
// a wrong qkey, no receive posted, a message longer than the receive buffer
// (with an SRQ: completed with IBV_WC_REM_INV_REQ_ERR), as rxe does.
#include <netinet/ip.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base.h"
#include "counters.h"
#include "cq.h"
#include "device.h"
#include "fabric.h"
#include "pd_mr.h"
#include "qp.h"
#include "ud.h"
#include "wire.h"

namespace softrdma {

namespace {

constexpr auto kSendWait = std::chrono::milliseconds(100);
constexpr int kSendBuffer = 1 << 20;

sockaddr_un qpAddress(uint32_t qpn) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string p = shmDir() + "/ud-" + std::to_string(qpn);
  snprintf(a.sun_path, sizeof a.sun_path, "%s", p.c_str());
  return a;
}

// Whether another process's socket is bound at `a` (a stale one refuses).
bool socketAlive(const sockaddr_un& a) {
  int p = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (p < 0) return false;
  bool alive = connect(p, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  close(p);
  return alive;
}

uint16_t ipChecksum(const uint8_t* h, size_t n) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < n; i += 2)
    sum += static_cast<uint32_t>(h[i] << 8 | h[i + 1]);
  while (sum >> 16)
    sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

bool isV4Mapped(const uint8_t* g) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g, kPrefix, 12) == 0;
}

// The 40 bytes a RoCE v2 HCA places before the payload: for IPv4 GIDs 20
// zero bytes and the packet's IPv4 header (libibverbs' ibv_init_ah_from_wc
// recognises it by its checksum), otherwise the IPv6 header.
void buildGrh(const UdHeader& h, uint8_t* g) {
  memset(g, 0, kGrhBytes);
  // UDP (8) + BTH (12) + DETH (8) + immediate + payload padded to 4 + ICRC (4).
  uint32_t l4 = 8 + 12 + 8 + (h.with_imm ? 4 : 0) + ((h.len + 3) & ~3u) + 4;
  if (isV4Mapped(h.sgid) && isV4Mapped(h.dgid)) {
    uint8_t* ip = g + 20;
    ip[0] = 0x45;
    ip[1] = h.traffic_class;
    uint32_t tot = 20 + l4;
    ip[2] = static_cast<uint8_t>(tot >> 8);
    ip[3] = static_cast<uint8_t>(tot);
    ip[6] = 0x40;  // don't fragment
    ip[8] = h.hop_limit;
    ip[9] = IPPROTO_UDP;
    memcpy(ip + 12, h.sgid + 12, 4);
    memcpy(ip + 16, h.dgid + 12, 4);
    uint16_t c = ipChecksum(ip, 20);
    ip[10] = static_cast<uint8_t>(c >> 8);
    ip[11] = static_cast<uint8_t>(c);
    return;
  }
  uint32_t vtf = 6u << 28 | static_cast<uint32_t>(h.traffic_class) << 20 | (h.flow_label & 0xfffff);
  uint32_t be = htonl(vtf);
  memcpy(g, &be, 4);
  uint16_t plen = htons(static_cast<uint16_t>(l4));
  memcpy(g + 4, &plen, 2);
  g[6] = IPPROTO_UDP;
  g[7] = h.hop_limit;
  memcpy(g + 8, h.sgid, 16);
  memcpy(g + 24, h.dgid, 16);
}

// A QP's socket: the progress thread reads its datagrams.
struct UdEndpoint : Endpoint {
  std::weak_ptr<Qp> qp;
  std::vector<uint8_t> buf = std::vector<uint8_t>(sizeof(UdHeader) + kUcMaxMessage + 1);
  void onEvents(uint32_t) override;
};

void completeRecv(Qp& q, const RecvWqe& w, ibv_wc_status st, const UdHeader& h) {
  ibv_wc wc{};
  wc.wr_id = w.wr_id;
  wc.status = st;
  wc.opcode = IBV_WC_RECV;
  wc.qp_num = q.qp.qp_num;
  if (st == IBV_WC_SUCCESS) {
    wc.byte_len = static_cast<uint32_t>(kGrhBytes) + h.len;
    wc.src_qp = h.src_qpn;
    wc.wc_flags = IBV_WC_GRH;
    if (h.with_imm) {
      wc.wc_flags |= IBV_WC_WITH_IMM;
      wc.imm_data = h.imm;
    }
    count(Counter::RdmaRecvs);
  }
  q.rcq->push(wc, h.solicited != 0);
}

// The receive WQE a datagram would take, left in its queue. q.mu held.
bool peekWqe(Qp& q, RecvWqe& w, const ibv_sge*& sg) {
  if (q.srq == nullptr) return q.rq.peek(w, sg);
  std::lock_guard sl(q.srq->mu);
  return q.srq->rq.peek(w, sg);
}

// Takes it (an SRQ below its limit raises SRQ_LIMIT_REACHED, once). q.mu held.
void takeWqe(Qp& q) {
  RecvWqe w;
  const ibv_sge* sg;
  if (q.srq == nullptr) {
    q.rq.pop(w, sg);
    return;
  }
  std::lock_guard sl(q.srq->mu);
  q.srq->rq.pop(w, sg);
  if (q.srq->limit > 0 && q.srq->rq.count < q.srq->limit) {
    q.srq->limit = 0;
    raiseAsync(q.qp.context, IBV_EVENT_SRQ_LIMIT_REACHED, kAsyncSrq, q.srq->srq.handle);
  }
}

// Whether the QP takes this datagram at all (q.mu held).
bool accepts(Qp& q, const UdHeader& h) {
  ibv_qp_state st = q.qp.state;
  if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD) return false;
  if (h.opcode >> 16 != IBV_QPT_UD || h.len > kUdMtu) return false;  // not a UD SEND
  if (h.netns != netnsId()) return false;  // another network namespace: not reachable
  bool to_me = h.dest_qpn == kMulticastQpn ? mcAttached(q, h.dgid) : h.dest_qpn == q.qp.qp_num;
  return to_me && h.qkey == q.attr.qkey;
}

// Places one datagram into the next receive WQE (q.mu held).
void receive(Qp& q, const UdHeader& h, const uint8_t* payload) {
  RecvWqe w;
  const ibv_sge* sg;
  if (!accepts(q, h)) return;  // dropped
  count(Counter::UdAccepted);
  if (!peekWqe(q, w, sg)) return;  // no receive: dropped
  uint64_t room = 0;
  bool prot_ok = true;
  for (uint32_t i = 0; i < w.num_sge; i++) {
    room += sg[i].length;
    if (sg[i].length == 0) continue;
    Mr* mr = findMrByKey(sg[i].lkey);
    if (mr == nullptr || mr->pd != q.pd || !(mr->access & IBV_ACCESS_LOCAL_WRITE) ||
        !mr->covers(sg[i].addr, sg[i].length))
      prot_ok = false;
  }
  if (room < kGrhBytes + h.len) {
    if (q.srq == nullptr) return;  // class D: dropped, the WQE stays
    takeWqe(q);
    return completeRecv(q, w, IBV_WC_REM_INV_REQ_ERR, h);  // class E
  }
  takeWqe(q);
  if (!prot_ok) {  // a malformed WQE: class A, the QP goes to error
    completeRecv(q, w, IBV_WC_LOC_QP_OP_ERR, h);
    q.flushAll(IBV_WC_WR_FLUSH_ERR);
    return;
  }
  uint8_t grh[kGrhBytes];
  buildGrh(h, grh);
  const uint8_t* parts[2] = {grh, payload};
  size_t lens[2] = {kGrhBytes, h.len};
  uint32_t i = 0;
  size_t off = 0;
  for (int p = 0; p < 2; p++) {
    size_t done = 0;
    while (done < lens[p]) {
      size_t k = std::min<size_t>(lens[p] - done, sg[i].length - off);
      memcpy(reinterpret_cast<uint8_t*>(sg[i].addr) + off, parts[p] + done, k);
      done += k;
      off += k;
      if (off == sg[i].length) {
        i++;
        off = 0;
      }
    }
  }
  completeRecv(q, w, IBV_WC_SUCCESS, h);
}

void UdEndpoint::onEvents(uint32_t) {
  for (;;) {
    ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: drained
    }
    auto q = qp.lock();
    if (!q || static_cast<size_t>(n) < sizeof(UdHeader)) continue;
    UdHeader h;
    memcpy(&h, buf.data(), sizeof h);
    if (h.magic != kUdMagic || h.len > kUcMaxMessage || sizeof h + h.len != static_cast<size_t>(n))
      continue;  // not a datagram of ours
    std::lock_guard lk(q->mu);
    if (q->destroyed) continue;
    if (q->qp.qp_type == IBV_QPT_UC)
      ucReceive(*q, h, buf.data() + sizeof h);
    else
      receive(*q, h, buf.data() + sizeof h);
  }
}

}  // namespace

std::string shmDir() {
  static const std::string dir = [] {
    std::string d = "/dev/shm/softrdma-" + std::to_string(getuid());
    mkdir(d.c_str(), 0700);
    return d;
  }();
  return dir;
}

uint64_t netnsId() {
  static const uint64_t id = [] {
    struct stat st {};
    return stat("/proc/self/ns/net", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  }();
  return id;
}

int udOpen(const std::shared_ptr<Qp>& qp) {
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  int sz = kSendBuffer;
  setsockopt(s, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
  timeval tv{0, static_cast<suseconds_t>(kSendWait.count() * 1000)};
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_un a = qpAddress(qp->qp.qp_num);
  int rc = bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  if (rc != 0 && errno == EADDRINUSE && !socketAlive(a)) {
    unlink(a.sun_path);  // left by a process that is gone
    rc = bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0) {
    int e = errno == EADDRINUSE ? EBUSY : errno;
    close(s);
    return e;
  }
  auto ep = std::make_shared<UdEndpoint>();
  ep->fd = s;
  ep->qp = qp;
  qp->ud = std::make_shared<UdState>();
  qp->ud->ep = ep;
  qp->ud->path = a.sun_path;
  Fabric::get().add(ep, EPOLLIN | EPOLLET);
  return 0;
}

void udClose(Qp& qp) {
  mcDetachAll(qp);
  Fabric::get().remove(qp.ud->ep);
  unlink(qp.ud->path.c_str());
}

bool udDeliver(int fd, const UdHeader& h, const ibv_sge* sg, int n, const void* inl, uint32_t qpn) {
  iovec io[kMaxSge + 1];
  int k = 0;
  io[k++] = {const_cast<UdHeader*>(&h), sizeof h};
  if (inl != nullptr) {
    if (h.len > 0) io[k++] = {const_cast<void*>(inl), h.len};
  } else {
    for (int i = 0; i < n; i++)
      if (sg[i].length > 0) io[k++] = {reinterpret_cast<void*>(sg[i].addr), sg[i].length};
  }
  sockaddr_un a = qpAddress(qpn);
  msghdr m{};
  m.msg_name = &a;
  m.msg_namelen = sizeof a;
  m.msg_iov = io;
  m.msg_iovlen = static_cast<size_t>(k);
  for (;;) {
    if (sendmsg(fd, &m, MSG_NOSIGNAL) >= 0) return true;
    if (errno != EINTR) return false;  // nobody there, or a receiver that does not drain
  }
}

}  // namespace softrdma
