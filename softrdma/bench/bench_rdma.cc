// softrdma-bench: the RDMA cases' requester and responder (bench.h), plain
// rdma-core code: rdma_cm connection, pre-posted receives, credits returned
// with zero-length SEND_WITH_IMM, selective signalling, post lists, and
// event-driven (comp channel + epoll) or busy-polled completions.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench.h"

namespace softrdma_bench {
namespace {

// ------------------------------------------------------------ rdma_cm helpers

// Waits (bounded) for the next CM event, which must be `want`.
rdma_cm_event* expectEvent(rdma_event_channel* ch, rdma_cm_event_type want, int timeout_ms) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) {
    fprintf(stderr, "softrdma-bench[%d]: timed out waiting for %s\n", getpid(),
            rdma_event_str(want));
    return nullptr;
  }
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(ch, &e) != 0) die("rdma_get_cm_event");
  if (e->event != want) {
    fprintf(stderr, "softrdma-bench[%d]: expected %s, got %s (status %d)\n", getpid(),
            rdma_event_str(want), rdma_event_str(e->event), e->status);
    rdma_ack_cm_event(e);
    return nullptr;
  }
  return e;
}

bool expectAndAck(rdma_event_channel* ch, rdma_cm_event_type want, int timeout_ms) {
  rdma_cm_event* e = expectEvent(ch, want, timeout_ms);
  if (e == nullptr) return false;
  rdma_ack_cm_event(e);
  return true;
}

// ------------------------------------------------------------ one RDMA endpoint

// The verbs resources of one side: PD, one CQ for sends and receives with a
// completion channel watched by epoll, the QP, and registered buffers.
class Endpoint {
 public:
  Endpoint(rdma_cm_id* id, const Case& c, uint32_t sq, uint32_t rq, size_t buf_bytes)
      : id_(id), wait_(c.wait) {
    pd_ = ibv_alloc_pd(id->verbs);
    if (pd_ == nullptr) die("ibv_alloc_pd");
    chan_ = ibv_create_comp_channel(id->verbs);
    if (chan_ == nullptr) die("ibv_create_comp_channel");
    int fl = fcntl(chan_->fd, F_GETFL);
    fcntl(chan_->fd, F_SETFL, fl | O_NONBLOCK);
    cq_ = ibv_create_cq(id->verbs, static_cast<int>(sq + rq + 16), nullptr, chan_, 0);
    if (cq_ == nullptr) die("ibv_create_cq");
    ibv_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = sq;
    a.cap.max_recv_wr = rq;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = 64;
    if (rdma_create_qp(id, pd_, &a) != 0) die("rdma_create_qp");
    qp_ = id->qp;
    buf_.assign(std::max<size_t>(buf_bytes, 64), 0);
    mr_ =
        ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (mr_ == nullptr) die("ibv_reg_mr");
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    if (epfd_ < 0 || epoll_ctl(epfd_, EPOLL_CTL_ADD, chan_->fd, &ev) != 0) die("epoll");
  }
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  ~Endpoint() {
    if (unacked_ > 0) ibv_ack_cq_events(cq_, unacked_);
    rdma_destroy_qp(id_);
    ibv_dereg_mr(mr_);
    ibv_destroy_cq(cq_);
    ibv_destroy_comp_channel(chan_);
    ibv_dealloc_pd(pd_);
    close(epfd_);
  }

  ibv_qp* qp() { return qp_; }
  ibv_mr* mr() { return mr_; }
  uint8_t* buf() { return buf_.data(); }

  int poll(ibv_wc* wc, int n) {
    int got = ibv_poll_cq(cq_, n, wc);
    if (got < 0) dieMsg("ibv_poll_cq failed");
    return got;
  }

  // Nothing to do: wait for a completion. Event mode: arm, poll again (the
  // caller's next poll), block on the channel. Returns after at most
  // `timeout_ms`. A completion found by the re-poll is returned in `wc`.
  int waitForCompletion(ibv_wc* wc, int n, int timeout_ms) {
    if (wait_ == Wait::Busy) return poll(wc, n);
    if (ibv_req_notify_cq(cq_, 0) != 0) dieMsg("ibv_req_notify_cq failed");
    int got = poll(wc, n);
    if (got > 0) return got;
    epoll_event ev;
    int r = epoll_wait(epfd_, &ev, 1, timeout_ms);
    if (r < 0 && errno != EINTR) die("epoll_wait");
    ibv_cq* ecq;
    void* ectx;
    while (ibv_get_cq_event(chan_, &ecq, &ectx) == 0) {
      wakeups_++;
      if (++unacked_ >= 64) {
        ibv_ack_cq_events(cq_, unacked_);
        unacked_ = 0;
      }
    }
    if (errno != EAGAIN) die("ibv_get_cq_event");
    return poll(wc, n);
  }

  void postRecv(ibv_recv_wr* wr) {
    ibv_recv_wr* bad = nullptr;
    int rc = ibv_post_recv(qp_, wr, &bad);
    if (rc != 0) {
      errno = rc;
      die("ibv_post_recv");
    }
  }

  void postSend(ibv_send_wr* wr) {
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp_, wr, &bad);
    if (rc != 0) {
      errno = rc;
      die("ibv_post_send");
    }
  }

  uint64_t wakeups() const { return wakeups_; }

 private:
  rdma_cm_id* id_;
  Wait wait_;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* chan_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<uint8_t> buf_;
  int epfd_ = -1;
  unsigned unacked_ = 0;
  uint64_t wakeups_ = 0;
};

void checkWc(const ibv_wc& wc, const char* side) {
  if (wc.status == IBV_WC_SUCCESS) return;
  fprintf(stderr, "softrdma-bench[%d]: %s completion wr_id %llu failed: %s\n", getpid(), side,
          static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status));
  exit(3);
}

// Sends a zero-length SEND_WITH_IMM (credits or the end marker).
void postImm(Endpoint& ep, uint32_t imm, uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  ep.postSend(&wr);
}

// ------------------------------------------------------------ responder

class Responder {
 public:
  Responder(rdma_cm_id* id, const Case& c)
      : c_(c), ep_(id, c, kCreditSq, c.depth + 1, size_t(c.size) * c.depth) {}

  AcceptInfo info() {
    return {1, c_.depth, reinterpret_cast<uintptr_t>(ep_.buf()), ep_.mr()->rkey, c_.size, c_.depth};
  }

  // Receives are posted before rdma_accept, so nothing arrives unexpected.
  void postInitial() {
    std::vector<uint32_t> all(c_.depth);
    for (uint32_t i = 0; i < c_.depth; i++)
      all[i] = i;
    repost(all);  // a WRITE case uses the first one for its end marker
  }

  // Runs until the end marker; returns 0, or 3 on a data mismatch.
  int run(int timeout_s) {
    auto hard = Clock::now() + std::chrono::seconds(timeout_s);
    std::vector<uint32_t> done;
    ibv_wc wc[64];
    while (Clock::now() < hard) {
      int n = ep_.poll(wc, 64);
      if (n == 0) n = ep_.waitForCompletion(wc, 64, 100);
      for (int i = 0; i < n; i++) {
        checkWc(wc[i], "responder");
        if (wc[i].opcode == IBV_WC_SEND) {  // a credit message went out
          credit_sends_--;
          continue;
        }
        if (wc[i].wc_flags & IBV_WC_WITH_IMM) return finish(ntohl(wc[i].imm_data));
        if (!check(wc[i])) return 3;
        done.push_back(static_cast<uint32_t>(wc[i].wr_id));
      }
      // Credits go back once a batch is reposted, and only while the send
      // queue has room (its completions free it).
      if (done.size() >= c_.repost && credit_sends_ < kCreditSq) {
        repost(done);
        postImm(ep_, static_cast<uint32_t>(done.size()), 0);
        credit_sends_++;
        max_credit_sends_ = std::max(max_credit_sends_, credit_sends_);
        done.clear();
      }
    }
    fprintf(stderr, "softrdma-bench[%d]: responder timed out\n", getpid());
    return 4;
  }

 private:
  bool check(const ibv_wc& wc) {
    uint64_t seq;
    memcpy(&seq, ep_.buf() + size_t(wc.wr_id) * c_.size, sizeof seq);
    if (wc.byte_len == c_.size && seq == received_) {
      received_++;
      return true;
    }
    fprintf(stderr, "softrdma-bench[%d]: message %llu: len %u seq %llu\n", getpid(),
            static_cast<unsigned long long>(received_), wc.byte_len,
            static_cast<unsigned long long>(seq));
    return false;
  }

  int finish(uint32_t sent) {
    if (c_.transport == Transport::Write || sent == static_cast<uint32_t>(received_)) return 0;
    fprintf(stderr, "softrdma-bench[%d]: requester sent %u messages, %llu received\n", getpid(),
            sent, static_cast<unsigned long long>(received_));
    return 3;
  }

  void repost(const std::vector<uint32_t>& slots) {
    std::vector<ibv_recv_wr> wr(slots.size());
    std::vector<ibv_sge> sg(slots.size());
    for (size_t i = 0; i < slots.size(); i++) {
      sg[i] = {reinterpret_cast<uintptr_t>(ep_.buf() + size_t(slots[i]) * c_.size), c_.size,
               ep_.mr()->lkey};
      wr[i].wr_id = slots[i];
      wr[i].sg_list = &sg[i];
      wr[i].num_sge = 1;
      wr[i].next = i + 1 < slots.size() ? &wr[i + 1] : nullptr;
    }
    if (!wr.empty()) ep_.postRecv(wr.data());
  }

  const Case& c_;
  Endpoint ep_;
  uint64_t received_ = 0;
  uint32_t credit_sends_ = 0;  // credit messages not yet completed

 public:
  uint32_t max_credit_sends_ = 0;
};

}  // namespace

int serveRdma(const Case& c, int ready_fd, int seconds) {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) die("rdma_create_event_channel");
  rdma_cm_id* listen_id = nullptr;
  if (rdma_create_id(ch, &listen_id, nullptr, RDMA_PS_TCP) != 0) die("rdma_create_id");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (rdma_bind_addr(listen_id, reinterpret_cast<sockaddr*>(&a)) != 0) die("rdma_bind_addr");
  if (rdma_listen(listen_id, 1) != 0) die("rdma_listen");
  uint16_t port = ntohs(rdma_get_src_port(listen_id));
  if (write(ready_fd, &port, sizeof port) != sizeof port) die("ready pipe");
  close(ready_fd);
  rdma_cm_event* req = expectEvent(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
  if (req == nullptr) return 4;
  rdma_cm_id* id = req->id;
  rdma_ack_cm_event(req);
  int rc;
  {
    Responder r(id, c);
    r.postInitial();
    AcceptInfo info = r.info();
    rdma_conn_param p{};
    p.private_data = &info;
    p.private_data_len = sizeof info;
    p.responder_resources = 1;
    p.initiator_depth = 1;
    p.rnr_retry_count = 7;
    if (rdma_accept(id, &p) != 0) die("rdma_accept");
    if (!expectAndAck(ch, RDMA_CM_EVENT_ESTABLISHED, 10000)) return 4;
    rc = r.run(seconds + kHardTimeoutExtra);
    if (getenv("SOFTRDMA_BENCH_DEBUG") != nullptr)
      fprintf(stderr, "responder: at most %u credit messages outstanding\n", r.max_credit_sends_);
    // The requester disconnects once it has read its results.
    if (rc == 0 && !expectAndAck(ch, RDMA_CM_EVENT_DISCONNECTED, 10000)) rc = 4;
    rdma_disconnect(id);
  }
  rdma_destroy_id(id);
  rdma_destroy_id(listen_id);
  rdma_destroy_event_channel(ch);
  return rc;
}

// ------------------------------------------------------------ requester

namespace {

class Requester {
 public:
  Requester(rdma_cm_id* id, const Case& c)
      : c_(c),
        ep_(id, c, c.sq_depth + 1, kCreditRecvs,
            c.size == k64 ? size_t(c.batch) * c.size : size_t(c.size) * c.sq_depth) {
    for (uint32_t i = 0; i < kCreditRecvs; i++) {
      ibv_recv_wr wr{};
      wr.wr_id = i;
      ep_.postRecv(&wr);
    }
  }

  void setPeer(const AcceptInfo& info) {
    peer_ = info;
    credits_ = c_.transport == Transport::Send ? info.credits : UINT32_MAX;
  }

  // Sends for `seconds`, then the end marker; false on a timeout.
  bool run(double seconds, Result& r) {
    auto start = Clock::now();
    auto stop = start + Seconds(seconds);
    auto hard = stop + std::chrono::seconds(kHardTimeoutExtra);
    bool stopping = false, marker_posted = false;
    ibv_wc wc[64];
    for (;;) {
      auto now = Clock::now();
      if (now >= hard) return false;
      bool progress = false;
      if (!stopping && now >= stop) stopping = true;
      if (!stopping) progress = postSome();
      if (stopping && !marker_posted && credits_ > 0 && outstanding() < c_.sq_depth) {
        postImm(ep_, static_cast<uint32_t>(posted_), kMarkerId);
        marker_posted = true;
      }
      int n = ep_.poll(wc, 64);
      if (n == 0 && !progress) n = ep_.waitForCompletion(wc, 64, 100);
      for (int i = 0; i < n; i++) {
        if (handle(wc[i])) {
          r.messages = posted_;
          r.seconds = Seconds(Clock::now() - start).count();
          return true;
        }
      }
    }
  }

  uint64_t wakeups() const { return ep_.wakeups(); }

 private:
  uint64_t outstanding() const { return posted_ - retired_; }

  // Posts as many full batches as credits and send-queue room allow.
  bool postSome() {
    bool any = false;
    auto b = static_cast<uint32_t>(c_.batch);
    while (credits_ >= b && outstanding() + b <= c_.sq_depth) {
      ibv_send_wr wr[16];
      ibv_sge sg[16];
      for (uint32_t i = 0; i < b; i++)
        fill(wr[i], sg[i], i, i + 1 < b ? &wr[i + 1] : nullptr);
      ep_.postSend(wr);
      if (c_.transport == Transport::Send) credits_ -= b;
      any = true;
    }
    return any;
  }

  void fill(ibv_send_wr& wr, ibv_sge& sg, uint32_t i, ibv_send_wr* next) {
    uint64_t seq = posted_++;
    bool small = c_.size == k64;
    uint8_t* p = ep_.buf() + size_t(small ? i : seq % c_.sq_depth) * c_.size;
    memcpy(p, &seq, sizeof seq);
    sg = {reinterpret_cast<uintptr_t>(p), c_.size, ep_.mr()->lkey};
    wr = ibv_send_wr{};
    wr.wr_id = seq;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.next = next;
    wr.opcode = c_.transport == Transport::Write ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
    if (small) wr.send_flags |= IBV_SEND_INLINE;
    if (seq % c_.signal == c_.signal - 1) wr.send_flags |= IBV_SEND_SIGNALED;
    if (c_.transport == Transport::Write) {
      wr.wr.rdma.remote_addr = peer_.addr + (seq % peer_.slots) * uint64_t(peer_.slot);
      wr.wr.rdma.rkey = peer_.rkey;
    }
  }

  // One completion; true when it is the end marker's.
  bool handle(const ibv_wc& wc) {
    checkWc(wc, "requester");
    if (wc.opcode == IBV_WC_RECV) {  // credits from the responder
      credits_ += ntohl(wc.imm_data);
      ibv_recv_wr wr{};
      wr.wr_id = wc.wr_id;
      ep_.postRecv(&wr);
      return false;
    }
    if (wc.wr_id == kMarkerId) return true;
    retired_ = wc.wr_id + 1;
    return false;
  }

  const Case& c_;
  Endpoint ep_;
  AcceptInfo peer_{};
  uint64_t credits_ = 0, posted_ = 0, retired_ = 0;
};

}  // namespace

bool runRdmaClient(const Case& c, uint16_t port, double seconds, Result& r) {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) die("rdma_create_event_channel");
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) die("rdma_create_id");
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  dst.sin_port = htons(port);
  bool ok = false;
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) == 0 &&
      expectAndAck(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000) && rdma_resolve_route(id, 2000) == 0 &&
      expectAndAck(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000)) {
    Requester q(id, c);
    rdma_conn_param p{};
    p.responder_resources = 1;
    p.initiator_depth = 1;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    if (rdma_connect(id, &p) != 0) die("rdma_connect");
    if (rdma_cm_event* e = expectEvent(ch, RDMA_CM_EVENT_ESTABLISHED, 10000)) {
      AcceptInfo info{};
      memcpy(&info, e->param.conn.private_data, sizeof info);  // padded to 196 bytes
      rdma_ack_cm_event(e);
      q.setPeer(info);
      ok = q.run(seconds, r);
      rdma_disconnect(id);
      expectAndAck(ch, RDMA_CM_EVENT_DISCONNECTED, 5000);
    }
  }
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  return ok;
}

}  // namespace softrdma_bench
