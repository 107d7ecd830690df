// The C library's socket calls, for softrdma's rsockets. librspreload (rdma-core's preload
// library) interposes socket(), bind(), connect(), read(), poll(), close() and more and sends
// them to rsocket(), rbind(), ... - that is, back into softrdma. The rsocket implementation
// therefore calls the C library's own definitions, looked up in libc.so.6 itself (not with
// RTLD_NEXT, which from softrdma would find librspreload when it is preloaded after it), so
// that it never re-enters an interposer. They stay cancellation points, as libc's are.
//
// The rest of softrdma creates its sockets with SOCK_CLOEXEC in the type, which rsocket()
// refuses (EOPNOTSUPP), so librspreload's socket() hands them to the C library; its other calls
// act on descriptors librspreload does not know, which it passes through.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

namespace softrdma::sys {

int socket(int domain, int type, int protocol);
int bind(int fd, const sockaddr* addr, socklen_t len);
int listen(int fd, int backlog);
int accept4(int fd, sockaddr* addr, socklen_t* len, int flags);
int connect(int fd, const sockaddr* addr, socklen_t len);
int shutdown(int fd, int how);
int close(int fd);
ssize_t read(int fd, void* buf, size_t len);
ssize_t write(int fd, const void* buf, size_t len);
ssize_t sendmsg(int fd, const msghdr* msg, int flags);
ssize_t recvmsg(int fd, msghdr* msg, int flags);
int poll(pollfd* fds, nfds_t n, int timeout);
int getsockname(int fd, sockaddr* addr, socklen_t* len);
int getpeername(int fd, sockaddr* addr, socklen_t* len);
int setsockopt(int fd, int level, int name, const void* val, socklen_t len);
int getsockopt(int fd, int level, int name, void* val, socklen_t* len);

}  // namespace softrdma::sys
