// One device per interface (SOFTRDMA_DEVICES), as rxe puts one over each netdev: the devices and
// their GID tables, rdma_cm choosing the device that holds an address, ports that follow their
// interface's link (PORT_ERR / PORT_ACTIVE), connections over a device whose link goes down
// failing while those over the other device carry on, and RDMA_CM_EVENT_ADDR_CHANGE on the ids
// over an interface whose hardware address changes.
//
// The process moves to a network namespace of its own before main (before softrdma starts and
// before any thread exists), with SOFTRDMA_DEVICES=rr0,rr1. Each test makes a second namespace
// for the peers, and two veth pairs between the two: rr0 (198.51.100.1) - rp0 (198.51.100.2) and
// rr1 (203.0.113.1) - rp1 (203.0.113.2), documentation addresses. TearDown stops the peers and
// deletes the peers' namespace, which takes the veth pairs with it; this process's namespace
// ends with the process.
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../support/wait.h"
#include "support.h"

extern char** environ;

namespace rdmamsg::test {
namespace {

// Before main: a network namespace of this process's own, and its devices. Empty, or why the
// namespace could not be made (the tests are skipped then).
const std::string kNamespaceError = [] {
  if (unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + strerror(errno);
  setenv("SOFTRDMA_DEVICES", "rr0,rr1", 1);
  return std::string();
}();

// Runs a command through /bin/sh, output discarded; its exit status, or -1 if it did not end
// within the deadline (it is killed then).
int run(const std::string& command) {
  const std::string line = command + " >/dev/null 2>&1";
  const char* argv[] = {"/bin/sh", "-c", line.c_str(), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, const_cast<char**>(argv), environ) != 0)
    return -1;
  int status = 0;
  if (!waitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, kDeadline)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Whether interface `ifname` of network namespace `netns` (this thread's if empty) is up and
// running, as SIOCGIFFLAGS tells.
bool linkRunning(const std::string& netns, const char* ifname) {
  bool running = false;
  auto query = [&] {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq r{};
    std::strncpy(r.ifr_name, ifname, sizeof r.ifr_name - 1);
    running = s >= 0 && ioctl(s, SIOCGIFFLAGS, &r) == 0 && (r.ifr_flags & IFF_RUNNING) != 0;
    if (s >= 0) close(s);
  };
  if (netns.empty()) {
    query();
    return running;
  }
  // Another namespace: from a thread of its own that enters it (setns affects that thread only).
  std::thread([&] {
    int fd = open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && setns(fd, CLONE_NEWNET) == 0) query();
    if (fd >= 0) close(fd);
  }).join();
  return running;
}

std::string gidString(const ibv_gid& g) {
  char s[64];
  inet_ntop(AF_INET6, g.raw, s, sizeof s);
  return s;
}

ibv_port_state portState(ibv_context* context) {
  ibv_port_attr attr{};
  EXPECT_EQ(0, ibv_query_port(context, 1, &attr));
  return attr.state;
}

class Devices : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kNamespaceError.empty()) GTEST_SKIP() << "no network namespace: " << kNamespaceError;
    netns_ = "rdmamsg-devices-" + std::to_string(getpid());
    ASSERT_EQ(0, run("ip link set lo up"));
    ASSERT_EQ(0, run("ip netns add " + netns_));
    namespaceMade_ = true;
    ASSERT_EQ(0, run("ip -n " + netns_ + " link set lo up"));
    const char* nets[] = {"198.51.100", "203.0.113"};
    for (int i = 0; i < 2; i++) {
      const std::string rr = "rr" + std::to_string(i), rp = "rp" + std::to_string(i);
      ASSERT_EQ(0, run("ip link add " + rr + " type veth peer name " + rp + " netns " + netns_));
      ASSERT_EQ(0, run("ip addr add " + std::string(nets[i]) + ".1/24 dev " + rr));
      ASSERT_EQ(0, run("ip -n " + netns_ + " addr add " + nets[i] + ".2/24 dev " + rp));
      ASSERT_EQ(0, run("ip link set " + rr + " up"));
      ASSERT_EQ(0, run("ip -n " + netns_ + " link set " + rp + " up"));
    }
    // The links are running on both ends (the kernel makes a veth's operational state UP a
    // moment after its carrier) before softrdma, here or in a peer, first looks at them.
    for (const char* ifname : {"rr0", "rr1"})
      ASSERT_TRUE(waitFor([&] { return linkRunning("", ifname); })) << ifname;
    for (const char* ifname : {"rp0", "rp1"})
      ASSERT_TRUE(waitFor([&] { return linkRunning(netns_, ifname); })) << ifname;
  }

  void TearDown() override {
    peers_.clear();
    if (namespaceMade_) {
      EXPECT_EQ(0, run("ip netns del " + netns_));
    }
    run("ip link del rr0");  // gone with the peers' ends already, normally
    run("ip link del rr1");
  }

  // A peer in the peers' namespace with its own devices over rp0 and rp1.
  PeerProcess& peer(const std::vector<std::string>& args) {
    peers_.push_back(
        std::make_unique<PeerProcess>(args, PeerPlace{netns_, {"SOFTRDMA_DEVICES=rp0,rp1"}}));
    return *peers_.back();
  }

  // A listening peer on `ip`: its port.
  uint16_t listeningPeer(const char* ip) {
    PeerProcess& p = peer({"listen", ip, "0"});
    auto line = p.readLine();
    EXPECT_TRUE(line && line->rfind("listening ", 0) == 0) << (line ? *line : "no line");
    return line && line->rfind("listening ", 0) == 0
               ? static_cast<uint16_t>(std::stoi(line->substr(10)))
               : 0;
  }

  std::string netns_;
  bool namespaceMade_ = false;
  std::vector<std::unique_ptr<PeerProcess>> peers_;
};

// The devices, opened; closed at the end of the test.
struct OpenDevices {
  OpenDevices() {
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr) return;
    for (int i = 0; i < count; i++) {
      names.push_back(ibv_get_device_name(list[i]));
      indexes.push_back(ibv_get_device_index(list[i]));
      guids.push_back(ibv_get_device_guid(list[i]));
      contexts.push_back(ibv_open_device(list[i]));
    }
    ibv_free_device_list(list);
  }
  ~OpenDevices() {
    for (ibv_context* c : contexts)
      if (c != nullptr) ibv_close_device(c);
  }
  int count = 0;
  std::vector<std::string> names;
  std::vector<int> indexes;
  std::vector<__be64> guids;
  std::vector<ibv_context*> contexts;
};

TEST_F(Devices, OneDevicePerInterfaceEachWithItsAddresses) {
  OpenDevices d;
  ASSERT_EQ(2, d.count);
  EXPECT_EQ("softrdma0", d.names[0]);
  EXPECT_EQ("softrdma1", d.names[1]);
  EXPECT_EQ(0, d.indexes[0]);
  EXPECT_EQ(1, d.indexes[1]);
  EXPECT_NE(d.guids[0], d.guids[1]);
  const char* gids[] = {"::ffff:198.51.100.1", "::ffff:203.0.113.1"};
  for (int i = 0; i < 2; i++) {
    ASSERT_NE(nullptr, d.contexts[i]);
    ibv_port_attr port{};
    ASSERT_EQ(0, ibv_query_port(d.contexts[i], 1, &port));
    EXPECT_EQ(IBV_PORT_ACTIVE, port.state);
    EXPECT_EQ(2, port.gid_tbl_len) << "its interface's one address, and the empty entry";
    ibv_gid gid{};
    ASSERT_EQ(0, ibv_query_gid(d.contexts[i], 1, 0, &gid));
    EXPECT_EQ(gids[i], gidString(gid));
    ibv_gid_entry entry{};
    ASSERT_EQ(0, ibv_query_gid_ex(d.contexts[i], 1, 0, &entry, 0));
    EXPECT_EQ(if_nametoindex(i == 0 ? "rr0" : "rr1"), entry.ndev_ifindex);
    EXPECT_EQ(ENODATA, ibv_query_gid_ex(d.contexts[i], 1, 1, &entry, 0));
  }
  // A second address shows in its interface's table only.
  ASSERT_EQ(0, run("ip addr add 198.51.100.7/24 dev rr0"));
  ibv_port_attr port{};
  ASSERT_EQ(0, ibv_query_port(d.contexts[0], 1, &port));
  EXPECT_EQ(3, port.gid_tbl_len);
  ASSERT_EQ(0, ibv_query_port(d.contexts[1], 1, &port));
  EXPECT_EQ(2, port.gid_tbl_len);
}

TEST_F(Devices, RdmaCmTakesTheDeviceThatHoldsTheAddress) {
  rdma_event_channel* ch = createChannel();
  ASSERT_NE(nullptr, ch);
  const char* peers[] = {"198.51.100.2", "203.0.113.2"};
  for (int i = 0; i < 2; i++) {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(0, rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP));
    sockaddr_in dst = ipv4(peers[i], 7471);
    ASSERT_EQ(0, rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
    auto ev = expectCmEvent(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_TRUE(ev && ev->type == RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_NE(nullptr, id->verbs);
    EXPECT_EQ("softrdma" + std::to_string(i), ibv_get_device_name(id->verbs->device)) << peers[i];
    EXPECT_EQ(0, rdma_destroy_id(id));
  }
  // A bound address: its device; an address no listed interface holds (lo's): none.
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(0, rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP));
  sockaddr_in src = ipv4("203.0.113.1", 0);
  ASSERT_EQ(0, rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&src)));
  ASSERT_NE(nullptr, id->verbs);
  EXPECT_STREQ("softrdma1", ibv_get_device_name(id->verbs->device));
  EXPECT_EQ(0, rdma_destroy_id(id));
  ASSERT_EQ(0, rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP));
  sockaddr_in lo = ipv4("127.0.0.1", 0);
  EXPECT_EQ(-1, rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&lo)));
  EXPECT_EQ(ENODEV, errno);
  EXPECT_EQ(0, rdma_destroy_id(id));
  int n = 0;
  ibv_context** contexts = rdma_get_devices(&n);
  ASSERT_NE(nullptr, contexts);
  EXPECT_EQ(2, n);
  rdma_free_devices(contexts);
  rdma_destroy_event_channel(ch);
}

TEST_F(Devices, WildcardListenerGetsEachRequestOnTheDeviceOfItsDestination) {
  rdma_event_channel* ch = createChannel();
  ASSERT_NE(nullptr, ch);
  rdma_cm_id* listener = nullptr;
  ASSERT_EQ(0, rdma_create_id(ch, &listener, nullptr, RDMA_PS_TCP));
  sockaddr_in any = ipv4("0.0.0.0", 0);
  ASSERT_EQ(0, rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&any)));
  ASSERT_EQ(0, rdma_listen(listener, 8));
  const std::string port = std::to_string(ntohs(rdma_get_src_port(listener)));
  const char* targets[] = {"198.51.100.1", "203.0.113.1"};
  for (int i = 0; i < 2; i++) {
    peer({"connect", targets[i], port, "hang"});
    rdma_cm_event* ev = getRawCmEvent(ch);
    ASSERT_NE(nullptr, ev) << "no CONNECT_REQUEST for " << targets[i];
    EXPECT_EQ(RDMA_CM_EVENT_CONNECT_REQUEST, ev->event);
    ASSERT_NE(nullptr, ev->id->verbs);
    EXPECT_EQ("softrdma" + std::to_string(i), ibv_get_device_name(ev->id->verbs->device));
    rdma_cm_id* request = ev->id;
    EXPECT_EQ(0, rdma_reject(request, nullptr, 0));
    rdma_ack_cm_event(ev);
    EXPECT_EQ(0, rdma_destroy_id(request));
  }
  EXPECT_EQ(0, rdma_destroy_id(listener));
  rdma_destroy_event_channel(ch);
}

TEST_F(Devices, PortFollowsItsInterfaceLinkWithPortErrAndPortActive) {
  OpenDevices d;
  ASSERT_EQ(2, d.count);
  ASSERT_EQ(0, run("ip link set rr0 down"));
  auto ev = nextAsyncEvent(d.contexts[0]);
  ASSERT_TRUE(ev) << "no PORT_ERR after ip link set rr0 down";
  EXPECT_EQ(IBV_EVENT_PORT_ERR, ev->event_type);
  EXPECT_EQ(1, ev->element.port_num);
  EXPECT_EQ(IBV_PORT_DOWN, portState(d.contexts[0]));
  EXPECT_EQ(IBV_PORT_ACTIVE, portState(d.contexts[1]));
  EXPECT_FALSE(nextAsyncEvent(d.contexts[1], kQuiet)) << "the other device saw an event";
  ASSERT_EQ(0, run("ip link set rr0 up"));
  ev = nextAsyncEvent(d.contexts[0]);
  ASSERT_TRUE(ev) << "no PORT_ACTIVE after ip link set rr0 up";
  EXPECT_EQ(IBV_EVENT_PORT_ACTIVE, ev->event_type);
  EXPECT_EQ(IBV_PORT_ACTIVE, portState(d.contexts[0]));
  // The carrier counts too: the far end going down takes rr1's link.
  ASSERT_EQ(0, run("ip -n " + netns_ + " link set rp1 down"));
  ev = nextAsyncEvent(d.contexts[1]);
  ASSERT_TRUE(ev) << "no PORT_ERR after the far end of rr1 went down";
  EXPECT_EQ(IBV_EVENT_PORT_ERR, ev->event_type);
  EXPECT_EQ(IBV_PORT_DOWN, portState(d.contexts[1]));
  // The route stays (rr1 is up, without carrier), but no neighbour answers on a port without
  // link: ADDR_ERROR, -ETIMEDOUT.
  rdma_event_channel* ch = createChannel();
  ASSERT_NE(nullptr, ch);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(0, rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP));
  sockaddr_in dst = ipv4("203.0.113.2", 7471);
  ASSERT_EQ(0, rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000))
      << strerror(errno);
  auto err = expectCmEvent(ch, RDMA_CM_EVENT_ADDR_ERROR);
  ASSERT_TRUE(err);
  EXPECT_EQ(-ETIMEDOUT, err->status);
  EXPECT_EQ(0, rdma_destroy_id(id));
  rdma_destroy_event_channel(ch);
  ASSERT_EQ(0, run("ip -n " + netns_ + " link set rp1 up"));
  ev = nextAsyncEvent(d.contexts[1]);
  ASSERT_TRUE(ev) << "no PORT_ACTIVE after the far end of rr1 came back";
  EXPECT_EQ(IBV_EVENT_PORT_ACTIVE, ev->event_type);
}

// Sends one message on `side` (slot 1) and waits for the peer's echo in a receive.
void expectEcho(Side& side, uint64_t wrId) {
  ASSERT_EQ(0, side.postSend(wrId, kSlot, 64));
  auto wcs = side.poll(2);
  ASSERT_EQ(2u, wcs.size()) << "the send and the echo";
  for (const auto& wc : wcs)
    EXPECT_EQ(IBV_WC_SUCCESS, wc.status) << ibv_wc_status_str(wc.status);
}

TEST_F(Devices, ConnectionsOverADownedLinkFailAndTheOthersCarryOn) {
  const uint16_t port0 = listeningPeer("198.51.100.2");
  const uint16_t port1 = listeningPeer("203.0.113.2");
  ASSERT_NE(0, port0);
  ASSERT_NE(0, port1);
  rdma_event_channel* ch0 = createChannel();
  rdma_event_channel* ch1 = createChannel();
  ASSERT_TRUE(ch0 != nullptr && ch1 != nullptr);
  {
    Side a, b;
    ASSERT_NO_FATAL_FAILURE(connectTo(ch0, a, "198.51.100.2", port0, 4));
    ASSERT_NO_FATAL_FAILURE(connectTo(ch1, b, "203.0.113.2", port1, 4));
    EXPECT_STREQ("softrdma0", ibv_get_device_name(a.id->verbs->device));
    EXPECT_STREQ("softrdma1", ibv_get_device_name(b.id->verbs->device));
    ASSERT_NO_FATAL_FAILURE(expectEcho(a, 1));
    ASSERT_NO_FATAL_FAILURE(expectEcho(b, 1));

    ASSERT_EQ(0, run("ip link set rr0 down"));
    // A send over the downed link: the transport gives up (RETRY_EXC_ERR), the QP goes to
    // error and its receives flush; rdma_cm reports the connection lost.
    ASSERT_EQ(0, a.postSend(2, kSlot, 64));
    auto wcs = a.poll(4);
    ASSERT_EQ(4u, wcs.size()) << "the send and three receives";
    for (const auto& wc : wcs) {
      if (wc.wr_id == 2) {
        EXPECT_EQ(IBV_WC_RETRY_EXC_ERR, wc.status) << ibv_wc_status_str(wc.status);
      } else {
        EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status) << ibv_wc_status_str(wc.status);
      }
    }
    EXPECT_EQ(IBV_QPS_ERR, a.qpState());
    auto lost = expectCmEvent(ch0, RDMA_CM_EVENT_DISCONNECTED);
    ASSERT_TRUE(lost);
    // The connection over the other device carries on.
    ASSERT_NO_FATAL_FAILURE(expectEcho(b, 3));
    EXPECT_FALSE(nextCmEvent(ch1, kQuiet)) << "an event on the connection over softrdma1";
    EXPECT_EQ(0, rdma_disconnect(a.id));
  }
  rdma_destroy_event_channel(ch0);
  rdma_destroy_event_channel(ch1);
}

// A listener on `ip` (port chosen by softrdma) on `ch`, or null.
rdma_cm_id* listenOn(rdma_event_channel* ch, const char* ip) {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) return nullptr;
  sockaddr_in a = ipv4(ip, 0);
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)) != 0 || rdma_listen(id, 4) != 0) {
    rdma_destroy_id(id);
    return nullptr;
  }
  return id;
}

// The ids of the ADDR_CHANGE events on `ch`: `n` of them, each within the deadline, then nothing
// more for kQuiet (one event per id and change). `what` names the channel in failures.
std::multiset<rdma_cm_id*> addrChanges(rdma_event_channel* ch, size_t n, const char* what) {
  std::multiset<rdma_cm_id*> ids;
  for (size_t i = 0; i < n; i++) {
    auto ev = expectCmEvent(ch, RDMA_CM_EVENT_ADDR_CHANGE);
    if (!ev) {
      ADD_FAILURE() << what << ": " << i << " ADDR_CHANGE of " << n;
      break;
    }
    EXPECT_EQ(0, ev->status) << what;
    ids.insert(ev->id);
  }
  auto extra = nextCmEvent(ch, kQuiet);
  EXPECT_FALSE(extra) << what << ": one more event, " << (extra ? rdma_event_str(extra->type) : "");
  return ids;
}

TEST_F(Devices, HardwareAddressChangeRaisesAddrChangeOnTheIdsOverItsInterface) {
  // Known addresses before any id records one.
  ASSERT_EQ(0, run("ip link set dev rr0 address 02:00:00:00:00:a0"));
  ASSERT_EQ(0, run("ip link set dev rr1 address 02:00:00:00:00:b0"));
  const uint16_t peerPort0 = listeningPeer("198.51.100.2");
  const uint16_t peerPort1 = listeningPeer("203.0.113.2");
  ASSERT_NE(0, peerPort0);
  ASSERT_NE(0, peerPort1);
  // One channel per group of ids: over rr0 a listener (with the id it accepts) and an active id,
  // over rr1 the same without an accepted id, and a wildcard listener (bound to no interface).
  rdma_event_channel* listenCh0 = createChannel();
  rdma_event_channel* ch0 = createChannel();
  rdma_event_channel* listenCh1 = createChannel();
  rdma_event_channel* ch1 = createChannel();
  rdma_event_channel* anyCh = createChannel();
  ASSERT_TRUE(listenCh0 && ch0 && listenCh1 && ch1 && anyCh);
  rdma_cm_id* listener0 = listenOn(listenCh0, "198.51.100.1");
  rdma_cm_id* listener1 = listenOn(listenCh1, "203.0.113.1");
  rdma_cm_id* anyListener = listenOn(anyCh, "0.0.0.0");
  ASSERT_TRUE(listener0 && listener1 && anyListener) << strerror(errno);
  {
    Side a, b, accepted;
    ASSERT_NO_FATAL_FAILURE(connectTo(ch0, a, "198.51.100.2", peerPort0, 4));
    ASSERT_NO_FATAL_FAILURE(connectTo(ch1, b, "203.0.113.2", peerPort1, 4));
    PeerProcess& client = peer(
        {"connect", "198.51.100.1", std::to_string(ntohs(rdma_get_src_port(listener0))), "hang"});
    auto request = expectCmEvent(listenCh0, RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST);
    ASSERT_NO_FATAL_FAILURE(accepted.create(request->id));
    rdma_conn_param param{};
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.rnr_retry_count = 7;
    ASSERT_EQ(0, rdma_accept(accepted.id, &param)) << strerror(errno);
    auto established = expectCmEvent(listenCh0, RDMA_CM_EVENT_ESTABLISHED);
    ASSERT_TRUE(established && established->type == RDMA_CM_EVENT_ESTABLISHED);
    EXPECT_EQ("established", client.readLine().value_or("no line"));

    // rr0's address changes: ADDR_CHANGE once on each id over rr0, on its own channel.
    ASSERT_EQ(0, run("ip link set dev rr0 address 02:00:00:00:00:a1"));
    EXPECT_EQ((std::multiset<rdma_cm_id*>{listener0, accepted.id}),
              addrChanges(listenCh0, 2, "rr0's listener"));
    EXPECT_EQ((std::multiset<rdma_cm_id*>{a.id}), addrChanges(ch0, 1, "rr0's active id"));
    addrChanges(listenCh1, 0, "rr1's listener");
    addrChanges(ch1, 0, "rr1's active id");
    addrChanges(anyCh, 0, "the wildcard listener");
    // Nothing else changed: both connections over rr0 carry data. (The peers' neighbour entry
    // takes the new address, as the gratuitous ARP of a failover would make it.)
    ASSERT_EQ(0, run("ip -n " + netns_ + " neigh replace 198.51.100.1 lladdr 02:00:00:00:00:a1" +
                     " dev rp0"));
    EXPECT_EQ(IBV_QPS_RTS, a.qpState());
    ASSERT_NO_FATAL_FAILURE(expectEcho(a, 1));
    ASSERT_EQ(0, accepted.postSend(1, kSlot, 64));
    auto sent = accepted.poll(1);
    ASSERT_EQ(1u, sent.size());
    EXPECT_EQ(IBV_WC_SUCCESS, sent[0].status) << ibv_wc_status_str(sent[0].status);

    // rr1's address changes: its ids only.
    ASSERT_EQ(0, run("ip link set dev rr1 address 02:00:00:00:00:b1"));
    EXPECT_EQ((std::multiset<rdma_cm_id*>{listener1}), addrChanges(listenCh1, 1, "rr1's listener"));
    EXPECT_EQ((std::multiset<rdma_cm_id*>{b.id}), addrChanges(ch1, 1, "rr1's active id"));
    addrChanges(listenCh0, 0, "rr0's listener");
    addrChanges(ch0, 0, "rr0's active id");
    ASSERT_NO_FATAL_FAILURE(expectEcho(b, 1));

    // As the kernel compares with the address each id recorded when it was bound (and keeps
    // it): rr0 back to that address brings none, a third address brings one again.
    ASSERT_EQ(0, run("ip link set dev rr0 address 02:00:00:00:00:a0"));
    addrChanges(listenCh0, 0, "rr0's listener, its address back");
    addrChanges(ch0, 0, "rr0's active id, its address back");
    ASSERT_EQ(0, run("ip link set dev rr0 address 02:00:00:00:00:a2"));
    EXPECT_EQ((std::multiset<rdma_cm_id*>{listener0, accepted.id}),
              addrChanges(listenCh0, 2, "rr0's listener, a third address"));
    EXPECT_EQ((std::multiset<rdma_cm_id*>{a.id}),
              addrChanges(ch0, 1, "rr0's active id, a third address"));
  }
  EXPECT_EQ(0, rdma_destroy_id(listener0));
  EXPECT_EQ(0, rdma_destroy_id(listener1));
  EXPECT_EQ(0, rdma_destroy_id(anyListener));
  for (rdma_event_channel* ch : {listenCh0, ch0, listenCh1, ch1, anyCh})
    rdma_destroy_event_channel(ch);
}

}  // namespace
}  // namespace rdmamsg::test
