// Passing file descriptors over a Unix stream socket (SCM_RIGHTS), with the
// bytes they belong to: how the shared-memory regions and doorbells of a
// local client reach the other side of its control socket.
//
// The fds travel with the first byte of `data` (a stream socket carries
// ancillary data only with at least one byte). On receipt they are made
// close-on-exec atomically (MSG_CMSG_CLOEXEC) and owned as UniqueFd at once,
// so every error path closes them: control data the kernel had to truncate
// (MSG_CTRUNC: more fds than the receiver allowed) is a protocol error and
// whatever fds did arrive are closed.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace rdmamsg {

// At most this many fds in one message (the kernel's limit is SCM_MAX_FD, 253).
inline constexpr size_t kMaxPassedFds = 16;

// Sends `data` (at least one byte) with `fds` attached. Returns the number of
// bytes written (at least 1: the fds went with them); the caller sends the
// rest, if any, as ordinary data. would_block when the socket is full
// (nothing was sent), io_error otherwise.
[[nodiscard]] Result<size_t> sendFds(int sock, std::span<const int> fds,
                                     std::span<const std::byte> data);

struct ReceivedFds {
  size_t bytes = 0;           // bytes read into the buffer; 0: the peer closed
  std::vector<UniqueFd> fds;  // in the order they were sent
};

// Reads up to data.size() bytes and at most `maxFds` fds (<= kMaxPassedFds).
// would_block when nothing is there; protocol_error when the peer sent more
// fds than `maxFds` or anything but SCM_RIGHTS; io_error otherwise.
[[nodiscard]] Result<ReceivedFds> receiveFds(int sock, std::span<std::byte> data, size_t maxFds);

}  // namespace rdmamsg
