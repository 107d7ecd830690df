// Bad input on the wire: softrdma maps rdma_cm port P on an IP to TCP port P on that IP; plain
// TCP clients writing garbage there must not stop the listener, and garbage injected into an
// established connection's TCP stream must end that connection, never crash the process.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "../support/wait.h"
#include "support.h"

namespace rdmamsg::test {
namespace {

// A plain TCP connection to 127.0.0.1:port (or -1).
int rawConnect(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = ipv4("127.0.0.1", port);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

std::vector<uint8_t> garbage(size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<uint8_t> bytes(n);
  for (auto& b : bytes)
    b = static_cast<uint8_t>(random());
  return bytes;
}

void sendAll(int fd, const std::vector<uint8_t>& bytes) {
  // The peer may drop us at any point: never SIGPIPE, ignore errors.
  (void)send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Connected IPv4 TCP sockets of this process (softrdma's, as the test opens none).
std::vector<int> connectedTcpSockets() {
  std::vector<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  const int self = dirfd(dir);
  while (dirent* entry = readdir(dir)) {
    const int fd = atoi(entry->d_name);
    if (entry->d_name[0] == '.' || fd == self) continue;
    int type = 0;
    socklen_t len = sizeof type;
    sockaddr_storage peer{};
    socklen_t peerLen = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM &&
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peerLen) == 0 &&
        peer.ss_family == AF_INET) {
      fds.push_back(fd);
    }
  }
  closedir(dir);
  return fds;
}

class WireGarbage : public CmFixture {};

TEST_F(WireGarbage, ListenerMapsToTcpPortOnSameAddress) {
  const int fd = rawConnect(port_);
  EXPECT_GE(fd, 0) << "rdma_cm port " << port_ << " on 127.0.0.1 is TCP port " << port_;
  if (fd >= 0) close(fd);
}

TEST_F(WireGarbage, GarbageFromRawTcpClientsLeavesListenerServing) {
  std::vector<int> raw;
  for (unsigned i = 0; i < 4; ++i) {
    const int fd = rawConnect(port_);
    ASSERT_GE(fd, 0);
    raw.push_back(fd);
  }
  sendAll(raw[0], garbage(64 * 1024, 1));
  sendAll(raw[1], std::vector<uint8_t>(64, 0xff));  // looks like a huge length
  sendAll(raw[2], garbage(3, 2));                   // a truncated header, then close
  close(raw[2]);
  shutdown(raw[3], SHUT_WR);  // says nothing at all
  sendAll(raw[0], std::vector<uint8_t>(4096, 0));

  // A real connection still works, and the garbage made no CM event.
  ConnectOptions options;
  options.serverRecvs = 1;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  memcpy(client_.at(0), "still serving", 13);
  ASSERT_EQ(0, client_.postSend(1, 0, 13));
  auto received = server_.poll(1);
  ASSERT_EQ(1u, received.size());
  EXPECT_EQ(IBV_WC_SUCCESS, received[0].status);
  EXPECT_EQ(0, memcmp(server_.at(0), "still serving", 13));
  EXPECT_FALSE(nextCmEvent(serverCh_, kQuiet)) << "garbage produced a CM event";
  for (int fd : {raw[0], raw[1], raw[3]})
    close(fd);
}

TEST_F(WireGarbage, GarbageInEstablishedConnectionEndsItWithoutCrash) {
  ConnectOptions options;
  options.clientRecvs = 2;
  options.serverRecvs = 2;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  const auto sockets = connectedTcpSockets();
  ASSERT_FALSE(sockets.empty()) << "softrdma carries the connection over TCP";
  // Garbage into every stream of the connection, both directions, in softrdma's own sockets.
  for (int fd : sockets)
    sendAll(fd, garbage(8192, static_cast<unsigned>(fd)));

  bool serverDisconnected = false;
  const bool ended = waitFor(
      [&] {
        auto event = nextCmEvent(serverCh_, Millis(0));
        if (event && event->type == RDMA_CM_EVENT_DISCONNECTED) serverDisconnected = true;
        return serverDisconnected || server_.qpState() == IBV_QPS_ERR;
      },
      kDeadline);
  EXPECT_TRUE(ended) << "the server side neither saw DISCONNECTED nor moved its QP to ERR";
  // Whatever the outcome, the receives come back after rdma_disconnect, with an error.
  rdma_disconnect(server_.id);
  auto wcs = server_.poll(2);
  ASSERT_EQ(2u, wcs.size());
  for (const auto& wc : wcs)
    EXPECT_NE(IBV_WC_SUCCESS, wc.status);
}

}  // namespace
}  // namespace rdmamsg::test
