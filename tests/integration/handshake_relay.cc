// A relay for integration tests: an attacker who sits between two daemons
// that hold the mesh secret and passes their handshake through, byte for
// byte, on two RC connections of its own.
//
//   handshake_relay --listen HOST:PORT --connect HOST:PORT --bind HOST
//
// It listens where one daemon dials its peer (--listen), takes the connect
// request, dials the peer (--connect, from --bind: the dialer's own host, so
// the address check passes) with the same Hello, accepts the first request
// with the peer's answer (its Hello and nonce), and then forwards every
// batch each way. Without binding, the proofs would check out on both ends
// and the relay would sit in the middle of an authenticated connection.
//
// Prints "relaying" once both connections are up, "forwarded N" for each
// batch it passed on, and "closed by dialer" / "closed by acceptor" when a
// daemon ends its connection. Exits 0 after a close, 1 when nothing ended
// within 15 s, 2 on setup errors. Runs under softrdma-run like the daemons.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kBufferSize = 64 * 1024;
constexpr uint32_t kBuffers = 16;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "handshake_relay: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(2);
}

sockaddr_storage parse(const std::string& text, bool withPort) {
  std::string host = text, port = "0";
  if (withPort) {
    const auto colon = text.rfind(':');
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) die("address " + text);
  sockaddr_storage out{};
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return out;
}

// One side's connection: its id, QP, and buffers.
struct Side {
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  std::vector<std::byte> recv, send;
  ibv_mr *recvMr = nullptr, *sendMr = nullptr;
  uint32_t sent = 0;
};

rdma_event_channel* g_channel = nullptr;

rdma_cm_event* nextEvent(Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(g_channel, &e) == 0) return e;
    if (errno != EAGAIN) die("rdma_get_cm_event");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return nullptr;
}

void postRecv(Side& s, uint32_t i) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(s.recv.data()) + size_t{i} * kBufferSize, kBufferSize,
              s.recvMr->lkey};
  ibv_recv_wr w{}, *bad = nullptr;
  w.wr_id = i;
  w.sg_list = &sge;
  w.num_sge = 1;
  if (ibv_post_recv(s.id->qp, &w, &bad) != 0) die("ibv_post_recv");
}

void setupQp(Side& s) {
  s.pd = ibv_alloc_pd(s.id->verbs);
  s.cq = ibv_create_cq(s.id->verbs, 2 * kBuffers + 4, nullptr, nullptr, 0);
  if (s.pd == nullptr || s.cq == nullptr) die("ibv_alloc_pd/ibv_create_cq");
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = s.cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = kBuffers;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  if (rdma_create_qp(s.id, s.pd, &a) != 0) die("rdma_create_qp");
  s.recv.assign(size_t{kBufferSize} * kBuffers, std::byte{0});
  s.send.assign(size_t{kBufferSize} * kBuffers, std::byte{0});
  s.recvMr = ibv_reg_mr(s.pd, s.recv.data(), s.recv.size(), IBV_ACCESS_LOCAL_WRITE);
  s.sendMr = ibv_reg_mr(s.pd, s.send.data(), s.send.size(), IBV_ACCESS_LOCAL_WRITE);
  if (s.recvMr == nullptr || s.sendMr == nullptr) die("ibv_reg_mr");
  for (uint32_t i = 0; i < kBuffers; i++)
    postRecv(s, i);
}

void forward(Side& to, const std::byte* bytes, uint32_t n) {
  std::byte* buf = to.send.data() + size_t{to.sent % kBuffers} * kBufferSize;
  std::memcpy(buf, bytes, n);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), n, to.sendMr->lkey};
  ibv_send_wr w{}, *bad = nullptr;
  w.wr_id = 1000 + to.sent++;
  w.sg_list = &sge;
  w.num_sge = 1;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  if (ibv_post_send(to.id->qp, &w, &bad) != 0) die("ibv_post_send");
}

// Every batch `from` received goes to `to`, its receive posted again.
void pump(Side& from, Side& to, uint64_t& forwarded) {
  ibv_wc wc[8];
  const int n = ibv_poll_cq(from.cq, 8, wc);
  for (int i = 0; i < n; i++) {
    if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id >= 1000) continue;
    forward(to, from.recv.data() + wc[i].wr_id * kBufferSize, wc[i].byte_len);
    postRecv(from, static_cast<uint32_t>(wc[i].wr_id));
    std::printf("forwarded %llu\n", static_cast<unsigned long long>(++forwarded));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen, connect, bind;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--listen") listen = v;
    if (k == "--connect") connect = v;
    if (k == "--bind") bind = v;
  }
  if (listen.empty() || connect.empty() || bind.empty()) {
    std::fprintf(stderr,
                 "usage: handshake_relay --listen HOST:PORT --connect HOST:PORT "
                 "--bind HOST\n");
    return 2;
  }
  g_channel = rdma_create_event_channel();
  if (g_channel == nullptr) die("rdma_create_event_channel");
  fcntl(g_channel->fd, F_SETFL, fcntl(g_channel->fd, F_GETFL) | O_NONBLOCK);
  rdma_cm_id* listener = nullptr;
  if (rdma_create_id(g_channel, &listener, nullptr, RDMA_PS_TCP) != 0) die("rdma_create_id");
  sockaddr_storage at = parse(listen, true);
  if (rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&at)) != 0) die("rdma_bind_addr");
  if (rdma_listen(listener, 4) != 0) die("rdma_listen");
  std::printf("listening\n");
  std::fflush(stdout);

  // The dialer's request, kept until the acceptor answered.
  Side dialer, acceptor;
  std::vector<uint8_t> hello;
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  while (dialer.id == nullptr) {
    rdma_cm_event* e = nextEvent(deadline);
    if (e == nullptr) return 1;
    if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      dialer.id = e->id;
      const auto* p = static_cast<const uint8_t*>(e->param.conn.private_data);
      hello.assign(p, p + e->param.conn.private_data_len);
    }
    rdma_ack_cm_event(e);
  }
  setupQp(dialer);

  // The same Hello to the acceptor, from the dialer's host.
  sockaddr_storage src = parse(bind, false), dst = parse(connect, true);
  if (rdma_create_id(g_channel, &acceptor.id, nullptr, RDMA_PS_TCP) != 0) die("rdma_create_id");
  if (rdma_resolve_addr(acceptor.id, reinterpret_cast<sockaddr*>(&src),
                        reinterpret_cast<sockaddr*>(&dst), 2000) != 0)
    die("rdma_resolve_addr");
  std::vector<uint8_t> answer;
  bool up = false;
  while (!up) {
    rdma_cm_event* e = nextEvent(deadline);
    if (e == nullptr) return 1;
    const rdma_cm_event_type type = e->event;
    if (type == RDMA_CM_EVENT_ESTABLISHED && e->id == acceptor.id) {
      const auto* p = static_cast<const uint8_t*>(e->param.conn.private_data);
      answer.assign(p, p + e->param.conn.private_data_len);
      up = true;
    }
    const bool failed = type == RDMA_CM_EVENT_REJECTED || type == RDMA_CM_EVENT_UNREACHABLE ||
                        type == RDMA_CM_EVENT_ADDR_ERROR || type == RDMA_CM_EVENT_ROUTE_ERROR;
    rdma_ack_cm_event(e);
    if (failed) {
      std::fprintf(stderr, "handshake_relay: the acceptor refused: %s\n", rdma_event_str(type));
      return 2;
    }
    if (type == RDMA_CM_EVENT_ADDR_RESOLVED && rdma_resolve_route(acceptor.id, 2000) != 0)
      die("rdma_resolve_route");
    if (type == RDMA_CM_EVENT_ROUTE_RESOLVED) {
      setupQp(acceptor);
      rdma_conn_param p{};
      p.private_data = hello.data();
      p.private_data_len = static_cast<uint8_t>(std::min<size_t>(hello.size(), 56));
      p.retry_count = p.rnr_retry_count = 7;
      if (rdma_connect(acceptor.id, &p) != 0) die("rdma_connect");
    }
  }
  // The acceptor's answer (Hello and nonce) to the dialer.
  rdma_conn_param p{};
  p.private_data = answer.data();
  p.private_data_len = static_cast<uint8_t>(std::min<size_t>(answer.size(), 196));
  p.rnr_retry_count = 7;
  if (rdma_accept(dialer.id, &p) != 0) die("rdma_accept");
  std::printf("relaying\n");
  std::fflush(stdout);

  uint64_t forwarded = 0;
  while (Clock::now() < deadline) {
    pump(dialer, acceptor, forwarded);
    pump(acceptor, dialer, forwarded);
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(g_channel, &e) == 0) {
      const bool gone = e->event == RDMA_CM_EVENT_DISCONNECTED;
      const bool byDialer = e->id == dialer.id;
      rdma_ack_cm_event(e);
      if (gone) {
        std::printf("closed by %s\n", byDialer ? "dialer" : "acceptor");
        std::fflush(stdout);
        return 0;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("nothing ended\n");
  return 1;
}
