// softrdma-bench: raw TCP loopback, the baseline every RDMA case is
// compared with (bench.h).
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

}  // namespace softrdma_bench
