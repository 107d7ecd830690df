/* softrdma_preload_probe: a plain C program linked against rdma-core's own libibverbs and
 * librdmacm (not softrdma), run under softrdma-run, as a user's program would be:
 *
 *   softrdma_preload_probe extended   ibv_query_device_ex, ibv_create_cq_ex with ibv_start_poll,
 *                                     rdma_create_qp_ex with the ibv_wr_* API, over 127.0.0.1
 *   softrdma_preload_probe fork       connect and exchange; fork; the child connects and exchanges
 *                                     on its own and exits; the parent goes on, during and after
 *
 * Both ends of each connection live in the one process (blocking channels, events in the order
 * the CM produces them). Prints "ok" and exits 0 on success; "FAIL: ..." and exits 1 otherwise.
 * alarm() bounds its life. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOT 4096

struct side {
  struct rdma_cm_id* id;
  struct ibv_pd* pd;
  struct ibv_cq_ex* cqx;
  struct ibv_cq* cq;
  struct ibv_mr* mr;
  struct ibv_qp_ex* qpx;
  char buf[4 * SLOT];
};

struct pair {
  struct rdma_event_channel* ch;
  struct rdma_cm_id* listener;
  struct side client, server;
};

static const char* who = "parent";

static void fail(const char* what) {
  printf("FAIL (%s): %s: %s\n", who, what, strerror(errno));
  fflush(stdout);
  _exit(1);
}

static void check(int ok, const char* what) {
  if (!ok) fail(what);
}

static struct rdma_cm_event* expect(struct rdma_event_channel* ch, enum rdma_cm_event_type type) {
  struct rdma_cm_event* ev;

  check(rdma_get_cm_event(ch, &ev) == 0, "rdma_get_cm_event");
  if (ev->event != type) {
    printf("FAIL (%s): event %s, expected %s\n", who, rdma_event_str(ev->event),
           rdma_event_str(type));
    _exit(1);
  }
  return ev;
}

static void ack(struct rdma_cm_event* ev) {
  check(rdma_ack_cm_event(ev) == 0, "rdma_ack_cm_event");
}

/* PD, extended CQ (byte_len, imm, qp_num), MR and a QP with the ibv_wr_* API. */
static void create_side(struct side* s, struct rdma_cm_id* id) {
  struct ibv_cq_init_attr_ex cq_attr = {0};
  struct ibv_qp_init_attr_ex qp_attr = {0};

  s->id = id;
  s->pd = ibv_alloc_pd(id->verbs);
  check(s->pd != NULL, "ibv_alloc_pd");
  cq_attr.cqe = 64;
  cq_attr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM;
  s->cqx = ibv_create_cq_ex(id->verbs, &cq_attr);
  check(s->cqx != NULL, "ibv_create_cq_ex");
  s->cq = ibv_cq_ex_to_cq(s->cqx);
  s->mr =
      ibv_reg_mr(s->pd, s->buf, sizeof s->buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  check(s->mr != NULL, "ibv_reg_mr");
  qp_attr.send_cq = s->cq;
  qp_attr.recv_cq = s->cq;
  qp_attr.qp_type = IBV_QPT_RC;
  qp_attr.cap.max_send_wr = 8;
  qp_attr.cap.max_recv_wr = 8;
  qp_attr.cap.max_send_sge = 1;
  qp_attr.cap.max_recv_sge = 1;
  qp_attr.cap.max_inline_data = 64;
  qp_attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qp_attr.pd = s->pd;
  qp_attr.send_ops_flags =
      IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE;
  check(rdma_create_qp_ex(id, &qp_attr) == 0, "rdma_create_qp_ex");
  check(qp_attr.cap.max_inline_data >= 64, "granted inline data");
  s->qpx = ibv_qp_to_qp_ex(id->qp);
  check(s->qpx != NULL, "ibv_qp_to_qp_ex");
}

static void post_recv(struct side* s, uint64_t wr_id, int slot) {
  struct ibv_sge sge = {(uintptr_t)(s->buf + slot * SLOT), SLOT, s->mr->lkey};
  struct ibv_recv_wr wr = {0}, *bad;

  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  check(ibv_post_recv(s->id->qp, &wr, &bad) == 0, "ibv_post_recv");
}

/* Waits (bounded by alarm) for one completion through the iterator API. */
static void poll_one(struct side* s, uint64_t* wr_id, enum ibv_wc_opcode* op, uint32_t* len,
                     uint32_t* imm) {
  struct ibv_poll_cq_attr attr = {0};
  int rc;

  while ((rc = ibv_start_poll(s->cqx, &attr)) == ENOENT)
    ;
  check(rc == 0, "ibv_start_poll");
  check(s->cqx->status == IBV_WC_SUCCESS, "completion status");
  *wr_id = s->cqx->wr_id;
  *op = ibv_wc_read_opcode(s->cqx);
  *len = ibv_wc_read_byte_len(s->cqx);
  *imm = (ibv_wc_read_wc_flags(s->cqx) & IBV_WC_WITH_IMM) ? ntohl(ibv_wc_read_imm_data(s->cqx)) : 0;
  check(ibv_wc_read_qp_num(s->cqx) == s->id->qp->qp_num, "qp_num");
  ibv_end_poll(s->cqx);
}

/* A listener on 127.0.0.1 and a connection to it, both ends here. */
static void connect_pair(struct pair* p) {
  struct sockaddr_in addr = {0};
  struct rdma_conn_param param = {0};
  struct rdma_cm_event* ev;
  struct rdma_cm_id *client_id, *server_id;

  p->ch = rdma_create_event_channel();
  check(p->ch != NULL, "rdma_create_event_channel");
  check(rdma_create_id(p->ch, &p->listener, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  check(rdma_bind_addr(p->listener, (struct sockaddr*)&addr) == 0, "rdma_bind_addr");
  check(rdma_listen(p->listener, 4) == 0, "rdma_listen");
  addr.sin_port = rdma_get_src_port(p->listener);

  check(rdma_create_id(p->ch, &client_id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
  check(rdma_resolve_addr(client_id, NULL, (struct sockaddr*)&addr, 2000) == 0,
        "rdma_resolve_addr");
  ack(expect(p->ch, RDMA_CM_EVENT_ADDR_RESOLVED));
  check(rdma_resolve_route(client_id, 2000) == 0, "rdma_resolve_route");
  ack(expect(p->ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
  create_side(&p->client, client_id);
  post_recv(&p->client, 100, 1);
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.rnr_retry_count = 7;
  check(rdma_connect(client_id, &param) == 0, "rdma_connect");

  ev = expect(p->ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  server_id = ev->id;
  ack(ev);
  create_side(&p->server, server_id);
  post_recv(&p->server, 200, 1);
  check(rdma_accept(server_id, &param) == 0, "rdma_accept");
  ev = expect(p->ch, RDMA_CM_EVENT_ESTABLISHED);
  check(ev->id == client_id, "ESTABLISHED for the client first");
  ack(ev);
  ack(expect(p->ch, RDMA_CM_EVENT_ESTABLISHED));
}

/* `from` sends a message through the ibv_wr_* API (inline, with immediate data); `to` gets it
 * into slot 1 and posts the next receive. */
static void exchange(struct side* from, struct side* to, uint32_t tag) {
  struct ibv_qp_ex* x = from->qpx;
  char msg[32];
  uint64_t wr_id;
  enum ibv_wc_opcode op;
  uint32_t len, imm;

  snprintf(msg, sizeof msg, "message %u", tag);
  ibv_wr_start(x);
  x->wr_id = tag;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send_imm(x, htonl(tag));
  ibv_wr_set_inline_data(x, msg, sizeof msg);
  check(ibv_wr_complete(x) == 0, "ibv_wr_complete");
  poll_one(from, &wr_id, &op, &len, &imm);
  check(wr_id == tag && op == IBV_WC_SEND, "send completion");
  poll_one(to, &wr_id, &op, &len, &imm);
  check(op == IBV_WC_RECV && len == sizeof msg && imm == tag, "receive completion");
  check(strcmp(to->buf + SLOT, msg) == 0, "message contents");
  post_recv(to, wr_id, 1);
}

static void destroy_side(struct side* s) {
  rdma_destroy_qp(s->id);
  check(ibv_dereg_mr(s->mr) == 0, "ibv_dereg_mr");
  check(ibv_destroy_cq(s->cq) == 0, "ibv_destroy_cq");
  check(ibv_dealloc_pd(s->pd) == 0, "ibv_dealloc_pd");
  check(rdma_destroy_id(s->id) == 0, "rdma_destroy_id");
}

static void close_pair(struct pair* p) {
  check(rdma_disconnect(p->client.id) == 0, "rdma_disconnect");
  ack(expect(p->ch, RDMA_CM_EVENT_DISCONNECTED)); /* the server's */
  check(rdma_disconnect(p->server.id) == 0, "rdma_disconnect");
  ack(expect(p->ch, RDMA_CM_EVENT_DISCONNECTED)); /* the client's */
  destroy_side(&p->client);
  destroy_side(&p->server);
  check(rdma_destroy_id(p->listener) == 0, "rdma_destroy_id");
  rdma_destroy_event_channel(p->ch);
}

static void extended(void) {
  struct ibv_device** list = ibv_get_device_list(NULL);
  struct ibv_device_attr_ex attr;
  struct ibv_context* ctx;
  struct pair p;

  check(list != NULL && list[0] != NULL, "ibv_get_device_list");
  ctx = ibv_open_device(list[0]);
  check(ctx != NULL, "ibv_open_device");
  check(ibv_query_device_ex(ctx, NULL, &attr) == 0, "ibv_query_device_ex");
  check(attr.phys_port_cnt_ex == 1, "phys_port_cnt_ex");
  check(attr.orig_attr.vendor_id != 0, "vendor_id");
  check(ibv_close_device(ctx) == 0, "ibv_close_device");
  ibv_free_device_list(list);

  memset(&p, 0, sizeof p);
  connect_pair(&p);
  exchange(&p.client, &p.server, 1);
  exchange(&p.server, &p.client, 2);
  close_pair(&p);
}

static void with_fork(void) {
  struct pair p;
  pid_t pid;
  int status;

  memset(&p, 0, sizeof p);
  connect_pair(&p);
  exchange(&p.client, &p.server, 1);
  pid = fork();
  check(pid >= 0, "fork");
  if (pid == 0) {
    struct pair q;

    who = "child";
    memset(&q, 0, sizeof q);
    connect_pair(&q);
    exchange(&q.client, &q.server, 10);
    exchange(&q.server, &q.client, 11);
    close_pair(&q);
    _exit(0);
  }
  exchange(&p.server, &p.client, 2); /* while the child runs */
  check(waitpid(pid, &status, 0) == pid, "waitpid");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("FAIL: the child ended with status %#x\n", status);
    _exit(1);
  }
  exchange(&p.client, &p.server, 3); /* after it */
  close_pair(&p);
}

int main(int argc, char** argv) {
  alarm(20);
  if (argc != 2) {
    fprintf(stderr, "usage: %s extended|fork\n", argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "extended") == 0)
    extended();
  else if (strcmp(argv[1], "fork") == 0)
    with_fork();
  else
    return 2;
  printf("ok\n");
  return 0;
}
