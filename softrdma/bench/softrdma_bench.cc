// softrdma-bench: measures softrdma's data path between two processes on
// 127.0.0.1 and compares it with raw TCP loopback measured in the same run.
//
// The parent process is the requester (client) of every case; for each case
// it starts a fresh copy of itself (fork + exec, "--serve CASE") as the
// responder (server), which reports its listening port through a pipe. The
// RDMA cases are plain rdma-core code (rdma_cm + verbs): receives pre-posted,
// credit-based flow control (the responder returns credits with zero-length
// SEND_WITH_IMM after reposting a batch of receives), selective signalling,
// post lists, and event-driven completion (comp channel + epoll,
// poll → arm → poll → wait) or busy polling. A case ends with a zero-length
// SEND_WITH_IMM marker carrying the number of messages sent; the responder
// checks it and the sequence numbers in the payloads, and exits non-zero on
// a mismatch.
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

namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

enum class Transport { Send, Write, Tcp };
enum class Wait { Event, Busy };

// One measured case. For TCP, `batch` is the number of messages per write().
struct Case {
  const char* name;
  Transport transport;
  uint32_t size;         // message bytes
  int batch;             // WRs per ibv_post_send call / messages per write()
  Wait wait;             // completion handling (RDMA)
  uint32_t depth;        // receives posted by the responder (= sender credits), RDMA
  uint32_t repost;       // the responder reposts and returns credits in batches of this
  uint32_t sq_depth;     // requester's max_send_wr (and outstanding limit)
  uint32_t signal;       // every Nth WR is signalled
  const char* baseline;  // the TCP case it is compared with
};

constexpr uint32_t k64 = 64;
constexpr uint32_t k1M = 1u << 20;

// clang-format off
const Case kCases[] = {
  {"send64-post1-event",  Transport::Send,  k64, 1,  Wait::Event, 512, 32, 1024, 32, "tcp64-write1"},
  {"send64-post16-event", Transport::Send,  k64, 16, Wait::Event, 512, 32, 1024, 32, "tcp64-write16"},
  {"send64-post1-busy",   Transport::Send,  k64, 1,  Wait::Busy,  512, 32, 1024, 32, "tcp64-write1"},
  {"send64-post16-busy",  Transport::Send,  k64, 16, Wait::Busy,  512, 32, 1024, 32, "tcp64-write16"},
  {"send1M-event",        Transport::Send,  k1M, 1,  Wait::Event, 16,  4,  16,   4,  "tcp1M"},
  {"write1M-event",       Transport::Write, k1M, 1,  Wait::Event, 16,  4,  16,   4,  "tcp1M"},
  {"tcp64-write1",        Transport::Tcp,   k64, 1,  Wait::Event, 0,   0,  0,    0,  nullptr},
  {"tcp64-write16",       Transport::Tcp,   k64, 16, Wait::Event, 0,   0,  0,    0,  nullptr},
  {"tcp1M",               Transport::Tcp,   k1M, 1,  Wait::Event, 0,   0,  0,    0,  nullptr},
};
// clang-format on

constexpr uint32_t kCreditRecvs = 64;  // requester: receives for credit messages
constexpr uint32_t kCreditSq = 64;     // responder: SQ depth for credit messages
constexpr uint64_t kMarkerId = ~0ull;
constexpr int kHardTimeoutExtra = 15;  // seconds beyond the measured interval

const Case* findCase(std::string_view name) {
  for (const Case& c : kCases)
    if (name == c.name) return &c;
  return nullptr;
}

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "softrdma-bench[%d]: %s: %s\n", getpid(), what, strerror(errno));
  exit(2);
}

[[noreturn]] void dieMsg(const char* what) {
  fprintf(stderr, "softrdma-bench[%d]: %s\n", getpid(), what);
  exit(2);
}

// What the responder tells the requester in rdma_accept's private data.
struct AcceptInfo {
  uint32_t version;
  uint32_t credits;
  uint64_t addr;
  uint32_t rkey;
  uint32_t slot;  // bytes per remote slot
  uint32_t slots;
};

struct Result {
  const Case* c = nullptr;
  bool ok = false;
  uint64_t messages = 0;
  double seconds = 0;
  double msgsPerSec() const { return seconds > 0 ? messages / seconds : 0; }
  double mbPerSec() const { return seconds > 0 ? messages * double(c->size) / seconds / 1e6 : 0; }
};

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

// ------------------------------------------------------------ raw TCP

int serveTcp(int ready_fd) {
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (ls < 0 || bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(ls, 1) != 0 ||
      getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    die("tcp listen");
  uint16_t port = ntohs(a.sin_port);
  if (write(ready_fd, &port, sizeof port) != sizeof port) die("ready pipe");
  close(ready_fd);
  int s = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
  if (s < 0) die("accept");
  std::vector<uint8_t> buf(k1M);
  uint64_t total = 0;
  for (;;) {
    ssize_t n = read(s, buf.data(), buf.size());
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("read");
    total += static_cast<uint64_t>(n);
  }
  if (write(s, &total, sizeof total) != sizeof total) die("write total");
  close(s);
  close(ls);
  return 0;
}

bool runTcpClient(const Case& c, uint16_t port, double seconds, Result& r) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // as softrdma's connections
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("tcp connect");
  timeval tv{kHardTimeoutExtra, 0};  // bounded: a stuck peer fails the case
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::vector<uint8_t> buf(size_t(c.size) * c.batch, 0x5a);
  auto start = Clock::now();
  auto stop = start + Seconds(seconds);
  uint64_t sent = 0;
  while (Clock::now() < stop) {
    size_t off = 0;
    while (off < buf.size()) {
      ssize_t n = write(s, buf.data() + off, buf.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(s);
        return false;
      }
      off += static_cast<size_t>(n);
    }
    sent += buf.size();
  }
  shutdown(s, SHUT_WR);
  uint64_t total = 0;
  bool ok = read(s, &total, sizeof total) == sizeof total && total == sent;
  r.seconds = Seconds(Clock::now() - start).count();
  r.messages = sent / c.size;
  close(s);
  return ok;
}

// ------------------------------------------------------------ processes

// The responder process of one case; killed and reaped if still running
// when this goes out of scope.
class Child {
 public:
  Child(const Case& c, double seconds) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) die("pipe");
    std::string secs = std::to_string(static_cast<int>(seconds + 1));
    std::string fd = std::to_string(p[1]);
    const char* argv[] = {"softrdma-bench", "--serve", c.name, fd.c_str(), secs.c_str(), nullptr};
    pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) die("fork");
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      fcntl(p[1], F_SETFD, 0);
      execv("/proc/self/exe", const_cast<char* const*>(argv));
      _exit(127);
    }
    close(p[1]);
    pollfd pf{p[0], POLLIN, 0};
    if (poll(&pf, 1, 10000) == 1 && read(p[0], &port_, sizeof port_) == sizeof port_) ready_ = true;
    close(p[0]);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  bool ready() const { return ready_; }
  uint16_t port() const { return port_; }

  // Waits up to `timeout_ms` for a clean exit.
  bool exitedOk(int timeout_ms) {
    auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < until) {
      int st = 0;
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return true;
        fprintf(stderr, "softrdma-bench: responder exited with status %d\n",
                WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    fprintf(stderr, "softrdma-bench: responder did not exit, killing it\n");
    return false;
  }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  bool ready_ = false;
  bool reaped_ = false;
};

Result runCase(const Case& c, double seconds) {
  Result r;
  r.c = &c;
  Child child(c, seconds);
  if (!child.ready()) {
    fprintf(stderr, "softrdma-bench: %s: responder did not start\n", c.name);
    return r;
  }
  bool ok = c.transport == Transport::Tcp ? runTcpClient(c, child.port(), seconds, r)
                                          : runRdmaClient(c, child.port(), seconds, r);
  bool child_ok = child.exitedOk(5000);
  r.ok = ok && child_ok;
  if (!ok) fprintf(stderr, "softrdma-bench: %s: requester failed\n", c.name);
  return r;
}

// ------------------------------------------------------------ output

const Result* findResult(const std::vector<Result>& rs, const char* name) {
  for (const Result& r : rs)
    if (name != nullptr && std::string_view(r.c->name) == name) return &r;
  return nullptr;
}

double ratio(const Result& r, const std::vector<Result>& rs) {
  const Result* b = findResult(rs, r.c->baseline);
  if (b == nullptr || !b->ok || !r.ok || b->msgsPerSec() == 0) return 0;
  return r.msgsPerSec() / b->msgsPerSec();
}

void printTable(const std::vector<Result>& rs) {
  printf("%-22s %8s %5s %6s %12s %10s %9s  %s\n", "case", "size", "post", "wait", "msgs/s", "MB/s",
         "ratio", "vs");
  for (const Result& r : rs) {
    const Case& c = *r.c;
    const char* wait = c.transport == Transport::Tcp ? "-"
                       : c.wait == Wait::Event       ? "event"
                                                     : "busy";
    if (!r.ok) {
      printf("%-22s %8u %5d %6s %12s\n", c.name, c.size, c.batch, wait, "FAILED");
      continue;
    }
    printf("%-22s %8u %5d %6s %12.0f %10.1f ", c.name, c.size, c.batch, wait, r.msgsPerSec(),
           r.mbPerSec());
    if (c.baseline != nullptr)
      printf("%9.2f  %s\n", ratio(r, rs), c.baseline);
    else
      printf("%9s\n", "-");
  }
  printf("(MB = 10^6 bytes; ratio = softrdma / raw TCP loopback, same size and batching)\n");
}

void printJson(const std::vector<Result>& rs, double seconds) {
  printf("{\"seconds_per_case\": %.3f, \"cases\": [\n", seconds);
  for (size_t i = 0; i < rs.size(); i++) {
    const Result& r = rs[i];
    const Case& c = *r.c;
    printf(
        "  {\"name\": \"%s\", \"transport\": \"%s\", \"size\": %u, \"batch\": %d, \"wait\": "
        "\"%s\", \"ok\": %s, \"messages\": %llu, \"seconds\": %.6f, \"msgs_per_s\": %.1f, "
        "\"mb_per_s\": %.3f, \"baseline\": %s%s%s, \"ratio\": %.4f}%s\n",
        c.name,
        c.transport == Transport::Tcp    ? "tcp"
        : c.transport == Transport::Send ? "send"
                                         : "write",
        c.size, c.batch, c.wait == Wait::Event ? "event" : "busy", r.ok ? "true" : "false",
        static_cast<unsigned long long>(r.messages), r.seconds, r.msgsPerSec(), r.mbPerSec(),
        c.baseline ? "\"" : "", c.baseline ? c.baseline : "null", c.baseline ? "\"" : "",
        ratio(r, rs), i + 1 < rs.size() ? "," : "");
  }
  printf("]}\n");
}

void usage() {
  fprintf(stderr,
          "usage: softrdma-bench [--seconds S] [--json] [--no-busy] [--only NAME[,NAME...]]\n"
          "Measures softrdma (RDMA over TCP) between two processes on 127.0.0.1 and raw\n"
          "TCP loopback with the same message sizes; prints messages/s, MB/s and ratios.\n"
          "cases:");
  for (const Case& c : kCases)
    fprintf(stderr, " %s", c.name);
  fprintf(stderr, "\n");
}

bool selected(const Case& c, const std::string& only, bool busy) {
  if (!busy && c.wait == Wait::Busy) return false;
  if (only.empty()) return true;
  std::string list = "," + only + ",";
  return list.find(std::string(",") + c.name + ",") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string_view(argv[1]) == "--serve") {
    const Case* c = findCase(argv[2]);
    if (c == nullptr) dieMsg("unknown case");
    int seconds = atoi(argv[4]);
    alarm(static_cast<unsigned>(seconds + 2 * kHardTimeoutExtra));  // never outlive a run
    int fd = atoi(argv[3]);
    return c->transport == Transport::Tcp ? serveTcp(fd) : serveRdma(*c, fd, seconds);
  }
  double seconds = 2.0;
  bool json = false, busy = true;
  std::string only;
  for (int i = 1; i < argc; i++) {
    std::string_view a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else if (a == "--json") {
      json = true;
    } else if (a == "--no-busy") {
      busy = false;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      usage();
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  if (seconds <= 0 || seconds > 5) {
    fprintf(stderr, "softrdma-bench: --seconds must be in (0, 5]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  std::vector<Result> results;
  for (const Case& c : kCases) {
    if (!selected(c, only, busy)) continue;
    results.push_back(runCase(c, seconds));
    if (!json) fprintf(stderr, "  %s done\n", c.name);
  }
  if (json)
    printJson(results, seconds);
  else
    printTable(results);
  for (const Result& r : results)
    if (!r.ok) return 1;
  return 0;
}
