// Test support for softrdma's fidelity suite: waiting for CM and completion events with
// deadlines, one side's verbs resources, and a fixture that connects a client QP to a server QP
// over 127.0.0.1 through the standard rdma-core API.
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace rdmamsg::test {

// Takes a QP connected without rdma_cm (the program's own exchange of QP
// numbers) to RTS toward `remoteQpn` at `gid`: the three ibv_modify_qp calls
// of every such test. 0 or the errno of the call that failed.
struct RtsOptions {
  int access = 0;               // qp_access_flags
  uint8_t maxDestRdAtomic = 0;  // responder resources
  uint8_t maxRdAtomic = 0;      // initiator depth
};
inline int manualQpToRts(ibv_qp* qp, uint32_t remoteQpn, const ibv_gid& gid,
                         const RtsOptions& o = {}) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = o.access;
  if (int rc = ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return rc;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remoteQpn;
  a.max_dest_rd_atomic = o.maxDestRdAtomic;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.hop_limit = 1;
  if (int rc = ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return rc;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = o.maxRdAtomic;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

using Millis = std::chrono::milliseconds;

// Longest wait for anything that must happen; tests fail (never hang) after it.
inline constexpr Millis kDeadline{5000};
// Observation window used to assert that something does NOT happen.
inline constexpr Millis kQuiet{150};
// Message slot size inside a side's registered buffer.
inline constexpr size_t kSlot = 4096;

bool setNonBlocking(int fd);
// poll() for POLLIN on `fd` for at most `timeout`.
bool waitReadable(int fd, Millis timeout);
sockaddr_in ipv4(const char* ip, uint16_t port);

// A CM event copied out of librdmacm's buffer (the event itself has been acked).
struct CmEvent {
  rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
  int status = 0;
  rdma_cm_id* id = nullptr;
  rdma_cm_id* listenId = nullptr;
  std::vector<uint8_t> privateData;  // exactly private_data_len bytes
  rdma_conn_param conn{};            // conn.private_data is cleared (it died with the ack)
};

// Next event of a non-blocking channel, not acked; nullptr after `timeout`.
rdma_cm_event* getRawCmEvent(rdma_event_channel* ch, Millis timeout = kDeadline);
// Next event of a non-blocking channel, copied and acked; nullopt after `timeout`.
std::optional<CmEvent> nextCmEvent(rdma_event_channel* ch, Millis timeout = kDeadline);
// The next asynchronous event of `context` (its fd made non-blocking), acked;
// nullopt after `timeout` (a failure if reading fails otherwise).
std::optional<ibv_async_event> nextAsyncEvent(ibv_context* context, Millis timeout = kDeadline);
// Like nextCmEvent, and records a test failure unless the event has type `type`.
std::optional<CmEvent> expectCmEvent(rdma_event_channel* ch, rdma_cm_event_type type,
                                     Millis timeout = kDeadline);
// A non-blocking event channel (null on failure).
rdma_event_channel* createChannel();

// Polls `cq` until `n` completions were collected or `timeout` passed.
std::vector<ibv_wc> pollCompletions(ibv_cq* cq, size_t n, Millis timeout = kDeadline);
// Polls `cq` for `window` and returns whatever arrived (used to assert "nothing").
std::vector<ibv_wc> collectFor(ibv_cq* cq, Millis window = kQuiet);
// Waits for one completion event on `ch` (non-blocking) and returns its CQ; acks nothing.
ibv_cq* getCqEvent(ibv_comp_channel* ch, Millis timeout = kDeadline);
// Opens the first verbs device (softrdma's), or null.
ibv_context* openFirstDevice();

// The first device opened, its first GID and a PD: what every test that
// builds its own QPs starts from. A subclass's SetUp calls
// DeviceFixture::SetUp() first (and returns on a fatal failure); its
// TearDown frees what it made, then calls DeviceFixture::TearDown().
class DeviceFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = openFirstDevice();
    ASSERT_NE(nullptr, context_);
    ASSERT_EQ(0, ibv_query_gid(context_, 1, 0, &gid_));
    pd_ = ibv_alloc_pd(context_);
    ASSERT_NE(nullptr, pd_);
  }
  void TearDown() override {
    if (pd_ != nullptr) {
      EXPECT_EQ(0, ibv_dealloc_pd(pd_));
    }
    if (context_ != nullptr) {
      EXPECT_EQ(0, ibv_close_device(context_));
    }
  }

  ibv_context* context_ = nullptr;
  ibv_gid gid_{};
  ibv_pd* pd_ = nullptr;
};

struct QpOptions {
  uint32_t sendWr = 64;
  uint32_t recvWr = 64;
  uint32_t sge = 4;
  uint32_t inlineData = 64;
  int sigAll = 0;
  int cqe = 512;
  size_t bufSize = 1 << 20;
};

// One side of a connection: comp channel, one CQ for both queues, PD, registered buffer, QP.
// Ownership: destroy() releases everything it holds, child objects first.
class Side {
 public:
  Side() = default;
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;
  ~Side() { destroy(); }

  // Creates the verbs objects on `cmId`'s device and the QP through rdma_create_qp.
  void create(rdma_cm_id* cmId, const QpOptions& options = {});
  void destroy();
  void destroyQp();

  uint8_t* at(size_t offset) { return buf.data() + offset; }
  uint64_t addr(size_t offset) { return reinterpret_cast<uint64_t>(at(offset)); }

  int postRecv(uint64_t wrId, size_t offset, uint32_t length);
  int postSend(uint64_t wrId, size_t offset, uint32_t length, unsigned flags = IBV_SEND_SIGNALED,
               ibv_wr_opcode opcode = IBV_WR_SEND, uint32_t immHostOrder = 0);
  int postRdma(uint64_t wrId, ibv_wr_opcode opcode, size_t offset, uint32_t length,
               uint64_t remoteAddr, uint32_t rkey, unsigned flags = IBV_SEND_SIGNALED,
               uint32_t immHostOrder = 0);
  std::vector<ibv_wc> poll(size_t n, Millis timeout = kDeadline) {
    return pollCompletions(cq, n, timeout);
  }
  // Current QP state via ibv_query_qp (or -1 if the query fails).
  int qpState();

  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* comp = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  ibv_qp* qp = nullptr;
  ibv_qp_cap cap{};
  std::vector<uint8_t> buf;
};

struct ConnectOptions {
  QpOptions clientQp;
  QpOptions serverQp;
  std::vector<uint8_t> connectData;
  std::vector<uint8_t> acceptData;
  uint8_t clientRnrRetry = 7;  // governs the SERVER's sends (rdma_connect.3)
  uint8_t serverRnrRetry = 7;  // governs the CLIENT's sends (rdma_accept.3)
  int clientRecvs = 0;         // receives posted before connecting: wr_id kRecvBase+i, slot i
  int clientAckTimeout = -1;   // >= 0: RDMA_OPTION_ID_ACK_TIMEOUT on the client id
  int serverRecvs = 0;
};
inline constexpr uint64_t kRecvBase = 1000;

// Two non-blocking event channels (client, server), a listener on 127.0.0.1 with a free port.
class CmFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Creates the client id on clientCh_ and resolves address and route to the listener.
  void resolveClient(uint16_t port = 0);
  // Full handshake with the fixture's listener; both sides end ESTABLISHED.
  void connect(const ConnectOptions& options = {});
  // Posts `n` receives of slot size on `side` (wr_id kRecvBase+i, slot i).
  static void postRecvs(Side& side, int n, int firstSlot = 0);

  rdma_event_channel* clientCh_ = nullptr;
  rdma_event_channel* serverCh_ = nullptr;
  rdma_cm_id* listenId_ = nullptr;
  uint16_t port_ = 0;
  Side client_;
  Side server_;
  CmEvent connectRequest_;
  CmEvent clientEstablished_;
};

// Active side of a connection to ip:port on `ch`: resolve, create `side`, post `recvs`
// receives (wr_id kRecvBase+i, slot i), connect, wait for ESTABLISHED.
void connectTo(rdma_event_channel* ch, Side& side, const char* ip, uint16_t port, int recvs = 0,
               const QpOptions& options = {});

// Ends the process with a message if it is still armed after `timeout`: for blocking calls
// (synchronous rdma_cm) that would otherwise hang a test until ctest's timeout.
class Watchdog {
 public:
  explicit Watchdog(Millis timeout);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog();
  // Names the blocking step in progress (reported if the deadline passes).
  void step(const char* what);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Where a peer runs: in the network namespace /run/netns/NETNS (`ip netns add`) unless empty,
// with ENV ("NAME=VALUE", or "NAME" to remove it) changing this process's environment.
struct PeerPlace {
  std::string netns;
  std::vector<std::string> env;
};

// A child process running tests/softrdma/peer_main.cc (softrdma_test_peer). The destructor
// kills and reaps it.
class PeerProcess {
 public:
  explicit PeerProcess(const std::vector<std::string>& args, const PeerPlace& place = {});
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;
  ~PeerProcess();

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Next line the child wrote to stdout (without '\n'), or nullopt after `timeout`/EOF.
  std::optional<std::string> readLine(Millis timeout = kDeadline);
  void writeLine(const std::string& line);
  void closeStdin();
  void kill(int signal);
  // Waits for the child to exit; returns its wait status or nullopt after `timeout`.
  std::optional<int> wait(Millis timeout = kDeadline);

 private:
  pid_t pid_ = -1;
  int toChild_ = -1;
  int fromChild_ = -1;
  std::string pending_;
};

}  // namespace rdmamsg::test
