// rsockets (<rdma/rsocket.h>, rsocket(7)) on softrdma: stream round trips, partial reads,
// rpoll readiness, non-blocking calls, shutdown and end of stream, and the errors of bad calls.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include <rdma/rdma_cma.h>

#include "rsocket_support.h"
#include "support.h"

namespace rdmamsg::test {
namespace {

TEST(Rsocket, StreamRoundTrip) {
  RsPair p;
  ASSERT_TRUE(p.connect());
  const char hello[] = "hello over rsockets";
  EXPECT_EQ(rsend(p.client, hello, sizeof hello, 0), ssize_t(sizeof hello));
  char got[sizeof hello] = {};
  EXPECT_EQ(rrecv(p.server, got, sizeof got, MSG_WAITALL), ssize_t(sizeof got));
  EXPECT_STREQ(got, hello);

  // 4 MiB back, written while the other side reads: more than every buffer holds.
  std::vector<uint8_t> big(4 << 20);
  std::iota(big.begin(), big.end(), uint8_t{7});
  std::thread writer(
      [&] { EXPECT_EQ(rsend(p.server, big.data(), big.size(), 0), ssize_t(big.size())); });
  std::vector<uint8_t> in(big.size());
  EXPECT_EQ(rrecv(p.client, in.data(), in.size(), MSG_WAITALL), ssize_t(in.size()));
  writer.join();
  EXPECT_EQ(in, big);

  sockaddr_in local{}, peer{};
  socklen_t l1 = sizeof local, l2 = sizeof peer;
  ASSERT_EQ(rgetsockname(p.client, reinterpret_cast<sockaddr*>(&local), &l1), 0);
  ASSERT_EQ(rgetpeername(p.client, reinterpret_cast<sockaddr*>(&peer), &l2), 0);
  EXPECT_EQ(ntohs(peer.sin_port), p.port);  // rsocket port P is the listener's port P
  EXPECT_EQ(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
}

TEST(Rsocket, PartialReadsPeekAndVectors) {
  RsPair p;
  ASSERT_TRUE(p.connect());
  char msg[100];
  for (int i = 0; i < 100; i++)
    msg[i] = char(i);
  ASSERT_EQ(rsend(p.client, msg, 60, 0), 60);
  ASSERT_EQ(rsend(p.client, msg + 60, 40, 0), 40);
  ASSERT_TRUE(waitReadableRs(p.server, 100));

  char buf[100] = {};
  EXPECT_EQ(rrecv(p.server, buf, 10, MSG_PEEK), 10);
  EXPECT_EQ(memcmp(buf, msg, 10), 0);
  EXPECT_EQ(rrecv(p.server, buf, 30, 0), 30);  // a short read takes part of the first send
  EXPECT_EQ(memcmp(buf, msg, 30), 0);
  char a[20], b[100];
  iovec iov[2] = {{a, sizeof a}, {b, sizeof b}};
  EXPECT_EQ(rreadv(p.server, iov, 2), 70);  // the rest, across both sends and both vectors
  EXPECT_EQ(memcmp(a, msg + 30, 20), 0);
  EXPECT_EQ(memcmp(b, msg + 50, 50), 0);

  iovec out[3] = {{msg, 5}, {msg + 5, 0}, {msg + 5, 7}};
  EXPECT_EQ(rwritev(p.server, out, 3), 12);
  EXPECT_EQ(rread(p.client, buf, sizeof buf), 12);
  EXPECT_EQ(memcmp(buf, msg, 12), 0);
}

TEST(Rsocket, RpollReportsReadinessWithOrdinaryDescriptors) {
  RsPair p;
  ASSERT_TRUE(p.listen());
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pollfd l{p.listener, POLLIN, 0};
  EXPECT_EQ(rpoll(&l, 1, 0), 0);  // nobody connecting yet
  ASSERT_TRUE(p.connect());

  pollfd fds[2] = {{p.server, POLLIN | POLLOUT, 0}, {pipefd[0], POLLIN, 0}};
  ASSERT_EQ(rpoll(fds, 2, 0), 1);
  EXPECT_EQ(fds[0].revents, POLLOUT);  // connected, nothing to read
  EXPECT_EQ(fds[1].revents, 0);

  // Blocks until data arrives (sent by another thread after a moment).
  fds[0].events = POLLIN;
  std::thread sender([&] { EXPECT_EQ(rsend(p.client, "x", 1, 0), 1); });
  EXPECT_EQ(rpoll(fds, 2, int(kDeadline.count())), 1);
  sender.join();
  EXPECT_EQ(fds[0].revents, POLLIN);

  // An ordinary descriptor wakes rpoll too.
  ASSERT_EQ(write(pipefd[1], "y", 1), 1);
  char c;
  ASSERT_EQ(rrecv(p.server, &c, 1, 0), 1);
  fds[0].revents = fds[1].revents = 0;
  EXPECT_EQ(rpoll(fds, 2, int(kDeadline.count())), 1);
  EXPECT_EQ(fds[0].revents, 0);
  EXPECT_EQ(fds[1].revents, POLLIN);

  // rselect: the same readiness.
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(p.server, &rd);
  timeval tv{0, 0};
  EXPECT_EQ(rselect(p.server + 1, &rd, nullptr, nullptr, &tv), 0);
  close(pipefd[0]);
  close(pipefd[1]);
}

TEST(Rsocket, NonBlockingCallsReturnEagainAndInProgress) {
  RsPair p;
  ASSERT_TRUE(p.listen());
  ASSERT_EQ(rfcntl(p.listener, F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(raccept(p.listener, nullptr, nullptr), -1);
  EXPECT_EQ(errno, EAGAIN);

  p.client = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(p.client, 0);
  ASSERT_EQ(rfcntl(p.client, F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(rfcntl(p.client, F_GETFL), O_NONBLOCK);
  sockaddr_in to = ipv4("127.0.0.1", p.port);
  ASSERT_EQ(rconnect(p.client, reinterpret_cast<sockaddr*>(&to), sizeof to), -1);
  EXPECT_EQ(errno, EINPROGRESS);
  pollfd c{p.client, POLLOUT, 0};
  ASSERT_EQ(rpoll(&c, 1, int(kDeadline.count())), 1);
  EXPECT_EQ(c.revents, POLLOUT);
  int err = -1;
  socklen_t len = sizeof err;
  ASSERT_EQ(rgetsockopt(p.client, SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, 0);
  pollfd l{p.listener, POLLIN, 0};
  ASSERT_EQ(rpoll(&l, 1, int(kDeadline.count())), 1);
  p.server = raccept(p.listener, nullptr, nullptr);
  ASSERT_GE(p.server, 0);

  char buf[64];
  EXPECT_EQ(rrecv(p.client, buf, sizeof buf, 0), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(rrecv(p.server, buf, sizeof buf, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);

  // The server reads nothing: the client's sends stop with EAGAIN once everything is full...
  std::vector<uint8_t> chunk(65536, 0x5a);
  size_t sent = 0;
  ssize_t n = 0;
  for (int i = 0; i < 4096 && (n = rsend(p.client, chunk.data(), chunk.size(), 0)) > 0; i++)
    sent += size_t(n);
  ASSERT_EQ(n, -1);
  EXPECT_EQ(errno, EAGAIN);
  pollfd w{p.client, POLLOUT, 0};
  EXPECT_EQ(rpoll(&w, 1, 0), 0);
  // ... and everything sent arrives once the server reads.
  std::vector<uint8_t> in(sent);
  ASSERT_EQ(rfcntl(p.server, F_SETFL, 0), 0);
  EXPECT_EQ(rrecv(p.server, in.data(), in.size(), MSG_WAITALL), ssize_t(sent));
  EXPECT_EQ(in, std::vector<uint8_t>(sent, 0x5a));
  EXPECT_EQ(rpoll(&w, 1, int(kDeadline.count())), 1);
  EXPECT_EQ(w.revents, POLLOUT);
}

TEST(Rsocket, ShutdownEndsTheStreamAfterItsData) {
  RsPair p;
  ASSERT_TRUE(p.connect());
  ASSERT_EQ(rsend(p.client, "last", 4, 0), 4);
  ASSERT_EQ(rshutdown(p.client, SHUT_WR), 0);
  EXPECT_EQ(rsend(p.client, "more", 4, 0), -1);
  EXPECT_EQ(errno, EPIPE);

  char buf[16];
  EXPECT_EQ(rrecv(p.server, buf, sizeof buf, MSG_WAITALL), 4);  // the data, then the end
  EXPECT_EQ(memcmp(buf, "last", 4), 0);
  EXPECT_EQ(rrecv(p.server, buf, sizeof buf, 0), 0);
  pollfd s{p.server, POLLIN | POLLRDHUP, 0};
  ASSERT_EQ(rpoll(&s, 1, 0), 1);
  EXPECT_EQ(s.revents, POLLIN | POLLRDHUP);

  // Half closed: the other direction still works.
  ASSERT_EQ(rsend(p.server, "back", 4, 0), 4);
  EXPECT_EQ(rrecv(p.client, buf, 4, MSG_WAITALL), 4);
  EXPECT_EQ(memcmp(buf, "back", 4), 0);

  // rclose: the peer reads the end of the stream.
  ASSERT_EQ(rclose(p.server), 0);
  p.server = -1;
  EXPECT_EQ(rrecv(p.client, buf, sizeof buf, 0), 0);
}

TEST(Rsocket, BadCallsFailAsSocketsDo) {
  EXPECT_EQ(rsocket(AF_UNIX, SOCK_STREAM, 0), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(rsocket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), -1);  // librdmacm: exact types only
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  char buf[8];
  EXPECT_EQ(rrecv(12345, buf, sizeof buf, 0), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(rclose(12345), -1);
  EXPECT_EQ(errno, EBADF);

  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  EXPECT_EQ(rsend(s, "x", 1, 0), -1);
  EXPECT_EQ(errno, ENOTCONN);
  EXPECT_EQ(raccept(s, nullptr, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rfcntl(s, F_GETFD), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  int v = 1;
  EXPECT_EQ(rsetsockopt(s, SOL_RDMA, 99, &v, sizeof v), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(rshutdown(s, SHUT_RDWR), -1);
  EXPECT_EQ(errno, ENOTCONN);

  // Nobody listens on the port: refused.
  RsPair unused;
  ASSERT_TRUE(unused.listen());
  uint16_t port = unused.port;
  rclose(unused.listener);
  unused.listener = -1;
  sockaddr_in to = ipv4("127.0.0.1", port);
  EXPECT_EQ(rconnect(s, reinterpret_cast<sockaddr*>(&to), sizeof to), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
  EXPECT_EQ(rclose(s), 0);
  EXPECT_EQ(rclose(s), -1);
  EXPECT_EQ(errno, EBADF);

  RsPair p;
  ASSERT_TRUE(p.connect());
  to = ipv4("127.0.0.1", p.port);
  EXPECT_EQ(rconnect(p.client, reinterpret_cast<sockaddr*>(&to), sizeof to), -1);
  EXPECT_EQ(errno, EISCONN);
  EXPECT_EQ(rsetsockopt(p.client, SOL_RDMA, RDMA_INLINE, &v, sizeof v), -1);  // too late
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rsendto(p.client, "x", 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to), -1);
  EXPECT_EQ(errno, EISCONN);
}

TEST(Rsocket, OptionsAreKeptAndInherited) {
  RsPair p;
  int v = 200;
  ASSERT_TRUE(p.listen([&](int l) {
    EXPECT_EQ(rsetsockopt(l, SOL_RDMA, RDMA_SQSIZE, &v, sizeof v), 0);
    int big = 1000;
    EXPECT_EQ(rsetsockopt(l, SOL_RDMA, RDMA_IOMAPSIZE, &big, sizeof big), 0);
  }));
  ASSERT_TRUE(p.connect());
  int got = 0;
  socklen_t len = sizeof got;
  ASSERT_EQ(rgetsockopt(p.server, SOL_RDMA, RDMA_SQSIZE, &got, &len), 0);
  EXPECT_EQ(got, 200);  // the accepted rsocket has its listener's options
  ASSERT_EQ(rgetsockopt(p.server, SOL_RDMA, RDMA_IOMAPSIZE, &got, &len), 0);
  EXPECT_EQ(got, 768);  // librdmacm's 8-bit scale: above 128, multiples of 256
  ASSERT_EQ(rgetsockopt(p.client, SOL_RDMA, RDMA_INLINE, &got, &len), 0);
  EXPECT_EQ(got, 64);  // librdmacm's default
  v = 1;
  ASSERT_EQ(rsetsockopt(p.client, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v), 0);
  ASSERT_EQ(rgetsockopt(p.client, IPPROTO_TCP, TCP_NODELAY, &got, &len), 0);
  EXPECT_EQ(got, 1);
  ASSERT_EQ(rsetsockopt(p.client, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof v), 0);  // passed through
  got = 0;
  ASSERT_EQ(rgetsockopt(p.client, SOL_SOCKET, SO_KEEPALIVE, &got, &len), 0);
  EXPECT_EQ(got, 1);
}

}  // namespace
}  // namespace rdmamsg::test

namespace rdmamsg::test {
namespace {

// rsockets and rdma_cm ids share one port space (RDMA_PS_TCP), as on hardware.
TEST(Rsocket, SharesThePortSpaceOfRdmaCmIds) {
  RsPair p;
  ASSERT_TRUE(p.listen());
  rdma_event_channel* ch = createChannel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in a = ipv4("127.0.0.1", p.port);
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)), -1);
  EXPECT_EQ(errno, EADDRINUSE);

  // The other way round: an rdma_cm listener's port is taken for an rsocket.
  a = ipv4("127.0.0.1", 0);
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)), 0);
  ASSERT_EQ(rdma_listen(id, 4), 0);
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  a = ipv4("127.0.0.1", ntohs(rdma_get_src_port(id)));
  EXPECT_EQ(rbind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  rclose(s);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

}  // namespace
}  // namespace rdmamsg::test
