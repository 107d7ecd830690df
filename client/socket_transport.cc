// SocketTransport: connect(2), send(2), recv(2) and poll(2) on the
// daemon's socket, each counted.
#include "client/socket_transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "common/fd_passing.h"

namespace rdmamsg::client {

Status errnoStatus(Errc code, const std::string& what, int err) {
  return Status(code, what + ": " + std::strerror(err));
}

Status SocketTransport::connect(const std::string& path, std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status(Errc::bad_request, "socket path too long: " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd_) return errnoStatus(Errc::io_error, "socket", errno);
  // A daemon that does not accept (its backlog full) would hold connect()
  // for ever; the send timeout bounds it (unix(7)), then is cleared.
  const auto ms = timeout.count() > 0 ? timeout.count() : 1;
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EAGAIN)
      return Status(Errc::timeout,
                    "rdmamsgd at " + path + " is not accepting connections (its backlog is full)");
    return errnoStatus(Errc::io_error, "cannot connect to rdmamsgd at " + path, errno);
  }
  tv = {};
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return Status();
}

Status SocketTransport::write(ByteBuffer& out) {
  while (!out.empty()) {
    ++counters_.socketWrites;
    const ssize_t n = ::send(fd_.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      out.consume(static_cast<size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno != EINTR) {
      return errnoStatus(Errc::io_error, "write to rdmamsgd", errno);
    }
  }
  return Status();
}

Result<size_t> SocketTransport::read(ByteBuffer& into, size_t chunk) {
  for (;;) {
    auto room = into.prepare(chunk);
    ++counters_.socketReads;
    const ssize_t n = ::recv(fd_.get(), room.data(), room.size(), MSG_DONTWAIT);
    if (n > 0) {
      into.commit(static_cast<size_t>(n));
      return static_cast<size_t>(n);
    }
    if (n == 0) return Status(Errc::not_connected, "rdmamsgd closed the connection");
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    if (errno != EINTR) return errnoStatus(Errc::io_error, "read from rdmamsgd", errno);
  }
}

Result<size_t> SocketTransport::sendWithFds(std::span<const int> fds,
                                            std::span<const std::byte> bytes) {
  return sendFds(fd_.get(), fds, bytes);
}

Status SocketTransport::poll(bool wantWrite, int ms) {
  pollfd p{fd_.get(), static_cast<short>(POLLIN | (wantWrite ? POLLOUT : 0)), 0};
  ++counters_.polls;
  if (::poll(&p, 1, ms) < 0 && errno != EINTR) return errnoStatus(Errc::io_error, "poll", errno);
  return Status();
}

Result<bool> SocketTransport::pollWith(int otherFd, int ms) {
  pollfd p[2] = {{otherFd, POLLIN, 0}, {fd_.get(), POLLIN, 0}};
  ++counters_.polls;
  if (::poll(p, 2, ms) < 0 && errno != EINTR) return errnoStatus(Errc::io_error, "poll", errno);
  return p[1].revents != 0;
}

}  // namespace rdmamsg::client
