// ShmDoorbell: eventfd creation, adoption of a received one, ring and drain.
#include "common/shm_doorbell.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "common/sys_error.h"

namespace rdmamsg {
namespace {

// An eventfd's /proc/self/fd link reads "anon_inode:[eventfd]".
bool isEventFd(int fd) {
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  std::array<char, 64> target{};
  const ssize_t n = ::readlink(link.c_str(), target.data(), target.size());
  return n > 0 && std::string_view(target.data(), static_cast<size_t>(n)) == "anon_inode:[eventfd]";
}

}  // namespace

Result<ShmDoorbell> ShmDoorbell::create() {
  UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!fd) return sysError("eventfd");
  return ShmDoorbell(std::move(fd));
}

Result<ShmDoorbell> ShmDoorbell::adopt(UniqueFd fd) {
  if (!fd) return Status(Errc::bad_request, "no doorbell fd to adopt");
  if (!isEventFd(fd.get()))
    return Status(Errc::protocol_error, "the doorbell fd is not an eventfd");
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return sysError("making the doorbell nonblocking");
  }
  return ShmDoorbell(std::move(fd));
}

Status ShmDoorbell::ring() {
  const uint64_t one = 1;
  ssize_t n;
  do {
    n = ::write(fd_.get(), &one, sizeof one);
  } while (n < 0 && errno == EINTR);
  ++rings_;
  if (n < 0 && errno != EAGAIN) return sysError("ringing the doorbell");
  return Status();
}

Result<bool> ShmDoorbell::drain() {
  Result<uint64_t> count = take();
  if (!count) return count.status();
  return *count != 0;
}

Result<uint64_t> ShmDoorbell::take() {
  uint64_t count = 0;
  ssize_t n;
  do {
    n = ::read(fd_.get(), &count, sizeof count);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN) return uint64_t{0};
    return sysError("draining the doorbell");
  }
  return count;
}

}  // namespace rdmamsg
