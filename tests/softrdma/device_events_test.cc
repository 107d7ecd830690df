// Device events driven through softrdma's control channel (SOFTRDMA_CONTROL, softrdma-ctl):
// device removal (DEVICE_FATAL on every context, DEVICE_REMOVAL on every bound rdma_cm id, QPs
// flushed, no device until it returns, then a fresh start works) and port flaps (PORT_ERR /
// PORT_ACTIVE, ibv_query_port, connection attempts while the link is down).
//
// This program sets SOFTRDMA_CONTROL before softrdma starts, so every test has a control socket
// (one per process: "%p" is the process id). Commands go through the softrdma-ctl tool, which
// returns once the command has been carried out.
#include <arpa/inet.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "../support/wait.h"
#include "support.h"

extern char** environ;

namespace rdmamsg::test {
namespace {

std::string controlDir() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

std::string controlPath(pid_t pid) {
  return controlDir() + "/softrdma-device-test-" + std::to_string(pid) + ".sock";
}

// Before main, hence before softrdma starts (it reads SOFTRDMA_CONTROL once).
[[maybe_unused]] const bool kControlEnabled = [] {
  const std::string pattern = controlDir() + "/softrdma-device-test-%p.sock";
  return setenv("SOFTRDMA_CONTROL", pattern.c_str(), 1) == 0;
}();

// Runs softrdma-ctl PATH ARGS...; returns its exit status (-1 if it did not end in time). Its
// standard output goes to `out` when given.
int softrdmaCtl(const std::string& path, const std::vector<std::string>& args,
                std::string* out = nullptr) {
  std::vector<std::string> all = {SOFTRDMA_CTL, path};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string outPath = controlDir() + "/softrdma-ctl-out-XXXXXX";
  const int outFd = out != nullptr ? mkstemp(outPath.data()) : -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (outFd >= 0) posix_spawn_file_actions_adddup2(&actions, outFd, STDOUT_FILENO);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  if (spawned == 0 && !waitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, kDeadline)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    status = -1;
  }
  if (outFd >= 0) {
    std::ifstream in(outPath);
    out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    close(outFd);
    unlink(outPath.c_str());
  }
  if (spawned != 0 || status == -1) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int ctl(const std::string& command, const std::string& arg = "") {
  std::vector<std::string> args = {command};
  if (!arg.empty()) args.push_back(arg);
  return softrdmaCtl(controlPath(getpid()), args);
}

int deviceCount() {
  int n = -1;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return -1;
  if (n == 0) {
    EXPECT_EQ(nullptr, list[0]) << "the list is NULL-terminated";
  }
  ibv_free_device_list(list);
  return n;
}

void expectAsyncEvent(ibv_context* context, ibv_event_type type, int port) {
  auto event = nextAsyncEvent(context);
  ASSERT_TRUE(event) << "no asynchronous event, expected " << ibv_event_type_str(type);
  EXPECT_EQ(type, event->event_type) << ibv_event_type_str(event->event_type);
  EXPECT_EQ(port, event->element.port_num);
}

int portState(ibv_context* context) {
  ibv_port_attr attr{};
  const int rc = ibv_query_port(context, 1, &attr);
  return rc == 0 ? attr.state : -rc;
}

class DeviceEvents : public CmFixture {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kControlEnabled);
    ASSERT_NO_FATAL_FAILURE(CmFixture::SetUp());
    ASSERT_EQ(0, access(controlPath(getpid()).c_str(), F_OK))
        << "softrdma made no control socket at " << controlPath(getpid());
  }

  void TearDown() override {
    // Leave the device present and its port up for the next test in this process.
    if (deviceCount() == 0) {
      EXPECT_EQ(0, ctl("add-device"));
    }
    EXPECT_EQ(0, ctl("port-up"));
    CmFixture::TearDown();
  }

  // A new listener on 127.0.0.1 (any port) replaces listenId_ (which the caller destroyed or
  // kept).
  void relisten() {
    ASSERT_EQ(0, rdma_create_id(serverCh_, &listenId_, nullptr, RDMA_PS_TCP));
    sockaddr_in addr = ipv4("127.0.0.1", 0);
    ASSERT_EQ(0, rdma_bind_addr(listenId_, reinterpret_cast<sockaddr*>(&addr))) << strerror(errno);
    ASSERT_EQ(0, rdma_listen(listenId_, 64)) << strerror(errno);
    port_ = ntohs(rdma_get_src_port(listenId_));
  }

  // A full connection and one message from client to server.
  void connectAndSend() {
    ConnectOptions options;
    options.serverRecvs = 1;
    ASSERT_NO_FATAL_FAILURE(connect(options));
    memcpy(client_.at(8 * kSlot), "after the event", 15);
    ASSERT_EQ(0, client_.postSend(1, 8 * kSlot, 15));
    auto sent = client_.poll(1);
    ASSERT_EQ(1u, sent.size());
    EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status) << ibv_wc_status_str(sent[0].status);
    auto received = server_.poll(1);
    ASSERT_EQ(1u, received.size());
    EXPECT_EQ(IBV_WC_SUCCESS, received[0].status) << ibv_wc_status_str(received[0].status);
    EXPECT_EQ(15u, received[0].byte_len);
    EXPECT_EQ(0, memcmp(server_.at(0), "after the event", 15));
  }
};

TEST_F(DeviceEvents, RemovalReportsDeviceRemovalAndDeviceFatalAndFlushesThenAFreshStartWorks) {
  ConnectOptions options;
  options.clientRecvs = 4;  // flushed
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ibv_context* old = client_.id->verbs;
  EXPECT_EQ(old, server_.id->verbs);
  EXPECT_EQ(old, listenId_->verbs);
  ibv_context* own = openFirstDevice();  // a context of the program's own, beside librdmacm's
  ASSERT_NE(nullptr, own);
  ibv_device* oldDevice = own->device;
  // Outstanding work: the server posted no receive, so the client's SEND waits there (RNR,
  // retried forever), and the server's READ response queues behind it on the wire.
  ASSERT_EQ(0, client_.postSend(7, 8 * kSlot, 16));
  ASSERT_EQ(0, server_.postRdma(8, IBV_WR_RDMA_READ, 8 * kSlot, 64, client_.addr(9 * kSlot),
                                client_.mr->rkey));

  ASSERT_EQ(0, ctl("remove-device", "60000"));  // back on add-device below

  // rdma_cm: DEVICE_REMOVAL for the listener and both connected ids, and nothing after it.
  std::set<rdma_cm_id*> removedIds;
  for (int i = 0; i < 2; ++i) {
    auto event = expectCmEvent(serverCh_, RDMA_CM_EVENT_DEVICE_REMOVAL);
    ASSERT_TRUE(event);
    EXPECT_EQ(0, event->status);
    removedIds.insert(event->id);
  }
  EXPECT_EQ((std::set<rdma_cm_id*>{listenId_, server_.id}), removedIds);
  auto clientRemoval = expectCmEvent(clientCh_, RDMA_CM_EVENT_DEVICE_REMOVAL);
  ASSERT_TRUE(clientRemoval);
  EXPECT_EQ(client_.id, clientRemoval->id);
  EXPECT_FALSE(nextCmEvent(clientCh_, kQuiet)) << "no event after DEVICE_REMOVAL";
  EXPECT_FALSE(nextCmEvent(serverCh_, Millis(0))) << "no event after DEVICE_REMOVAL";

  // Verbs: DEVICE_FATAL on every context (element 0), every posted WR flushed.
  expectAsyncEvent(own, IBV_EVENT_DEVICE_FATAL, 0);
  expectAsyncEvent(old, IBV_EVENT_DEVICE_FATAL, 0);
  auto clientWcs = client_.poll(5);
  ASSERT_EQ(5u, clientWcs.size());
  std::set<uint64_t> flushed;
  for (const auto& wc : clientWcs) {
    EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status) << ibv_wc_status_str(wc.status);
    flushed.insert(wc.wr_id);
  }
  EXPECT_EQ((std::set<uint64_t>{7, kRecvBase, kRecvBase + 1, kRecvBase + 2, kRecvBase + 3}),
            flushed);
  auto serverWcs = server_.poll(1);
  ASSERT_EQ(1u, serverWcs.size());
  EXPECT_EQ(8u, serverWcs[0].wr_id);
  EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, serverWcs[0].status) << ibv_wc_status_str(serverWcs[0].status);
  ASSERT_EQ(0, client_.postSend(9, 8 * kSlot, 16)) << "posting to a QP in error flushes";
  auto late = client_.poll(1);
  ASSERT_EQ(1u, late.size());
  EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, late[0].status);

  // While absent: no device, creating resources on the old contexts fails with EIO.
  EXPECT_EQ(0, deviceCount());
  errno = 0;
  EXPECT_EQ(nullptr, ibv_open_device(oldDevice));
  EXPECT_EQ(ENODEV, errno);
  errno = 0;
  EXPECT_EQ(nullptr, ibv_alloc_pd(old));
  EXPECT_EQ(EIO, errno);
  errno = 0;
  EXPECT_EQ(nullptr, ibv_create_cq(own, 16, nullptr, nullptr, 0));
  EXPECT_EQ(EIO, errno);
  errno = 0;
  EXPECT_EQ(nullptr, ibv_create_comp_channel(old));
  EXPECT_EQ(EIO, errno);
  errno = 0;
  EXPECT_EQ(nullptr, ibv_reg_mr(client_.pd, client_.at(0), kSlot, IBV_ACCESS_LOCAL_WRITE));
  EXPECT_EQ(EIO, errno);
  EXPECT_EQ(-EIO, portState(old));
  errno = 0;
  EXPECT_EQ(-1, rdma_disconnect(client_.id)) << "the QP cannot be moved on a removed device";
  EXPECT_EQ(EIO, errno);
  EXPECT_NE(0, ctl("port-down")) << "no port without a device";
  EXPECT_NE(0, ctl("remove-device")) << "already absent";

  // New ids: a specific address has no device (ENODEV), address resolution ends in ADDR_ERROR.
  rdma_cm_id* probe = nullptr;
  ASSERT_EQ(0, rdma_create_id(clientCh_, &probe, nullptr, RDMA_PS_TCP));
  sockaddr_in local = ipv4("127.0.0.1", 0);
  errno = 0;
  EXPECT_EQ(-1, rdma_bind_addr(probe, reinterpret_cast<sockaddr*>(&local)));
  EXPECT_EQ(ENODEV, errno);
  sockaddr_in dst = ipv4("127.0.0.1", port_);
  ASSERT_EQ(0, rdma_resolve_addr(probe, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000))
      << strerror(errno);
  auto addrError = expectCmEvent(clientCh_, RDMA_CM_EVENT_ADDR_ERROR);
  ASSERT_TRUE(addrError);
  EXPECT_EQ(probe, addrError->id);
  EXPECT_EQ(-ENODEV, addrError->status);
  EXPECT_EQ(nullptr, probe->verbs);
  EXPECT_EQ(0, rdma_destroy_id(probe));

  // The program tears everything down: every destroy succeeds. The old listener is kept for now
  // (so librdmacm's old context stays open while the new one is compared with it).
  client_.destroy();
  server_.destroy();
  rdma_cm_id* staleListener = listenId_;
  listenId_ = nullptr;
  EXPECT_EQ(0, ibv_close_device(own));

  // The device is back: listed again, and a fresh start runs on a new, working context.
  ASSERT_EQ(0, ctl("add-device"));
  EXPECT_EQ(1, deviceCount());
  ASSERT_NO_FATAL_FAILURE(relisten());
  ASSERT_NO_FATAL_FAILURE(connectAndSend());
  EXPECT_NE(old, client_.id->verbs) << "a new context for the new device";
  EXPECT_EQ(listenId_->verbs, client_.id->verbs);
  EXPECT_EQ(IBV_PORT_ACTIVE, portState(client_.id->verbs));
  EXPECT_EQ(0, rdma_destroy_id(staleListener));
}

TEST_F(DeviceEvents, RemovedDeviceComesBackAfterTheGivenTime) {
  ibv_context* own = openFirstDevice();
  ASSERT_NE(nullptr, own);
  ASSERT_EQ(0, ctl("remove-device", "300"));
  expectAsyncEvent(own, IBV_EVENT_DEVICE_FATAL, 0);
  auto removal = expectCmEvent(serverCh_, RDMA_CM_EVENT_DEVICE_REMOVAL);
  ASSERT_TRUE(removal);
  EXPECT_EQ(listenId_, removal->id);
  EXPECT_TRUE(waitFor([] { return deviceCount() == 1; }, kDeadline)) << "the device came back";
  EXPECT_FALSE(nextAsyncEvent(own, Millis(0))) << "the old context reports nothing more";
  EXPECT_EQ(0, ibv_close_device(own));
  EXPECT_EQ(0, rdma_destroy_id(listenId_));
  listenId_ = nullptr;
  ASSERT_NO_FATAL_FAILURE(relisten());
  ASSERT_NO_FATAL_FAILURE(connectAndSend());
}

TEST_F(DeviceEvents, WildcardListenerIsNotRemovedAndListensOnTheReturnedDevice) {
  // A listener on 0.0.0.0 has no device (id->verbs is NULL): the kernel does not report the
  // removal to it, and it listens on the device when that returns.
  rdma_cm_id* wildcard = nullptr;
  ASSERT_EQ(0, rdma_create_id(serverCh_, &wildcard, nullptr, RDMA_PS_TCP));
  sockaddr_in any = ipv4("0.0.0.0", 0);
  ASSERT_EQ(0, rdma_bind_addr(wildcard, reinterpret_cast<sockaddr*>(&any)));
  ASSERT_EQ(0, rdma_listen(wildcard, 8));
  EXPECT_EQ(nullptr, wildcard->verbs);
  const uint16_t port = ntohs(rdma_get_src_port(wildcard));

  ASSERT_EQ(0, ctl("remove-device", "60000"));
  auto removal = expectCmEvent(serverCh_, RDMA_CM_EVENT_DEVICE_REMOVAL);
  ASSERT_TRUE(removal);
  EXPECT_EQ(listenId_, removal->id) << "only the listener bound to 127.0.0.1";
  EXPECT_FALSE(nextCmEvent(serverCh_, kQuiet));
  EXPECT_EQ(0, rdma_destroy_id(listenId_));
  listenId_ = nullptr;
  ASSERT_EQ(0, ctl("add-device"));

  ASSERT_NO_FATAL_FAILURE(resolveClient(port));
  ASSERT_NO_FATAL_FAILURE(client_.create(client_.id));
  rdma_conn_param param{};
  param.rnr_retry_count = 7;
  ASSERT_EQ(0, rdma_connect(client_.id, &param));
  auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(wildcard, request->listenId);
  EXPECT_EQ(client_.id->verbs, request->id->verbs) << "the returned device";
  ASSERT_NO_FATAL_FAILURE(server_.create(request->id));
  ASSERT_EQ(0, rdma_accept(server_.id, &param));
  EXPECT_TRUE(expectCmEvent(clientCh_, RDMA_CM_EVENT_ESTABLISHED));
  EXPECT_TRUE(expectCmEvent(serverCh_, RDMA_CM_EVENT_ESTABLISHED));
  client_.destroy();
  server_.destroy();
  EXPECT_EQ(0, rdma_destroy_id(wildcard));
}

TEST_F(DeviceEvents, PortDownAndUpRaisePortEventsAndQueryPortFollows) {
  ibv_context* own = openFirstDevice();
  ASSERT_NE(nullptr, own);
  EXPECT_EQ(IBV_PORT_ACTIVE, portState(own));

  ASSERT_EQ(0, ctl("port-down"));
  expectAsyncEvent(own, IBV_EVENT_PORT_ERR, 1);
  EXPECT_EQ(IBV_PORT_DOWN, portState(own));
  EXPECT_EQ(IBV_PORT_DOWN, portState(listenId_->verbs));
  // No link: address resolution fails (no neighbour answers).
  ASSERT_EQ(0, rdma_create_id(clientCh_, &client_.id, nullptr, RDMA_PS_TCP));
  sockaddr_in dst = ipv4("127.0.0.1", port_);
  ASSERT_EQ(0, rdma_resolve_addr(client_.id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  auto addrError = expectCmEvent(clientCh_, RDMA_CM_EVENT_ADDR_ERROR);
  ASSERT_TRUE(addrError);
  EXPECT_EQ(-ETIMEDOUT, addrError->status);
  EXPECT_EQ(0, rdma_destroy_id(client_.id));
  client_.id = nullptr;
  EXPECT_EQ(0, ctl("port-down")) << "already down: accepted, no second event";

  ASSERT_EQ(0, ctl("port-up"));
  expectAsyncEvent(own, IBV_EVENT_PORT_ACTIVE, 1);
  EXPECT_FALSE(nextAsyncEvent(own, Millis(0)));
  EXPECT_EQ(IBV_PORT_ACTIVE, portState(own));
  EXPECT_FALSE(nextCmEvent(serverCh_, Millis(0))) << "the CM reports nothing for a port flap";
  ASSERT_NO_FATAL_FAILURE(connectAndSend());
  EXPECT_EQ(0, ibv_close_device(own));
}

TEST_F(DeviceEvents, ConnectWhilePortIsDownIsUnreachable) {
  ASSERT_NO_FATAL_FAILURE(resolveClient());
  ASSERT_NO_FATAL_FAILURE(client_.create(client_.id));
  ASSERT_EQ(0, ctl("port-down"));
  rdma_conn_param param{};
  param.rnr_retry_count = 7;
  ASSERT_EQ(0, rdma_connect(client_.id, &param));
  auto event = expectCmEvent(clientCh_, RDMA_CM_EVENT_UNREACHABLE, Millis(10000));
  ASSERT_TRUE(event);
  EXPECT_EQ(-ETIMEDOUT, event->status);
  EXPECT_FALSE(nextCmEvent(serverCh_, Millis(0))) << "no request reached the listener";
}

TEST_F(DeviceEvents, PortDownBreaksEstablishedConnectionsLikeALostPeer) {
  ConnectOptions options;
  options.serverRecvs = 2;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ASSERT_EQ(0, ctl("port-down"));
  auto clientDisconnected = expectCmEvent(clientCh_, RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_TRUE(clientDisconnected);
  EXPECT_EQ(client_.id, clientDisconnected->id);
  auto serverDisconnected = expectCmEvent(serverCh_, RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_TRUE(serverDisconnected);
  EXPECT_EQ(server_.id, serverDisconnected->id);
  ASSERT_EQ(0, rdma_disconnect(server_.id));
  auto flushed = server_.poll(2);
  ASSERT_EQ(2u, flushed.size());
  for (const auto& wc : flushed)
    EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status) << ibv_wc_status_str(wc.status);
  ASSERT_EQ(0, rdma_disconnect(client_.id));
}

TEST_F(DeviceEvents, PortDownKeepLeavesEstablishedConnectionsAlone) {
  ConnectOptions options;
  options.serverRecvs = 1;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ASSERT_EQ(0, ctl("port-down", "keep"));
  ASSERT_EQ(0, client_.postSend(1, 8 * kSlot, 8));
  auto sent = client_.poll(1);
  ASSERT_EQ(1u, sent.size());
  EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status) << ibv_wc_status_str(sent[0].status);
  EXPECT_EQ(1u, server_.poll(1).size());
  EXPECT_FALSE(nextCmEvent(clientCh_, kQuiet));
  EXPECT_FALSE(nextCmEvent(serverCh_, Millis(0)));
}

TEST_F(DeviceEvents, RemovingThePeersDeviceLooksLikeADeadPeer) {
  // The peer process inherits SOFTRDMA_CONTROL: it has a control socket of its own.
  PeerProcess peer({"connect", "127.0.0.1", std::to_string(port_), "hang"});
  ASSERT_TRUE(peer.started());
  auto request = expectCmEvent(serverCh_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NO_FATAL_FAILURE(server_.create(request->id));
  ASSERT_NO_FATAL_FAILURE(postRecvs(server_, 3));
  rdma_conn_param param{};
  param.rnr_retry_count = 7;
  ASSERT_EQ(0, rdma_accept(server_.id, &param));
  EXPECT_TRUE(expectCmEvent(serverCh_, RDMA_CM_EVENT_ESTABLISHED));
  ASSERT_EQ("established", peer.readLine());

  const std::string peerControl = controlPath(peer.pid());
  EXPECT_EQ(0, softrdmaCtl(peerControl, {"remove-device", "60000"}));
  auto disconnected = expectCmEvent(serverCh_, RDMA_CM_EVENT_DISCONNECTED);
  ASSERT_TRUE(disconnected);
  EXPECT_EQ(server_.id, disconnected->id);
  ASSERT_EQ(0, rdma_disconnect(server_.id));
  auto flushed = server_.poll(3);
  ASSERT_EQ(3u, flushed.size());
  for (const auto& wc : flushed)
    EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status) << ibv_wc_status_str(wc.status);
  peer.kill(SIGKILL);
  EXPECT_TRUE(peer.wait());
  unlink(peerControl.c_str());  // killed: it could not remove its socket
}

TEST(DeviceControl, SoftrdmaCtlFailsWithoutSocketAndOnUnknownCommands) {
  EXPECT_EQ(1, softrdmaCtl(controlDir() + "/softrdma-no-such-socket", {"port-up"}));
  ASSERT_EQ(1, deviceCount());  // starts softrdma, hence the control socket
  EXPECT_EQ(1, ctl("reboot"));
  EXPECT_EQ(1, ctl("remove-device", "soon"));
  EXPECT_EQ(1, ctl("add-device")) << "the device is present";
  EXPECT_EQ(0, ctl("port-up")) << "already up: nothing to do";
}

// This process's device counters, read with `softrdma-ctl PATH counters`.
std::map<std::string, uint64_t> counters() {
  std::string out;
  EXPECT_EQ(0, softrdmaCtl(controlPath(getpid()), {"counters"}, &out));
  std::map<std::string, uint64_t> values;
  std::istringstream lines(out);
  std::string name;
  uint64_t value = 0;
  while (lines >> name >> value)
    values[name] = value;
  return values;
}

class Counters : public DeviceEvents {};

TEST_F(Counters, ListsTheRxeNamesStartingAtZero) {
  auto values = counters();
  for (const char* name : {"send_rnr_err", "retry_rnr_exceeded_err", "retry_exceeded_err",
                           "link_downed", "rdma_sends", "rdma_recvs"}) {
    ASSERT_TRUE(values.count(name)) << name << " missing";
    EXPECT_EQ(0u, values[name]) << name << ": nothing has happened in this process yet";
  }
}

TEST_F(Counters, ASendWithoutAReceiveCountsSendRnrErrUntilOneIsPosted) {
  ConnectOptions options;
  options.serverRnrRetry = 7;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ASSERT_EQ(0, client_.postSend(1, 0, 8));
  ASSERT_TRUE(waitFor([] { return counters()["send_rnr_err"] >= 2; }, kDeadline))
      << "the responder retries every min_rnr_timer, each time an RNR NAK";
  ASSERT_EQ(0, server_.postRecv(2, 0, kSlot));
  ASSERT_EQ(1u, server_.poll(1).size());
  ASSERT_EQ(1u, client_.poll(1).size());
  auto values = counters();
  EXPECT_EQ(1u, values["rdma_sends"]);
  EXPECT_EQ(1u, values["rdma_recvs"]);
  EXPECT_EQ(0u, values["retry_rnr_exceeded_err"]);
}

TEST_F(Counters, RnrRetriesExhaustedCountRetryRnrExceededErr) {
  ConnectOptions options;
  options.serverRnrRetry = 0;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ASSERT_EQ(0, client_.postSend(1, 0, 8));
  auto wcs = client_.poll(1);
  ASSERT_EQ(1u, wcs.size());
  ASSERT_EQ(IBV_WC_RNR_RETRY_EXC_ERR, wcs[0].status);
  auto values = counters();
  EXPECT_EQ(1u, values["retry_rnr_exceeded_err"]);
  EXPECT_EQ(1u, values["send_rnr_err"]);
  EXPECT_EQ(0u, values["rdma_sends"]);
}

TEST_F(Counters, ALostPeerCountsRetryExceededErrAndPortDownLinkDowned) {
  ConnectOptions options;
  options.serverRecvs = 1;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  ASSERT_EQ(0, ctl("port-down"));
  EXPECT_EQ(1u, counters()["link_downed"]);
  ASSERT_TRUE(expectCmEvent(clientCh_, RDMA_CM_EVENT_DISCONNECTED));
  ASSERT_EQ(0, client_.postSend(1, 0, 8));
  auto wcs = client_.poll(1);
  ASSERT_EQ(1u, wcs.size());
  EXPECT_EQ(IBV_WC_RETRY_EXC_ERR, wcs[0].status) << ibv_wc_status_str(wcs[0].status);
  EXPECT_EQ(1u, counters()["retry_exceeded_err"]);
}

}  // namespace
}  // namespace rdmamsg::test
