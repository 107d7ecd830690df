// sendFds / receiveFds: sendmsg and recvmsg with SCM_RIGHTS.
#include "common/fd_passing.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace rdmamsg {
namespace {

// Control buffer for up to kMaxPassedFds fds, aligned for struct cmsghdr.
union ControlBuffer {
  char bytes[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  cmsghdr align;
};

Status socketError(const char* call) {
  if (errno == EAGAIN || errno == EWOULDBLOCK) return Status(Errc::would_block, call);
  return Status(Errc::io_error, std::string(call) + ": " + std::strerror(errno));
}

// Takes ownership of every fd in the control data, whatever else is wrong
// with it; returns the first problem found.
Status collectFds(msghdr& msg, std::vector<UniqueFd>& out) {
  Status problem;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
      problem = Status(Errc::protocol_error,
                       "unexpected control message type " + std::to_string(c->cmsg_type));
      continue;
    }
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      out.emplace_back(fd);
    }
  }
  return problem;
}

}  // namespace

Result<size_t> sendFds(int sock, std::span<const int> fds, std::span<const std::byte> data) {
  if (data.empty()) return Status(Errc::bad_request, "fds need at least one byte to travel with");
  if (fds.size() > kMaxPassedFds) {
    return Status(Errc::bad_request, "at most " + std::to_string(kMaxPassedFds) + " fds at once");
  }
  iovec iov{const_cast<std::byte*>(data.data()), data.size()};
  ControlBuffer control{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control.bytes;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return socketError("sendmsg with fds");
  return static_cast<size_t>(n);
}

Result<ReceivedFds> receiveFds(int sock, std::span<std::byte> data, size_t maxFds) {
  if (data.empty() || maxFds > kMaxPassedFds) {
    return Status(Errc::bad_request, "receiveFds needs a buffer and at most " +
                                         std::to_string(kMaxPassedFds) + " fds");
  }
  iovec iov{data.data(), data.size()};
  ControlBuffer control{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.bytes;
  // Room for exactly maxFds: any more and the kernel truncates (MSG_CTRUNC).
  msg.msg_controllen = maxFds == 0 ? 0 : CMSG_SPACE(sizeof(int) * maxFds);
  if (maxFds == 0) msg.msg_control = nullptr;
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return socketError("recvmsg with fds");

  ReceivedFds received;
  received.bytes = static_cast<size_t>(n);
  Status problem = collectFds(msg, received.fds);
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    return Status(Errc::protocol_error, "the peer sent more than " + std::to_string(maxFds) +
                                            " fds (control data truncated)");
  }
  if (!problem) return problem;
  if (received.fds.size() > maxFds) {
    return Status(Errc::protocol_error,
                  "the peer sent more than " + std::to_string(maxFds) + " fds");
  }
  return received;
}

}  // namespace rdmamsg
