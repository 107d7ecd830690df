// Test support for softrdma's fidelity suite (see support.h).
#include "support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "../support/wait.h"

namespace rdmamsg::test {

namespace {

using Clock = std::chrono::steady_clock;

Millis remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  return left.count() > 0 ? left : Millis(0);
}

}  // namespace

bool setNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

bool waitReadable(int fd, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    const int n = poll(&pfd, 1, static_cast<int>(remaining(deadline).count()));
    if (n > 0) return (pfd.revents & POLLIN) != 0;
    if (n == 0 || errno != EINTR) return false;
  }
}

sockaddr_in ipv4(const char* ip, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, ip, &addr.sin_addr);
  return addr;
}

rdma_event_channel* createChannel() {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch != nullptr && !setNonBlocking(ch->fd)) {
    rdma_destroy_event_channel(ch);
    return nullptr;
  }
  return ch;
}

rdma_cm_event* getRawCmEvent(rdma_event_channel* ch, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(ch, &event) == 0) return event;
    if (errno != EAGAIN) {
      ADD_FAILURE() << "rdma_get_cm_event: " << strerror(errno);
      return nullptr;
    }
    if (remaining(deadline).count() == 0) return nullptr;
    waitReadable(ch->fd, remaining(deadline));
  }
}

std::optional<ibv_async_event> nextAsyncEvent(ibv_context* context, Millis timeout) {
  EXPECT_TRUE(setNonBlocking(context->async_fd));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ibv_async_event event{};
    if (ibv_get_async_event(context, &event) == 0) {
      ibv_ack_async_event(&event);
      return event;
    }
    if (errno != EAGAIN) {
      ADD_FAILURE() << "ibv_get_async_event: " << strerror(errno);
      return std::nullopt;
    }
    const auto left =
        std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    waitReadable(context->async_fd, left);
  }
}

std::optional<CmEvent> nextCmEvent(rdma_event_channel* ch, Millis timeout) {
  rdma_cm_event* raw = getRawCmEvent(ch, timeout);
  if (raw == nullptr) return std::nullopt;
  CmEvent event;
  event.type = raw->event;
  event.status = raw->status;
  event.id = raw->id;
  event.listenId = raw->listen_id;
  event.conn = raw->param.conn;
  const auto* data = static_cast<const uint8_t*>(raw->param.conn.private_data);
  if (data != nullptr) event.privateData.assign(data, data + raw->param.conn.private_data_len);
  event.conn.private_data = nullptr;
  EXPECT_EQ(0, rdma_ack_cm_event(raw));
  return event;
}

std::optional<CmEvent> expectCmEvent(rdma_event_channel* ch, rdma_cm_event_type type,
                                     Millis timeout) {
  auto event = nextCmEvent(ch, timeout);
  if (!event) {
    ADD_FAILURE() << "no CM event within " << timeout.count() << " ms, expected "
                  << rdma_event_str(type);
  } else if (event->type != type) {
    ADD_FAILURE() << "CM event " << rdma_event_str(event->type) << " (status " << event->status
                  << "), expected " << rdma_event_str(type);
  }
  return event;
}

std::vector<ibv_wc> pollCompletions(ibv_cq* cq, size_t n, Millis timeout) {
  std::vector<ibv_wc> out;
  waitFor(
      [&] {
        ibv_wc wc[32];
        for (int got = 1; got > 0 && out.size() < n;) {
          got = ibv_poll_cq(cq, static_cast<int>(std::min<size_t>(32, n - out.size())), wc);
          if (got < 0) ADD_FAILURE() << "ibv_poll_cq returned " << got;
          out.insert(out.end(), wc, wc + std::max(got, 0));
        }
        return out.size() >= n;
      },
      timeout);
  return out;
}

std::vector<ibv_wc> collectFor(ibv_cq* cq, Millis window) {
  return pollCompletions(cq, SIZE_MAX, window);
}

ibv_cq* getCqEvent(ibv_comp_channel* ch, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(ch, &cq, &context) == 0) return cq;
    if (errno != EAGAIN) {
      ADD_FAILURE() << "ibv_get_cq_event: " << strerror(errno);
      return nullptr;
    }
    if (remaining(deadline).count() == 0) return nullptr;
    waitReadable(ch->fd, remaining(deadline));
  }
}

ibv_context* openFirstDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return nullptr;
  ibv_context* context = n > 0 ? ibv_open_device(list[0]) : nullptr;
  ibv_free_device_list(list);
  return context;
}

// --- Side ---------------------------------------------------------------------------------------

void Side::create(rdma_cm_id* cmId, const QpOptions& options) {
  id = cmId;
  ASSERT_NE(nullptr, id->verbs) << "the id has no device yet";
  pd = ibv_alloc_pd(id->verbs);
  ASSERT_NE(nullptr, pd);
  comp = ibv_create_comp_channel(id->verbs);
  ASSERT_NE(nullptr, comp);
  ASSERT_TRUE(setNonBlocking(comp->fd));
  cq = ibv_create_cq(id->verbs, options.cqe, this, comp, 0);
  ASSERT_NE(nullptr, cq);
  buf.assign(options.bufSize, 0);
  mr = ibv_reg_mr(pd, buf.data(), buf.size(),
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(nullptr, mr);
  ibv_qp_init_attr attr{};
  attr.send_cq = cq;
  attr.recv_cq = cq;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = options.sigAll;
  attr.cap.max_send_wr = options.sendWr;
  attr.cap.max_recv_wr = options.recvWr;
  attr.cap.max_send_sge = options.sge;
  attr.cap.max_recv_sge = options.sge;
  attr.cap.max_inline_data = options.inlineData;
  ASSERT_EQ(0, rdma_create_qp(id, pd, &attr)) << strerror(errno);
  qp = id->qp;
  ASSERT_NE(nullptr, qp);
  cap = attr.cap;
}

void Side::destroyQp() {
  if (qp != nullptr) rdma_destroy_qp(id);
  qp = nullptr;
}

void Side::destroy() {
  destroyQp();
  if (mr != nullptr) {
    EXPECT_EQ(0, ibv_dereg_mr(mr));
  }
  if (cq != nullptr) {
    EXPECT_EQ(0, ibv_destroy_cq(cq));
  }
  if (comp != nullptr) {
    EXPECT_EQ(0, ibv_destroy_comp_channel(comp));
  }
  if (pd != nullptr) {
    EXPECT_EQ(0, ibv_dealloc_pd(pd));
  }
  if (id != nullptr) {
    EXPECT_EQ(0, rdma_destroy_id(id));
  }
  mr = nullptr;
  cq = nullptr;
  comp = nullptr;
  pd = nullptr;
  id = nullptr;
}

int Side::postRecv(uint64_t wrId, size_t offset, uint32_t length) {
  ibv_sge sge{addr(offset), length, mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &wr, &bad);
}

int Side::postSend(uint64_t wrId, size_t offset, uint32_t length, unsigned flags,
                   ibv_wr_opcode opcode, uint32_t immHostOrder) {
  return postRdma(wrId, opcode, offset, length, 0, 0, flags, immHostOrder);
}

int Side::postRdma(uint64_t wrId, ibv_wr_opcode opcode, size_t offset, uint32_t length,
                   uint64_t remoteAddr, uint32_t rkey, unsigned flags, uint32_t immHostOrder) {
  ibv_sge sge{addr(offset), length, mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = flags;
  wr.imm_data = htonl(immHostOrder);
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

int Side::qpState() {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (qp == nullptr || ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) != 0) return -1;
  return attr.qp_state;
}

// --- CmFixture ----------------------------------------------------------------------------------

void CmFixture::SetUp() {
  clientCh_ = createChannel();
  serverCh_ = createChannel();
  ASSERT_NE(nullptr, clientCh_);
  ASSERT_NE(nullptr, serverCh_);
  ASSERT_EQ(0, rdma_create_id(serverCh_, &listenId_, nullptr, RDMA_PS_TCP));
  sockaddr_in any = ipv4("127.0.0.1", 0);
  ASSERT_EQ(0, rdma_bind_addr(listenId_, reinterpret_cast<sockaddr*>(&any))) << strerror(errno);
  ASSERT_EQ(0, rdma_listen(listenId_, 64)) << strerror(errno);
  port_ = ntohs(rdma_get_src_port(listenId_));
  ASSERT_NE(0, port_);
}

void CmFixture::TearDown() {
  client_.destroy();
  server_.destroy();
  if (listenId_ != nullptr) {
    EXPECT_EQ(0, rdma_destroy_id(listenId_));
  }
  if (clientCh_ != nullptr) rdma_destroy_event_channel(clientCh_);
  if (serverCh_ != nullptr) rdma_destroy_event_channel(serverCh_);
}

void CmFixture::resolveClient(uint16_t port) {
  ASSERT_EQ(0, rdma_create_id(clientCh_, &client_.id, nullptr, RDMA_PS_TCP));
  sockaddr_in dst = ipv4("127.0.0.1", port != 0 ? port : port_);
  ASSERT_EQ(0, rdma_resolve_addr(client_.id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000))
      << strerror(errno);
  auto addr = expectCmEvent(clientCh_, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_TRUE(addr && addr->type == RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_EQ(client_.id, addr->id);
  ASSERT_EQ(0, rdma_resolve_route(client_.id, 2000)) << strerror(errno);
  auto route = expectCmEvent(clientCh_, RDMA_CM_EVENT_ROUTE_RESOLVED);
  ASSERT_TRUE(route && route->type == RDMA_CM_EVENT_ROUTE_RESOLVED);
}

void CmFixture::postRecvs(Side& side, int n, int firstSlot) {
  for (int i = firstSlot; i < firstSlot + n; ++i) {
    ASSERT_EQ(0, side.postRecv(kRecvBase + i, i * kSlot, kSlot));
  }
}

void CmFixture::connect(const ConnectOptions& options) {
  ASSERT_NO_FATAL_FAILURE(resolveClient());
  ASSERT_NO_FATAL_FAILURE(client_.create(client_.id, options.clientQp));
  ASSERT_NO_FATAL_FAILURE(postRecvs(client_, options.clientRecvs));
  if (options.clientAckTimeout >= 0) {
    auto timeout = static_cast<uint8_t>(options.clientAckTimeout);
    ASSERT_EQ(0, rdma_set_option(client_.id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
                                 sizeof timeout));
  }
  rdma_conn_param param{};
  param.private_data = options.connectData.data();
  param.private_data_len = static_cast<uint8_t>(options.connectData.size());
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = options.clientRnrRetry;
  ASSERT_EQ(0, rdma_connect(client_.id, &param)) << strerror(errno);

  auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST);
  connectRequest_ = *request;
  ASSERT_NO_FATAL_FAILURE(server_.create(request->id, options.serverQp));
  ASSERT_NO_FATAL_FAILURE(postRecvs(server_, options.serverRecvs));
  rdma_conn_param accept{};
  accept.private_data = options.acceptData.data();
  accept.private_data_len = static_cast<uint8_t>(options.acceptData.size());
  accept.responder_resources = 1;
  accept.initiator_depth = 1;
  accept.rnr_retry_count = options.serverRnrRetry;
  ASSERT_EQ(0, rdma_accept(server_.id, &accept)) << strerror(errno);

  auto established = expectCmEvent(clientCh_, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_TRUE(established && established->type == RDMA_CM_EVENT_ESTABLISHED);
  clientEstablished_ = *established;
  auto serverEstablished = expectCmEvent(serverCh_, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_TRUE(serverEstablished && serverEstablished->type == RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_EQ(server_.id, serverEstablished->id);
}

void connectTo(rdma_event_channel* ch, Side& side, const char* ip, uint16_t port, int recvs,
               const QpOptions& options) {
  ASSERT_EQ(0, rdma_create_id(ch, &side.id, nullptr, RDMA_PS_TCP));
  sockaddr_in dst = ipv4(ip, port);
  ASSERT_EQ(0, rdma_resolve_addr(side.id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000))
      << strerror(errno);
  auto addr = expectCmEvent(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_TRUE(addr && addr->type == RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_EQ(0, rdma_resolve_route(side.id, 2000)) << strerror(errno);
  auto route = expectCmEvent(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  ASSERT_TRUE(route && route->type == RDMA_CM_EVENT_ROUTE_RESOLVED);
  ASSERT_NO_FATAL_FAILURE(side.create(side.id, options));
  for (int i = 0; i < recvs; ++i)
    ASSERT_EQ(0, side.postRecv(kRecvBase + i, i * kSlot, kSlot));
  rdma_conn_param param{};
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  ASSERT_EQ(0, rdma_connect(side.id, &param)) << strerror(errno);
  auto established = expectCmEvent(ch, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_TRUE(established && established->type == RDMA_CM_EVENT_ESTABLISHED);
}

// --- Watchdog -----------------------------------------------------------------------------------

struct Watchdog::State {
  std::mutex mu;
  std::condition_variable cv;
  bool disarmed = false;
  std::string step = "start";
};

Watchdog::Watchdog(Millis timeout) : state_(std::make_shared<State>()) {
  std::thread([state = state_, timeout] {
    std::unique_lock lock(state->mu);
    if (!state->cv.wait_for(lock, timeout, [&] { return state->disarmed; })) {
      std::fprintf(stderr, "FATAL: blocked in '%s' for more than %lld ms\n", state->step.c_str(),
                   static_cast<long long>(timeout.count()));
      std::fflush(stderr);
      std::_Exit(1);
    }
  }).detach();
}

Watchdog::~Watchdog() {
  std::lock_guard lock(state_->mu);
  state_->disarmed = true;
  state_->cv.notify_all();
}

void Watchdog::step(const char* what) {
  std::lock_guard lock(state_->mu);
  state_->step = what;
}

// --- PeerProcess --------------------------------------------------------------------------------

namespace {

// This process's environment with `changes` ("NAME=VALUE" sets, "NAME" removes) applied.
std::vector<std::string> changedEnvironment(const std::vector<std::string>& changes) {
  std::vector<std::string> env;
  auto nameOf = [](const std::string& v) { return v.substr(0, v.find('=')); };
  for (char** e = environ; *e != nullptr; ++e) {
    std::string v = *e;
    bool replaced = false;
    for (const auto& c : changes)
      replaced |= nameOf(c) == nameOf(v);
    if (!replaced) env.push_back(v);
  }
  for (const auto& c : changes)
    if (c.find('=') != std::string::npos) env.push_back(c);
  return env;
}

}  // namespace

PeerProcess::PeerProcess(const std::vector<std::string>& args, const PeerPlace& place) {
  // Everything the child needs is made before fork: it only calls async-signal-safe functions.
  int netnsFd = -1;
  if (!place.netns.empty()) {
    netnsFd = open(("/run/netns/" + place.netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (netnsFd < 0) return;
  }
  int in[2];
  int out[2];
  if (pipe2(in, O_CLOEXEC) != 0) {
    if (netnsFd >= 0) close(netnsFd);
    return;
  }
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    if (netnsFd >= 0) close(netnsFd);
    return;
  }
  std::vector<char*> argv;
  std::string path = SOFTRDMA_TEST_PEER;
  argv.push_back(path.data());
  std::vector<std::string> copy = args;
  for (auto& arg : copy)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> envCopy = changedEnvironment(place.env);
  std::vector<char*> envp;
  for (auto& v : envCopy)
    envp.push_back(v.data());
  envp.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    if (netnsFd >= 0 && setns(netnsFd, CLONE_NEWNET) != 0) _exit(126);
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    close_range(3, ~0U, 0);  // the child starts its own softrdma; it inherits nothing else
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  if (netnsFd >= 0) close(netnsFd);
  close(in[0]);
  close(out[1]);
  toChild_ = in[1];
  fromChild_ = out[0];
  setNonBlocking(fromChild_);
}

PeerProcess::~PeerProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (toChild_ >= 0) close(toChild_);
  if (fromChild_ >= 0) close(fromChild_);
}

std::optional<std::string> PeerProcess::readLine(Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto newline = pending_.find('\n');
    if (newline != std::string::npos) {
      std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      return line;
    }
    char chunk[256];
    const ssize_t n = read(fromChild_, chunk, sizeof chunk);
    if (n > 0) {
      pending_.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) return std::nullopt;
    if (remaining(deadline).count() == 0) return std::nullopt;
    waitReadable(fromChild_, remaining(deadline));
  }
}

void PeerProcess::writeLine(const std::string& line) {
  const std::string data = line + "\n";
  EXPECT_EQ(static_cast<ssize_t>(data.size()), write(toChild_, data.data(), data.size()));
}

void PeerProcess::closeStdin() {
  if (toChild_ >= 0) close(toChild_);
  toChild_ = -1;
}

void PeerProcess::kill(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

std::optional<int> PeerProcess::wait(Millis timeout) {
  int status = 0;
  const bool exited = waitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout);
  if (!exited) return std::nullopt;
  pid_ = -1;
  return status;
}

}  // namespace rdmamsg::test
