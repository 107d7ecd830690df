// softrdma_test_peer: the other process in softrdma's multi-process tests, written against the
// plain rdma-core API (async event channel, explicit PD/CQ).
//
//   softrdma_test_peer connect IP PORT exit|hang   connect; print "established"; then _exit(0)
//                                                  or block until stdin closes (or SIGKILL)
//   softrdma_test_peer listen IP PORT              listen (PORT 0: any); print "listening PORT";
//                                                  accept everyone,
//                                                  echo every message; exit when stdin closes
//
// Every line goes to stdout; "error ..." lines report failures. alarm() bounds its lifetime.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kSlot = 4096;
constexpr unsigned kLifetimeSeconds = 30;

struct Connection {
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<char> buf = std::vector<char>(2 * kSlot);
};

[[noreturn]] void fail(const char* what) {
  std::printf("error %s: %s\n", what, std::strerror(errno));
  std::fflush(stdout);
  _exit(1);
}

void say(const char* line) {
  std::printf("%s\n", line);
  std::fflush(stdout);
}

sockaddr_in address(const char* ip, const char* port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
  if (inet_pton(AF_INET, ip, &addr.sin_addr) != 1) fail("address");
  return addr;
}

rdma_cm_event* nextEvent(rdma_event_channel* ch, rdma_cm_event_type expected) {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(ch, &event) != 0) fail("rdma_get_cm_event");
  if (event->event != expected) {
    std::printf("error event %s status %d, expected %s\n", rdma_event_str(event->event),
                event->status, rdma_event_str(expected));
    std::fflush(stdout);
    _exit(1);
  }
  return event;
}

void postRecv(Connection& c) {
  ibv_sge sge{reinterpret_cast<uint64_t>(c.buf.data()), kSlot, c.mr->lkey};
  ibv_recv_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (ibv_post_recv(c.id->qp, &wr, &bad) != 0) fail("ibv_post_recv");
}

void setUp(Connection& c, rdma_cm_id* id) {
  c.id = id;
  c.pd = ibv_alloc_pd(id->verbs);
  if (c.pd == nullptr) fail("ibv_alloc_pd");
  c.cq = ibv_create_cq(id->verbs, 64, nullptr, nullptr, 0);
  if (c.cq == nullptr) fail("ibv_create_cq");
  c.mr = ibv_reg_mr(c.pd, c.buf.data(), c.buf.size(), IBV_ACCESS_LOCAL_WRITE);
  if (c.mr == nullptr) fail("ibv_reg_mr");
  ibv_qp_init_attr attr{};
  attr.send_cq = c.cq;
  attr.recv_cq = c.cq;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 1;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 16;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, c.pd, &attr) != 0) fail("rdma_create_qp");
  postRecv(c);
}

int runConnect(const char* ip, const char* port, const std::string& mode) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  if (ch == nullptr || rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) fail("create id");
  sockaddr_in dst = address(ip, port);
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) != 0) {
    fail("rdma_resolve_addr");
  }
  rdma_ack_cm_event(nextEvent(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
  if (rdma_resolve_route(id, 2000) != 0) fail("rdma_resolve_route");
  rdma_ack_cm_event(nextEvent(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
  Connection c;
  setUp(c, id);
  rdma_conn_param param{};
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  if (rdma_connect(id, &param) != 0) fail("rdma_connect");
  rdma_ack_cm_event(nextEvent(ch, RDMA_CM_EVENT_ESTABLISHED));
  say("established");
  if (mode == "exit") _exit(0);
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  _exit(0);
}

// Echoes every received message back on the same connection.
void echo(Connection& c) {
  ibv_wc wc{};
  while (ibv_poll_cq(c.cq, 1, &wc) > 0) {
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) continue;
    std::memcpy(c.buf.data() + kSlot, c.buf.data(), wc.byte_len);
    postRecv(c);
    ibv_sge sge{reinterpret_cast<uint64_t>(c.buf.data() + kSlot), wc.byte_len, c.mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(c.id->qp, &wr, &bad) != 0) fail("ibv_post_send");
  }
}

void handleEvent(rdma_event_channel* ch, std::vector<Connection>& connections) {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(ch, &event) != 0) fail("rdma_get_cm_event");
  if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
    connections.emplace_back();
    setUp(connections.back(), event->id);
    rdma_conn_param param{};
    param.rnr_retry_count = 7;
    if (rdma_accept(event->id, &param) != 0) fail("rdma_accept");
  } else if (event->event == RDMA_CM_EVENT_DISCONNECTED) {
    rdma_disconnect(event->id);
  }
  rdma_ack_cm_event(event);
}

int runListen(const char* ip, const char* port) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* listener = nullptr;
  if (ch == nullptr || rdma_create_id(ch, &listener, nullptr, RDMA_PS_TCP) != 0) {
    fail("create id");
  }
  sockaddr_in addr = address(ip, port);
  if (rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&addr)) != 0) fail("rdma_bind_addr");
  if (rdma_listen(listener, 64) != 0) fail("rdma_listen");
  std::printf("listening %u\n", ntohs(rdma_get_src_port(listener)));
  std::fflush(stdout);
  std::vector<Connection> connections;
  connections.reserve(256);
  for (;;) {
    pollfd fds[2] = {{ch->fd, POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    if (poll(fds, 2, 5) < 0 && errno != EINTR) fail("poll");
    if (fds[1].revents != 0) {
      char byte;
      if (read(STDIN_FILENO, &byte, 1) <= 0) _exit(0);
    }
    if (fds[0].revents & POLLIN) handleEvent(ch, connections);
    for (auto& c : connections)
      echo(c);
  }
}

}  // namespace

int main(int argc, char** argv) {
  alarm(kLifetimeSeconds);
  if (argc == 5 && std::string(argv[1]) == "connect") return runConnect(argv[2], argv[3], argv[4]);
  if (argc == 4 && std::string(argv[1]) == "listen") return runListen(argv[2], argv[3]);
  std::fprintf(stderr, "usage: %s connect IP PORT exit|hang | listen IP PORT\n", argv[0]);
  return 2;
}
