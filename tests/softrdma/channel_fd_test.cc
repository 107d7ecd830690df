// The rdma_cm event channel and the completion channel are real, pollable fds that honour
// O_NONBLOCK (EAGAIN when empty) and wake edge-triggered epoll once per new event.
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "support.h"

namespace rdmamsg::test {
namespace {

int epollWait(int epfd, Millis timeout) {
  epoll_event events[4];
  int n;
  do {
    n = epoll_wait(epfd, events, 4, static_cast<int>(timeout.count()));
  } while (n < 0 && errno == EINTR);
  return n;
}

bool readableNow(int fd) {
  return waitReadable(fd, Millis(0));
}

TEST(ChannelFd, EmptyNonBlockingCmChannelReturnsEagain) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(nullptr, ch);
  ASSERT_GE(ch->fd, 0);
  ASSERT_EQ(0, fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK));
  rdma_cm_event* event = nullptr;
  errno = 0;
  EXPECT_EQ(-1, rdma_get_cm_event(ch, &event));
  EXPECT_EQ(EAGAIN, errno);
  EXPECT_FALSE(readableNow(ch->fd));
  rdma_destroy_event_channel(ch);
}

TEST(ChannelFd, EmptyNonBlockingCompChannelReturnsEagain) {
  ibv_context* context = openFirstDevice();
  ASSERT_NE(nullptr, context);
  ibv_comp_channel* ch = ibv_create_comp_channel(context);
  ASSERT_NE(nullptr, ch);
  ASSERT_EQ(0, fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK));
  ibv_cq* cq = nullptr;
  void* cqContext = nullptr;
  errno = 0;
  EXPECT_EQ(-1, ibv_get_cq_event(ch, &cq, &cqContext));
  EXPECT_EQ(EAGAIN, errno);
  EXPECT_FALSE(readableNow(ch->fd));
  EXPECT_EQ(0, ibv_destroy_comp_channel(ch));
  EXPECT_EQ(0, ibv_close_device(context));
}

TEST(ChannelFd, CmChannelPollsInWhenEventPending) {
  rdma_event_channel* ch = createChannel();
  ASSERT_NE(nullptr, ch);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(0, rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP));
  EXPECT_FALSE(readableNow(ch->fd));
  sockaddr_in dst = ipv4("127.0.0.1", 4791);
  ASSERT_EQ(0, rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  pollfd pfd{ch->fd, POLLIN, 0};
  ASSERT_EQ(1, poll(&pfd, 1, static_cast<int>(kDeadline.count())));
  EXPECT_TRUE(pfd.revents & POLLIN);
  auto event = nextCmEvent(ch, Millis(0));
  ASSERT_TRUE(event);
  EXPECT_EQ(RDMA_CM_EVENT_ADDR_RESOLVED, event->type);
  EXPECT_FALSE(readableNow(ch->fd)) << "the only event was consumed";
  EXPECT_EQ(0, rdma_destroy_id(id));
  rdma_destroy_event_channel(ch);
}

TEST(ChannelFd, EdgeTriggeredEpollWakesForEachNewCmEvent) {
  rdma_event_channel* ch = createChannel();
  ASSERT_NE(nullptr, ch);
  const int epfd = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(epfd, 0);
  epoll_event reg{};
  reg.events = EPOLLIN | EPOLLET;
  ASSERT_EQ(0, epoll_ctl(epfd, EPOLL_CTL_ADD, ch->fd, &reg));

  rdma_cm_id* first = nullptr;
  rdma_cm_id* second = nullptr;
  ASSERT_EQ(0, rdma_create_id(ch, &first, nullptr, RDMA_PS_TCP));
  ASSERT_EQ(0, rdma_create_id(ch, &second, nullptr, RDMA_PS_TCP));
  sockaddr_in dst = ipv4("127.0.0.1", 4791);
  ASSERT_EQ(0, rdma_resolve_addr(first, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  EXPECT_EQ(1, epollWait(epfd, kDeadline)) << "first event wakes";
  EXPECT_EQ(0, epollWait(epfd, Millis(0))) << "no new edge without a new event";
  // The first event is still unread: a second event must still produce a new edge.
  ASSERT_EQ(0, rdma_resolve_addr(second, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000));
  EXPECT_EQ(1, epollWait(epfd, kDeadline)) << "second event wakes although the first is unread";

  auto a = nextCmEvent(ch);
  auto b = nextCmEvent(ch);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(RDMA_CM_EVENT_ADDR_RESOLVED, a->type);
  EXPECT_EQ(RDMA_CM_EVENT_ADDR_RESOLVED, b->type);
  EXPECT_EQ(first, a->id);
  EXPECT_EQ(second, b->id);
  rdma_cm_event* none = nullptr;
  EXPECT_EQ(-1, rdma_get_cm_event(ch, &none));
  EXPECT_EQ(EAGAIN, errno);

  close(epfd);
  EXPECT_EQ(0, rdma_destroy_id(first));
  EXPECT_EQ(0, rdma_destroy_id(second));
  rdma_destroy_event_channel(ch);
}

bool closeOnExec(int fd) {
  return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

// Every fd open in this process, by number.
std::vector<int> openFds() {
  std::vector<int> fds;
  for (int fd = 0; fd < 4096; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0) fds.push_back(fd);
  }
  return fds;
}

class CompChannelFd : public CmFixture {};

// rdma-core opens its channels O_CLOEXEC; softrdma's sockets must not leak into exec'd programs
// either (a leaked TCP socket keeps a connection or a port alive in the child).
TEST_F(CompChannelFd, ChannelsAndInternalFdsAreCloseOnExec) {
  EXPECT_TRUE(closeOnExec(clientCh_->fd));
  const auto before = openFds();
  ConnectOptions options;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  EXPECT_TRUE(closeOnExec(client_.comp->fd));
  for (int fd : openFds()) {
    if (std::find(before.begin(), before.end(), fd) == before.end()) {
      EXPECT_TRUE(closeOnExec(fd)) << "fd " << fd << " opened by softrdma lacks FD_CLOEXEC";
    }
  }
}

TEST_F(CompChannelFd, PollsInWhenCompletionEventPending) {
  ConnectOptions options;
  options.serverRecvs = 1;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  EXPECT_FALSE(readableNow(server_.comp->fd));
  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 0));
  ASSERT_EQ(0, client_.postSend(1, 0, 8));
  pollfd pfd{server_.comp->fd, POLLIN, 0};
  ASSERT_EQ(1, poll(&pfd, 1, static_cast<int>(kDeadline.count())));
  EXPECT_TRUE(pfd.revents & POLLIN);
  ibv_cq* cq = getCqEvent(server_.comp, Millis(0));
  EXPECT_EQ(server_.cq, cq);
  ibv_ack_cq_events(server_.cq, 1);
  EXPECT_FALSE(readableNow(server_.comp->fd));
  EXPECT_EQ(1u, server_.poll(1).size());
  EXPECT_EQ(1u, client_.poll(1).size());
}

TEST_F(CompChannelFd, EdgeTriggeredEpollWakesForEachNewCompletionEvent) {
  ConnectOptions options;
  options.serverRecvs = 2;
  ASSERT_NO_FATAL_FAILURE(connect(options));
  const int epfd = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(epfd, 0);
  epoll_event reg{};
  reg.events = EPOLLIN | EPOLLET;
  ASSERT_EQ(0, epoll_ctl(epfd, EPOLL_CTL_ADD, server_.comp->fd, &reg));

  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 0));
  ASSERT_EQ(0, client_.postSend(1, 0, 8));
  EXPECT_EQ(1, epollWait(epfd, kDeadline));
  EXPECT_EQ(0, epollWait(epfd, Millis(0)));
  ASSERT_EQ(1u, server_.poll(1).size());
  // Re-arm without reading the first event: the next completion is a new edge.
  ASSERT_EQ(0, ibv_req_notify_cq(server_.cq, 0));
  ASSERT_EQ(0, client_.postSend(2, 0, 8));
  EXPECT_EQ(1, epollWait(epfd, kDeadline));
  ASSERT_EQ(1u, server_.poll(1).size());

  EXPECT_EQ(server_.cq, getCqEvent(server_.comp, Millis(0)));
  EXPECT_EQ(server_.cq, getCqEvent(server_.comp, Millis(0)));
  ibv_ack_cq_events(server_.cq, 2);
  EXPECT_EQ(2u, client_.poll(2).size());
  close(epfd);
}

}  // namespace
}  // namespace rdmamsg::test
